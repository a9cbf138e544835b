"""The ACL index as columns, each node made into objects only when first touched.

A snapshot load and a replay from empty both end in an ``AclTable``: per node (in runs of one
resource type and pattern type) its name and its groups, per group its principal and ACLs, per
ACL its id, host, operation and permission, in flat columns (lists of shared strings, byte
strings, offset arrays) built with a few bulk operations per column and no Python object per ACL.
The image's maps hold, for a node or an ACL id, a placeholder int (the node's or the ACL's
position) that ``node`` / ``group_at`` make into the ``Group`` / ``Few`` / ``Multi`` the eager
index would hold, once, when an authorize, describe or write first reaches it (``layered_map``).
Issue 24's profiles: a load that made every group (``group_of`` per ACL) cost 10-15 us per ACL
once ACLs stopped sharing groups (about ten principals per resource, most with a host); a
placeholder costs a dict entry.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from collections.abc import Iterable
from itertools import accumulate, compress, groupby
from operator import attrgetter

from secmeta.events.errors import InvalidValueError
from secmeta.events.types import AclBinding, PatternType
from secmeta.projections.acl_index import (
    KINDS,
    AclIndex,
    Group,
    Node,
    TypeIndex,
    group_of,
    lone_bit,
    node_of,
)
from secmeta.projections.acl_match import ACL_BITS

__all__ = ["AclTable", "TableError"]

_OFFSETS = "q"
_HOST, _OPERATION, _PERMISSION = attrgetter("host"), attrgetter("operation"), attrgetter("permission_type")


class TableError(InvalidValueError):
    """Columns that hold no index (a snapshot's chunk that is damaged or not ours)."""


def _named(resource_type: int, pattern_type: int, name: str) -> str:
    """A node's pattern for an error message: TOPIC LITERAL 'name'."""
    kind = KINDS[resource_type, pattern_type]
    return f"{kind[0].name} {kind[1].name} {name!r}"


class AclTable:
    """Index nodes as columns; ``node(i)`` makes node i (once), ``group_at(p)`` the group of the ACL at p."""

    __slots__ = ("resource_types", "pattern_types", "names", "group_start", "principals", "acl_start", "ids",
                 "hosts", "operations", "permissions", "_nodes")

    def __init__(self, resource_types: bytes, pattern_types: bytes, names: list[str], group_counts: Iterable[int],
                 principals: list[str], acl_counts: Iterable[int], ids: list[str], hosts: list[str],
                 operations: bytes, permissions: bytes):
        """Columns as a snapshot chunk lists them (principals interned, one per group); checked, TableError if
        they hold no index.  Nodes may come in any order; a node's groups are one per principal."""
        group_counts, acl_counts = array(_OFFSETS, group_counts), array(_OFFSETS, acl_counts)
        self.resource_types, self.pattern_types, self.names = resource_types, pattern_types, names
        self.group_start = array(_OFFSETS, accumulate(group_counts, initial=0))
        self.acl_start = array(_OFFSETS, accumulate(acl_counts, initial=0))
        self.principals, self.ids, self.hosts = principals, ids, hosts
        self.operations, self.permissions = operations, permissions
        self._nodes: list[Node | None] = [None] * len(names)
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
        if 0 in group_counts:
            problems.append((group_counts.index(0), "node {} holds no principal's group"))
        if 0 in acl_counts:
            problems.append((bisect_right(self.group_start, acl_counts.index(0)) - 1, "a group of node {} holds no ACL"))
        starts, principals = self.group_start, self.principals
        for i in compress(range(nodes), map((1).__lt__, group_counts)):  # the nodes of several groups
            if len(set(principals[starts[i]:starts[i + 1]])) != group_counts[i]:
                problems.append((i, "node {} lists a principal's group twice"))
                break
        if problems:
            node, what = min(problems)
            raise TableError(what.format(self._named(node)))

    def _named(self, i: int) -> str:
        return _named(self.resource_types[i], self.pattern_types[i], self.names[i])

    @classmethod
    def of_pairs(cls, pairs: Iterable[tuple[str, AclBinding | None]]) -> AclTable:
        """The table of these (acl_id, binding) pairs (ids distinct; a None binding is skipped)."""
        nodes: dict[tuple, dict[str, list[int]]] = {}
        ids: list[str] = []
        entries = []
        for acl_id, binding in pairs:
            if binding is None:
                continue
            pattern, entry = binding.pattern, binding.entry
            key = (pattern.resource_type, pattern.pattern_type, pattern.name)
            per = nodes.get(key)
            if per is None:
                nodes[key] = {entry.principal: [len(ids)]}
            else:
                held = per.get(entry.principal)
                if held is None:
                    per[entry.principal] = [len(ids)]
                else:
                    held.append(len(ids))
            ids.append(acl_id)
            entries.append(entry)
        intern = sys.intern
        resource_types, pattern_types, names = bytearray(), bytearray(), []
        group_counts, principals, acl_counts, order = [], [], [], []
        for (resource_type, pattern_type, name), per in nodes.items():
            resource_types.append(resource_type)
            pattern_types.append(pattern_type)
            names.append(name)
            group_counts.append(len(per))
            for principal, positions in per.items():
                principals.append(intern(principal))
                acl_counts.append(len(positions))
                order += positions
        ordered = list(map(entries.__getitem__, order))
        return cls(bytes(resource_types), bytes(pattern_types), names, group_counts, principals, acl_counts,
                   list(map(ids.__getitem__, order)), list(map(intern, map(_HOST, ordered))),
                   bytes(map(_OPERATION, ordered)), bytes(map(_PERMISSION, ordered)))

    def node(self, i: int) -> Node:
        """Node i (made on first use)."""
        node = self._nodes[i]
        return self._made(i) if node is None else node

    __call__ = node  # a LayeredMap's source of nodes

    def group_at(self, position: int) -> Group:
        """The group that holds the ACL at ``position``."""
        g = bisect_right(self.acl_start, position) - 1
        node = self.node(bisect_right(self.group_start, g) - 1)
        return node.group(self.principals[g])  # type: ignore[return-value]

    def _made(self, i: int) -> Node:
        # No lock (a forked snapshot writer must never wait for one its parent held): two threads that make
        # one node at once make equal ones, and either may be kept; nothing relies on a node's identity.
        node = self._nodes[i] = self._make(i)
        return node

    def _make(self, i: int) -> Node:
        name = self.names[i]
        kind = KINDS[self.resource_types[i], self.pattern_types[i]]
        ids, hosts, operations, permissions, starts = self.ids, self.hosts, self.operations, self.permissions, \
            self.acl_start
        groups = []
        for g in range(self.group_start[i], self.group_start[i + 1]):
            a, b = starts[g], starts[g + 1]
            principal = self.principals[g]
            if b - a == 1:
                bit = lone_bit(hosts[a], operations[a], permissions[a])
                if bit:
                    groups.append(Group(principal, ids[a], bit, name, kind))
                    continue
            groups.append(group_of(principal, name, kind,
                                   list(zip(ids[a:b], hosts[a:b], operations[a:b], permissions[a:b], strict=True))))
        return node_of(groups)  # type: ignore[return-value]

    def index(self) -> AclIndex:
        """The index of the table's nodes (each made on first use)."""
        stores: dict[tuple[int, int], dict[str, int]] = {}
        at = 0
        for key, run in groupby(zip(self.resource_types, self.pattern_types)):
            size = len(list(run))
            if key not in KINDS:
                raise TableError(f"a node has resource type {key[0]} and pattern type {key[1]}, which no ACL has")
            store = stores.setdefault(key, {})
            held = len(store)
            store.update(zip(self.names[at:at + size], range(at, at + size)))
            if len(store) != held + size:
                raise TableError(f"a node is listed twice ({self._repeated(key, at, size)})")
            at += size
        types = list(AclIndex.EMPTY.types)
        for resource_type in {key[0] for key in stores}:
            literal = stores.get((resource_type, PatternType.LITERAL), {})
            prefixed = stores.get((resource_type, PatternType.PREFIXED), {})
            types[resource_type] = TypeIndex.of(literal, prefixed, self)
        return AclIndex(tuple(types))

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
