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
``Unchanged`` one, whose index is the table's own; ``Changed`` holds deferred changes.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from itertools import repeat
from operator import itemgetter
from typing import cast

import immutables

from secmeta.events.records import AclRow, acl_row
from secmeta.events.types import AclBinding, PatternType
from secmeta.projections.acl_ids import AclIds
from secmeta.projections.acl_index import (
    KINDS,
    AclIndex,
    Group,
    Member,
    Node,
    group_of,
    index_of,
    lazy_view,
    node_of,
)
from secmeta.projections.acl_section import MappedAclTable
from secmeta.projections.layered_map import EMPTY_MAP

__all__ = ["DEFER_FROM", "Deferred", "deferred_of"]

DEFER_FROM = 1000  # changes from which a delta onto a deferred image is merged, not applied node by node
_MISSING = object()
_PREFIXED = int(PatternType.PREFIXED)  # compared as an int: an enum member's comparison is a Python call


def _not_made() -> None:
    """A dead weak reference: the ids or index not made yet."""
    return None


# A row's member of its group and its id (row[0] is the id its changes key it by: ``AclRow``).
_MEMBER, _ACL_ID = itemgetter(0, 5, 6, 7), itemgetter(0)

_ROW_TYPES = frozenset((tuple, type(None)))
_TABLE_ACL_BYTES, _CHANGE_BYTES, _NAME_BYTES = 40, 1000, 70  # see ``table_bytes`` and ``own_bytes``
Key = tuple[int, int, str]  # resource type, pattern type, name
Entry = tuple[dict[str, set[str]], dict[str, list[Member]]]  # a node's changes: removed ids, added ACLs, by principal


class Deferred:
    """The ACL image of a table plus changes by id (None: removed), as ``(AclIds, AclIndex)`` made lazily: the table's
    own (``Unchanged``, what ``of`` gives), or with changes deferred (``Changed``, what ``applied`` gives).

    The changes are gathered by node once: an image with more changes deferred (``applied``) copies the gathered
    state and gathers only the new changes, copying the nodes' entries they touch (issue 24: a point past a held
    answer gathered every change since the file again, about 0.5 s of a point's 0.6 s at 2M events)."""

    __slots__ = ("table", "changes", "_acls", "_index", "_pending", "_added", "_added_at", "_added_keys", "_key_at",
                 "_size", "_own")

    def __init__(self, table: MappedAclTable):
        """The fields of ``table``'s image with no change deferred (``Changed`` copies them from the image it is
        applied to)."""
        self.table = table
        # Persistent maps, shared with the images applied onto this one but for what their own changes copy:
        self.changes: immutables.Map = EMPTY_MAP  # id -> its row, or None: removed
        # per node key the changes touch: the removed ids of the table's ACLs by principal, the added ACLs by principal
        self._pending: immutables.Map = EMPTY_MAP
        self._added_at: immutables.Map = EMPTY_MAP  # id -> its added row's placeholder
        self._added: list[AclRow] = []  # the rows the changes added, by placeholder - ACLs (one replaced stays)
        self._added_keys: list[Key] = []  # keys no table node holds, by placeholder - nodes
        self._key_at: dict[Key, int] = {}  # such a key -> its placeholder
        self._size = len(table.section_ids)
        self._own = 0  # changes gathered by this image (not by the one it was applied to)
        self._acls: Callable[[], AclIds | None] = _not_made
        self._index: Callable[[], AclIndex | None] = _not_made

    @classmethod
    def of(cls, table: MappedAclTable) -> Deferred:
        """The image of ``table`` with no change deferred."""
        return Unchanged(table)

    def applied(self, changes: Mapping[str, AclBinding | AclRow | None], held: Container[str] | None = None
                ) -> Deferred:
        """This image with ``changes`` (later ones win) deferred too (given as bindings or rows).  The nodes the
        new changes do not touch are this image's, made or not (their changes are the same).  ``held``, when
        known, holds every id of ``changes`` that the table holds (a delta checkpoint file records them): the
        others are not looked up in the table's hash table; given as a dict (``where``), where the table holds each
        too, checked and used instead of a lookup (``MappedAclTable.located``)."""
        new = object.__new__(Changed)
        new.table, new._size, new._added = self.table, self._size, list(self._added)
        new.changes, new._pending, new._added_at = self.changes, self._pending, self._added_at
        new._added_keys, new._key_at = list(self._added_keys), dict(self._key_at)
        new._stores = {kind: dict(names) for kind, names in self._maps().items()}
        new._own = len(changes)
        new._touch(new._gather(changes, held))
        new._acls, new._index = _not_made, _not_made
        return new

    def _maps(self) -> Mapping[tuple[int, int], dict]:
        """(resource type, pattern type) -> name -> placeholder, or the node made for it: this image's index maps'
        dicts, for an image applied onto this one to copy (never changed)."""
        raise NotImplementedError

    def where(self, acl_ids: Iterable[str]) -> dict[str, tuple[int, int]] | None:
        """For an image with no change deferred: where its table holds those of ``acl_ids`` it holds (id -> (position,
        group): ``MappedAclTable.where``), which a delta checkpoint file records and its ``applied`` (``held``) checks
        and uses instead of a lookup per id; else None."""
        return None

    # The image's ids and index refer to this object (their lookups make its nodes and groups); it refers to them
    # only weakly.  Issue 24: an image read in place was a reference cycle (index -> node maps -> self.node -> self
    # -> index), which reference counting never frees; once ``gc.freeze()`` (``paused_gc``) had moved it out of the
    # collector's reach, time travel's eviction of a file's lineage freed nothing, and RSS went past the budget.

    @property
    def acls(self) -> AclIds:
        """This image's ids (made again when nothing holds them any more)."""
        acls = self._acls()
        if acls is None:
            acls = AclIds(_DeferredIds(self), self.group)  # type: ignore[arg-type]
            self._acls = weakref.ref(acls)
        return acls

    @property
    def index(self) -> AclIndex:
        """This image's index (made again when nothing holds it any more)."""
        index = self._index()
        if index is None:
            index = self._made_index()
            self._index = weakref.ref(index)
        return index

    def _made_index(self) -> AclIndex:
        raise NotImplementedError

    def nbytes(self) -> int:
        """Estimated bytes this image holds: its table's (``table_bytes``) and its own (``own_bytes``)."""
        return self.table_bytes() + self.own_bytes()

    def table_bytes(self) -> int:
        """Estimated bytes of the table as loaded: its section's, plus what a load makes per ACL (each ACL's host
        and each group's principal listed, codes and offsets copied; ~38 B per ACL on the mixed log, tracemalloc)."""
        return self.table.nbytes + _TABLE_ACL_BYTES * len(self.table.section_ids)

    def own_bytes(self) -> int:
        """Estimated bytes of what this image holds beyond the image it was applied to: its index maps' dicts and
        added rows' list (copied), and per change it gathered, the row and its share of the persistent maps and of
        its node's gathered entry (tracemalloc on the mixed log: ~1 kB per change, ~70 B per node name)."""
        return _NAME_BYTES * self._names() + 8 * len(self._added) + _CHANGE_BYTES * self._own

    def _names(self) -> int:
        """How many names this image's index maps hold (or will, once each type is read)."""
        raise NotImplementedError

    def columns_of(self, i: int) -> MappedAclTable | None:
        """The table whose columns list placeholder ``i``'s node as this image holds it, or None (a node changed
        or new)."""
        return None if self._changed(i) else self.table

    def pristine(self, acls: AclIds, index: AclIndex) -> bool:
        """Whether ``acls`` and ``index`` are this image's, unchanged."""
        return acls is self._acls() and index is self._index()

    def _changed(self, i: int) -> bool:
        """Whether the changes touch placeholder ``i``'s node (a new node's, past the table's, always)."""
        table = self.table
        return i >= len(table.names) or (table.resource_types[i], table.pattern_types[i], table.names[i]) in self._pending

    # -- the changes by node -------------------------------------------------------------

    def _gather(self, changes: Mapping[str, AclBinding | AclRow | None], held: Container[str] | None = None
                ) -> dict[Key, Entry]:
        """Record ``changes`` onto the gathered state; the entries of the nodes they touch, by key (each one's dicts
        copied from the image this one was applied to before its first edit here, their sets and lists shared with it
        and never changed in place: an edit puts a new one in).

        Issue 24: recording a change cost ~10 us, a replay of 100k events past a checkpoint over a second.  The ids
        changes, placeholders and node entries are gathered in plain dicts and each persistent map is updated once at
        the end (an id comes once in ``changes``, so what an earlier image recorded is all an id's change meets), and
        a removed ACL's node and principal are found with one search of each start column (``held_at``).  The changes
        are taken in three passes, each over only the ids it concerns (C-level passes split them): the table's ACLs
        removed or replaced, the rows earlier images added taken back, then the rows added, in order (an id comes
        once, so a row added here is never one taken back here; a member list keeps its order); removals and rows
        are grouped by node and principal first, and each group's set or list joined to its entry's once."""
        table, old, rows = self.table, self.changes, self._added
        ids = list(changes)
        values: list = list(changes.values())
        if not _ROW_TYPES.issuperset(map(type, values)):  # bindings (a write's): as rows
            values = [given if given is None or type(given) is tuple else acl_row(acl_id, given)
                      for acl_id, given in zip(ids, values)]
        if old:  # an id an earlier image changed: its row taken back (a removal left nothing to take back)
            priors = list(map(old.get, ids, repeat(_MISSING)))
            taken = [(acl_id, prior) for acl_id, prior in zip(ids, priors)
                     if prior is not _MISSING and prior is not None]
            first_here = [acl_id for acl_id, prior in zip(ids, priors) if prior is _MISSING]
        else:
            taken, first_here = [], ids
        fresh = first_here if held is None else [acl_id for acl_id in first_here if acl_id in held]
        where = cast(dict[str, tuple[int, int]], held) if type(held) is dict else None  # see ``Deferred.where``
        held_at, old_entry = table.held_at, self._pending.get
        edits: dict[Key, Entry] = {}

        def entry(key: Key) -> Entry:
            made = old_entry(key)
            made = edits[key] = (dict(made[0]), dict(made[1])) if made is not None else ({}, {})
            return made

        removed: dict[tuple[Key, str], set[str]] = {}  # the table's ACLs removed, by node and principal
        for acl_id in fresh:  # first changed here: the table's ACL, if it holds the id, is removed
            found = None if where is None else table.located(acl_id, *where[acl_id])
            if found is None:
                position = table.position(acl_id)
                if position < 0:
                    continue
                found = held_at(position)
            removed.setdefault(found, set()).add(acl_id)
        for (key, principal), ids_removed in removed.items():
            gone = (edits.get(key) or entry(key))[0]
            were = gone.get(principal)
            gone[principal] = ids_removed if were is None else were | ids_removed
        for acl_id, was in taken:  # added by earlier changes: taken back
            key = (was[1], was[3], was[2])
            members = (edits.get(key) or entry(key))[1]
            members[was[4]] = [m for m in members[was[4]] if m[0] != acl_id]
        added = list(filter(None, values))  # the rows (a row is a non-empty tuple, a removal None), in order
        grouped: dict[tuple[Key, str], list[Member]] = {}  # the rows added, by node and principal, in order
        for row, member in zip(added, map(_MEMBER, added)):
            grouped.setdefault(((row[1], row[3], row[2]), row[4]), []).append(member)
        for (key, principal), members_added in grouped.items():
            members = (edits.get(key) or entry(key))[1]
            listed = members.get(principal)
            members[principal] = members_added if listed is None else listed + members_added
        size = self._size - sum(map(len, removed.values()))
        placeholder = len(table.section_ids) + len(rows)
        added_at = dict(zip(map(_ACL_ID, added), range(placeholder, placeholder + len(added))))
        rows += added
        self._size = size - len(taken) + len(added)
        self.changes, self._pending = old.update(zip(ids, values)), self._pending.update(edits)
        if taken:
            mutation = self._added_at.mutate()
            for acl_id, _ in taken:
                del mutation[acl_id]
            mutation.update(added_at)
            self._added_at = mutation.finish()
        else:
            self._added_at = self._added_at.update(added_at)
        return edits

    # -- what lookups make ---------------------------------------------------------------

    def node(self, i: int) -> Node:
        """Node ``i``: the table's, with its changes applied (a placeholder past the table's nodes: a new node).

        A table's node is a ``Lazy`` view (``Patched``) whose groups the changes touch are made with them, the others
        read from the table as its own node reads them: an authorize reads its principal's and ``User:*``'s alone, a
        describe their entries from the columns (issue 24: a point past a checkpoint file made every group of a node
        its changes touched, each decoding its ids as text, ~0.08 s of a point's four questions on the mixed log)."""
        table = self.table
        if not self._changed(i):
            return table.node(i)
        ends = len(table.names)
        if i >= ends:
            return self._new_node(self._added_keys[i - ends])
        key = (table.resource_types[i], table.pattern_types[i], table.names[i])
        removed, added = self._pending[key]
        kind = KINDS[key[0], key[1]]
        first = table.group_start[i]
        principals: list[str] = []
        at: list[int] = []  # the table's position of each group of the node, by its place in ``principals``
        made: dict[int, Group] = {}  # the groups the changes touch, made with them, by their place
        for k, principal in enumerate(table.group_principals(i)):
            g = first + k
            if principal in removed or principal in added:
                group = table.group(i, g)
                gone = removed.get(principal, ())
                members = [m for m in group.fields() if m[0] not in gone]
                members += added.get(principal, ())
                if not members:
                    continue
                made[len(principals)] = group_of(sys.intern(group.principal), key[2], kind, members)
            principals.append(principal)
            at.append(g)
        for principal in sorted(added.keys() - set(principals) - removed.keys()):
            if added[principal]:
                made[len(principals)] = group_of(sys.intern(principal), key[2], kind, list(added[principal]))
                principals.append(principal)
                at.append(-1)
        if not principals:
            raise LookupError(f"node {key} was kept though its changes remove every ACL")
        return lazy_view(table, i, principals, at, made)

    def _new_node(self, key: Key) -> Node:
        """The node of a key no table node holds: the ACLs the changes add."""
        _, added = self._pending[key]
        kind = KINDS[key[0], key[1]]
        node = node_of([group_of(sys.intern(principal), key[2], kind, list(members))
                        for principal, members in added.items() if members])
        if node is None:
            raise LookupError(f"node {key} was kept though its changes remove every ACL")
        return node

    def node_bits(self, i: int, principal: str, host: str) -> int | None:
        """``AclTable.node_bits`` for placeholder ``i``: the table's columns answer for a node no change touches;
        None for one the changes touch (made, patched, by ``node``)."""
        return None if self._changed(i) else self.table.node_bits(i, principal, host)

    def group(self, placeholder: int) -> Group:
        """The group of the ACL at ``placeholder`` (a table position, or past them an added ACL) in this image."""
        raise NotImplementedError


class Unchanged(Deferred):
    """A table's image with no change deferred: its index is the table's own (each type's maps made when first read),
    so a first authorize pays no call through this image (issue 24: copies of every name map made at open were
    25-45 ms of the current shape's 0.15-0.18 s snapshot open at 200k ACLs)."""

    __slots__ = ()

    def _made_index(self) -> AclIndex:
        return self.table.index()

    def _maps(self) -> Mapping[tuple[int, int], dict]:
        """Each type's maps as this image's index made them (with the nodes made so far), or for a type it has not
        read yet, the table's (review 27: every type's were made again at the first ``applied``)."""
        maps: dict[tuple[int, int], dict] = {}
        for resource_type, type_index in enumerate(self.index.types):
            made = type_index.made_names()
            held = self.table.names_of(resource_type) if made is None else made
            for pattern_type, names in zip((PatternType.LITERAL, PatternType.PREFIXED), held, strict=True):
                if names:
                    maps[resource_type, pattern_type] = names
        return maps

    def _names(self) -> int:
        return len(self.table.names)

    def where(self, acl_ids: Iterable[str]) -> dict[str, tuple[int, int]] | None:
        return self.table.where(acl_ids)

    def group(self, placeholder: int) -> Group:
        return self.table.group_at(placeholder)


class Changed(Deferred):
    """An image with changes deferred onto a table's: its index maps hold a placeholder per node, each node a touched
    key's made with its changes (``node``) when a lookup first reaches it."""

    __slots__ = ("_stores",)

    # (resource type, pattern type) -> name -> placeholder, or the node made for it: the index maps' dicts
    _stores: dict[tuple[int, int], dict]

    def _maps(self) -> Mapping[tuple[int, int], dict]:
        return self._stores

    def _names(self) -> int:
        return sum(map(len, self._stores.values()))

    def _made_index(self) -> AclIndex:
        return index_of(self._stores, *((self.node, self) if self._pending else (self.table, self.table)))

    def _touch(self, touched: Mapping[Key, Entry]) -> None:
        """``_stores``, the table's nodes as the index holds them, with each touched key's node (``touched``: its
        entry) a placeholder to make with its changes (a new key's past the table's), or gone when they remove every
        ACL it held."""
        stores, table, key_at = self._stores, self.table, self._key_at
        ends, acl_count = len(table.names), table.acl_count
        maps: dict[tuple[int, int], tuple[dict, dict[str, int]]] = {}  # (its store, the table's names) by kind
        for key, (removed, added) in touched.items():
            kind = key[:2]
            held = maps.get(kind)
            if held is None:
                held = maps[kind] = (stores.setdefault(kind, {}), table.names_of(kind[0])[kind[1] == _PREFIXED])
            store, name = held[0], key[2]
            i = held[1].get(name)
            if i is None:
                if not any(added.values()):  # ACLs added on a new pattern and taken back: no node
                    store.pop(name, None)
                    continue
                i = key_at.get(key)
                if i is None:
                    i = key_at[key] = ends + len(self._added_keys)
                    self._added_keys.append(key)
                store[name] = i
            elif not removed or acl_count(i) - sum(map(len, removed.values())) + sum(map(len, added.values())) > 0:
                store[name] = i  # none of the node's ACLs removed: it keeps them all (a table's node holds one at least)
            else:
                store.pop(name, None)

    def _node_of(self, key: Key) -> Node | None:
        """The node at ``key`` as the index's maps make it (into the same dict: ``LayeredMap.get``), or None."""
        store = cast(dict[str, "int | Node"], self._stores.get(key[:2], {}))  # placeholders, or nodes made from them
        found = store.get(key[2])
        if type(found) is int:
            found = store[key[2]] = self.node(found)
        return cast("Node | None", found)

    def group(self, placeholder: int) -> Group:
        table = self.table
        acls = len(table.section_ids)
        if placeholder < acls:
            key, principal = table.held_at(placeholder)
        else:
            row = self._added[placeholder - acls]
            key, principal = (row[1], row[3], row[2]), row[4]
        node = self._node_of(key)
        group = None if node is None else node.group(principal)
        if group is None:
            raise LookupError(f"no group of {principal} at {key} holds a listed ACL")
        return group


class _DeferredIds:
    """acl_id -> placeholder (or the group made for it): the changes first, then the table's hash table."""

    __slots__ = ("_deferred", "_added", "_made")

    def __init__(self, deferred: Deferred):
        self._deferred = deferred
        self._added = deferred._added_at
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
