"""The ACL index as one binary section of a snapshot (format 5), read in place: no work per ACL at open.

Issue 24: a format-4 load still split every chunk's strings, listed every ACL's host and principal and
built a dict of every ACL id, about 1 us per ACL, and a time-travel checkpoint of millions of ACLs had
to be built whole before it answered anything.  This section lists the same columns as the format-4
chunks, each as one little-endian array (or one UTF-8 blob of strings plus their offsets), so a
loader views each array in the snapshot's bytes with one ``memoryview.cast``:

- per node (in index order, runs of one resource type and pattern type): resource type, pattern type,
  name (``names`` blob), where its groups start;
- per group: its principal (a position in the distinct ``principals``), where its ACLs start;
- per ACL: its id (``ids`` blob), host (a position in the distinct ``hosts``), operation, permission;
- an open-addressing hash table of the ids (CRC-32 of the id's UTF-8, linear probing, a slot holds
  position + 1, 0 when empty, at most half full), so an id is found without a dict of every id.

A string blob holds each string followed by a separator none of them holds (or, when they hold every
character, by nothing: then only the offsets delimit them), so a run of strings decodes with one
``decode`` and one ``split`` (``section_arrays``).

Since snapshot format 6 (``MAGIC``, a header with one more field) the ids of a section whose every id is a
canonical UUID (what ``secmeta`` makes) are 16 bytes each, without offsets (``section_arrays.Uuids``), and
every offset column is as narrow as its values: about 36 bytes per ACL of the mixed log instead of 62.
Format 5's sections (``MAGIC5``) still load.

``MappedAclTable`` is an ``AclTable`` over these views: the names of the nodes are decoded at open
(one dict per resource type and pattern, as the index needs), and every other column only for the node
a lookup makes; ``position`` finds an id through the hash table, so an image whose ACLs are looked up
by id (a delete, ``get``) decodes only the ids it asks for.  The image over a table is
``acl_deferred.Deferred``.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from itertools import accumulate
from typing import Any
from zlib import crc32

from secmeta.projections.acl_index import Group, Node
from secmeta.projections.acl_match import ACL_BITS
from secmeta.projections.acl_table import (
    _SCAN_PRINCIPALS,
    UNLISTED,
    AclColumns,
    AclTable,
    TableError,
)
from secmeta.projections.section_arrays import (
    SectionError,
    Strings,
    Uuids,
    blob,
    narrow,
    packed,
    separator_code,
    separator_named,
    separator_of,
    signed,
    uuid_bytes,
    uuid_of,
    views,
    width,
)

__all__ = ["MAGIC", "MappedAclTable", "encode_section", "read_section"]

MAGIC = b"SMACL\x00\x00\x06"
MAGIC5 = b"SMACL\x00\x00\x05"
# magic, separator code point + 1 (0: none), nodes, groups, ACLs, principals, hosts, slots, arrays; since 6: ids
# as 16-byte UUIDs (1) or a blob (0)
_HEADER = struct.Struct("<8sIIIIIIIQI4x")
_HEADER5 = struct.Struct("<8sIIIIIIIQ")
_UUID_IDS = 1
_ARRAY = struct.Struct("<cxxxxxxxQQ")  # typecode, byte offset (from the section's start), items
# The arrays in their order in the section: (name, typecode or None when the width is chosen by the values).
_LAYOUT = ("resource_types", "pattern_types", "names", "name_offsets", "group_start", "group_principals",
           "acl_start", "principals", "principal_offsets", "ids", "id_offsets", "id_slots", "hosts",
           "host_offsets", "acl_hosts", "operations", "permissions")
_FOUND_KEPT = 1 << 16  # ids whose positions ``MappedAclTable.position`` keeps (~100 B each with its id text)
_OPERATION_CODES, _PERMISSION_CODES = bytes(range(len(ACL_BITS[0]))), bytes(range(len(ACL_BITS)))


def _slots(encoded: list[bytes]) -> array:
    """The open-addressing hash table of ``encoded`` (position + 1 per slot), at most half full."""
    capacity = 8
    while capacity < 2 * len(encoded):
        capacity *= 2
    mask = capacity - 1
    slots = array(width(len(encoded) + 1), bytes(capacity * array(width(len(encoded) + 1)).itemsize))
    for position, key in enumerate(encoded, 1):
        at = crc32(key) & mask
        while slots[at]:
            at = (at + 1) & mask
        slots[at] = position
    return slots


def encode_section(resource_types: bytes, pattern_types: bytes, names: list[str], group_counts: Sequence[int],
                   principals: list[str], group_principals: Sequence[int], acl_counts: Sequence[int],
                   ids: list[str], hosts: list[str], acl_hosts: Sequence[int], operations: bytes,
                   permissions: bytes) -> list[bytes]:
    """The section of these columns (as a format-4 chunk lists them) as byte strings to write in order."""
    uuids = uuid_bytes(ids)
    separator = separator_of((names, principals, hosts) if uuids is not None else (names, principals, ids, hosts))
    name_blob, name_offsets, _ = blob(names, separator)
    principal_blob, principal_offsets, _ = blob(principals, separator)
    if uuids is None:
        id_blob, id_offsets, encoded_ids = blob(ids, separator)
    else:
        id_blob, id_offsets, encoded_ids = uuids, array("B"), [i.encode() for i in ids]
    host_blob, host_offsets, _ = blob(hosts, separator)
    # Written signed 64-bit, as a loaded table holds them: one copy of their bytes at open (issue 24: 0.19 s for the
    # 2.8M groups of the 10M-event mixed log when they were narrowed and converted item by item).
    group_start = array("q", accumulate(group_counts, initial=0))
    acl_start = array("q", accumulate(acl_counts, initial=0))
    values: dict[str, array | bytes] = {
        "resource_types": resource_types, "pattern_types": pattern_types, "names": name_blob,
        "name_offsets": name_offsets, "group_start": group_start, "group_principals": narrow(group_principals),
        "acl_start": acl_start, "principals": principal_blob, "principal_offsets": principal_offsets,
        "ids": id_blob, "id_offsets": id_offsets, "id_slots": _slots(encoded_ids), "hosts": host_blob,
        "host_offsets": host_offsets, "acl_hosts": narrow(acl_hosts), "operations": operations,
        "permissions": permissions,
    }
    header = _HEADER.pack(MAGIC, separator_code(separator), len(names), len(group_principals), len(ids),
                          len(principals), len(hosts), len(values["id_slots"]), len(_LAYOUT),
                          _UUID_IDS if uuids is not None else 0)
    return packed(header, [values[name] for name in _LAYOUT])


def _listed(table: list[str], positions: memoryview) -> list[str]:
    """The strings a column of positions in ``table`` names (TableError if one is past it).  A column of zeros (every
    ACL's host ``*``, the benchmarks' shape) is one string repeated, found by one C-level count of its bytes."""
    if positions.format not in "BHIQ":  # a signed column could name a string from the end of the table
        raise TableError(f"a column of principal or host positions has typecode {positions.format!r}")
    if table and positions.nbytes == positions.tobytes().count(0):
        return [table[0]] * len(positions)
    try:
        return list(map(table.__getitem__, positions))
    except IndexError:
        raise TableError("a group or ACL names a principal or host the section does not list") from None


class MappedAclTable(AclTable):
    """An ``AclTable`` whose columns are views of a format-5 section: each node is read when first made."""

    __slots__ = ("section_ids", "nbytes", "_slots", "_mask", "_names", "_runs_by_type", "_nodes", "_principal_at",
                 "_principal_names", "_found")

    def __init__(self, section: memoryview, *, vouched: bool = True,  # noqa: PLW0231 - AclTable.__init__ checks
                 principals_when_read: bool = False):
        """The table of ``section``; ``vouched``: an HMAC vouches for its bytes (else every column is checked whole
        at open: ``_check_whole``); ``principals_when_read`` (a ``PrincipalsWhenRead``, given ``vouched``): each node's
        groups' principals are listed when the node is first read (``_list_principals``), else all of them here."""
        arrays, separator, counts, uuid_ids = _views(section)
        nodes, groups, acls = counts
        self.nbytes = len(section)
        # Split by their separator, when they have one, only the first and last offsets read (``Strings.all``)
        strings = [Strings(arrays[column], arrays[f"{column[:-1]}_offsets"], separator)
                   for column in ("names", "principals", "hosts")]
        names, principals, hosts = (column.all() for column in strings)
        self.section_ids: Strings | Uuids = (
            Uuids(arrays["ids"]) if uuid_ids else Strings(arrays["ids"], arrays["id_offsets"], separator))
        # AclTable's columns as views: the same reads (an item, a slice, a length), no list per ACL.
        # Codes as bytes and offsets as arrays (C-level copies): read by position on authorize's hot path, where
        # a memoryview's item access costs more.
        columns: dict[str, Any] = {
            "resource_types": bytes(arrays["resource_types"]), "pattern_types": bytes(arrays["pattern_types"]),
            "group_start": signed(arrays["group_start"]), "acl_start": signed(arrays["acl_start"]),
            "names": names,
            # Per group and per ACL as lists of the shared strings: authorize reads them by position in its hot loop
            # (AclTable.bits), where a view's Python __getitem__ doubled its p99.  The hosts are listed here (one
            # C-level map); the principals too, or each node's when the node is first read (``_list_principals``):
            # issue 24, listing the 2.9M groups' of the 10M-event mixed log's last checkpoint file was 0.11 s of its
            # 0.5 s load, for a point that reads a few nodes, while a store serving authorize from a snapshot would pay
            # it node by node on its first pass (the diverse shape's first-pass p99 at 1M: 13.7 -> 20.1 us).
            "principals": ([UNLISTED] * groups if principals_when_read and vouched and type(self) is PrincipalsWhenRead
                           else _listed(principals, arrays["group_principals"])),
            "ids": self.section_ids,
            "hosts": _listed(hosts, arrays["acl_hosts"]), "operations": bytes(arrays["operations"]),
            "permissions": bytes(arrays["permissions"]),
        }
        for name, column in columns.items():
            setattr(self, name, column)
        self.acl_columns = AclColumns(self.ids, self.hosts, self.operations, self.permissions)
        if arrays["group_principals"].format not in "BHIQ":  # a signed column could name one from the end of the list
            raise TableError(f"a column of principal or host positions has typecode {arrays['group_principals'].format!r}")
        self._principal_at, self._principal_names = arrays["group_principals"], principals
        self._nodes: list[Node | None] = [None] * nodes
        self._groups: dict[int, Group] = {}
        self._names: dict[int, tuple[dict[str, int], dict[str, int]]] = {}  # ``names_of``, by resource type
        self._runs_by_type: dict[int, list[tuple[int, int, int]]] | None = None  # ``_type_runs``, once found
        self._check_mapped(counts, arrays)
        if not vouched:
            self._check_whole(counts, arrays["id_slots"], strings)
        self._slots = arrays["id_slots"]
        self._mask = len(self._slots) - 1
        self._found: dict[str, int] = {}  # id -> position, of ids ``position`` found (at most _FOUND_KEPT)

    def _check_mapped(self, counts: tuple[int, int, int], arrays: dict) -> None:
        """The checks that need no Python work per ACL (the file's HMAC vouches for what it holds; each node's
        columns are checked as it is made)."""
        nodes, groups, acls = counts
        lengths = {"resource_types": nodes, "pattern_types": nodes, "name_offsets": nodes + 1,
                   "group_start": nodes + 1, "group_principals": groups, "acl_start": groups + 1,
                   "acl_hosts": acls, "operations": acls, "permissions": acls}
        for name, expected in lengths.items():
            if len(arrays[name]) != expected:
                raise TableError(f"column {name} holds {len(arrays[name])} values, not {expected}")
        if len(self.names) != nodes:
            raise TableError("the node names disagree with their offsets")
        if len(self.section_ids) != acls:
            raise TableError(f"the ids column holds {len(self.section_ids)} ids, not {acls}")
        if isinstance(self.section_ids, Strings):  # ids kept as text are sliced by their offsets at each lookup
            self.section_ids.check()
        start, acl_start = self.group_start, self.acl_start
        if start[0] != 0 or start[nodes] != groups or acl_start[0] != 0 or acl_start[groups] != acls:
            raise TableError("column lengths disagree")
        slots = arrays["id_slots"]
        if len(slots) & (len(slots) - 1) or len(slots) < 2 * acls:
            raise TableError("the id table is not a power of two at most half full")
        if (bytes(self.operations).translate(None, _OPERATION_CODES)
                or bytes(self.permissions).translate(None, _PERMISSION_CODES)):
            raise TableError("an ACL has an operation or permission code no ACL has")

    def _check_whole(self, counts: tuple[int, int, int], slots: memoryview, strings: list[Strings]) -> None:
        """The checks a file's HMAC stands in for, for a section nothing vouches for (a Kafka follower's checkpoint
        read without a keyring: review 26, 1.1): every node's groups and every group's ACLs are a run of at least one
        item within their column (``AclTable._check_starts``, naming the node at fault), the id table lists each
        ACL exactly once, and every offset of the string columns runs from 0 to its blob's end (C-level passes, no
        object per ACL).  A table CRC-valid but forged is then still refused
        whenever its starts or its id table are not a table's (an id table with no empty slot made ``position`` loop
        for ever; a start past its column would read another node's groups or ACLs)."""
        _, groups, acls = counts
        self._check_starts(groups, acls)
        self.stores()  # a node listed twice, refused now rather than when its type is first read (``index``)
        try:
            for column in strings:
                column.check()
        except SectionError as exc:
            raise TableError(str(exc)) from None
        held = set(slots)  # {0, 1, ..., acls} (slots are unsigned), each but 0 in one slot
        if len(held) != acls + 1 or max(held) != acls or sum(map(bool, slots)) != acls:
            raise TableError(f"the id table does not list each of the section's {acls} ACLs once")

    def node(self, i: int) -> Node:
        """Node i, made when first asked for; a node of a few principals is checked as it is made for one listed
        twice (``_lazy`` checks a node of many as it maps them).  Its starts were checked at open, or vouched for
        (``AclTable._unsound_run``)."""
        node = self._nodes[i]
        if node is None:
            starts = self.group_start
            g, end = starts[i], starts[i + 1]
            principals = self.group_principals(i)
            count = end - g
            if count != 1 and count <= _SCAN_PRINCIPALS and len(set(principals)) != count:
                self._repeated_principal(i)
            node = self._nodes[i] = self._lazy(i, g, principals)
        return node

    __call__ = node

    def forget_made(self) -> None:
        """``AclTable.forget_made``, and the nodes made so far: this table keeps them (its deferred images' maps are
        made anew, ``acl_deferred``), and they refer to it, so a table with any made is a reference cycle that
        only the cyclic collector frees, and never once ``gc.freeze()`` has moved it out of its reach (issue 24:
        time travel evicting a checkpoint file's image)."""
        super().forget_made()
        self._nodes = [None] * len(self._nodes)
        self._found = {}

    def id_positions(self) -> dict[str, int]:
        raise TypeError("a mapped table finds ids through its section's hash table (position)")

    def position(self, acl_id: object) -> int:
        """The position of the ACL with this id, or -1 (through the section's hash table).

        A column of UUIDs (``Uuids``) has each probed slot's 16 bytes compared with the id's, converted once
        (``uuid_of``), with no call per slot; an id that is no canonical UUID is in no such column, so it is not
        probed at all (issue 24: a replay past a checkpoint file probes each id it changes, ~2 us a probe through
        ``Uuids.find``).  A column of texts is asked through its ``find``.  An id whose first slot is empty is not
        held, found without converting it.  The positions of the first ``_FOUND_KEPT`` ids found are kept: a replay's
        removal is checked against the image (``AclsDelta.remove``), then gathered (``Deferred._gather``), and each
        later point replayed past the same file probes the same ids again."""
        if type(acl_id) is not str:
            return -1
        found = self._found.get(acl_id)
        if found is not None:
            return found
        encoded = acl_id.encode()
        slots, mask = self._slots, self._mask
        at = crc32(encoded) & mask
        if not slots[at]:  # about half the ids a table does not hold: no conversion, no comparison
            return -1
        ids = self.section_ids
        raw = ids.raw if type(ids) is Uuids else None
        if raw is not None:
            sought = uuid_of(encoded)
            if sought is None:
                return -1
        find = ids.find
        for _ in range(len(slots)):  # at most the whole table: one with no empty slot is damaged, not a loop
            slot = slots[at]
            if not slot:
                return -1
            if (raw[16 * slot - 16:16 * slot] == sought) if raw is not None else find(encoded, slot - 1):
                if len(self._found) < _FOUND_KEPT:
                    self._found[acl_id] = slot - 1
                return slot - 1
            at = (at + 1) & mask
        raise TableError(f"the id table has no empty slot: it is damaged (looking up ACL id {acl_id!r})")

    def held_at(self, position: int) -> tuple[tuple[int, int, str], str]:
        """((resource type, pattern type, name) of the node that holds the ACL at ``position``, its group's principal),
        with one search of each start column."""
        return self._group_at(bisect_right(self.acl_start, position) - 1)

    def _group_at(self, g: int) -> tuple[tuple[int, int, str], str]:
        """``held_at`` of an ACL of group ``g``."""
        i = bisect_right(self.group_start, g) - 1
        principal = self.principals[g]
        if principal is UNLISTED:  # the one group's, read from the section (its node's are listed when it is read)
            try:
                principal = self._principal_names[self._principal_at[g]]
            except IndexError:
                raise TableError("a group or ACL names a principal or host the section does not list") from None
        return (self.resource_types[i], self.pattern_types[i], self.names[i]), principal

    def where(self, acl_ids: Iterable[str]) -> dict[str, tuple[int, int]]:
        """Where the table holds those of ``acl_ids`` it holds: id -> (its position, its group's).  A delta checkpoint
        file records it for the ids its changes remove or replace, so that its apply looks none of them up
        (``located``)."""
        starts, found = self.acl_start, {}
        for acl_id in acl_ids:
            position = self.position(acl_id)
            if position >= 0:
                found[acl_id] = (position, bisect_right(starts, position) - 1)
        return found

    def located(self, acl_id: str, position: int, group: int) -> tuple[tuple[int, int, str], str] | None:
        """``held_at(position)`` when the table holds ``acl_id`` at ``position``, an ACL of group ``group`` (as ``where``
        gave them), else None: the id's bytes there and the group's run are checked, no hash table probed and no start
        column searched at its size (issue 24: at 10M events of the mixed log, a delta checkpoint's 16k removals of
        the table's ACLs cost ~0.1 s of its apply probed and searched; what the file says is only ever a shortcut)."""
        starts = self.acl_start
        if (type(acl_id) is not str or not 0 <= group < len(starts) - 1
                or not starts[group] <= position < starts[group + 1]
                or not self.section_ids.find(acl_id.encode(), position)):
            return None
        return self._group_at(group)

    def _list_principals(self, g: int, end: int) -> list[str]:
        """List the principals of a node's groups [g, end) into ``principals`` (a node's are listed whole, so its first
        group's tells whether they are)."""
        held = self.principals[g:end] = self._read_principals(g, end)
        return held

    def _read_principals(self, g: int, end: int) -> list[str]:
        """The principals of groups [g, end) as the section lists them (TableError when one names a principal it does
        not list: checked as its node is first read, as a node's other columns are)."""
        try:
            return list(map(self._principal_names.__getitem__, self._principal_at[g:end]))
        except IndexError:
            raise TableError("a group or ACL names a principal or host the section does not list") from None

    def acl_count(self, i: int) -> int:
        """How many ACLs node ``i`` holds."""
        return self.acl_start[self.group_start[i + 1]] - self.acl_start[self.group_start[i]]

    def names_of(self, resource_type: int) -> tuple[dict[str, int], dict[str, int]]:
        """The literal and the prefixed name -> node position of one resource type, made once (``_type_names``)."""
        names = self._names.get(resource_type)
        return self._type_names(resource_type, self._type_runs().get(resource_type, [])) if names is None else names

    def _type_runs(self) -> dict[int, list[tuple[int, int, int]]]:
        """``AclTable._type_runs``, found once (the columns never change)."""
        runs = self._runs_by_type
        if runs is None:
            runs = self._runs_by_type = super()._type_runs()
        return runs

    def _type_names(self, resource_type: int, runs: list[tuple[int, int, int]]) -> tuple[dict[str, int], dict[str, int]]:
        """``AclTable._names_of``, made once per type: what ``stores`` gives, the deferred images' positions and the
        maps they copy (never changed; an index makes its own, ``index``, as its maps take the nodes it makes)."""
        names = self._names.get(resource_type)
        if names is None:
            names = self._names[resource_type] = self._names_of(resource_type, runs)
        return names


def _views(section: memoryview) -> tuple[dict[str, memoryview], str, tuple[int, int, int], bool]:
    """Each array of a section as a memoryview of its typecode (a copy, byte-swapped, on a big-endian machine), the
    separator, the counts, and whether the ids are 16-byte UUIDs."""
    header = _HEADER5 if section[:len(MAGIC5)] == MAGIC5 else _HEADER
    if len(section) < header.size:
        raise TableError(f"the ACL section is truncated ({len(section)} bytes)")
    magic, separator, nodes, groups, acls, principals, hosts, slots, count, *form = header.unpack_from(section)
    if magic != MAGIC and magic != MAGIC5:
        raise TableError(f"the ACL section starts with {bytes(magic)!r}, not {MAGIC!r}")
    uuid_ids = form == [_UUID_IDS]
    if form not in ([], [0], [_UUID_IDS]):
        raise TableError(f"the ACL section's ids have form {form[0]}, which no ACL section has")
    if count != len(_LAYOUT) or len(section) < header.size + count * _ARRAY.size:
        raise TableError(f"the ACL section lists {count} arrays, not {len(_LAYOUT)}")
    arrays = views(section, header.size, _LAYOUT, "ACL")
    if len(arrays["id_slots"]) != slots:
        raise TableError("the id table's size disagrees with the header")
    if not uuid_ids and len(arrays["id_offsets"]) != acls + 1:
        raise TableError(f"column id_offsets holds {len(arrays['id_offsets'])} values, not {acls + 1}")
    return arrays, separator_named(separator), (nodes, groups, acls), uuid_ids


class PrincipalsWhenRead(MappedAclTable):
    """A ``MappedAclTable`` of a vouched section whose nodes' principals are listed when each node is first read:
    ``node_bits`` lists them first (a check kept off ``AclTable.node_bits``, authorize's hot path: on the diverse
    shape at 1M it cost a store's warm authorize ~0.6 us a call, 12%)."""

    __slots__ = ()

    def node_bits(self, i: int, principal: str, host: str) -> int | None:
        starts = self.group_start
        g = starts[i]
        if self.principals[g] is UNLISTED:
            self._list_principals(g, starts[i + 1])
        return MappedAclTable.node_bits(self, i, principal, host)


def read_section(section: memoryview, *, vouched: bool = True, principals_when_read: bool = False) -> MappedAclTable:
    """The table of a format-5 ACL section (TableError when it holds no index); ``vouched``: an HMAC vouches for
    its bytes (else every column is checked whole at open); ``principals_when_read`` (given ``vouched``): each node's
    groups' principals listed when the node is first read (``PrincipalsWhenRead``)."""
    if principals_when_read and vouched:
        return PrincipalsWhenRead(section, principals_when_read=True)
    return MappedAclTable(section, vouched=vouched)
