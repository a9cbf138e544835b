"""The ACL index as columns, each node made into objects only when first touched, and then only what is asked.

A snapshot load and a replay from empty both end in an ``AclTable``: per node (in runs of one
resource type and pattern type) its name and its groups, per group its principal and ACLs, per
ACL its id, host, operation and permission, in flat columns (lists of shared strings, byte
strings, offset arrays) built with a few bulk operations per column and no Python object per ACL.
The image's maps hold, for a node or an ACL id, a placeholder int (the node's or the ACL's
position) that ``node`` / ``group_at`` make real when an authorize, describe or write first reaches
it (``layered_map``): a node becomes a ``Lazy`` view of its columns (its principals, scanned, or for
many a dict).  An authorize makes no node at all: it reads the request's principal's and ``User:*``'s ACL
bits straight from the columns (``node_bits``, through ``acl_index.NodeMap``), so the first call to reach
a node does what the next ones do and keeps nothing; a group object
(``TableGroup``, its entries made only when described) is made once, for a large group or when
describe, explain or a write asks for it (``group``).
Issue 24's profiles: a load that made every group (``group_of`` per ACL) cost 10-15 us per ACL
once ACLs stopped sharing groups (about ten principals per resource, most with a host); a
placeholder costs a dict entry.  Making every group of a node on its first authorize cost the
first pass over a loaded image 100 us per call on that shape (about ten groups per node).
"""

from __future__ import annotations

import operator
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from functools import partial
from itertools import accumulate, compress
from operator import itemgetter

from secmeta.events.errors import InvalidValueError
from secmeta.events.records import AclRow, acl_row
from secmeta.events.types import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    PatternType,
    ResourcePattern,
)
from secmeta.projections.acl_entries import canonical_entry
from secmeta.projections.acl_index import (
    KINDS,
    SCAN_PRINCIPALS,
    AclIndex,
    Group,
    HostGroup,
    Lazy,
    Member,
    Node,
    Positions,
    group_entries,
    host_masks,
    pending_index_of,
)
from secmeta.projections.acl_match import ACL_BITS, host_matches

__all__ = ["AclTable", "TableError"]

_OFFSETS = "q"
_FEW_ACLS = 8  # a group of up to this many ACLs is read from the columns, never made for an authorize
_SCAN_PRINCIPALS = SCAN_PRINCIPALS  # a node of up to this many principals is scanned for one, a larger one gets a dict
_NO_GROUP = "node {} holds no principal's group"  # TableError's message, naming the node
_NO_ACL = "a group of node {} holds no ACL"
_ID, _HOST, _OPERATION, _PERMISSION = itemgetter(0), itemgetter(5), itemgetter(6), itemgetter(7)  # of an AclRow


class TableError(InvalidValueError):
    """Columns that hold no index (a snapshot's chunk that is damaged or not ours)."""


class _Unlisted:
    """The principal of a group whose node's principals a table has not listed yet (``MappedAclTable`` lists them per
    node, when the node is first read: ``group_principals``).  Comparing or hashing it raises TableError, so a read
    that skipped the listing fails closed instead of matching no principal (a DENY passed over)."""

    __slots__ = ()

    def _unlisted(self, *_: object) -> bool:
        raise TableError("a group's principal was read before its node's principals were listed")

    __eq__ = __ne__ = __hash__ = _unlisted  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "<unlisted principal>"


UNLISTED = _Unlisted()


def _named(resource_type: int, pattern_type: int, name: str) -> str:
    """A node's pattern for an error message: TOPIC LITERAL 'name'."""
    kind = KINDS[resource_type, pattern_type]
    return f"{kind[0].name} {kind[1].name} {name!r}"


def _first_unsound(starts: Sequence[int], end: int) -> int | None:
    """The first k whose run ``starts[k]:starts[k + 1]`` is empty, reversed or outside ``0:end`` (or the first or
    last run when items before or after the runs are left out), or None when ``starts`` rises strictly from 0 to
    ``end``: one C-level pass, and a search only when it fails."""
    if starts[0] == 0 and starts[-1] == end and all(map(operator.lt, starts[:-1], starts[1:])):
        return None
    for k in range(len(starts) - 1):
        if not 0 <= starts[k] < starts[k + 1] <= end:
            return k
    return 0 if starts[0] != 0 else max(len(starts) - 2, 0)


class AclColumns:
    """A table's per-ACL columns, what its groups read their entries from (``TableGroup``): not the table, which
    keeps the groups it made, so a group refers to nothing that refers back to it."""

    __slots__ = ("ids", "hosts", "operations", "permissions", "__weakref__")  # weakly held by KeptByObject

    def __init__(self, ids, hosts, operations, permissions):
        self.ids, self.hosts, self.operations, self.permissions = ids, hosts, operations, permissions


class TableGroup(HostGroup):
    """A ``HostGroup`` made from a table's columns: its entries are made when first asked for (an authorize
    needs only its masks).  ``order``: the position of its ACL, or the positions of its ACLs in ``acl_ids()``
    order."""

    __slots__ = ("columns", "order", "at")

    def __init__(self, principal, ids, any_host, name, kind, hosts, nets, columns: AclColumns, order, at: int):
        super().__init__(principal, ids, any_host, name, kind, hosts, nets, None)
        self.columns = columns
        self.order = order
        self.at = at  # the group's position in the table (with its columns, what names it: ``KeptByObject``)

    def _positions(self) -> tuple[int, ...]:
        order = self.order
        return (order,) if type(order) is int else order

    def _entry_tuple(self) -> tuple[AccessControlEntry, ...]:
        entries = self.entries
        if entries is None:
            t, principal = self.columns, self.principal
            entries = self.entries = tuple(canonical_entry(principal, t.hosts[k], t.operations[k], t.permissions[k])
                                           for k in self._positions())
        return entries

    def fields(self) -> list[Member]:
        t = self.columns
        return [(t.ids[k], t.hosts[k], t.operations[k], t.permissions[k]) for k in self._positions()]


# Per code: a translation of a code column to 0 where a byte is that code, 1 elsewhere (``_runs``).
_OTHER_THAN = [bytes(int(byte != code) for byte in range(256)) for code in range(256)]


def _runs(resource_types: bytes, pattern_types: bytes) -> list[tuple[int, int, tuple[int, int]]]:
    """(start, length, (resource type, pattern type)) of each run of nodes of one pair, in order.  A run ends where
    either column first holds another code: each column is translated once per code it holds (to 0 for the code, 1
    for any other) and the end found by a C-level ``find`` of 1 (issue 24: a regex pass over the two columns
    interleaved, matching each pair against the one before, cost 4-12 ms of a 160k-node snapshot's open; this is
    well under 1 ms, and a Python step per run, as before)."""
    n = len(resource_types)
    if len(pattern_types) != n:
        raise TableError("the nodes' resource types and pattern types disagree in length")
    others: tuple[dict[int, bytes], dict[int, bytes]] = ({}, {})
    runs, at = [], 0
    while at < n:
        kind = (resource_types[at], pattern_types[at])
        end = n
        for column, code, other in zip((resource_types, pattern_types), kind, others, strict=True):
            marked = other.get(code)
            if marked is None:
                marked = other[code] = column.translate(_OTHER_THAN[code])
            found = marked.find(1, at)
            if 0 <= found < end:
                end = found
        runs.append((at, end - at, kind))
        at = end
    return runs


class AclTable:
    """Index nodes as columns; ``node(i)`` makes node i, ``group_at(p)`` the group of the ACL at p (made once).

    Nothing the table makes refers back to anything that refers to what it made: a node (``Lazy``) refers to the
    table, which keeps no node (the index's maps keep each, ``LayeredMap``), and a group (``TableGroup``) to its
    ``AclColumns``, which keep nothing made; so an image's tables go with it by reference counting alone, also
    after ``gc.freeze()`` (a replay's ``paused_gc``) has put them out of the cyclic collector's reach."""

    __slots__ = ("resource_types", "pattern_types", "names", "group_start", "principals", "acl_start", "ids",
                 "hosts", "operations", "permissions", "acl_columns", "_groups",
                 "__weakref__")  # weakly held by KeptByObject

    def __init__(self, resource_types: bytes, pattern_types: bytes, names: list[str], group_counts: Iterable[int],
                 principals: list[str], acl_counts: Iterable[int], ids: list[str], hosts: list[str],
                 operations: bytes, permissions: bytes, *, sound: bool = False):
        """Columns as a snapshot chunk lists them (principals shared, one per group); checked, TableError if
        they hold no index, unless ``sound`` (``of_rows``' own, sound by construction).  Nodes may come in any
        order; a node's groups are one per principal."""
        group_counts, acl_counts = array(_OFFSETS, group_counts), array(_OFFSETS, acl_counts)
        self.resource_types, self.pattern_types, self.names = resource_types, pattern_types, names
        self.group_start = array(_OFFSETS, accumulate(group_counts, initial=0))
        self.acl_start = array(_OFFSETS, accumulate(acl_counts, initial=0))
        self.principals, self.ids, self.hosts = principals, ids, hosts
        self.operations, self.permissions = operations, permissions
        self.acl_columns = AclColumns(ids, hosts, operations, permissions)
        self._groups: dict[int, Group] = {}  # group position -> group, once made
        if not sound:
            self._check(group_counts, acl_counts)

    def _check(self, group_counts: array, acl_counts: array) -> None:
        nodes, groups = len(self.names), len(self.principals)
        if not (len(self.resource_types) == len(self.pattern_types) == nodes == len(group_counts)
                and self.group_start[-1] == groups == len(acl_counts)
                and self.acl_start[-1] == len(self.ids) == len(self.hosts) == len(self.operations)
                == len(self.permissions)):
            raise TableError("column lengths disagree")
        if groups and not (max(self.operations) < len(ACL_BITS[0]) and max(self.permissions) < len(ACL_BITS)):
            raise TableError("an ACL has an operation or permission code no ACL has")
        problems = []  # (node, what): the first node's problem is named
        unsound = self._unsound_run(groups, len(self.ids))
        if unsound is not None:
            problems.append(unsound)
        starts, principals = self.group_start, self.principals
        for i in compress(range(nodes), map((1).__lt__, group_counts)):  # the nodes of several groups
            if len(set(principals[starts[i]:starts[i + 1]])) != group_counts[i]:
                problems.append((i, "node {} lists a principal's group twice"))
                break
        if problems:
            node, what = min(problems)
            raise TableError(what.format(self._named(node)))
        self.stores()  # a node listed twice, refused now rather than when its type is first read (``index``)

    def _check_starts(self, groups: int, acls: int) -> None:
        """TableError naming the first node whose groups, or a group of which whose ACLs, are no run of at least one
        item within their column (``_unsound_run``)."""
        unsound = self._unsound_run(groups, acls)
        if unsound is not None:
            node, what = unsound
            raise TableError(what.format(self._named(node)))

    def _unsound_run(self, groups: int, acls: int) -> tuple[int, str] | None:
        """The first node (and ``_NO_GROUP`` or ``_NO_ACL``) whose groups, or a group of which whose ACLs, are no run
        of at least one item within their column, or None: ``group_start`` must rise strictly from 0 to ``groups``
        and ``acl_start`` from 0 to ``acls`` (one C-level pass each; the search for the run at fault only when one
        fails).  Every read of a run relies on this holding (``node``, ``node_bits``, ``bits``, ``group``), and it is
        made sure of once, when a table is made: a table built from rows holds it by construction, format-4 columns
        and a section nothing vouches for are checked here, and a section an HMAC vouches for was written from a
        table that held it (a start read unchecked past its column would read another node's groups or ACLs)."""
        at = _first_unsound(self.group_start, groups)
        if at is not None:
            return at, _NO_GROUP
        at = _first_unsound(self.acl_start, acls)
        if at is not None:
            return bisect_right(self.group_start, at) - 1, _NO_ACL
        return None

    def _named(self, i: int) -> str:
        return _named(self.resource_types[i], self.pattern_types[i], self.names[i])

    @classmethod
    def of_pairs(cls, pairs: Iterable[tuple[str, AclBinding | None]]) -> AclTable:
        """The table of these (acl_id, binding) pairs (ids distinct; a None binding is skipped)."""
        return cls.of_rows(None if binding is None else acl_row(acl_id, binding) for acl_id, binding in pairs)

    @classmethod
    def of_rows(cls, rows: Iterable[AclRow | None]) -> AclTable:
        """The table of these ACL rows (``AclCreated.ROW``; ids distinct; None is skipped), its nodes listed
        kind by kind (``index`` then adds each kind's in one run)."""
        # kind -> name -> the node's one row, or principal -> the group's one row, or its list of rows (most
        # groups hold one ACL; on the benchmark's shape most nodes do: no dict is made for them)
        kinds: dict[tuple[int, int], dict[str, AclRow | dict[str, AclRow | list[AclRow]]]] = {}
        for row in rows:
            if row is None:
                continue
            kind = (row[1], row[3])
            nodes = kinds.get(kind)
            if nodes is None:
                nodes = kinds[kind] = {}
            per = nodes.get(row[2])
            if per is None:
                nodes[row[2]] = row
            elif per.__class__ is tuple:  # the node's second ACL
                first = per[4]  # type: ignore[index]
                nodes[row[2]] = {first: [per, row]} if first == row[4] else {first: per, row[4]: row}  # type: ignore
            else:
                held = per.get(row[4])  # type: ignore[union-attr]
                if held is None:
                    per[row[4]] = row  # type: ignore[index]
                elif held.__class__ is tuple:
                    per[row[4]] = [held, row]  # type: ignore[index, list-item]
                else:
                    held.append(row)  # type: ignore[union-attr]
        resource_types, pattern_types = bytearray(), bytearray()
        names: list[str] = []
        group_counts: list[int] = []
        principals: list[str] = []
        acl_counts: list[int] = []
        ordered: list[AclRow] = []
        extend, append, count = ordered.extend, ordered.append, acl_counts.append
        for (resource_type, pattern_type), nodes in kinds.items():
            resource_types += bytes((resource_type,)) * len(nodes)
            pattern_types += bytes((pattern_type,)) * len(nodes)
            names += nodes
            for per in nodes.values():
                if per.__class__ is tuple:  # a node of one ACL
                    group_counts.append(1)
                    principals.append(per[4])  # type: ignore[index, arg-type]
                    append(per)  # type: ignore[arg-type]
                    count(1)
                    continue
                group_counts.append(len(per))
                principals += per  # type: ignore[arg-type]
                for held in per.values():  # type: ignore[union-attr]
                    if held.__class__ is tuple:
                        append(held)  # type: ignore[arg-type]
                        count(1)
                    else:
                        extend(held)  # type: ignore[arg-type]
                        count(len(held))
        shared: dict[str, str] = {}  # one object per distinct principal or host (a local dict: sys.intern's table,
        # holding every name interned so far, cost 2x as much per string on the diverse shape's 70k distinct ones)
        hosts = list(map(_HOST, ordered))
        return cls(bytes(resource_types), bytes(pattern_types), names, group_counts,
                   list(map(shared.setdefault, principals, principals)), acl_counts, list(map(_ID, ordered)),
                   list(map(shared.setdefault, hosts, hosts)), bytes(map(_OPERATION, ordered)),
                   bytes(map(_PERMISSION, ordered)), sound=True)

    def node(self, i: int) -> Node:
        """Node i, a ``Lazy`` view of its columns, made anew (the index's map keeps it in place of its placeholder:
        kept here too, it would refer back to the table, a reference cycle)."""
        return self._lazy(i, self.group_start[i], self.group_principals(i))

    def group_principals(self, i: int) -> list[str]:
        """The principals of node i's groups, in order: what ``principals`` holds for them, listed first where a table
        lists them only when a node is first read (``UNLISTED``, ``_list_principals``)."""
        g, end = self.group_start[i], self.group_start[i + 1]
        held = self.principals[g:end]
        if held and held[0] is UNLISTED:
            held = self._list_principals(g, end)
        return held

    def _list_principals(self, g: int, end: int) -> list[str]:
        """List the principals of groups [g, end) into ``principals`` (a table that lists them when first read)."""
        raise TableError("this table lists every group's principal when made")

    def _lazy(self, i: int, g: int, principals: list[str]) -> Lazy:
        """Node i (its first group at ``g``, its groups' ``principals``) as a view of the columns.

        No lock (a forked snapshot writer must never wait for one its parent held): two threads that make one
        node at once make equal ones, and either may be kept; nothing relies on a node's identity."""
        count = len(principals)
        if count <= _SCAN_PRINCIPALS:
            return Lazy(self, i, g, principals)
        positions = Positions(zip(principals, range(count)))
        if len(positions) != count:
            self._repeated_principal(i)
        return Lazy(self, i, g, positions)

    def _repeated_principal(self, i: int) -> None:
        raise TableError(f"node {self._named(i)} lists a principal's group twice")

    __call__ = node  # a LayeredMap's source of nodes

    def group_at(self, position: int) -> Group:
        """The group that holds the ACL at ``position``."""
        g = bisect_right(self.acl_start, position) - 1
        return self.group(bisect_right(self.group_start, g) - 1, g)

    def node_bits(self, i: int, principal: str, host: str) -> int | None:
        """The packed bits of node i's ACLs of ``principal`` and 'User:*' that apply to a client host (``Lazy.bits``),
        read from the columns, making nothing; None for a node of more principals than a scan suits (its
        ``Positions`` map is made once, with the node: ``node``).  A node listing an asked principal's group twice
        fails closed (TableError), as making it would."""
        starts = self.group_start
        g, end = starts[i], starts[i + 1]
        if end - g == 1:  # most nodes of the benchmarks' shape: no list
            own = self.principals[g]
            return self.bits(i, g, host) if own == principal or own == WILDCARD_PRINCIPAL else 0
        if end - g > _SCAN_PRINCIPALS:
            return None
        held = self.principals[g:end]
        bits = 0
        if principal in held:
            k = held.index(principal)
            if principal in held[k + 1:]:
                self._repeated_principal(i)
            bits = self.bits(i, g + k, host)
        if principal != WILDCARD_PRINCIPAL and WILDCARD_PRINCIPAL in held:
            k = held.index(WILDCARD_PRINCIPAL)
            if WILDCARD_PRINCIPAL in held[k + 1:]:
                self._repeated_principal(i)
            bits |= self.bits(i, g + k, host)
        return bits

    def bits(self, i: int, g: int, host: str) -> int:
        """The packed bits of the ACLs of group ``g`` (node i's) that apply to a client host: a group of a few
        ACLs is read from the columns (no object made), a larger one through its group (made once)."""
        starts = self.acl_start
        a, b = starts[g], starts[g + 1]
        if b - a > _FEW_ACLS:
            group = self.group(i, g)
            return group.any_host if group.hosts is None else group.host_bits(host)
        hosts, operations, permissions = self.hosts, self.operations, self.permissions
        bits = 0
        for k in range(a, b):
            acl_host = hosts[k]
            if host_matches(acl_host, host):
                bits |= ACL_BITS[permissions[k]][operations[k]]
        return bits

    def forget_made(self) -> None:
        """Drop the groups made so far (made again if asked for: nothing relies on their identity), and a mapped
        table's nodes (``MappedAclTable``): time travel evicting a checkpoint file's lineage."""
        self._groups = {}

    def group(self, i: int, g: int) -> Group:
        """The group at position ``g`` (one of node i's), as ``group_of`` would make it from its ACLs (made
        once)."""
        group = self._groups.get(g)
        if group is None:
            # No lock (a forked snapshot writer must never wait for one its parent held): two threads that make
            # one group at once make equal ones, and either may be kept; nothing relies on a group's identity.
            group = self._groups[g] = self._group(i, g)
        return group

    def _group(self, i: int, g: int) -> Group:
        name = self.names[i]
        kind = KINDS[self.resource_types[i], self.pattern_types[i]]
        principal, ids, hosts = self.principals[g], self.ids, self.hosts
        if principal is UNLISTED:
            principal = self.group_principals(i)[g - self.group_start[i]]
        a, b = self.acl_start[g], self.acl_start[g + 1]
        if b - a == 1:
            bit = ACL_BITS[self.permissions[a]][self.operations[a]]
            if hosts[a] == WILDCARD and bit:
                return Group(principal, ids[a], bit, name, kind)
            order: int | tuple[int, ...] = a
            acl_ids: str | tuple[str, ...] = ids[a]
            positions: Iterable[int] = (a,)
        else:
            # The group's ids read as one run (a mapped table's: one decoding, not one per id; issue 24: a node patched
            # past a checkpoint makes all its groups, ~40k ids decoded one by one for a point's four questions), in
            # group_of's order (ids distinct).
            run = ids[a:b]
            ranks = sorted(range(b - a), key=run.__getitem__)
            acl_ids = tuple(map(run.__getitem__, ranks))
            positions = order = tuple(a + k for k in ranks)
        operations, permissions = self.operations, self.permissions
        any_host, masks, nets = host_masks([hosts[k] for k in positions],
                                           [ACL_BITS[permissions[k]][operations[k]] for k in positions])
        return TableGroup(principal, acl_ids, any_host, name, kind, masks, nets, self.acl_columns, order, g)

    def entries(self, i: int, g: int) -> tuple[AccessControlEntry, ...]:
        """The entries of the ACLs of group ``g`` (one of node i's), read from the columns (its group's, if made): no
        group is made and no id read (``Lazy.entries``: a describe at a point past a checkpoint file made every group
        of the nodes it returned, each decoding its ids as text, for answers that hold no id)."""
        group = self._groups.get(g)
        if group is not None:
            return group_entries(group)
        principal = self.principals[g]
        if principal is UNLISTED:
            principal = self.group_principals(i)[g - self.group_start[i]]
        hosts, operations, permissions = self.hosts, self.operations, self.permissions
        return tuple(canonical_entry(principal, hosts[k], operations[k], permissions[k])
                     for k in range(self.acl_start[g], self.acl_start[g + 1]))

    def pattern(self, i: int) -> ResourcePattern:
        """The pattern of node i."""
        resource_type, pattern_type = KINDS[self.resource_types[i], self.pattern_types[i]]
        return ResourcePattern(resource_type, self.names[i], pattern_type)

    def index(self) -> AclIndex:
        """The index of the table's nodes (each made on first use), each resource type's name maps made when the
        type is first read (``PendingTypeIndex``; a pattern no ACL has is refused at once)."""
        return pending_index_of({resource_type: partial(self._names_of, resource_type, runs)
                                 for resource_type, runs in self._type_runs().items()}, self, self)

    def made(self, skip: set[int]) -> dict[tuple[int, int], dict[str, Node]]:
        """Every node but those at positions ``skip``, made: (resource type, pattern type) -> name -> node (a node of
        one group is that group, as ``node_of`` makes it; one of several a ``Lazy`` view)."""
        group, node, starts, names = self.group, self.node, self.group_start, self.names
        nodes: dict[tuple[int, int], dict[str, Node]] = {}
        for at, size, kind in _runs(self.resource_types, self.pattern_types):
            store = nodes.setdefault(kind, {})
            for i in range(at, at + size):
                if i not in skip:
                    a = starts[i]
                    store[names[i]] = group(i, a) if starts[i + 1] - a == 1 else node(i)
        return nodes

    def rows(self, i: int) -> list[AclRow]:
        """The rows of node i's ACLs (``AclCreated.ROW``, the codes as ints)."""
        resource_type, pattern_type, name = self.resource_types[i], self.pattern_types[i], self.names[i]
        ids, hosts, operations, permissions = self.ids, self.hosts, self.operations, self.permissions
        starts, first = self.acl_start, self.group_start[i]
        principals = self.group_principals(i)
        rows: list = [(ids[k], resource_type, name, pattern_type, principals[g - first], hosts[k], operations[k],
                       permissions[k])
                      for g in range(first, self.group_start[i + 1]) for k in range(starts[g], starts[g + 1])]
        return rows

    def stores(self) -> dict[tuple[int, int], dict[str, int]]:
        """(resource type, pattern type) -> name -> node position (TableError if a node is listed twice or has a
        pattern no ACL has)."""
        stores: dict[tuple[int, int], dict[str, int]] = {}
        for resource_type, runs in self._type_runs().items():
            for pattern_type, names in zip((PatternType.LITERAL, PatternType.PREFIXED),
                                           self._type_names(resource_type, runs), strict=True):
                if names:
                    stores[resource_type, pattern_type] = names
        return stores

    def _type_names(self, resource_type: int, runs: list[tuple[int, int, int]]) -> tuple[dict[str, int], dict[str, int]]:
        """The name maps ``stores`` gives for one resource type (``_names_of``; a mapped table keeps them)."""
        return self._names_of(resource_type, runs)

    def _type_runs(self) -> dict[int, list[tuple[int, int, int]]]:
        """resource type -> the runs of its nodes, (start, length, pattern type) each, in order (TableError for a
        node of a pattern no ACL has)."""
        types: dict[int, list[tuple[int, int, int]]] = {}
        for at, size, key in _runs(self.resource_types, self.pattern_types):
            if key not in KINDS:
                raise TableError(f"a node has resource type {key[0]} and pattern type {key[1]}, which no ACL has")
            types.setdefault(key[0], []).append((at, size, key[1]))
        return types

    def _names_of(self, resource_type: int, runs: list[tuple[int, int, int]]) -> tuple[dict[str, int], dict[str, int]]:
        """The literal and the prefixed name -> node position of one resource type's runs (TableError if a node is
        listed twice): a dict built from two C-level iterables per run."""
        literal: dict[str, int] = {}
        prefixed: dict[str, int] = {}
        names = self.names
        for at, size, pattern_type in runs:
            store = prefixed if pattern_type == PatternType.PREFIXED else literal
            held = len(store)
            store.update(zip(names[at:at + size], range(at, at + size)))
            if len(store) != held + size:
                raise TableError(f"a node is listed twice ({self._repeated((resource_type, pattern_type), at, size)})")
        return literal, prefixed

    def _repeated(self, key: tuple[int, int], at: int, size: int) -> str:
        """The pattern of the run at ``at`` that an earlier listing holds already."""
        earlier = {self.names[i] for i in range(at) if (self.resource_types[i], self.pattern_types[i]) == key}
        for name in self.names[at:at + size]:
            if name in earlier:
                return _named(*key, name)
            earlier.add(name)
        raise AssertionError("no repeated node")

    def id_positions(self) -> dict[str, int]:
        """acl_id -> the ACL's position (TableError if an id is listed twice)."""
        positions = dict(zip(self.ids, range(len(self.ids))))
        if len(positions) != len(self.ids):
            raise TableError("an ACL id is listed twice in the snapshot's index")
        return positions
