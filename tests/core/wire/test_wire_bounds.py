"""secmeta.core.wire.bounds: announced lengths are checked against the frame before kio's native reader.

Kafka's generated readers refuse a collection or string longer than the bytes left ("Tried to
allocate a collection of size N, but there are only M bytes remaining": MessageUtil and the
generated *Data.read methods); kio 0.6.5 instead allocates the announced count and aborts the
process, so every decode goes through this check first.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.core.wire import bounds
from secmeta.core.wire.codec import (
    FrameError,
    build,
    decode_request,
    decode_response,
    encode_request,
    request_class,
)

CREATE_ACLS_V1 = request_class(30, 1)     # legacy: int32 array counts, int16 string lengths
CREATE_ACLS_V3 = request_class(30, 3)     # flexible: compact counts and lengths, tagged fields
SCRAM_DESCRIBE = request_class(50, 0)     # nullable compact array of users


def creation(name: str = "orders") -> dict:
    return dict(resource_type=2, resource_name=name, resource_pattern_type=3, principal="User:a",
                host="*", operation=3, permission_type=3)


def body(request) -> bytes:
    return encode_request(1, "bounds", request)[4:]


@pytest.mark.parametrize("cls", [CREATE_ACLS_V1, CREATE_ACLS_V3])
def test_a_well_formed_request_ends_where_kio_says(cls):
    frame = body(build(cls, creations=[creation(), creation("payments")]))
    assert bounds.check(cls, frame, bounds.check(cls.__header_schema__, frame, 0)) == len(frame)
    assert decode_request(frame).request.creations[1].resource_name == "payments"


def _header_size(cls) -> int:
    """Bytes before the request body (headers have no arrays: any request of ``cls`` will do)."""
    frame = body(build(cls, **({"users": []} if cls is SCRAM_DESCRIBE else {"creations": []})))
    return bounds.check(cls.__header_schema__, frame, 0)


def test_a_legacy_array_announcing_more_items_than_bytes_is_malformed():
    cls = CREATE_ACLS_V1
    frame = body(build(cls, creations=[]))
    start = _header_size(cls)
    forged = frame[:start] + struct.pack(">i", 2**31 - 1)
    with pytest.raises(FrameError, match="creations announces 2147483647 items"):
        decode_request(forged)


def test_a_compact_array_announcing_2_to_the_32_items_is_malformed_not_a_crash():
    cls = SCRAM_DESCRIBE
    frame = body(build(cls, users=[]))
    start = _header_size(cls)
    forged = frame[:start] + bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])   # uvarint 2**32 - 1 = count + 1
    with pytest.raises(FrameError, match="users announces 4294967294 items"):
        decode_request(forged)


def test_a_string_longer_than_the_frame_is_malformed():
    cls = CREATE_ACLS_V1
    frame = body(build(cls, creations=[creation("t")]))
    start = _header_size(cls) + 4 + 1   # past the array count and resource_type
    forged = frame[:start] + struct.pack(">h", 30000) + frame[start + 2:]
    with pytest.raises(FrameError, match="resource_name announces 30000 bytes"):
        decode_request(forged)


def test_a_tagged_field_larger_than_the_frame_is_malformed():
    cls = CREATE_ACLS_V3
    frame = body(build(cls, creations=[]))
    # the request's tagged-field section is its last byte (0 tags): announce one tag of 1000 bytes
    forged = frame[:-1] + bytes([1, 7]) + bytes([0xE8, 0x07]) + b"x"
    with pytest.raises(FrameError, match="tagged field 7 announces 1000 bytes"):
        decode_request(forged)


def test_a_malformed_response_is_a_frame_error_for_the_client():
    frame = body(build(CREATE_ACLS_V1, creations=[]))   # not a response at all
    with pytest.raises(FrameError):
        decode_response(29, 1, frame[:6] + struct.pack(">i", 2**30))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(min_size=1, max_size=64), cut=st.integers(min_value=0, max_value=200))
def test_any_truncation_or_garbage_is_a_frame_error_never_a_crash(data, cut):
    """Whatever follows a valid header, decoding answers or refuses with FrameError."""
    frame = body(build(CREATE_ACLS_V3, creations=[creation()]))
    start = bounds.check(CREATE_ACLS_V3.__header_schema__, frame, 0)
    for forged in (frame[:start] + data, frame[: start + cut % max(1, len(frame) - start)]):
        try:
            decode_request(forged, trailing_ok=True)
        except FrameError:
            pass
