"""The hot responses encoded by hand: DescribeAcls' answer straight from the store's index groups.

kio builds a frozen entity per ACL (checking each int's range) and then walks it to write
the bytes; for a DescribeAcls answer that was most of the server's time.  Here the body is
written directly from the groups the store selects (``SecurityStore.describe_acl_groups``),
byte for byte what kio writes for the same ACLs at every served version
(tests/core/wire/test_hot_responses.py checks that property over all of them).  The encoding
is Kafka's: non-flexible versions write int16-length strings and int32-length arrays; flexible
ones (DescribeAcls v2+) write unsigned varints of length + 1 and an empty tagged-field section
(one 0 byte) after every struct.

An index group (one principal's ACLs on one resource pattern) is an immutable value that the
images holding it share, and so is an index node (every group on one pattern), so the encoding of
all its ACLs is kept per group or node object (``_HeldBytes``) and reused by every answer that
selects the whole group or node, in this image and the next ones, until a write replaces it with a
new object.  A filter on the pattern alone selects whole nodes (``AclsImage.selection(...,
whole_nodes=True)``): its answer is the kept encodings of its nodes, joined.  A group only partly
selected (the filter names a host, an operation or a permission) is encoded afresh.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from secmeta.core.wire.codec import (
    ApiKey,
    EncodedResponse,
    first_flexible_version,
    flexible_response_header,
    uvarint,
)
from secmeta.events.types import AccessControlEntry
from secmeta.projections.acl_index import Group, Node
from secmeta.projections.kept_by_object import KeptByObject, holds_a_table

__all__ = ["describe_acls_response"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FLEXIBLE_FROM = first_flexible_version(ApiKey.DESCRIBE_ACLS)
#: throttle_time_ms 0, error_code 0, error_message null
_HEAD = {False: b"\0\0\0\0\0\0\xff\xff", True: b"\0\0\0\0\0\0\0"}


def _put_compact(out: bytearray, data: bytes) -> None:
    n = len(data) + 1
    if n < 0x80:
        out.append(n)
    else:
        out += uvarint(n)
    out += data


def _put_string(out: bytearray, data: bytes) -> None:
    out += _I16.pack(len(data))
    out += data


Selected = tuple[Group | Node, Sequence[tuple[str, AccessControlEntry]] | None]


def describe_acls_response(version: int, groups: Iterable[Selected]) -> EncodedResponse:
    """DescribeAcls' successful answer (no error, not throttled) of the selected ``groups`` (each a group with
    the (acl_id, entry) pairs selected, or a group or a whole index node with None for all its ACLs), one
    resource per run of them on the same pattern, in their order (the index hands out a node's groups
    together: one run per pattern)."""
    flexible = version >= _FLEXIBLE_FROM
    resources: list[tuple[bytes, list[int], list[bytes]]] = []
    name: str | None = None
    kind: tuple | None = None
    counts: list[int] = []
    parts: list[bytes] = []
    of = _HELD_BYTES.of
    for holder, chosen in groups:
        if chosen is None:
            held_name, held_kind, pattern, count, data = of(holder, flexible)
        else:
            held_name, held_kind = holder.name, holder.kind      # type: ignore[union-attr]
            pattern = None
            count, data = len(chosen), _entries_bytes([entry for _, entry in chosen], flexible)
        if held_name != name or held_kind != kind:
            name, kind = held_name, held_kind
            counts, parts = [], []
            resources.append((pattern or _pattern_bytes(name, kind, flexible), counts, parts))
        counts.append(count)
        parts.append(data)
    out = bytearray(_HEAD[flexible])
    out += uvarint(len(resources) + 1) if flexible else _I32.pack(len(resources))
    for pattern_bytes, counts, parts in resources:
        out += pattern_bytes
        count = counts[0] if len(counts) == 1 else sum(counts)
        out += uvarint(count + 1) if flexible else _I32.pack(count)
        out += parts[0] if len(parts) == 1 else b"".join(parts)
        if flexible:
            out.append(0)       # the resource's tagged fields
    if flexible:
        out.append(0)
    header = _HEADER_FLEXIBLE.get(version)
    if header is None:
        header = _HEADER_FLEXIBLE[version] = flexible_response_header(ApiKey.DESCRIBE_ACLS, version)
    return EncodedResponse(header, bytes(out))


def _pattern_bytes(name: str, kind: tuple, flexible: bool) -> bytes:
    """A resource's pattern in the answer: its type, name and pattern type."""
    pattern = bytearray((kind[0],))
    (_put_compact if flexible else _put_string)(pattern, name.encode())
    pattern.append(kind[1])
    return bytes(pattern)


def _entries_bytes(entries: Iterable[AccessControlEntry], flexible: bool) -> bytes:
    """The ACL entries of one resource in the answer (without the array's length)."""
    out = bytearray()
    put = _put_compact if flexible else _put_string
    for entry in entries:
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
    return bytes(out)


class _HeldBytes:
    """The encoded ACLs of whole groups and whole index nodes, per encoding (non-flexible, flexible), kept by
    object (``KeptByObject``: bounded, never pinning an index table no image holds): (pattern name, (resource
    type, pattern type), the pattern's bytes, how many ACLs, their entries)."""

    def __init__(self, limit: int = 2 * 65536, budget: int = 32 * 1024 * 1024):
        self._kept = KeptByObject(limit, budget)

    def of(self, holder: Group | Node, flexible: bool) -> tuple[str, tuple, bytes, int, bytes]:
        """(name, kind, pattern bytes, how many ACLs, their encoded entries) of all of ``holder``'s ACLs (a group,
        or a node: all of its groups, in its order)."""
        value = self._kept.find(holder, flexible)
        if value is None:
            if holds_a_table(holder):  # a write's node of a table's groups, never kept (it would pin the table):
                parts = [self.of(group, flexible) for group in holder.groups()]  # its groups' kept encodings
                name, kind, pattern = parts[0][:3]
                return name, kind, pattern, sum(part[3] for part in parts), b"".join(part[4] for part in parts)
            groups = (holder,) if isinstance(holder, Group) else tuple(holder.groups())
            first = groups[0]
            entries = [entry for group in groups for _, entry in group.members()]
            data = _entries_bytes(entries, flexible)
            value = (first.name, first.kind, _pattern_bytes(first.name, first.kind, flexible), len(entries), data)
            self._kept.keep(holder, flexible, value, len(data))
        return value  # type: ignore[no-any-return]


_HELD_BYTES = _HeldBytes()
_HEADER_FLEXIBLE: dict[int, bool] = {}     # DescribeAcls version -> response header v1
