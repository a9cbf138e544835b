"""The large answer's transport floor (scripts/bench/serve_floor.py): every DescribeAcls answered with kio's
encoding of the same ACLs, whatever its filter, frames split anyhow across reads, in order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scripts.bench.serve_floor import SERVED, FloorProtocol
from secmeta.core.wire import convert
from secmeta.core.wire.codec import (
    ApiKey,
    build,
    decode_response,
    encode_request,
    encode_response,
    request_class,
    response_class,
)
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

BINDINGS = [AclBinding.of(ResourceType.TOPIC, "big-", PatternType.PREFIXED, f"User:u{i}", f"10.0.0.{i}",
                          AclOperation.READ, AclPermissionType.ALLOW) for i in range(40)]
RESOURCES = convert.resources_fields(BINDINGS)


class Transport:
    """What the protocol writes, in order, and whether it closed."""

    def __init__(self):
        self.out, self.closed = bytearray(), False

    def write(self, data: bytes) -> None:
        self.out += data

    def writelines(self, parts) -> None:
        for part in parts:
            self.out += part

    def close(self) -> None:
        self.closed = True


def _describe(correlation_id: int, version: int, name: str) -> bytes:
    return encode_request(correlation_id, "t", build(request_class(ApiKey.DESCRIBE_ACLS, version), resource_type_filter=2,
                                                     resource_name_filter=name, pattern_type_filter=2,
                                                     principal_filter=None, host_filter=None, operation=1,
                                                     permission_type=1))


def _frames(out: bytes) -> list[bytes]:
    frames, pos = [], 0
    while pos < len(out):
        end = pos + 4 + int.from_bytes(out[pos:pos + 4], "big")
        frames.append(out[pos + 4:end])
        pos = end
    assert pos == len(out)
    return frames


@settings(max_examples=40, deadline=None)
@given(versions=st.lists(st.integers(*ApiKey.DESCRIBE_ACLS.versions).filter(lambda v: v >= 1), min_size=1, max_size=5),
       cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_every_describe_acls_gets_kios_frame_of_the_resources_in_order(versions, cuts):
    """Requests for any topic, at any version from v1, sent in one stream cut at arbitrary points, each get kio's
    frame of the same resources under their own correlation id, in request order."""
    stream = b"".join(_describe(i, v, f"t{i}") for i, v in enumerate(versions))
    transport = Transport()
    protocol = FloorProtocol({}, RESOURCES, 9092)
    protocol.connection_made(transport)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    for start, end in zip(points, points[1:]):
        protocol.data_received(stream[start:end])
    frames = _frames(bytes(transport.out))
    assert len(frames) == len(versions) and not transport.closed
    for i, (frame, version) in enumerate(zip(frames, versions)):
        kio = encode_response(i, build(response_class(ApiKey.DESCRIBE_ACLS, version), throttle_time=0, error_code=0,
                                       error_message=None, resources=RESOURCES))
        assert frame == kio[4:]
        correlation_id, response = decode_response(ApiKey.DESCRIBE_ACLS, version, frame)
        assert correlation_id == i and convert.bindings_from_resources(response.resources) == BINDINGS


def test_it_answers_api_versions_and_metadata_and_closes_on_anything_else():
    """What an AdminClient asks before DescribeAcls is answered (the served APIs, this one node), anything else closes."""
    transport = Transport()
    protocol = FloorProtocol({}, RESOURCES, 9092)
    protocol.connection_made(transport)
    protocol.data_received(encode_request(1, "t", build(request_class(ApiKey.API_VERSIONS, 3), client_software_name="t",
                                                        client_software_version="1")))
    protocol.data_received(encode_request(2, "t", build(request_class(ApiKey.METADATA, 9), topics=None,
                                                        allow_auto_topic_creation=False,
                                                        include_cluster_authorized_operations=False,
                                                        include_topic_authorized_operations=False)))
    versions, metadata = _frames(bytes(transport.out))
    _, answer = decode_response(ApiKey.API_VERSIONS, 3, versions)
    assert {int(k.api_key) for k in answer.api_keys} == {int(k) for k in SERVED}
    _, answer = decode_response(ApiKey.METADATA, 9, metadata)
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [(1, "127.0.0.1", 9092)] and answer.controller_id == 1
    assert not transport.closed
    protocol.data_received(encode_request(3, "t", build(request_class(ApiKey.DESCRIBE_CLUSTER, 0),
                                                        include_cluster_authorized_operations=False)))
    assert transport.closed
