"""Answers the server keeps encoded (Metadata, DescribeCluster) or writes by hand (DescribeAcls) are never
stale: a write answered on one connection is seen at once by a request on another."""

from __future__ import annotations

import pytest
from confluent_kafka import admin as ck

from secmeta.core.wire.codec import build, decode_response, request_class
from secmeta.events.types import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.adminkit import TIMEOUT, ck_binding, ck_filter, from_ck
from tests.serverkit import RawClient, running_server

LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
NOT_REQUESTED = -2147483648


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("kept"), LISTENERS) as srv:
        yield srv


@pytest.fixture(scope="module")
def writer(server):
    """An AdminClient logged in as admin: the connection that writes."""
    return ck.AdminClient(server.confluent_config("SASL_PLAINTEXT"))


def _cluster_acl(operation: AclOperation) -> AclBinding:
    return AclBinding.of(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, "User:ANONYMOUS", "*",
                         operation, AclPermissionType.ALLOW)


def _create(writer, binding: AclBinding) -> None:
    for future in writer.create_acls([ck_binding(binding)], request_timeout=TIMEOUT).values():
        future.result(timeout=TIMEOUT)


def _delete(writer, binding: AclBinding) -> None:
    for future in writer.delete_acls([ck_filter(AclBindingFilter(binding.pattern, binding.entry))],
                                     request_timeout=TIMEOUT).values():
        future.result(timeout=TIMEOUT)


def _ask(raw: RawClient, api_key: int, version: int, **fields):
    raw.send(build(request_class(api_key, version), **fields))
    return decode_response(api_key, version, raw.read_frame())[1]


def _metadata_operations(raw: RawClient) -> int:
    return int(_ask(raw, 3, 10, topics=None, allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
                    include_topic_authorized_operations=False).cluster_authorized_operations)


def _describe_cluster_operations(raw: RawClient) -> int:
    return int(_ask(raw, 60, 1, include_cluster_authorized_operations=True,
                    endpoint_type=1).cluster_authorized_operations)


def test_describe_acls_on_another_connection_sees_each_write_at_once(server, writer):
    """Each CreateAcls answered on one connection is in the very next DescribeAcls sent on another."""
    reader = ck.AdminClient(server.confluent_config("SASL_PLAINTEXT"))
    seen: set[AclBinding] = set()
    for i in range(15):
        binding = AclBinding.of(ResourceType.TOPIC, "kept-topic", PatternType.LITERAL, f"User:u{i}", "*",
                                AclOperation.READ, AclPermissionType.ALLOW)
        _create(writer, binding)
        seen.add(binding)
        got = reader.describe_acls(ck_filter(AclBindingFilter.of(ResourceType.TOPIC, "kept-topic", PatternType.MATCH)),
                                   request_timeout=TIMEOUT).result(timeout=TIMEOUT)
        assert {from_ck(b) for b in got} == seen


def test_cluster_operations_on_another_connection_follow_each_write(server, writer):
    """Metadata and DescribeCluster (answers kept encoded per cluster-operations value) show an ACL granted or
    removed on another connection in the very next request, and "not requested" when not asked."""
    with RawClient.connect(server, "PLAINTEXT") as raw:
        assert _metadata_operations(raw) == 0 and _describe_cluster_operations(raw) == 0
        describe, other = _cluster_acl(AclOperation.DESCRIBE), _cluster_acl(AclOperation.IDEMPOTENT_WRITE)
        _create(writer, describe)
        bits = 1 << int(AclOperation.DESCRIBE)
        assert _metadata_operations(raw) == bits and _describe_cluster_operations(raw) == bits
        _create(writer, other)
        bits |= 1 << int(AclOperation.IDEMPOTENT_WRITE)
        assert _metadata_operations(raw) == bits and _describe_cluster_operations(raw) == bits
        _delete(writer, describe)
        assert _metadata_operations(raw) == 0 and _describe_cluster_operations(raw) == 0   # no DESCRIBE: 0
        answer = _ask(raw, 3, 10, topics=None, allow_auto_topic_creation=False,
                      include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
        assert int(answer.cluster_authorized_operations) == NOT_REQUESTED
        _delete(writer, other)
