"""An ACL image read from a snapshot's section plus changes not yet applied: each node patched when first made.

Issue 24: a time-travel checkpoint of millions of ACLs answers a point past it after a replay of up to
a spacing of events; applying those changes to the index makes every node they touch (on the mixed
log at 10M events, ~40k nodes of ~40 ACLs each: the whole image, seconds and about a gigabyte), while a
question asks about a few resources.  ``Deferred`` is the image at a point as (the checkpoint's table,
every ACL change since it, by id): the index's maps hold a placeholder per node, and a node is made from
the table's columns with its own changes applied only when a lookup first reaches it; the id map finds
an id in the changes, else in the section's hash table.  Applying a large delta to such an image merges
the changes (``applied``) instead of making nodes; a small one (a write) goes through the ordinary
``AclIndex.updated``, which makes only the nodes it touches.  The image loaded from a section is the
``Deferred`` of no changes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping

from secmeta.events.types import AclBinding
from secmeta.projections.acl_ids import AclIds
from secmeta.projections.acl_index import (
    KINDS,
    AclIndex,
    Group,
    Member,
    Node,
    group_of,
    index_of,
    node_of,
)
from secmeta.projections.acl_section import MappedAclTable

__all__ = ["DEFER_FROM", "Deferred", "deferred_of"]

DEFER_FROM = 1000  # changes from which a delta onto a deferred image is merged, not applied node by node
_MISSING = object()
Key = tuple[int, int, str]  # resource type, pattern type, name


class Deferred:
    """The ACL image of a table plus changes by id (None: removed), as ``(AclIds, AclIndex)`` made lazily."""

    __slots__ = ("table", "changes", "acls", "index", "_pending", "_keys", "_added", "_added_keys", "_size",
                 "_changed")

    def __init__(self, table: MappedAclTable, changes: Mapping[str, AclBinding | None]):
        self.table, self.changes = table, dict(changes)
        self._pending: dict[Key, tuple[set[str], dict[str, list[Member]]]] = {}  # removed ids, principal -> added
        self._added: list[tuple[str, AclBinding]] = []  # ids the changes add, by placeholder - ACLs
        self._added_keys: list[Key] = []  # keys no table node holds, by placeholder - nodes
        self._changed: set[int] = set()  # the placeholders of the nodes the changes touch (made by ``node``)
        self._size = len(table.section_ids)
        self._gather()
        self.index = self._index()
        self.acls = AclIds(_DeferredIds(self), self.group)  # type: ignore[arg-type]

    @classmethod
    def of(cls, table: MappedAclTable) -> Deferred:
        return cls(table, {})

    def applied(self, changes: Mapping[str, AclBinding | None]) -> Deferred:
        """This image with ``changes`` (later ones win) deferred too."""
        return Deferred(self.table, {**self.changes, **changes})

    def nbytes(self) -> int:
        """Estimated bytes this image holds: the section's and about 350 per change (what replay costs)."""
        return self.table.nbytes + 350 * len(self.changes)

    def columns_of(self, i: int) -> MappedAclTable | None:
        """The table whose columns list placeholder ``i``'s node as this image holds it, or None (a node changed
        or new)."""
        return None if i in self._changed else self.table

    def pristine(self, acls: AclIds, index: AclIndex) -> bool:
        """Whether ``acls`` and ``index`` are this image's, unchanged."""
        return acls is self.acls and index is self.index

    # -- the changes by node -------------------------------------------------------------

    def _gather(self) -> None:
        table = self.table
        position_of = table.position
        for acl_id, binding in self.changes.items():
            position = position_of(acl_id)
            if position >= 0:
                self._removed(table.key_of(position), acl_id)
                self._size -= 1
            if binding is not None:
                pattern, entry = binding.pattern, binding.entry
                key = (pattern.resource_type, pattern.pattern_type, pattern.name)
                self._added_to(key, entry.principal).append((acl_id, entry.host, entry.operation,
                                                            entry.permission_type))
                self._added.append((acl_id, binding))
                self._size += 1

    def _change(self, key: Key) -> tuple[set[str], dict[str, list[Member]]]:
        change = self._pending.get(key)
        if change is None:
            change = self._pending[key] = (set(), {})
        return change

    def _removed(self, key: Key, acl_id: str) -> None:
        self._change(key)[0].add(acl_id)

    def _added_to(self, key: Key, principal: str) -> list[Member]:
        return self._change(key)[1].setdefault(principal, [])

    def _index(self) -> AclIndex:
        """The table's index with a placeholder for every node the changes touch (and each new one)."""
        table = self.table
        nodes = table.stores()
        stores = {kind: dict(names) for kind, names in nodes.items()}
        ends = len(table.names)
        for key, (removed, added) in self._pending.items():
            store = stores.setdefault(key[:2], {})
            i = nodes.get(key[:2], {}).get(key[2])
            if i is None:
                i = store[key[2]] = ends + len(self._added_keys)
                self._added_keys.append(key)
            elif table.acl_count(i) - len(removed) + sum(map(len, added.values())) > 0:
                store[key[2]] = i
            else:
                del store[key[2]]
            self._changed.add(i)
        # A node no change touches is the table's own (its Lazy view, made on first use): with no changes the maps
        # ask the table, so a first authorize pays no call through this image.
        return index_of(stores, self.node if self._pending else table)

    # -- what lookups make ---------------------------------------------------------------

    def node(self, i: int) -> Node:
        """Node ``i``: the table's, with its changes applied (a placeholder past the table's nodes: a new node)."""
        table = self.table
        if i not in self._changed:
            return table.node(i)
        ends = len(table.names)
        if i >= ends:
            key, old = self._added_keys[i - ends], None
        else:
            key, old = (table.resource_types[i], table.pattern_types[i], table.names[i]), table.node(i)
        removed, added = self._pending[key]
        kind = KINDS[key[0], key[1]]
        name = key[2] if old is None else next(iter(old.groups())).name
        groups = {} if old is None else {group.principal: group for group in old.groups()}
        touched = set(added)
        if removed:
            touched.update(group.principal for group in groups.values()
                           if any(acl_id in removed for acl_id in group.acl_ids()))
        for principal in touched:
            group = groups.get(principal)
            members = [] if group is None else [m for m in group.fields() if m[0] not in removed]
            members += added.get(principal, ())
            shared = principal if group is None else group.principal
            if members:
                groups[shared] = group_of(sys.intern(shared), name, kind, members)
            else:
                groups.pop(shared, None)
        node = node_of(list(groups.values()))
        if node is None:
            raise LookupError(f"node {key} was kept though its changes remove every ACL")
        return node

    def group(self, placeholder: int) -> Group:
        """The group of the ACL at ``placeholder`` (a table position, or past them an added ACL) in this image."""
        table = self.table
        acls = len(table.section_ids)
        if placeholder < acls:
            key, principal = table.key_of(placeholder), table.principal_of(placeholder)
        else:
            binding = self._added[placeholder - acls][1]
            pattern = binding.pattern
            key, principal = (pattern.resource_type, pattern.pattern_type, pattern.name), binding.entry.principal
        node = self.index.node(*key)
        group = None if node is None else node.group(principal)
        if group is None:
            raise LookupError(f"no group of {principal} at {key} holds a listed ACL")
        return group


class _DeferredIds:
    """acl_id -> placeholder (or the group made for it): the changes first, then the table's hash table."""

    __slots__ = ("_deferred", "_added", "_made")

    def __init__(self, deferred: Deferred):
        self._deferred = deferred
        acls = len(deferred.table.section_ids)
        self._added = {acl_id: acls + n for n, (acl_id, _) in enumerate(deferred._added)}
        self._made: dict[str, Group] = {}

    def get(self, key, default=None):
        value = self._made.get(key, _MISSING)
        if value is not _MISSING:
            return value
        changes = self._deferred.changes
        if key in changes:
            return default if changes[key] is None else self._added[key]
        position = self._deferred.table.position(key)
        return default if position < 0 else position

    def __getitem__(self, key):
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __setitem__(self, key, value) -> None:
        if key not in self:
            raise KeyError(f"{key!r} is not held: a deferred id table only records made values")
        self._made[key] = value

    def __contains__(self, key: object) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def __len__(self) -> int:
        return self._deferred._size

    def __iter__(self) -> Iterator[str]:
        changes = self._deferred.changes
        for acl_id in self._deferred.table.section_ids.all():
            if acl_id not in changes:
                yield acl_id
        yield from self._added

    def keys(self) -> Iterator[str]:
        return iter(self)

    def items(self) -> Iterator[tuple]:
        for key in self:
            yield key, self.get(key)


def deferred_of(acls: AclIds, index: AclIndex) -> Deferred | None:
    """The ``Deferred`` whose unchanged image these are, or None."""
    owner = getattr(acls.source, "__self__", None)
    return owner if isinstance(owner, Deferred) and owner.pristine(acls, index) else None
