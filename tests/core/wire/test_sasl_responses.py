"""A login's SASL answers as the server writes them are byte for byte kio's, at every version served."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from secmeta.core.errors import ErrorCode
from secmeta.core.wire.codec import ApiKey, build, decode_response, encode_response, response_class
from secmeta.core.wire.sasl_responses import sasl_authenticate_response, sasl_handshake_response

_LOW, _HIGH = ApiKey.SASL_AUTHENTICATE.versions
# messages and SCRAM bytes of every length class: empty, short, past one varint byte (127) and 255
_TEXT = st.one_of(st.none(), st.text(max_size=8), st.text(min_size=120, max_size=300))
_BYTES = st.one_of(st.binary(max_size=8), st.binary(min_size=120, max_size=300))


@given(version=st.integers(_LOW, _HIGH), correlation_id=st.integers(-(2**31), 2**31 - 1),
       error_code=st.sampled_from([int(code) for code in ErrorCode]), message=_TEXT, auth_bytes=_BYTES,
       lifetime=st.integers(0, 2**40))   # (kio reads it as a timedelta: exact up to far past any lifetime)
def test_sasl_authenticate_answer_is_kios(version: int, correlation_id: int, error_code: int, message: str | None,
                                          auth_bytes: bytes, lifetime: int) -> None:
    ours = sasl_authenticate_response(version, error_code, message, auth_bytes, lifetime)
    kio = build(response_class(ApiKey.SASL_AUTHENTICATE, version), error_code=error_code, error_message=message,
                auth_bytes=auth_bytes, session_lifetime=lifetime)
    assert encode_response(correlation_id, ours) == encode_response(correlation_id, kio)
    assert ours.error_code == error_code


@given(version=st.integers(*ApiKey.SASL_HANDSHAKE.versions), correlation_id=st.integers(0, 2**31 - 1),
       error_code=st.sampled_from([0, 33, 34]),
       mechanisms=st.lists(st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]), unique=True, max_size=3))
def test_sasl_handshake_answer_names_its_fields_whatever_was_kept_before(version: int, correlation_id: int,
                                                                          error_code: int, mechanisms: list[str]) -> None:
    """Kept per version, error and mechanisms: each key reads back as its own fields and its request's id."""
    frame = encode_response(correlation_id, sasl_handshake_response(version, error_code, tuple(mechanisms)))
    got_id, response = decode_response(ApiKey.SASL_HANDSHAKE, version, frame[4:])
    assert (got_id, int(response.error_code), list(response.mechanisms)) == (correlation_id, error_code, mechanisms)
