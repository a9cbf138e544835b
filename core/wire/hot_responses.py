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


def _put_compact(out: bytearray, data: bytes) -> None:
    n = len(data) + 1
    if n < 0x80:
        out.append(n)
    else:
        out += _uvarint(n)
    out += data


def _put_string(out: bytearray, data: bytes) -> None:
    out += _I16.pack(len(data))
    out += data


def describe_acls_response(version: int, bindings: Iterable[AclBinding]) -> EncodedResponse:
    """DescribeAcls' successful answer (no error, not throttled) of ``bindings``, grouped by resource
    pattern in first-seen order (Kafka's DescribeAclsResponse.aclsResources)."""
    flexible = version >= _FLEXIBLE_FROM
    put = _put_compact if flexible else _put_string
    groups: dict[tuple[int, str, int], list[AclBinding]] = {}
    last_pattern, same = None, []
    for binding in bindings:
        pattern = binding.pattern
        if pattern is not last_pattern:   # the index hands out a group's ACLs together, sharing one pattern
            last_pattern = pattern
            same = groups.setdefault((pattern.resource_type, pattern.name, pattern.pattern_type), [])
        same.append(binding)
    out = bytearray(_HEAD[flexible])
    out += _uvarint(len(groups) + 1) if flexible else _I32.pack(len(groups))
    for (resource_type, name, pattern_type), acls in groups.items():
        out.append(resource_type)
        put(out, name.encode())
        out.append(pattern_type)
        out += _uvarint(len(acls) + 1) if flexible else _I32.pack(len(acls))
        for binding in acls:
            entry = binding.entry
            principal, host = entry.principal.encode(), entry.host.encode()
            if flexible and len(principal) < 0x7F and len(host) < 0x7F:     # lengths + 1 fit one varint byte
                out.append(len(principal) + 1)
                out += principal
                out.append(len(host) + 1)
                out += host
                out += bytes((entry.operation, entry.permission_type, 0))   # ..., no tagged fields
                continue
            put(out, principal)
            put(out, host)
            out.append(entry.operation)
            out.append(entry.permission_type)
            if flexible:
                out.append(0)       # no tagged fields
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    header = _HEADER_FLEXIBLE.get(version)
    if header is None:
        header = _HEADER_FLEXIBLE[version] = flexible_response_header(ApiKey.DESCRIBE_ACLS, version)
    return EncodedResponse(header, bytes(out))


_HEADER_FLEXIBLE: dict[int, bool] = {}     # DescribeAcls version -> response header v1
