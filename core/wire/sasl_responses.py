"""The SASL answers of a login as bytes: SaslHandshake's kept per version and mechanisms, SaslAuthenticate's by hand.

Every SCRAM login is answered a SaslHandshake and two SaslAuthenticate responses.  Building a kio
entity and walking it to write its bytes cost about as much as the SCRAM step itself (~10 us a
response), so:

- a SaslHandshake answer depends only on its version, its error code and the mechanisms offered:
  it is encoded by kio once per such key and kept (it carries nothing secret);
- a SaslAuthenticate answer carries the exchange's own SCRAM message: it is written by hand, each
  time, and never kept.

Both are byte for byte what kio writes for the same fields at every version served
(tests/core/wire/test_sasl_responses.py checks it).  SaslAuthenticate v0-1 write an int16-length
nullable string and int32-length bytes (v1 adds the session lifetime); v2 is flexible: unsigned
varints of length + 1 and an empty tagged-field section.
"""

from __future__ import annotations

import struct
from functools import lru_cache

from secmeta.core.wire.codec import (
    ApiKey,
    EncodedResponse,
    build,
    encoded,
    first_flexible_version,
    flexible_response_header,
    response_class,
    uvarint,
)

__all__ = ["sasl_authenticate_response", "sasl_handshake_response"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_FLEXIBLE_FROM = first_flexible_version(ApiKey.SASL_AUTHENTICATE)


@lru_cache(maxsize=64)
def sasl_handshake_response(version: int, error_code: int, mechanisms: tuple[str, ...]) -> EncodedResponse:
    """SaslHandshake's answer at ``version``: ``error_code`` and the ``mechanisms`` offered (kept per key)."""
    return encoded(build(response_class(ApiKey.SASL_HANDSHAKE, version), error_code=error_code,
                         mechanisms=list(mechanisms)))


def sasl_authenticate_response(version: int, error_code: int, error_message: str | None, auth_bytes: bytes,
                               session_lifetime_ms: int = 0) -> EncodedResponse:
    """SaslAuthenticate's answer at ``version`` (0-2), written by hand; never kept (it carries the exchange's bytes)."""
    message = None if error_message is None else error_message.encode("utf-8")
    parts = [_I16.pack(int(error_code))]
    if version >= _FLEXIBLE_FROM:
        parts += [b"\0" if message is None else uvarint(len(message) + 1), message or b"",
                  uvarint(len(auth_bytes) + 1), auth_bytes, _I64.pack(session_lifetime_ms), b"\0"]
    else:
        parts += [_I16.pack(-1 if message is None else len(message)), message or b"",
                  _I32.pack(len(auth_bytes)), auth_bytes]
        if version >= 1:
            parts.append(_I64.pack(session_lifetime_ms))
    return EncodedResponse(flexible_response_header(ApiKey.SASL_AUTHENTICATE, version), b"".join(parts), int(error_code))
