"""The authorizer index of an ACL image, built from persistent (HAMT) maps.

Per resource type (``TypeIndex``): literal names and prefixes each map to a
node (``LayeredMap``: a bulk-built dict whose nodes may be made on first use, see ``acl_table``,
under a persistent overlay of later changes); a node holds one ``Group`` per principal (a single principal's group
is the node itself, a few principals' groups a ``Few`` tuple, many a
``Multi`` map; a node of a bulk-built table is ``Lazy``: its principals' groups made one at a time); a group folds its ACLs into packed masks per host (see
``acl_match``) and is the one place an ACL is stored: the image maps each
ACL id to its group, which gives the ACL's binding back (``Group.binding``).
A lookup probes the literal name, the literal ``*`` and only the prefix
lengths that exist for the type.  ``grants`` indexes the same groups by
principal, then by (operation, permission, pattern type), for
``authorize_by_resource_type``; it is built on first use (one build at a
time per lineage: the indexes updated from one another) and, once any
index of a lineage has been asked for it, every index updated from then
on carries it, kept up to date.  Updates replace only the touched groups, nodes and map
paths, so untouched structure is shared.
"""

from __future__ import annotations

import functools
import sys
import threading
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import ClassVar

import immutables

from secmeta.events.records import AclRow
from secmeta.events.types import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from secmeta.projections.acl_entries import canonical_entry
from secmeta.projections.acl_match import (
    ACL_BITS,
    DENY_SHIFT,
    acl_network,
    client_address,
    ranges_bits,
)
from secmeta.projections.layered_map import LayeredMap

__all__ = [
    "KINDS",
    "AclIndex",
    "EMPTY_MAP",
    "Few",
    "Group",
    "HostGroup",
    "Lazy",
    "Multi",
    "Node",
    "NodeMap",
    "Patched",
    "Positions",
    "TypeIndex",
    "frozen_map",
    "grant_key",
    "group_entries",
    "group_of",
    "host_masks",
    "index_of",
    "lone_bit",
    "pending_index_of",
    "node_entries",
    "node_of",
    "node_pattern",
    "lazy_view",
    "SCAN_PRINCIPALS",
]

EMPTY_MAP: immutables.Map = immutables.Map()
_TYPE_CODES = 8  # ResourceType codes 0..7
_PREFIXED_KEY = 2 * DENY_SHIFT
_FEW = 8  # nodes with up to this many principals hold their groups in a tuple
SCAN_PRINCIPALS = 16  # a Lazy node of up to this many principals scans a list for one, a larger one has a dict

#: (ResourceType, PatternType) members by (type code, pattern code), for the patterns an image holds.
KINDS: Mapping[tuple[int, int], tuple[ResourceType, PatternType]] = {
    (int(t), int(p)): (t, p) for t in ResourceType for p in (PatternType.LITERAL, PatternType.PREFIXED)
}

# The (operation, permission) of each nonzero packed bit.
_BIT_FIELDS: dict[int, tuple[AclOperation, AclPermissionType]] = {
    ACL_BITS[permission][operation]: (operation, permission)
    for permission in (AclPermissionType.ALLOW, AclPermissionType.DENY)
    for operation in AclOperation
}


def frozen_map(items: dict) -> immutables.Map:
    """A persistent map of a dict's items, filled in place (about a third faster than ``Map(dict)``)."""
    mutation = EMPTY_MAP.mutate()
    for key, value in items.items():
        mutation[key] = value
    return mutation.finish()


def grant_key(operation: int, deny: bool, prefixed: bool) -> int:
    """The key of ``TypeIndex.grants[principal]`` for one (operation, permission, pattern)."""
    return operation + (DENY_SHIFT if deny else 0) + (_PREFIXED_KEY if prefixed else 0)


def lone_bit(host: str, operation: int, permission: int) -> int:
    """The bit of an ACL that is a ``Group`` when it is its principal's only ACL on a pattern, else 0.

    Such an ACL has host ``*`` and an (operation, permission) with one
    packed bit; any other ACL goes into a ``HostGroup``.
    """
    return ACL_BITS[permission][operation] if host == WILDCARD else 0


_SHARED_MASKS: dict[int, int] = {}


def _shared(mask: int) -> int:
    """One int object per distinct mask value (masks repeat across groups)."""
    if len(_SHARED_MASKS) < 65536:
        return _SHARED_MASKS.setdefault(mask, mask)
    return mask


class Group:
    """The ACLs of one principal on one resource pattern, as packed masks.

    This class holds exactly one ACL with host ``*`` whose one bit names
    its operation and permission (``ids`` is its id); every other group is
    a ``HostGroup``.  ``any_host`` holds the bits of host-``*`` ACLs;
    ``hosts`` (or None) maps every other ACL host string to its bits;
    ``nets`` (or None) lists the CIDR hosts as (``acl_network``'s (version,
    network, netmask), bits); the rule is ``acl_match.host_matches``'.
    ``name`` and ``kind`` ((ResourceType, PatternType)) are the pattern the
    group sits under.
    """

    __slots__ = ("principal", "ids", "any_host", "name", "kind")

    hosts: dict[str, int] | None = None
    nets: tuple[tuple[tuple[int, int, int], int], ...] | None = None
    entries: tuple[AccessControlEntry, ...] | None = None

    def __init__(self, principal: str, ids, any_host: int, name: str, kind: tuple[ResourceType, PatternType]):
        self.principal = principal
        self.ids: str | tuple[str, ...] = ids
        self.any_host = any_host
        self.name = name
        self.kind = kind

    def host_bits(self, host: str) -> int:
        """The packed bits of this group's ACLs that apply to a client host (``host_matches``' cases, split ahead
        of time: '*', the client's string, a range holding its address)."""
        hosts = self.hosts
        if hosts is None:
            return self.any_host
        bits = self.any_host | hosts.get(host, 0)
        nets = self.nets
        if nets is not None:
            bits |= ranges_bits(nets, client_address(host))
        return bits

    def bits(self, principal: str, host: str) -> int:
        """Node protocol: bits applying to (principal, host), counting 'User:*'."""
        own = self.principal
        if own != principal and own != WILDCARD_PRINCIPAL:
            return 0
        if self.hosts is None:
            return self.any_host
        return self.host_bits(host)

    def group(self, principal: str) -> Group | None:
        """Node protocol: the group of exactly this principal."""
        return self if self.principal == principal else None

    def groups(self) -> Iterable[Group]:
        """Node protocol: every group of the node."""
        return (self,)

    def acl_ids(self) -> tuple[str, ...]:
        """The ids of this group's ACLs."""
        ids = self.ids
        return (ids,) if isinstance(ids, str) else ids

    def union_bits(self) -> int:
        """The bits of all this group's ACLs, whatever their host."""
        bits = self.any_host
        if self.hosts is not None:
            for mask in self.hosts.values():
                bits |= mask
        return bits

    def members(self) -> list[tuple[str, AccessControlEntry]]:
        """(acl_id, entry) of every ACL of the group."""
        operation, permission = _BIT_FIELDS[self.any_host]
        return [(self.ids, canonical_entry(self.principal, WILDCARD, operation, permission))]  # type: ignore[list-item]

    def fields(self) -> list[Member]:
        """(acl_id, host, operation, permission) of every ACL of the group."""
        return [(self.ids, WILDCARD, *_BIT_FIELDS[self.any_host])]  # type: ignore[list-item]

    def entry(self, acl_id: str) -> AccessControlEntry:
        """The entry of one of the group's ACLs."""
        return self.members()[0][1]

    def pattern(self) -> ResourcePattern:
        resource_type, pattern_type = self.kind
        return ResourcePattern(resource_type, self.name, pattern_type)

    def binding(self, acl_id: str) -> AclBinding:
        """The binding of one of the group's ACLs."""
        return AclBinding(self.pattern(), self.entry(acl_id))

    def pairs(self) -> list[tuple[str, AclBinding]]:
        """(acl_id, binding) of every ACL of the group."""
        pattern = self.pattern()
        return [(acl_id, AclBinding(pattern, entry)) for acl_id, entry in self.members()]

    def _entry_tuple(self) -> tuple[AccessControlEntry, ...] | None:
        """The entries parallel to ``acl_ids()`` that a ``HostGroup`` holds (None here)."""
        return None

    def _fields(self) -> tuple:
        return (self.principal, self.ids, self.any_host, self.name, self.kind, self.hosts, self.nets,
                self._entry_tuple())

    def __eq__(self, other: object) -> bool:
        """Equal when they hold the same ACLs under the same pattern, however each was made."""
        if not isinstance(other, Group):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.principal!r}, ids={self.ids!r}, any_host={self.any_host:#x}, "
            f"hosts={self.hosts!r})"
        )


class HostGroup(Group):
    """A group of several ACLs, or of one whose host is not ``*``; ``entries`` parallel ``acl_ids()`` (a subclass
    may make them when first asked for: ``_entry_tuple``)."""

    __slots__ = ("hosts", "nets", "entries")

    def __init__(self, principal, ids, any_host, name, kind, hosts, nets, entries):
        super().__init__(principal, ids, any_host, name, kind)
        self.hosts = hosts
        self.nets = nets
        self.entries = entries

    def _entry_tuple(self) -> tuple[AccessControlEntry, ...]:
        return self.entries  # type: ignore[return-value]

    def members(self) -> list[tuple[str, AccessControlEntry]]:
        return list(zip(self.acl_ids(), self._entry_tuple(), strict=True))

    def entry(self, acl_id: str) -> AccessControlEntry:
        return self._entry_tuple()[self.acl_ids().index(acl_id)]

    def fields(self) -> list[Member]:
        return [(acl_id, e.host, e.operation, e.permission_type) for acl_id, e in self.members()]


Member = tuple[str, str, int, int]  # acl_id, host, operation code, permission code


def host_masks(hosts: Iterable[str], bits: Iterable[int]) -> tuple[int, dict[str, int] | None, tuple | None]:
    """A group's masks from its ACLs' hosts and packed bits (parallel): the bits of host ``*``, every other
    host's bits (or None), and the CIDR hosts among them as sorted (``acl_network``'s (version, network, netmask),
    bits) (or None)."""
    any_host = 0
    masks: dict[str, int] | None = None
    for host, bit in zip(hosts, bits, strict=True):
        if host == WILDCARD:
            any_host |= bit
        else:
            if masks is None:
                masks = {}
            masks[host] = masks.get(host, 0) | bit
    if masks is None:
        return _shared(any_host), None, None
    masks = {sys.intern(host): _shared(mask) for host, mask in masks.items()}
    nets = [(network, mask) for host, mask in masks.items()
            if "/" in host and (network := acl_network(host)) is not None]
    return _shared(any_host), masks, tuple(sorted(nets)) or None


def group_of(principal: str, name: str, kind: tuple[ResourceType, PatternType], members: list[Member]) -> Group:
    """The group of one principal's ACLs (non-empty) on one pattern.

    ``principal`` and ``name`` should be the strings the group is to share
    (interned principal, the node's name).
    """
    if len(members) == 1:
        acl_id, host, operation, permission = members[0]
        bit = lone_bit(host, operation, permission)
        if bit:
            return Group(principal, acl_id, bit, name, kind)
    members = sorted(members)
    any_host, hosts, nets = host_masks([m[1] for m in members], [ACL_BITS[m[3]][m[2]] for m in members])
    ids = members[0][0] if len(members) == 1 else tuple(m[0] for m in members)
    entries = tuple(canonical_entry(principal, m[1], m[2], m[3]) for m in members)
    return HostGroup(principal, ids, any_host, name, kind, hosts, nets, entries)


class Few(tuple):
    """A node with the groups of 2 to ``_FEW`` principals, sorted by principal."""

    __slots__ = ()

    def bits(self, principal: str, host: str) -> int:
        bits = 0
        for group in self:
            own = group.principal
            if own == principal or own == WILDCARD_PRINCIPAL:
                bits |= group.any_host if group.hosts is None else group.host_bits(host)
        return bits

    def group(self, principal: str) -> Group | None:
        for group in self:
            if group.principal == principal:
                return group
        return None

    def groups(self) -> Iterable[Group]:
        return self

    def __repr__(self) -> str:
        return f"Few({tuple(self)!r})"


class Multi:
    """A node with the groups of more than ``_FEW`` principals (principal -> Group)."""

    __slots__ = ("by_principal",)

    def __init__(self, by_principal: immutables.Map):
        self.by_principal = by_principal

    def bits(self, principal: str, host: str) -> int:
        get = self.by_principal.get
        bits = 0
        group = get(principal)
        if group is not None:
            bits = group.any_host if group.hosts is None else group.host_bits(host)
        group = get(WILDCARD_PRINCIPAL)
        if group is not None:
            bits |= group.any_host if group.hosts is None else group.host_bits(host)
        return bits

    def group(self, principal: str) -> Group | None:
        return self.by_principal.get(principal)

    def groups(self) -> Iterable[Group]:
        return self.by_principal.values()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Multi):
            return NotImplemented
        return self.by_principal == other.by_principal

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Multi({dict(self.by_principal)!r})"


class Lazy:
    """A node read from a table's columns until asked for more (``acl_table``'s nodes of several groups).

    ``source``, the table; ``at``, the node's position in it; ``principals``, its groups' principals (a list
    scanned, or for many a ``Positions`` dict), whose ``index`` is a group's offset from ``first``, the first
    group's position.  An authorize reads the bits of the ACLs of the request's principal and ``User:*`` from
    the columns (``source.bits``), making no group but a large one, so the first call to reach a node costs
    about what later ones do; a group is made once, when asked for (``source.group``).  ``whole()`` is the
    eager node of all its groups (made once), which writes edit.
    """

    __slots__ = ("source", "at", "first", "principals", "_whole")

    def __init__(self, source, at: int, first: int, principals: list[str] | Positions):
        self.source = source
        self.at = at
        self.first = first
        self.principals = principals
        self._whole: Node | None = None

    def group(self, principal: str) -> Group | None:
        principals = self.principals
        if principal not in principals:
            return None
        return self.source.group(self.at, self.first + principals.index(principal))

    def bits(self, principal: str, host: str) -> int:
        principals = self.principals
        bits = 0
        if principal in principals:
            bits = self.source.bits(self.at, self.first + principals.index(principal), host)
        if WILDCARD_PRINCIPAL in principals:
            bits |= self.source.bits(self.at, self.first + principals.index(WILDCARD_PRINCIPAL), host)
        return bits

    def whole(self) -> Node:
        """The node of every group (made once; the groups are the ones ``group`` gives)."""
        whole = self._whole
        if whole is None:
            source, at, first = self.source, self.at, self.first
            whole = self._whole = node_of([source.group(at, first + k) for k in range(len(self.principals))])
        return whole  # type: ignore[return-value]

    def groups(self) -> Iterable[Group]:
        return self.whole().groups()

    def pattern(self) -> ResourcePattern:
        """The pattern every group of the node sits under."""
        return self.source.pattern(self.at)  # type: ignore[no-any-return]

    def entries(self) -> list[AccessControlEntry]:
        """The entry of every ACL of the node, read from its source's columns and making no group (so no id is read:
        a describe returns bindings, not ids), or from its groups once it is made whole."""
        whole = self._whole
        if whole is not None:
            return [entry for group in whole.groups() for entry in group_entries(group)]
        source, at, first = self.source, self.at, self.first
        return [entry for k in range(len(self.principals)) for entry in source.entries(at, first + k)]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Group | Few | Multi | Lazy):
            return NotImplemented
        return _by_principal(self) == _by_principal(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Lazy(<{len(self.principals)} principals>)"


def group_entries(group: Group) -> tuple[AccessControlEntry, ...]:
    """The entries of a group's ACLs (in ``acl_ids()`` order)."""
    entries = group._entry_tuple()
    return entries if entries is not None else (group.members()[0][1],)


def node_entries(node: Node) -> list[AccessControlEntry]:
    """The entries of every ACL of a node (a ``Lazy`` one's read without making its groups)."""
    if type(node) is Lazy:
        return node.entries()
    return [entry for group in node.groups() for entry in group_entries(group)]


def node_pattern(node: Node) -> ResourcePattern:
    """The pattern of a node (every group's)."""
    if type(node) is Lazy:
        return node.pattern()
    return next(iter(node.groups())).pattern()


class Positions(dict):
    """principal -> offset of its group among a node's (``Lazy.principals`` of a node of many principals)."""

    __slots__ = ()
    index = dict.__getitem__


def _by_principal(node: Node) -> dict[str, Group]:
    return {group.principal: group for group in node.groups()}


Node = Group | Few | Multi | Lazy


def node_of(groups: list[Group]) -> Node | None:
    """The node holding these groups (one per principal), or None for none."""
    if len(groups) == 1:
        return groups[0]
    if not groups:
        return None
    if len(groups) <= _FEW:
        return Few(sorted(groups, key=_PRINCIPAL))
    return Multi(immutables.Map({group.principal: group for group in groups}))


_PRINCIPAL = attrgetter("principal")


class Patched:
    """The source a ``Lazy`` view of a table's node ``i`` with some groups replaced reads: its k-th group is
    ``made[k]`` when given, else the table's group at ``at[k]``, read as the table's own node reads it (bits and
    entries from the columns, the group made only when asked for).  ``table``: an ``AclTable`` (or a snapshot's
    ``MappedAclTable``); a view of it always has ``first`` 0."""

    __slots__ = ("table", "at", "made", "__weakref__")  # weakly held by KeptByObject, as a table is

    def __init__(self, table, at: list[int], made: dict[int, Group]):
        self.table, self.at, self.made = table, at, made

    def group(self, i: int, k: int) -> Group:
        made = self.made.get(k)
        return made if made is not None else self.table.group(i, self.at[k])  # type: ignore[no-any-return]

    def bits(self, i: int, k: int, host: str) -> int:
        made = self.made.get(k)
        if made is None:
            return self.table.bits(i, self.at[k], host)  # type: ignore[no-any-return]
        return made.any_host if made.hosts is None else made.host_bits(host)

    def entries(self, i: int, k: int) -> tuple[AccessControlEntry, ...]:
        made = self.made.get(k)
        return group_entries(made) if made is not None else self.table.entries(i, self.at[k])  # type: ignore[no-any-return]

    def pattern(self, i: int) -> ResourcePattern:
        return self.table.pattern(i)  # type: ignore[no-any-return]


def lazy_view(table, i: int, principals: list[str], at: list[int], made: dict[int, Group]) -> Lazy:
    """A ``Lazy`` view of node ``i`` of ``table`` whose groups are ``principals``' (in order), the k-th read from
    the table's group at ``at[k]`` unless ``made[k]`` replaces it (``Patched``)."""
    view = principals if len(principals) <= SCAN_PRINCIPALS else Positions(zip(principals, range(len(principals))))
    return Lazy(Patched(table, at, made), i, 0, view)


def _lazy_with(node: Lazy, updates: dict[str, Group | None]) -> Node | None:
    """A ``Lazy`` node after replacing (or, for None, dropping) some principals' groups: a ``Lazy`` view again, whose
    other groups are still read from the table's columns and made only when asked for; a node of one group left is
    that group (``node_of``).  Issue 24: a follower's batch deleting an ACL of a node of ten principals made the
    node's every group (``Lazy.whole``), a third of applying a round of the diverse shape."""
    source, i, first = node.source, node.at, node.first
    if type(source) is Patched:  # a view patched before: patched again, over its table
        table, held_at, held_made = source.table, source.at, source.made
    else:
        table, held_at, held_made = source, None, None
    principals: list[str] = []
    at: list[int] = []
    made: dict[int, Group] = {}
    for k, principal in enumerate(node.principals):
        position = first + k if held_at is None else held_at[k]
        if principal in updates:
            group = updates[principal]
            if group is None:
                continue
            made[len(principals)] = group
        elif held_made is not None and k in held_made:
            made[len(principals)] = held_made[k]
        principals.append(principal)
        at.append(position)
    held = node.principals
    for principal, group in updates.items():
        if group is not None and principal not in held:
            made[len(principals)] = group
            principals.append(principal)
            at.append(-1)
    if len(principals) <= 1:
        return node_of([made[0] if 0 in made else table.group(i, at[0])] if principals else [])
    return lazy_view(table, i, principals, at, made)


def _node_with(node: Node | None, updates: dict[str, Group | None]) -> Node | None:
    """The node after replacing (or, for None, dropping) some principals' groups.

    A ``Multi`` is edited through its persistent map (cost of the changes,
    not of the principals held) while more than ``_FEW`` principals remain; a ``Lazy`` node of up to
    ``SCAN_PRINCIPALS`` principals stays a ``Lazy`` view whose untouched groups are read from its table as before
    (``_lazy_with``); a larger one is edited as its whole node (made once, so writes to a node held by many
    principals stay flat).
    """
    if type(node) is Lazy:
        if len(node.principals) <= SCAN_PRINCIPALS:
            return _lazy_with(node, updates)
        node = node.whole()
    if type(node) is Multi:
        mutation = node.by_principal.mutate()
        for principal, group in updates.items():
            if group is None:
                mutation.pop(principal, None)
            else:
                mutation[principal] = group
        if len(mutation) > _FEW:
            return Multi(mutation.finish())
        return node_of(list(mutation.finish().values()))
    groups = {} if node is None else {group.principal: group for group in node.groups()}
    for principal, group in updates.items():
        if group is None:
            groups.pop(principal, None)
        else:
            groups[principal] = group
    return node_of(list(groups.values()))


def _grant_keys(group: Group | None, prefixed: bool) -> list[int]:
    """The grant keys a group is listed under (one per set bit of its ACLs)."""
    if group is None:
        return []
    bits = group.union_bits()
    offset = _PREFIXED_KEY if prefixed else 0
    keys = []
    while bits:
        low = bits & -bits
        keys.append(low.bit_length() - 1 + offset)
        bits ^= low
    return keys


class NodeMap(LayeredMap):
    """A ``LayeredMap`` of a type's nodes by name whose placeholders (nodes not made yet) ``columns`` can answer an
    authorize for straight from its columns (``AclTable.node_bits``), making nothing.

    Issue 24: a node made on its first authorize (a ``Lazy`` view, its principals' list, the map's entry replaced)
    cost the first pass over a loaded image about 7k more instructions a call than the warm one (30%), and the
    objects it kept ran the cyclic collector during the pass; now a first authorize does the warm one's work."""

    __slots__ = ("columns",)
    EMPTY: ClassVar[NodeMap]  # type: ignore[misc]

    def __init__(self, base: dict, resolve: Callable[[int], Node], overlay: immutables.Map = EMPTY_MAP,
                 size: int | None = None, columns=None):
        super().__init__(base, resolve, overlay, size)
        self.columns = columns  # answers ``node_bits`` for this map's placeholders (None: it holds none)

    def _with(self, base: dict, overlay: immutables.Map, size: int | None, levels: tuple[dict, ...] = ()) -> NodeMap:
        if levels:  # ``bits`` reads the overlay and the base alone
            raise TypeError("a NodeMap holds no levels (LayeredMapMutation.add_new)")
        return NodeMap(base, self._resolve, overlay, size, self.columns)

    def bits(self, name: str, principal: str, host: str) -> int | None:
        """The packed bits of the node at ``name`` that apply to (principal, host), counting 'User:*' (the node
        protocol's ``bits``), or None when no node is there."""
        node = self.peek(name) if self._overlay else self._base.get(name)  # (peek's own test, without its call)
        if node is None:
            return None
        if type(node) is int:
            bits = self.columns.node_bits(node, principal, host)
            if bits is not None:
                return bits  # type: ignore[no-any-return]
            node = self.get(name)  # a node the columns do not answer for: made (once)
        return node.bits(principal, host)  # type: ignore[no-any-return]


NodeMap.EMPTY = NodeMap({}, LayeredMap.EMPTY.source)


def _one_prefix(length: int) -> Callable[[str], tuple[str]]:
    """What gives a 1-tuple of a name's prefix of ``length`` (``itemgetter`` of one slice gives no tuple)."""
    at = slice(0, length)
    return lambda name: (name[at],)


class _PrefixSlicers(dict):
    """count -> what slices a name at each of the first ``count`` prefix ``lengths`` in one C call (a 1-tuple of
    the name's prefix when only one fits), each made when first asked for.

    Issue 24's review: building all of them in every ``TypeIndex`` was quadratic in the number of distinct prefix
    lengths (5.3 ms at 200 of them) on every write and follower batch; now one is made per count a name asks for,
    and the indexes of equal lengths share them (``_prefix_slicers``)."""

    __slots__ = ("lengths",)

    def __init__(self, lengths: tuple[int, ...]):
        super().__init__()
        self.lengths = lengths

    def __missing__(self, count: int) -> Callable[[str], tuple[str, ...]]:
        lengths = self.lengths
        if not 0 < count <= len(lengths):
            raise KeyError(count)
        made = self[count] = (itemgetter(*(slice(0, length) for length in lengths[:count])) if count > 1
                              else _one_prefix(lengths[0]))
        return made  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=64)
def _prefix_slicers(lengths: tuple[int, ...]) -> _PrefixSlicers:
    """The slicers of these sorted lengths, shared by the type indexes that hold them (bounded)."""
    return _PrefixSlicers(lengths)


class _Lineage:
    """Shared by a type index and those updated from it: whether grants were wanted, one build at a time."""

    __slots__ = ("wanted", "building")

    def __init__(self) -> None:
        self.wanted = False
        self.building = threading.Lock()


class TypeIndex:
    """The index of one resource type's ACLs.

    ``literal``: name -> Node (including ``*``); ``prefixed``: prefix -> Node;
    ``wildcard``: the literal ``*`` node, kept apart for the hot path;
    ``lengths``: the sorted distinct prefix lengths; ``grants``: principal ->
    Map(grant_key -> Map(name -> Group)), built on first use.
    """

    __slots__ = ("literal", "prefixed", "wildcard", "lengths", "length_counts", "_prefix_slices", "_grants",
                 "_lineage")

    def __init__(self, literal: NodeMap = NodeMap.EMPTY, prefixed: NodeMap = NodeMap.EMPTY,
                 length_counts: immutables.Map = EMPTY_MAP, grants: immutables.Map | None = EMPTY_MAP,
                 lineage: _Lineage | None = None):
        self.literal = literal
        self.prefixed = prefixed
        self.wildcard: Node | None = literal.get(WILDCARD)
        self.lengths: tuple[int, ...] = tuple(sorted(length_counts.keys()))
        self.length_counts = length_counts
        self._prefix_slices = _prefix_slicers(self.lengths)
        self._grants = grants
        self._lineage = _Lineage() if lineage is None else lineage

    @classmethod
    def of(cls, literal: dict[str, int], prefixed: dict[str, int], make: Callable[[int], Node],
           columns) -> TypeIndex:
        """A type index of placeholders (node positions) that ``make`` makes into nodes on first use, and
        ``columns`` answers an authorize for without making them (``NodeMap``); its grants left to first use."""
        counts = frozen_map(dict(Counter(map(len, prefixed))))
        return cls(NodeMap(literal, make, columns=columns), NodeMap(prefixed, make, columns=columns), counts, None)

    @property
    def grants(self) -> immutables.Map:
        """principal -> Map(grant_key -> Map(name -> Group)) of every group."""
        grants = self._grants
        if grants is None:
            lineage = self._lineage
            lineage.wanted = True  # from now on updated() carries grants forward
            with lineage.building:  # a second reader waits for the build instead of repeating it
                grants = self._grants
                if grants is None:
                    grants = self._grants = self._built_grants()
        return grants

    def _built_grants(self) -> immutables.Map:
        tables: dict[tuple[str, int], dict[str, Group]] = {}
        for prefixed, nodes in ((False, self.literal), (True, self.prefixed)):
            for name, node in nodes.items():
                for group in node.groups():
                    for grant in _grant_keys(group, prefixed):
                        key = (group.principal, grant)
                        table = tables.get(key)
                        if table is None:
                            tables[key] = {name: group}
                        else:
                            table[name] = group
        nested: dict[str, dict[int, immutables.Map]] = {}
        for (principal, key), table in tables.items():
            nested.setdefault(principal, {})[key] = frozen_map(table)
        return frozen_map({principal: frozen_map(per_key) for principal, per_key in nested.items()})

    def prefixes_of(self, name: str) -> Iterable[str]:
        """The prefix patterns that may cover a resource name: every held prefix of it (``covers``' PREFIXED
        rule), some maybe twice and some no longer held (``prefixed.get`` says), probed by the maps' own
        lookups."""
        count = bisect_right(self.lengths, len(name))
        if not count:
            return ()
        return self.prefixed.held(self._prefix_slices[count](name))

    def applicable_nodes(self, name: str) -> Iterator[Node]:
        """Nodes whose pattern covers a resource name: literal, '*', then prefixes."""
        node = self.literal.get(name)
        if node is not None:
            yield node
        if name != WILDCARD and self.wildcard is not None:
            yield self.wildcard
        get = self.prefixed.get
        for prefix in dict.fromkeys(self.prefixes_of(name)):
            node = get(prefix)
            if node is not None:
                yield node

    def nodes(self) -> Iterator[Node]:
        """Every node, literal then prefixed."""
        yield from self.literal.values()
        yield from self.prefixed.values()

    def updated(self, resource_type: int, changes: dict, rebuilt: list[Group]) -> TypeIndex:
        """Apply {(pattern type, name): {principal: (removed ids, added members)}}.

        Every group made anew is appended to ``rebuilt``.
        """
        literal = self.literal.mutate()
        prefixed = self.prefixed.mutate()
        counts = self.length_counts.mutate()
        base = self.grants if self._grants is None and self._lineage.wanted else self._grants
        grants = None if base is None else _GrantsUpdate(base)
        for (pattern_type, name), per_principal in changes.items():
            is_prefixed = pattern_type == PatternType.PREFIXED
            kind = KINDS[resource_type, pattern_type]
            store = prefixed if is_prefixed else literal
            node = store.get(name)
            if node is not None:  # share the node's string (a Lazy one's from its table: no group made)
                name = node.pattern().name if type(node) is Lazy else next(iter(node.groups())).name
            updates: dict[str, Group | None] = {}
            for principal, (gone, new) in per_principal.items():
                old = None if node is None else node.group(principal)
                if old is not None:
                    principal = old.principal
                    kept = [member for member in old.fields() if member[0] not in gone]
                    new = kept + new
                else:
                    principal = sys.intern(principal)
                group = group_of(principal, name, kind, new) if new else None
                updates[principal] = group
                if group is not None:
                    rebuilt.append(group)
                if grants is not None:
                    grants.replace(principal, is_prefixed, name, old, group)
            new_node = _node_with(node, updates) if node is not None or len(updates) > 1 else group
            if new_node is not None:
                store[name] = new_node
                if node is None and is_prefixed:
                    counts[len(name)] = counts.get(len(name), 0) + 1
            elif node is not None:
                del store[name]
                if is_prefixed:
                    left = counts[len(name)] - 1
                    if left:
                        counts[len(name)] = left
                    else:
                        del counts[len(name)]
        return TypeIndex(literal.finish(), prefixed.finish(), counts.finish(),
                         None if grants is None else grants.finish(), self._lineage)

    def with_nodes(self, literal: Mapping[str, Node], prefixed: Mapping[str, Node]) -> TypeIndex:
        """This index with nodes at literal names and prefixes it does not hold."""
        base = self.grants if self._grants is None and self._lineage.wanted else self._grants
        grants = None if base is None else _GrantsUpdate(base)
        stores = []
        for is_prefixed, nodes, held in ((False, literal, self.literal), (True, prefixed, self.prefixed)):
            if not nodes:
                stores.append(held)
                continue
            store = held.mutate()
            store.update(nodes)
            if grants is not None:
                for name, node in nodes.items():
                    for group in node.groups():
                        grants.replace(group.principal, is_prefixed, name, None, group)
            stores.append(store.finish())
        counts = self.length_counts
        if prefixed:
            mutation = counts.mutate()
            for length, count in Counter(map(len, prefixed)).items():
                mutation[length] = mutation.get(length, 0) + count
            counts = mutation.finish()
        return TypeIndex(stores[0], stores[1], counts, None if grants is None else grants.finish(), self._lineage)

    def made_names(self) -> tuple[dict, dict] | None:
        """The literal and the prefixed maps' dicts (name -> placeholder, or the node made for it) of an index made and
        not changed since (a table's: ``of``), or None (not made yet: ``PendingTypeIndex``; or changed).  Read only."""
        if type(self._lineage) is _PendingLineage:
            return None
        literal, prefixed = self.literal, self.prefixed
        return None if literal.changed() or prefixed.changed() else (literal.base, prefixed.base)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TypeIndex):
            return NotImplemented
        return self.literal == other.literal and self.prefixed == other.prefixed

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TypeIndex(<{len(self.literal)} literal, {len(self.prefixed)} prefixed>)"


class _PendingLineage(_Lineage):
    """A pending type index's lineage, holding what makes the index (a valid lineage, whatever reads it first) and,
    once a reader has made it, the one made index every reader takes (``made``)."""

    __slots__ = ("make", "made")

    def __init__(self, make: Callable[[], TypeIndex]) -> None:
        super().__init__()
        self.make = make
        self.made: dict[str, TypeIndex] = {}  # "index" -> the first index made (dict.setdefault: one step)


class PendingTypeIndex(TypeIndex):
    """A ``TypeIndex`` whose name maps are made when any of its attributes is first read: it then takes the made
    index's attributes and becomes a ``TypeIndex`` (its class too), so every later read costs a plain one's.

    Issue 24: a snapshot's open hashed every node name into its type's dicts, 25-35 ms of the current shape's
    0.15-0.18 s (160k nodes at 200k ACLs) before anything asked; now a type's first reader (an authorize, a
    describe, a write on that type) pays its own type's maps, and a type no one asks about costs nothing.
    No lock (a forked snapshot writer must never wait for one its parent held): two threads that read it first
    at once may each make the maps, but the first made is published in one step (``dict.setdefault``) and every
    reader takes all its attributes from that one, so the index never holds a mix of two builds (review 27)."""

    __slots__ = ()

    def __init__(self, make: Callable[[], TypeIndex]) -> None:  # noqa: PLW0231 - the made index's __init__ runs
        self._lineage = _PendingLineage(make)

    def __getattr__(self, name: str):  # only for an attribute not set: before it is made (or none of a TypeIndex's)
        lineage = self._lineage
        if type(lineage) is not _PendingLineage or name not in TypeIndex.__slots__:  # made meanwhile by another thread
            return object.__getattribute__(self, name)
        made = lineage.made.get("index")
        if made is None:
            made = lineage.made.setdefault("index", lineage.make())  # a racing reader's, if it published first
        for slot in TypeIndex.__slots__:
            if slot != "_lineage":
                object.__setattr__(self, slot, getattr(made, slot))
        self._lineage = made._lineage  # last: a reader that finds it made finds every slot set
        object.__setattr__(self, "__class__", TypeIndex)
        return getattr(self, name)

    def __repr__(self) -> str:
        return "PendingTypeIndex(<made when first read>)" if type(self._lineage) is _PendingLineage else super().__repr__()


class _GrantsUpdate:
    """Batched changes to ``TypeIndex.grants`` (one mutation per touched inner map)."""

    __slots__ = ("base", "pending")

    def __init__(self, base: immutables.Map):
        self.base = base
        self.pending: dict[str, dict[int, immutables.MapMutation]] = {}

    def _mutation(self, principal: str, key: int):
        per_key = self.pending.get(principal)
        if per_key is None:
            per_key = self.pending[principal] = {}
        mutation = per_key.get(key)
        if mutation is None:
            current = self.base.get(principal, EMPTY_MAP).get(key, EMPTY_MAP)
            mutation = per_key[key] = current.mutate()
        return mutation

    def replace(self, principal: str, prefixed: bool, name: str, old, new) -> None:
        new_keys = _grant_keys(new, prefixed)
        for key in _grant_keys(old, prefixed):
            if key not in new_keys:
                del self._mutation(principal, key)[name]
        for key in new_keys:
            self._mutation(principal, key)[name] = new

    def finish(self) -> immutables.Map:
        if not self.pending:
            return self.base
        grants = self.base.mutate()
        for principal, per_key in self.pending.items():
            tables = grants.get(principal, EMPTY_MAP).mutate()
            for key, mutation in per_key.items():
                table = mutation.finish()
                if table:
                    tables[key] = table
                else:
                    tables.pop(key, None)
            finished = tables.finish()
            if finished:
                grants[principal] = finished
            else:
                grants.pop(principal, None)
        return grants.finish()


_EMPTY_TYPE = TypeIndex()


@dataclass(frozen=True, slots=True, weakref_slot=True)
class AclIndex:
    """All resource types' indexes, by ResourceType code (weakly referable: ``acl_deferred.Deferred`` refers to its
    own so)."""

    types: tuple[TypeIndex, ...] = (_EMPTY_TYPE,) * _TYPE_CODES
    EMPTY: ClassVar[AclIndex]

    def node(self, resource_type: int, pattern_type: int, name: str) -> Node | None:
        """The node of one exact pattern (LITERAL or PREFIXED), if any ACL has it."""
        t = self.types[resource_type]
        if pattern_type == PatternType.LITERAL:
            return t.literal.get(name)
        if pattern_type == PatternType.PREFIXED:
            return t.prefixed.get(name)
        return None

    def groups(self) -> Iterator[Group]:
        """Every group of every type."""
        for t in self.types:
            for node in t.nodes():
                yield from node.groups()

    def held(self, patterns: Mapping[tuple[int, int], Mapping[str, int]]) -> set[int]:
        """The values of ``patterns`` ((resource type, pattern type) -> name -> a value) whose pattern has a node
        here (none made)."""
        found: set[int] = set()
        for (resource_type, pattern_type), names in patterns.items():
            t = self.types[resource_type]
            store = t.prefixed if pattern_type == PatternType.PREFIXED else t.literal
            found.update(names[name] for name in store.held(names) if name in store)
        return found

    def with_nodes(self, nodes: Mapping[tuple[int, int], Mapping[str, Node]]) -> AclIndex:
        """A new index with ``nodes`` ((resource type, pattern type) -> name -> node) at patterns it does not
        hold."""
        types = list(self.types)
        for resource_type in {kind[0] for kind in nodes}:
            types[resource_type] = types[resource_type].with_nodes(
                nodes.get((resource_type, PatternType.LITERAL), {}), nodes.get((resource_type, PatternType.PREFIXED), {}))
        return AclIndex(tuple(types))

    def updated(
        self, removed: Iterable[tuple[str, Group]], added: Iterable[AclRow]
    ) -> tuple[AclIndex, list[Group]]:
        """A new index with ACLs removed (id, the group that held it) and added (``AclCreated.ROW``); and the
        groups made anew."""
        changes: dict[int, dict] = {}

        def change(resource_type: int, pattern_type: int, name: str, principal: str) -> tuple[set, list]:
            per_type = changes.get(resource_type)
            if per_type is None:
                per_type = changes[resource_type] = {}
            per_pattern = per_type.get((pattern_type, name))
            if per_pattern is None:
                per_pattern = per_type[(pattern_type, name)] = {}
            found = per_pattern.get(principal)
            if found is None:
                found = per_pattern[principal] = (set(), [])
            return found

        for acl_id, group in removed:
            resource_type, pattern_type = group.kind
            change(resource_type, pattern_type, group.name, group.principal)[0].add(acl_id)
        for row in added:
            change(row[1], row[3], row[2], row[4])[1].append((row[0], row[5], row[6], row[7]))
        rebuilt: list[Group] = []
        if not changes:
            return self, rebuilt
        types = list(self.types)
        for resource_type, per_type in changes.items():
            types[resource_type] = types[resource_type].updated(resource_type, per_type, rebuilt)
        return AclIndex(tuple(types)), rebuilt


AclIndex.EMPTY = AclIndex()


def pending_index_of(types: Mapping[int, Callable[[], tuple[dict[str, int], dict[str, int]]]],
                     make: Callable[[int], Node], columns) -> AclIndex:
    """``index_of`` with each resource type's (literal, prefixed) name -> position maps given by a function called
    when the type is first read (``PendingTypeIndex``)."""
    index_types = list(AclIndex.EMPTY.types)
    for resource_type, names in types.items():
        index_types[resource_type] = PendingTypeIndex(functools.partial(_type_of, names, make, columns))
    return AclIndex(tuple(index_types))


def _type_of(names: Callable[[], tuple[dict[str, int], dict[str, int]]], make: Callable[[int], Node],
             columns) -> TypeIndex:
    return TypeIndex.of(*names(), make, columns)


def index_of(stores: Mapping[tuple[int, int], dict[str, int]], make: Callable[[int], Node], columns) -> AclIndex:
    """The index of node placeholders ((resource type, pattern type) -> name -> position) that ``make`` makes into
    nodes on first use and ``columns`` answers an authorize for (``NodeMap``): how a table's, or a deferred
    image's, index is built."""
    types = list(AclIndex.EMPTY.types)
    for resource_type in {key[0] for key in stores}:
        literal = stores.get((resource_type, PatternType.LITERAL), {})
        prefixed = stores.get((resource_type, PatternType.PREFIXED), {})
        types[resource_type] = TypeIndex.of(literal, prefixed, make, columns)
    return AclIndex(tuple(types))
