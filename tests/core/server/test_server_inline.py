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
from tests.serverkit import ADMIN, ADMIN_PASSWORD, RawClient

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


def _described(raw: RawClient, correlation_id: int, f: AclBindingFilter) -> tuple[int, list[AclBinding]]:
    """(error code, bindings) of a DescribeAcls v3 of ``f`` sent as bytes (a logged-in connection answers it inline)."""
    raw.send_bytes(encode_request(correlation_id, "t", build(request_class(29, 3), **convert.filter_fields(f))))
    answer = decode_response(29, 3, raw.read_frame())[1]
    return int(answer.error_code), convert.bindings_from_resources(answer.resources)


def test_a_describe_refused_on_the_spot_is_refused_and_allowed_once_a_write_grants_the_right(serve):
    """A logged-in user without DESCRIBE on the cluster gets CLUSTER_AUTHORIZATION_FAILED for a DescribeAcls naming a
    resource, then, once a write grants the right, the ACLs (the decision on the cluster is never kept past a write)."""
    server = serve(LISTENERS, users={"admin": ADMIN_PASSWORD, "bob": "bob-secret"})
    assert not any(server.store.create_acls([ORDERS], context=ADMIN))
    orders = AclBindingFilter.of(ResourceType.TOPIC, "orders", PatternType.MATCH)
    with RawClient.connect(server, "SASL_PLAINTEXT") as bob:
        assert bob.sasl_login("bob", "bob-secret").error_code == 0
        assert _described(bob, 1, orders) == (31, [])      # CLUSTER_AUTHORIZATION_FAILED
        assert _described(bob, 2, orders) == (31, [])
        grant = AclBinding.of(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:bob", "*",
                              AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        assert not any(server.store.create_acls([grant], context=ADMIN))
        assert _described(bob, 3, orders) == (0, [ORDERS])


def test_a_write_to_a_resource_already_described_is_in_the_next_answer(admin):
    """The answer of a resource's ACLs (kept encoded per index node) holds what a write added to or removed from that
    resource, literal and prefixed, once the write is answered."""
    literal = AclBindingFilter.of(ResourceType.TOPIC, "orders", PatternType.LITERAL)
    match = AclBindingFilter.of(ResourceType.TOPIC, "orders-eu", PatternType.MATCH)
    prefixed = AclBinding.of(ResourceType.TOPIC, "orders", PatternType.PREFIXED, "User:carol", "10.0.0.1",
                             AclOperation.WRITE, AclPermissionType.DENY)
    second = AclBinding.of(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:bob", "*",
                           AclOperation.READ, AclPermissionType.ALLOW)
    admin.send_bytes(_create(1))
    assert decode_response(30, 3, admin.read_frame())[1].results[0].error_code == 0
    assert _described(admin, 2, literal) == (0, [ORDERS])
    assert _described(admin, 3, match) == (0, [])
    admin.send(build(request_class(30, 3), creations=[convert.acl_creation_fields(b) for b in (second, prefixed)]))
    assert decode_response(30, 3, admin.read_frame())[1].results[0].error_code == 0
    assert sorted(_described(admin, 4, literal)[1], key=repr) == sorted([ORDERS, second], key=repr)
    assert _described(admin, 5, match) == (0, [prefixed])
    delete = build(request_class(31, 3), filters=[convert.filter_fields(AclBindingFilter.of(principal="User:alice"))])
    admin.send(delete)
    admin.read_frame()
    assert _described(admin, 6, literal) == (0, [second])


def test_a_damaged_request_is_never_answered_from_a_kept_answer(admin):
    """A DescribeAcls whose answer is kept, sent again cut short by one byte (its size says so): not the kept
    answer but the server's refusal of a malformed frame, as for any (the connection is closed)."""
    orders = AclBindingFilter.of(ResourceType.TOPIC, "orders", PatternType.MATCH)
    assert _described(admin, 1, orders) == (0, [])
    assert _described(admin, 2, orders) == (0, [])         # kept
    frame = _describe(3)[4:-1]
    admin.send_bytes(len(frame).to_bytes(4, "big") + frame)
    assert admin.next_frame() is None
