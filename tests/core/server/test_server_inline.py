"""Hot reads answered as their bytes arrive (secmeta.core.server.inline): the same answers, in request order,
and a connection that only sends them is not idle."""

from __future__ import annotations

import time

import pytest

from secmeta.core.server.config import ServerConfig
from secmeta.core.wire import convert
from secmeta.core.wire.codec import build, decode_response, encode_request, request_class
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.serverkit import ADMIN_PASSWORD, RawClient

LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
ORDERS = AclBinding.of(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)


def _describe(correlation_id: int) -> bytes:
    f = AclBindingFilter.of(ResourceType.TOPIC, "orders", PatternType.MATCH)
    return encode_request(correlation_id, "t", build(request_class(29, 3), **convert.filter_fields(f)))


def _metadata(correlation_id: int) -> bytes:
    return encode_request(correlation_id, "t", build(request_class(3, 12), topics=None, allow_auto_topic_creation=False,
                                                     include_topic_authorized_operations=False))


def _create(correlation_id: int) -> bytes:
    return encode_request(correlation_id, "t", build(request_class(30, 3), creations=[convert.acl_creation_fields(ORDERS)]))


def _correlation(answer: bytes) -> int:
    return int.from_bytes(answer[:4], "big", signed=True)


def _logged_in(server) -> RawClient:
    raw = RawClient.connect(server, "SASL_PLAINTEXT")
    assert raw.sasl_login("admin", ADMIN_PASSWORD).error_code == 0
    return raw


@pytest.fixture
def admin(serve):
    with _logged_in(serve(LISTENERS)) as raw:
        yield raw


def test_pipelined_reads_and_a_write_are_answered_in_order_each_read_seeing_the_writes_before_it(admin):
    """Reads, a write and reads again, sent in one piece: one answer each, in request order; the DescribeAcls
    after the CreateAcls (a write the worker threads serve) sees its ACL, the one before does not."""
    frames = [_metadata(1), _describe(2), _create(3), _describe(4), _metadata(5), _describe(6)]
    admin.send_bytes(b"".join(frames))
    answers = [admin.read_frame() for _ in frames]
    assert [_correlation(a) for a in answers] == [1, 2, 3, 4, 5, 6]
    described = [convert.bindings_from_resources(decode_response(29, 3, answers[i])[1].resources) for i in (1, 3, 5)]
    assert described == [[], [ORDERS], [ORDERS]]
    assert decode_response(30, 3, answers[2])[1].results[0].error_code == 0


def test_a_request_split_over_several_reads_is_answered_once(admin):
    """A hot read whose bytes arrive in pieces, with the next one's first bytes: each answered once, in order."""
    data = _describe(1) + _metadata(2)
    for cut in (3, 9, len(_describe(1)) + 2):
        admin.send_bytes(data[:cut])
        time.sleep(0.02)            # (a separate segment: the server reads it alone)
        admin.send_bytes(data[cut:])
        assert [_correlation(admin.read_frame()) for _ in range(2)] == [1, 2]


def test_a_connection_sending_only_hot_reads_is_not_idle(serve):
    """connections.max.idle.ms (600 ms here) counts from the last request, however it was answered."""
    with _logged_in(serve(LISTENERS, config=ServerConfig(connections_max_idle_ms=600))) as raw:
        for i in range(8):      # 8 requests 150 ms apart: 1.2 s in all, never 600 ms without one
            raw.send_bytes(_metadata(i))
            assert _correlation(raw.read_frame()) == i
            time.sleep(0.15)
        assert not raw.closed_by_server(timeout=0.1)
