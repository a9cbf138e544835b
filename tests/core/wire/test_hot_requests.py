"""DescribeAcls and SaslAuthenticate requests read by hand: kio's decoding exactly, or no answer (kio decides), at
every served version."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader

from secmeta.core.wire import bounds
from secmeta.core.wire.codec import (
    ApiKey,
    RequestFrame,
    build,
    decode_request,
    encode_request,
    request_class,
)
from secmeta.core.wire.hot_requests import (
    describe_acls_body,
    describe_acls_fields,
    describe_acls_key,
    describe_acls_request,
    fields_of,
    sasl_authenticate_request,
)

_VERSIONS = st.integers(*ApiKey.DESCRIBE_ACLS.versions)
_INT8 = st.integers(-128, 127)
_SHORT = st.none() | st.text(max_size=20)
_ANY_TEXT = st.none() | st.text(max_size=20) | st.text(min_size=100, max_size=200)


def _kio(frame: bytes, trailing_ok: bool, api: ApiKey = ApiKey.DESCRIBE_ACLS) -> RequestFrame | None:
    """What kio decodes (after the length check the server runs first), or None if it refuses the frame."""
    try:
        cls = request_class(api, int.from_bytes(frame[2:4], "big", signed=True))
    except Exception:  # noqa: BLE001 - a version kio does not know
        return None
    try:
        bounds.check(cls, frame, bounds.check(cls.__header_schema__, frame, 0))
        header, header_size = entity_reader(cls.__header_schema__)(frame, 0)
        request, size = entity_reader(cls)(frame, header_size)
    except Exception:  # noqa: BLE001 - any refusal
        return None
    if header_size + size != len(frame) and not trailing_ok:
        return None
    return RequestFrame(api, cls.__version__, header.correlation_id, header.client_id, request)


@st.composite
def _frames(draw, text=_ANY_TEXT) -> bytes:
    version = draw(_VERSIONS)
    request = build(request_class(ApiKey.DESCRIBE_ACLS, version), resource_type_filter=draw(_INT8),
                    resource_name_filter=draw(text), pattern_type_filter=draw(_INT8), principal_filter=draw(text),
                    host_filter=draw(text), operation=draw(_INT8), permission_type=draw(_INT8))
    return encode_request(draw(st.integers(-(2**31), 2**31 - 1)), draw(text), request)[4:]


@settings(max_examples=60, deadline=None)
@given(frame=_frames(), trailing_ok=st.booleans())
def test_a_request_reads_as_kio_reads_it(frame, trailing_ok):
    """Any DescribeAcls request, short or long strings, null or not: the hand reader gives kio's request or none."""
    ours = describe_acls_request(frame, trailing_ok=trailing_ok)
    assert ours is None or ours == _kio(frame, trailing_ok)


@settings(max_examples=60, deadline=None)
@given(frame=_frames(text=_SHORT), trailing_ok=st.booleans())
def test_a_plain_request_is_read_by_hand(frame, trailing_ok):
    """The shape clients send (short strings, no tagged fields) is read by hand, as kio reads it."""
    ours = describe_acls_request(frame, trailing_ok=trailing_ok)
    assert ours is not None and ours == _kio(frame, trailing_ok)
    assert decode_request(frame, trailing_ok=trailing_ok) == ours


@settings(max_examples=100, deadline=None)
@given(frame=_frames(text=_SHORT), data=st.data(), trailing_ok=st.booleans())
def test_a_damaged_request_is_never_read_otherwise_than_by_kio(frame, data, trailing_ok):
    """Cut, extended or with a byte changed, a request the hand reader accepts is one kio accepts alike:
    it never reads a frame kio refuses, nor reads one differently."""
    how = data.draw(st.sampled_from(["cut", "extend", "flip"]))
    if how == "cut":
        frame = frame[:data.draw(st.integers(8, len(frame) - 1))]
    elif how == "extend":
        frame += data.draw(st.binary(min_size=1, max_size=8))
    else:
        at = data.draw(st.integers(8, len(frame) - 1))
        frame = frame[:at] + bytes([data.draw(st.integers(0, 255))]) + frame[at + 1:]
    ours = describe_acls_request(frame, trailing_ok=trailing_ok)
    assert ours is None or ours == _kio(frame, trailing_ok)


@settings(max_examples=100, deadline=None)
@given(frame=_frames(), data=st.data(), trailing_ok=st.booleans())
def test_the_filter_values_read_by_hand_are_kios_or_none(frame, data, trailing_ok):
    """The filter values read straight from a request (the server's inline answer) are kio's request's, with its
    version and correlation id, whatever the frame (damaged or not); or none, and then kio decides."""
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(frame) - 1))
        frame = frame[:at] + bytes([data.draw(st.integers(0, 255))]) + frame[at + 1:]
    read = describe_acls_fields(frame, trailing_ok=trailing_ok)
    if read is None:
        return
    kio = _kio(frame, trailing_ok)
    assert kio is not None
    assert read == (kio.api_version, kio.correlation_id, kio.client_id, fields_of(kio.request))


def test_another_api_or_an_unserved_version_is_not_read_as_describe_acls():
    """Only a DescribeAcls request of a served version is read by hand: the same bytes under another api key or
    version are left to the decoder (which refuses them or reads them as what they are)."""
    frame = encode_request(7, "t", build(request_class(ApiKey.DESCRIBE_ACLS, 3), resource_type_filter=2,
                                         resource_name_filter="orders", pattern_type_filter=4, principal_filter=None,
                                         host_filter=None, operation=1, permission_type=1))[4:]
    assert describe_acls_fields(frame, trailing_ok=False) == (3, 7, "t", (2, "orders", 4, None, None, 1, 1))
    for api_key, version in ((ApiKey.DELETE_ACLS, 3), (ApiKey.DESCRIBE_ACLS, 4), (ApiKey.DESCRIBE_ACLS, 0)):
        other = api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + frame[4:]
        assert describe_acls_fields(other, trailing_ok=False) is None


def _damaged(frame: bytes, data) -> bytes:
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(frame) - 1))
        frame = frame[:at] + bytes([data.draw(st.integers(0, 255))]) + frame[at + 1:]
    return frame


@settings(max_examples=150, deadline=None)
@given(first=_frames(text=_SHORT), second=_frames(text=_SHORT), data=st.data())
def test_requests_of_one_key_are_one_filter(first, second, data):
    """The server finds a kept answer by ``describe_acls_key`` without reading the body: two requests (damaged or
    not) of equal keys that kio both decodes are the same version and filter, whatever their correlation and
    client ids; a request kio decodes with its filter read by hand has a key, with its correlation id."""
    if data.draw(st.booleans()):        # the same filter from another client, under another correlation id
        second = first[:4] + second[4:8] + first[8:] if data.draw(st.booleans()) else first
    first, second = _damaged(first, data), _damaged(second, data)
    keys = [describe_acls_key(f) for f in (first, second)]
    reads = [describe_acls_fields(f, trailing_ok=True) for f in (first, second)]
    for key, read, frame in zip(keys, reads, (first, second), strict=True):
        if read is not None:
            assert key is not None and key[:2] == read[:2] and _kio(frame, True) is not None
            assert describe_acls_body(frame, key[0], key[2], trailing_ok=True) == read[3]
    if None not in keys and keys[0][3] == keys[1][3] and None not in reads:
        assert (reads[0][0], reads[0][3]) == (reads[1][0], reads[1][3])


# -- SaslAuthenticate: the SCRAM message after the header (int32-length bytes; compact bytes from v2) -----------------

_SASL = ApiKey.SASL_AUTHENTICATE
# SCRAM messages of every length class: empty, short, past one varint byte (127), two (16383)
_AUTH_BYTES = st.binary(max_size=8) | st.binary(min_size=100, max_size=300) | st.binary(min_size=16380, max_size=16400)


@st.composite
def _sasl_frames(draw) -> bytes:
    request = build(request_class(_SASL, draw(st.integers(*_SASL.versions))), auth_bytes=draw(_AUTH_BYTES))
    return encode_request(draw(st.integers(-(2**31), 2**31 - 1)), draw(_ANY_TEXT), request)[4:]


@settings(max_examples=80, deadline=None)
@given(frame=_sasl_frames(), trailing=st.binary(max_size=4), trailing_ok=st.booleans())
def test_a_sasl_authenticate_request_is_read_by_hand_as_kio_reads_it(frame, trailing, trailing_ok):
    """What clients send (any client id, any message length) is read by hand, as kio reads it; trailing bytes as
    kio takes them (accepted where the caller allows them, else left to kio, which refuses them)."""
    frame += trailing
    ours = sasl_authenticate_request(frame, trailing_ok=trailing_ok)
    if trailing and not trailing_ok:
        assert ours is None
        return
    assert ours is not None and ours == _kio(frame, trailing_ok, _SASL)
    assert decode_request(frame, trailing_ok=trailing_ok) == ours


@settings(max_examples=150, deadline=None)
@given(frame=_sasl_frames(), data=st.data(), trailing_ok=st.booleans())
def test_a_damaged_sasl_authenticate_request_is_never_read_otherwise_than_by_kio(frame, data, trailing_ok):
    """Cut, or with a byte changed (its api key, version, lengths included), a SaslAuthenticate request the hand
    reader accepts is one kio accepts alike."""
    if data.draw(st.booleans()):
        frame = frame[:data.draw(st.integers(0, len(frame) - 1))]
    else:
        at = data.draw(st.integers(0, min(len(frame) - 1, 40)))
        frame = frame[:at] + bytes([data.draw(st.integers(0, 255))]) + frame[at + 1:]
    ours = sasl_authenticate_request(frame, trailing_ok=trailing_ok)
    assert ours is None or ours == _kio(frame, trailing_ok, _SASL)
