"""The authorizer index of an ACL image, built from persistent (HAMT) maps.

Per resource type (``TypeIndex``): literal names and prefixes each map to a
node; a node holds one ``Group`` per principal (a single principal's group
is the node itself); a group folds its ACLs into packed masks per host (see
``acl_match``).  A lookup probes the literal name, the literal ``*`` and
only the prefix lengths that exist for the type.  ``grants`` indexes the
same groups by principal, then by (operation, permission, pattern type),
for ``authorize_by_resource_type``.  Updates replace only the touched
groups, nodes and map paths, so untouched structure is shared.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import immutables

from events.types import WILDCARD, WILDCARD_PRINCIPAL, AclBinding, PatternType
from projections.acl_match import ACL_BITS, DENY_SHIFT, acl_network, client_address

__all__ = [
    "AclIndex",
    "EMPTY_MAP",
    "Group",
    "Multi",
    "Node",
    "TypeIndex",
    "grant_key",
]

EMPTY_MAP: immutables.Map = immutables.Map()
_TYPE_CODES = 8  # ResourceType codes 0..7
_PREFIXED_KEY = 2 * DENY_SHIFT


def grant_key(operation: int, deny: bool, prefixed: bool) -> int:
    """The key of ``TypeIndex.grants[principal]`` for one (operation, permission, pattern)."""
    return operation + (DENY_SHIFT if deny else 0) + (_PREFIXED_KEY if prefixed else 0)


_SHARED_MASKS: dict[int, int] = {}


def _shared(mask: int) -> int:
    """One int object per distinct mask value (masks repeat across groups)."""
    if len(_SHARED_MASKS) < 65536:
        return _SHARED_MASKS.setdefault(mask, mask)
    return mask


class Group:
    """The ACLs of one principal on one resource pattern, as packed masks.

    ``any_host`` holds the bits of host-``*`` ACLs; ``hosts`` (or None) maps
    every other ACL host string to its bits; ``nets`` (or None) lists the
    CIDR hosts as (version, network, netmask, bits).  ``ids`` is one ACL id
    or a sorted tuple of them.
    """

    __slots__ = ("principal", "ids", "any_host", "hosts", "nets")

    def __init__(self, principal, ids, any_host, hosts, nets):
        self.principal: str = principal
        self.ids: str | tuple[str, ...] = ids
        self.any_host: int = any_host
        self.hosts: dict[str, int] | None = hosts
        self.nets: tuple[tuple[int, int, int, int], ...] | None = nets

    def host_bits(self, host: str) -> int:
        """The packed bits of this group's ACLs that apply to a client host."""
        hosts = self.hosts
        if hosts is None:
            return self.any_host
        bits = self.any_host | hosts.get(host, 0)
        nets = self.nets
        if nets is not None:
            address = client_address(host)
            if address is not None:
                version, value = address
                for net_version, network, netmask, mask in nets:
                    if net_version == version and value & netmask == network:
                        bits |= mask
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

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Group):
            return NotImplemented
        return (
            self.principal == other.principal
            and self.ids == other.ids
            and self.any_host == other.any_host
            and self.hosts == other.hosts
            and self.nets == other.nets
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Group({self.principal!r}, ids={self.ids!r}, any_host={self.any_host:#x}, hosts={self.hosts!r})"


class Multi:
    """A node with groups of several principals (principal -> Group)."""

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


Node = Group | Multi


Entries = list[tuple[str, AclBinding]]


def _build_group(principal: str, entries: Entries) -> Group | None:
    """Fold (acl_id, binding) pairs of one principal on one pattern into a Group."""
    if not entries:
        return None
    if len(entries) == 1:
        acl_id, binding = entries[0]
        entry = binding.entry
        if entry.host == WILDCARD:
            bit = ACL_BITS[entry.permission_type][entry.operation]
            return Group(principal, acl_id, bit, None, None)
    any_host = 0
    hosts: dict[str, int] | None = None
    for _, binding in entries:
        entry = binding.entry
        bit = ACL_BITS[entry.permission_type][entry.operation]
        host = entry.host
        if host == WILDCARD:
            any_host |= bit
        else:
            if hosts is None:
                hosts = {}
            hosts[host] = hosts.get(host, 0) | bit
    nets = None
    if hosts is not None:
        hosts = {host: _shared(mask) for host, mask in hosts.items()}
        found = []
        for host, mask in hosts.items():
            network = acl_network(host)
            if network is not None:
                found.append((*network, mask))
        nets = tuple(sorted(found)) or None
    if len(entries) == 1:
        ids: str | tuple[str, ...] = entries[0][0]
    else:
        ids = tuple(sorted(acl_id for acl_id, _ in entries))
    return Group(principal, ids, _shared(any_host), hosts, nets)


def _node_with(node: Node | None, updates: dict[str, Group | None]) -> Node | None:
    """The node after replacing (or, for None, dropping) some principals' groups."""
    if isinstance(node, Multi):
        mutation = node.by_principal.mutate()
        for principal, group in updates.items():
            if group is None:
                mutation.pop(principal, None)
            else:
                mutation[principal] = group
        by_principal = mutation.finish()
        if len(by_principal) > 1:
            return Multi(by_principal)
        return next(iter(by_principal.values()), None)
    groups = {} if node is None else {node.principal: node}
    for principal, group in updates.items():
        if group is None:
            groups.pop(principal, None)
        else:
            groups[principal] = group
    if len(groups) > 1:
        return Multi(immutables.Map(groups))
    return next(iter(groups.values()), None)


def _grant_keys(group: Group | None, prefixed: bool) -> list[int]:
    """The grant keys a group is listed under (one per set bit)."""
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


@dataclass(frozen=True, slots=True)
class TypeIndex:
    """The index of one resource type's ACLs."""

    literal: immutables.Map = EMPTY_MAP  # name -> Node (including '*')
    prefixed: immutables.Map = EMPTY_MAP  # prefix -> Node
    wildcard: Node | None = None  # literal '*' node, kept apart for the hot path
    lengths: tuple[int, ...] = ()  # sorted distinct lengths of the prefixes
    length_counts: immutables.Map = EMPTY_MAP  # length -> number of prefixes
    grants: immutables.Map = EMPTY_MAP  # principal -> Map(grant_key -> Map(name -> Group))

    def applicable_nodes(self, name: str) -> Iterator[Node]:
        """Nodes whose pattern covers a resource name: literal, '*', then prefixes."""
        node = self.literal.get(name)
        if node is not None:
            yield node
        if name != WILDCARD and self.wildcard is not None:
            yield self.wildcard
        get = self.prefixed.get
        size = len(name)
        for length in self.lengths:
            if length > size:
                break
            node = get(name[:length])
            if node is not None:
                yield node

    def updated(self, changes: dict, acls: Mapping[str, AclBinding]) -> TypeIndex:
        """Apply {(pattern type, name): {principal: (removed ids, added entries)}}."""
        literal = self.literal.mutate()
        prefixed = self.prefixed.mutate()
        counts = self.length_counts.mutate()
        grants = _GrantsUpdate(self.grants)
        for (pattern_type, name), per_principal in changes.items():
            is_prefixed = pattern_type == PatternType.PREFIXED
            store = prefixed if is_prefixed else literal
            node = store.get(name)
            updates: dict[str, Group | None] = {}
            for principal, (gone, new) in per_principal.items():
                old = None if node is None else node.group(principal)
                if old is not None:
                    kept = [(i, acls[i]) for i in old.acl_ids() if i not in gone]
                    new = kept + new
                group = _build_group(principal, new)
                updates[principal] = group
                grants.replace(principal, is_prefixed, name, old, group)
            new_node = _node_with(node, updates)
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
        return _type_index(literal.finish(), prefixed.finish(), counts.finish(), grants.finish())


def _type_index(literal, prefixed, length_counts, grants) -> TypeIndex:
    return TypeIndex(
        literal=literal,
        prefixed=prefixed,
        wildcard=literal.get(WILDCARD),
        lengths=tuple(sorted(length_counts.keys())),
        length_counts=length_counts,
        grants=grants,
    )


def _built(sources: tuple[dict[str, Entries], dict[str, Entries]]) -> TypeIndex:
    """A type index from (literal, prefixed) name -> entries, built in dicts then frozen.

    Most patterns hold one ACL: that group is made inline (its one bit is its
    one grant key); grants gather in one flat (principal, key) table, nested
    once at the end.
    """
    nodes: tuple[dict[str, Node], dict[str, Node]] = ({}, {})
    grants: dict[tuple[str, int], dict[str, Group]] = {}
    facts: dict[int, tuple[str, int, bool]] = {}  # id(entry) -> (principal, bit, host is '*')
    bits_of = ACL_BITS
    for prefixed in (0, 1):
        offset = _PREFIXED_KEY if prefixed else 0
        out = nodes[prefixed]
        for name, entries in sources[prefixed].items():
            if len(entries) == 1:
                acl_id, binding = entries[0]
                entry = binding.entry
                fact = facts.get(id(entry))
                if fact is None:
                    fact = facts[id(entry)] = (
                        entry.principal,
                        bits_of[entry.permission_type][entry.operation],
                        entry.host == WILDCARD,
                    )
                principal, bit, any_host = fact
                if any_host:
                    group = out[name] = Group(principal, acl_id, bit, None, None)
                    key = (principal, bit.bit_length() - 1 + offset)
                    table = grants.get(key)
                    if table is None:
                        grants[key] = {name: group}
                    else:
                        table[name] = group
                    continue
                members: Sequence[Group] = (_build_group(principal, entries),)
            else:
                per_principal: dict[str, Entries] = {}
                for pair in entries:
                    per_principal.setdefault(pair[1].entry.principal, []).append(pair)
                members = [_build_group(p, e) for p, e in per_principal.items()]
            for member in members:
                bits = member.union_bits()
                while bits:
                    low = bits & -bits
                    key = (member.principal, low.bit_length() - 1 + offset)
                    table = grants.get(key)
                    if table is None:
                        grants[key] = {name: member}
                    else:
                        table[name] = member
                    bits ^= low
            if len(members) == 1:
                out[name] = members[0]
            else:
                out[name] = Multi(immutables.Map({m.principal: m for m in members}))
    counts: dict[int, int] = {}
    for name in nodes[1]:
        counts[len(name)] = counts.get(len(name), 0) + 1
    nested: dict[str, dict[int, immutables.Map]] = {}
    for (principal, key), table in grants.items():
        tables = nested.get(principal)
        if tables is None:
            tables = nested[principal] = {}
        tables[key] = immutables.Map(table)
    return _type_index(
        immutables.Map(nodes[0]),
        immutables.Map(nodes[1]),
        immutables.Map(counts),
        immutables.Map({principal: immutables.Map(tables) for principal, tables in nested.items()}),
    )


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


@dataclass(frozen=True, slots=True)
class AclIndex:
    """All resource types' indexes, by ResourceType code."""

    types: tuple[TypeIndex, ...] = (_EMPTY_TYPE,) * _TYPE_CODES
    EMPTY: ClassVar[AclIndex]

    def type_index(self, resource_type: int) -> TypeIndex:
        return self.types[resource_type]

    def node(self, resource_type: int, pattern_type: int, name: str) -> Node | None:
        """The node of one exact pattern (LITERAL or PREFIXED), if any ACL has it."""
        t = self.types[resource_type]
        if pattern_type == PatternType.LITERAL:
            return t.literal.get(name)
        if pattern_type == PatternType.PREFIXED:
            return t.prefixed.get(name)
        return None

    def updated(
        self,
        removed: Iterable[tuple[str, AclBinding]],
        added: Iterable[tuple[str, AclBinding]],
        acls: Mapping[str, AclBinding],
    ) -> AclIndex:
        """A new index with ACLs removed and added; ``acls`` is the new id map."""
        if not removed and self.is_empty():
            return AclIndex._bulk(added)
        changes: dict[int, dict] = {}
        for position, pairs in ((0, removed), (1, added)):
            for acl_id, binding in pairs:
                pattern = binding.pattern
                per_type = changes.get(pattern.resource_type)
                if per_type is None:
                    per_type = changes[pattern.resource_type] = {}
                key = (pattern.pattern_type, pattern.name)
                per_pattern = per_type.get(key)
                if per_pattern is None:
                    per_pattern = per_type[key] = {}
                principal = binding.entry.principal
                change = per_pattern.get(principal)
                if change is None:
                    change = per_pattern[principal] = (set(), [])
                if position == 0:
                    change[0].add(acl_id)
                else:
                    change[1].append((acl_id, binding))
        if not changes:
            return self
        types = list(self.types)
        for resource_type, per_type in changes.items():
            types[resource_type] = types[resource_type].updated(per_type, acls)
        return AclIndex(tuple(types))

    def is_empty(self) -> bool:
        return all(not t.literal and not t.prefixed for t in self.types)

    @staticmethod
    def _bulk(added: Iterable[tuple[str, AclBinding]]) -> AclIndex:
        """An index of additions only (a snapshot load): one pass, then per-type builds."""
        sources: dict[int, tuple[dict[str, Entries], dict[str, Entries]]] = {}
        prefixed_type = PatternType.PREFIXED
        for pair in added:
            pattern = pair[1].pattern
            by_pattern = sources.get(pattern.resource_type)
            if by_pattern is None:
                by_pattern = sources[pattern.resource_type] = ({}, {})
            store = by_pattern[pattern.pattern_type == prefixed_type]
            entries = store.get(pattern.name)
            if entries is None:
                store[pattern.name] = [pair]
            else:
                entries.append(pair)
        types = list(AclIndex.EMPTY.types)
        for resource_type, by_pattern in sources.items():
            types[resource_type] = _built(by_pattern)
        return AclIndex(tuple(types))


AclIndex.EMPTY = AclIndex()
