"""The hot responses encoded by hand: DescribeAcls' answer straight from the store's bindings.

kio builds a frozen entity per ACL (checking each int's range) and then walks it to write
the bytes; for a DescribeAcls answer that is most of the server's time.  Here the body is
written directly from the bindings, byte for byte what kio writes for the same values at
every served version (tests/core/wire/test_hot_responses.py checks that property over all
of them).  The encoding is Kafka's: non-flexible versions write int16-length strings and
int32-length arrays; flexible ones (DescribeAcls v2+) write unsigned varints of length + 1
and an empty tagged-field section (one 0 byte) after every struct.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from secmeta.core.wire.codec import ApiKey, EncodedResponse, flexible_response_header
from secmeta.events.types import AclBinding

__all__ = ["describe_acls_response"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FLEXIBLE_FROM = 2     # DescribeAcls v2 is the first flexible version
_NO_TAGS = b"\0"
#: throttle_time_ms 0, error_code 0, error_message null
_HEAD = {False: b"\0\0\0\0\0\0\xff\xff", True: b"\0\0\0\0\0\0\0"}


def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_string(value: str) -> bytes:
    data = value.encode()
    n = len(data) + 1
    return (bytes((n,)) if n < 0x80 else _uvarint(n)) + data


def _string(value: str) -> bytes:
    data = value.encode()
    return _I16.pack(len(data)) + data


def describe_acls_response(version: int, bindings: Iterable[AclBinding]) -> EncodedResponse:
    """DescribeAcls' successful answer (no error, not throttled) of ``bindings``, grouped by resource
    pattern in first-seen order (Kafka's DescribeAclsResponse.aclsResources)."""
    flexible = version >= _FLEXIBLE_FROM
    string = _compact_string if flexible else _string
    tail = _NO_TAGS if flexible else b""
    groups: dict[tuple[int, str, int], list[bytes]] = {}
    last_pattern, entries = None, []
    for binding in bindings:
        pattern, entry = binding.pattern, binding.entry
        if pattern is not last_pattern:   # the index hands out a resource's ACLs together, sharing one pattern
            last_pattern = pattern
            entries = groups.setdefault((int(pattern.resource_type), pattern.name, int(pattern.pattern_type)), [])
        entries.append(string(entry.principal) + string(entry.host)
                       + bytes((entry.operation, entry.permission_type)) + tail)
    out = [_HEAD[flexible], _uvarint(len(groups) + 1) if flexible else _I32.pack(len(groups))]
    for (resource_type, name, pattern_type), acls in groups.items():
        out += (bytes((resource_type,)), string(name), bytes((pattern_type,)),
                _uvarint(len(acls) + 1) if flexible else _I32.pack(len(acls)))
        out += acls
        out.append(tail)
    out.append(tail)
    return EncodedResponse(flexible_response_header(ApiKey.DESCRIBE_ACLS, version), b"".join(out))
