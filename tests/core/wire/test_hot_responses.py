"""The responses the server keeps or writes as bytes are byte for byte kio's, at every version we advertise."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.core.wire import convert, hot_responses
from secmeta.core.wire.codec import (
    ApiKey,
    build,
    decode_response,
    encode_response,
    encoded,
    response_class,
)
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

# names and hosts of every length class: empty, short, and past one varint byte (127) and 255
_TEXT = st.one_of(st.text(max_size=8), st.text(min_size=120, max_size=300))
_PATTERN_TYPES = [PatternType.LITERAL, PatternType.PREFIXED]
_RESOURCE_TYPES = [t for t in ResourceType if t not in (ResourceType.ANY, ResourceType.UNKNOWN)]
_OPERATIONS = [o for o in AclOperation if o not in (AclOperation.ANY, AclOperation.UNKNOWN)]


@st.composite
def _bindings(draw) -> list[AclBinding]:
    """ACLs on a few resources, interleaved (so groups are not contiguous), some resources shared."""
    patterns = draw(st.lists(st.tuples(st.sampled_from(_RESOURCE_TYPES), _TEXT, st.sampled_from(_PATTERN_TYPES)),
                             min_size=1, max_size=4))
    entries = draw(st.lists(st.tuples(st.integers(0, len(patterns) - 1), _TEXT, _TEXT, st.sampled_from(_OPERATIONS),
                                      st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY])),
                            max_size=60))
    return [AclBinding.of(*patterns[i][:2], patterns[i][2], principal, host, op, perm)
            for i, principal, host, op, perm in entries]


def _kio_frame(api_key: ApiKey, version: int, correlation_id: int, **fields) -> bytes:
    return encode_response(correlation_id, build(response_class(api_key, version), throttle_time=0, **fields))


_DESCRIBE_ACLS_VERSIONS = range(ApiKey.DESCRIBE_ACLS.versions[0], ApiKey.DESCRIBE_ACLS.versions[1] + 1)
_CORRELATION = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=60, deadline=None)
@given(bindings=_bindings(), version=st.sampled_from(_DESCRIBE_ACLS_VERSIONS), correlation_id=_CORRELATION)
def test_describe_acls_by_hand_is_kios_encoding(bindings, version, correlation_id):
    """DescribeAcls' hand-written answer equals kio's for the same bindings, grouped by resource, at v1-v3."""
    ours = encode_response(correlation_id, hot_responses.describe_acls_response(version, bindings))
    kio = _kio_frame(ApiKey.DESCRIBE_ACLS, version, correlation_id, error_code=0, error_message=None,
                     resources=convert.resources_fields(bindings))
    assert ours == kio
    assert decode_response(ApiKey.DESCRIBE_ACLS, version, ours[4:])[0] == correlation_id


def test_describe_acls_by_hand_reads_back_as_the_bindings():
    """A client reading the hand-written answer gets every binding, each resource's ACLs together."""
    bindings = [AclBinding.of(ResourceType.TOPIC, name, PatternType.LITERAL, f"User:u{i}", "*",
                              AclOperation.READ, AclPermissionType.ALLOW) for i, name in enumerate("abab")]
    for version in _DESCRIBE_ACLS_VERSIONS:
        frame = encode_response(3, hot_responses.describe_acls_response(version, bindings))
        _, response = decode_response(ApiKey.DESCRIBE_ACLS, version, frame[4:])
        assert [r.resource_name for r in response.resources] == ["a", "b"]
        assert convert.bindings_from_resources(response.resources) == [bindings[0], bindings[2], bindings[1], bindings[3]]


_CLUSTER_APIS = {
    ApiKey.API_VERSIONS: lambda ops, host: {"error_code": 0, "api_keys": [
        {"api_key": k, "min_version": k.versions[0], "max_version": k.versions[1]} for k in ApiKey]},
    ApiKey.METADATA: lambda ops, host: {
        "brokers": [{"node_id": 1, "host": host, "port": 9092, "rack": None}], "cluster_id": "c", "controller_id": 1,
        "topics": [], "cluster_authorized_operations": ops, "error_code": 0},
    ApiKey.DESCRIBE_CLUSTER: lambda ops, host: {
        "error_code": 0, "error_message": None, "endpoint_type": 1, "cluster_id": "c", "controller_id": 1,
        "brokers": [{"broker_id": 1, "host": host, "port": 9092, "rack": None, "is_fenced": False}],
        "cluster_authorized_operations": ops},
}


@settings(max_examples=60, deadline=None)
@given(api=st.sampled_from(sorted(_CLUSTER_APIS)), data=st.data(), correlation_id=_CORRELATION,
       operations=st.integers(-(2**31), 2**31 - 1), host=_TEXT)
def test_a_kept_encoding_frames_as_kio_frames_the_entity(api, data, correlation_id, operations, host):
    """An answer kept encoded and framed later with another correlation id equals kio's frame of it, at every
    version of ApiVersions, Metadata and DescribeCluster (their header v0 or v1 included)."""
    version = data.draw(st.integers(*api.versions))
    entity = build(response_class(api, version), throttle_time=0, **_CLUSTER_APIS[api](operations, host))
    kept = encoded(entity)
    assert encode_response(correlation_id, kept) == encode_response(correlation_id, entity)
    assert kept.error_code == 0
