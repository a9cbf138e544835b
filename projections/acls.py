"""The immutable ACL image and the delta that derives the next one.

As Kafka's AclsImage/AclsDelta: an image is a value (``AclsImage.EMPTY`` to
start); ``AclsDelta(image)`` records adds and removes by ACL id and
``apply()`` returns a new image that shares every untouched part of the old
one (persistent maps: O(k log n) for k changes).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress
from operator import itemgetter
from types import MappingProxyType
from typing import ClassVar, Literal, overload

from secmeta.events.errors import InvalidValueError
from secmeta.events.records import AclRow, acl_row, row_binding
from secmeta.events.types import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from secmeta.projections.acl_deferred import DEFER_FROM, deferred_of
from secmeta.projections.acl_entries import canonical_entry
from secmeta.projections.acl_ids import AclIds
from secmeta.projections.acl_index import (
    AclIndex,
    Few,
    Group,
    Multi,
    Node,
    node_entries,
    node_pattern,
)
from secmeta.projections.acl_match import entry_filter_matches
from secmeta.projections.acl_table import AclTable, TableError
from secmeta.projections.errors import InconsistentEventError
from secmeta.projections.gc_pause import paused_gc
from secmeta.projections.kept_by_object import KeptByObject

__all__ = ["AclsDelta", "AclsImage", "canonical_entry"]


@dataclass(frozen=True, slots=True, repr=False)
class AclsImage:
    """Every ACL by id, plus the authorizer index derived from them.

    ``acls`` maps each id to the index group that holds the ACL; bindings
    are made from it when asked for (``get``, iteration, ``matching``).
    """

    acls: AclIds = field(default_factory=lambda: AclIds.EMPTY)  # acl_id -> Group
    index: AclIndex = AclIndex.EMPTY
    EMPTY: ClassVar[AclsImage]

    def __repr__(self) -> str:
        return f"AclsImage(<{len(self.acls)} ACLs>)"

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, AclBinding]]) -> AclsImage:
        """An image holding these (acl_id, binding) pairs, e.g. from a snapshot (a later id wins).

        The index is built once, in bulk, as columns (``AclTable``).
        """
        with paused_gc():
            return cls.of_table(AclTable.of_rows({acl_id: acl_row(acl_id, _indexable(binding))
                                                  for acl_id, binding in pairs}.values()))

    @classmethod
    def of_table(cls, table: AclTable) -> AclsImage:
        """The image of a table's ACLs, each node and group made when first used (TableError if an id is listed
        twice)."""
        if not table.ids:
            return cls.EMPTY
        return cls(AclIds(table.id_positions(), table.group_at), table.index())

    def get(self, acl_id: str) -> AclBinding | None:
        group = self.acls.get(acl_id)
        return None if group is None else group.binding(acl_id)

    def __len__(self) -> int:
        return len(self.acls)

    def __contains__(self, acl_id: object) -> bool:
        return acl_id in self.acls

    def __iter__(self) -> Iterator[tuple[str, AclBinding]]:
        """(acl_id, binding) pairs, in no particular order."""
        for group in self.index.groups():
            yield from group.pairs()

    def find(self, binding: AclBinding) -> str | None:
        """The id of an ACL equal to ``binding`` in all seven fields, or None."""
        pattern = binding.pattern
        node = self.index.node(pattern.resource_type, pattern.pattern_type, pattern.name)
        group = None if node is None else node.group(binding.entry.principal)
        if group is None:
            return None
        entry = binding.entry
        for acl_id, held in group.members():
            if held == entry:
                return acl_id
        return None

    @overload
    def selection(self, f: AclBindingFilter, *, whole_nodes: Literal[False] = False
                  ) -> Iterator[tuple[Group, list[tuple[str, AccessControlEntry]] | None]]: ...

    @overload
    def selection(self, f: AclBindingFilter, *, whole_nodes: bool
                  ) -> Iterator[tuple[Group | Node, list[tuple[str, AccessControlEntry]] | None]]: ...

    def selection(self, f: AclBindingFilter, *, whole_nodes: bool = False
                  ) -> Iterator[tuple[Group | Node, list[tuple[str, AccessControlEntry]] | None]]:
        """Each index group holding ACLs the filter selects (Kafka filter rules), with the (acl_id, entry)
        pairs it selects, or None when it selects every ACL of the group.  With ``whole_nodes``, a node
        whose every ACL the filter selects (a filter on the pattern alone) comes as the node itself, with
        None: all of its groups (one pattern; a node of one principal is that principal's group).

        The index does the pattern and principal part of the rules: a filter naming a resource visits only
        the nodes that hold that exact pattern (or, with MATCH, the name's literal node, '*' and the name's
        prefixes); one without a name but with a resource type walks that type; otherwise it walks every
        type.  Every group of a visited node has a pattern the filter selects, and a filter naming a
        principal takes only that principal's group.  So only host, operation and permission are left to
        check, per ACL, and only when the filter restricts them.  Groups are immutable values shared by the
        images that hold them: the same group object is the same ACLs.
        """
        pf, ef = f.pattern, f.entry
        principal = ef.principal
        checks_entries = (ef.host is not None or ef.operation != _ANY_OPERATION
                          or ef.permission_type != _ANY_PERMISSION)
        if pf.resource_type == _ANY_TYPE:
            types = range(len(self.index.types))
        else:
            types = (pf.resource_type,)
        for resource_type in types:
            for node in _filter_nodes(self.index, resource_type, pf.pattern_type, pf.name):
                if principal is None:
                    if whole_nodes and not checks_entries:
                        yield node, None
                        continue
                    groups = node.groups()
                else:
                    group = node.group(principal)
                    if group is None:
                        continue
                    groups = (group,)
                for group in groups:
                    if not checks_entries:
                        yield group, None
                        continue
                    members = group.members()
                    chosen = [(acl_id, entry) for acl_id, entry in members if entry_filter_matches(ef, entry)]
                    if chosen:
                        yield group, (None if len(chosen) == len(members) else chosen)

    def matching(self, f: AclBindingFilter) -> Iterator[tuple[str, AclBinding]]:
        """(acl_id, binding) of every ACL the filter selects (Kafka filter rules, see ``selection``).

        A whole group's pairs are kept by group (``_GROUP_PAIRS``: a group is immutable, so its bindings are
        too), so a describe of a resource that many ACLs match (a wildcard or a short prefix) builds none of
        them again until a write replaces the group."""
        pattern = ResourcePattern(ResourceType.UNKNOWN, "")    # (made anew for the first group)
        name = kind = None
        for group, chosen in self.selection(f):
            if chosen is None:
                yield from _pairs_of(group)
                continue
            if group.name is not name or group.kind is not kind:   # a node's groups share one name and kind
                name, kind = group.name, group.kind
                pattern = group.pattern()
            for acl_id, entry in chosen:
                yield acl_id, AclBinding(pattern, entry)

    def bindings(self, f: AclBindingFilter) -> Iterator[AclBinding]:
        """The binding of every ACL the filter selects, as ``matching`` gives them but without their ids: a whole node
        (or group) selected gives its bindings from its entries (``node_entries``: a ``Lazy`` node's read from its
        table's columns, making no group and reading no id), kept by node or group (``_GROUP_PAIRS``) as ``matching``
        keeps a group's pairs.  Issue 24: a describe at a point past a checkpoint file made every group of the nodes
        it returned (thousands of ACLs for a topic's short prefixes on the mixed log), each decoding its ids as text
        for an answer that holds none."""
        for item, chosen in self.selection(f, whole_nodes=True):
            if chosen is None:
                yield from _bindings_of(item)
                continue
            pattern = item.pattern()  # type: ignore[union-attr]  # only groups come with entries chosen
            for _, entry in chosen:
                yield AclBinding(pattern, entry)

    def describe(self, f: AclBindingFilter) -> list[tuple[str, AclBinding]]:
        """The ACLs a filter selects, as a list of (acl_id, binding) in no set order."""
        return list(self.matching(f))


AclsImage.EMPTY = AclsImage()

#: (acl_id, binding) pairs of whole groups, kept by group: at most 256k pairs (~40 MB at most).
_GROUP_PAIRS = KeptByObject(limit=65536, budget=262144)


def _pairs_of(group: Group) -> tuple[tuple[str, AclBinding], ...]:
    """``group.pairs()``, kept while the group lives (``KeptByObject``)."""
    pairs = _GROUP_PAIRS.find(group, 0)
    if pairs is None:
        pairs = tuple(group.pairs())
        _GROUP_PAIRS.keep(group, 0, pairs, len(pairs))
    return pairs  # type: ignore[no-any-return]


def _bindings_of(node: Node) -> Iterable[AclBinding]:
    """The bindings of every ACL of a node or group (``node_entries``), kept while it lives (``KeptByObject``, in
    its slot 1: slot 0 holds a group's pairs): a ``Lazy`` node's or a group's whole, a node of groups by group (a
    write's node of a table's groups is never kept whole: ``holds_a_table``)."""
    if type(node) is Few or type(node) is Multi:
        return chain.from_iterable(map(_bindings_of, node.groups()))
    bindings = _GROUP_PAIRS.find(node, 1)
    if bindings is None:
        pattern = node_pattern(node)
        bindings = tuple([AclBinding(pattern, entry) for entry in node_entries(node)])
        _GROUP_PAIRS.keep(node, 1, bindings, len(bindings))
    return bindings  # type: ignore[no-any-return]


# The enum members a describe compares with, read once: on Python 3.11 a member read off its class goes through
# EnumType.__getattr__'s slot (about 0.25 us each), and a describe read ten of them on every call.
_ANY_OPERATION, _ANY_PERMISSION, _ANY_TYPE, _MATCH = (AclOperation.ANY, AclPermissionType.ANY, ResourceType.ANY,
                                                      PatternType.MATCH)
_SELECT_LITERAL = frozenset((PatternType.ANY, PatternType.MATCH, PatternType.LITERAL))    # filters on literal nodes
_SELECT_PREFIXED = frozenset((PatternType.ANY, PatternType.MATCH, PatternType.PREFIXED))  # and on prefixed ones


def _filter_nodes(index: AclIndex, resource_type: int, pattern_type: int, name: str | None):
    """The index nodes that may hold ACLs a pattern filter selects."""
    t = index.types[resource_type]
    use_literal = pattern_type in _SELECT_LITERAL
    use_prefixed = pattern_type in _SELECT_PREFIXED
    if name is None:
        if use_literal:
            yield from t.literal.values()
        if use_prefixed:
            yield from t.prefixed.values()
        return
    if pattern_type == _MATCH:
        yield from t.applicable_nodes(name)
        return
    node: Node | None
    if use_literal:
        node = t.literal.get(name)
        if node is not None:
            yield node
    if use_prefixed:
        node = t.prefixed.get(name)
        if node is not None:
            yield node


_INDEXED_PATTERNS = frozenset((PatternType.LITERAL, PatternType.PREFIXED))
_ACL_ID, _PATTERN_TYPE = itemgetter(0), itemgetter(3)  # of an AclRow


def _indexable(binding: AclBinding) -> AclBinding:
    """The binding of an ACL an image can hold (LITERAL or PREFIXED), else InvalidValueError."""
    if binding.pattern.pattern_type not in _INDEXED_PATTERNS:
        raise InvalidValueError(f"ACL pattern type must be LITERAL or PREFIXED: {binding!r}")
    return binding


class AclsDelta:
    """Changes to an AclsImage: id -> the new ACL (its binding, or its row as replay reads it:
    ``AclCreated.ROW``), or None for removed.

    ``add`` of an existing id replaces its binding; ``remove`` of an id that
    is neither in the image nor added in this delta raises InconsistentEventError
    (as Kafka's AclsDelta.replay of a RemoveAccessControlEntryRecord).
    """

    __slots__ = ("image", "_changes", "_bindings", "_runs", "defer_from", "_misfit", "_held")

    def __init__(self, image: AclsImage):
        self.image = image
        self._changes: dict[str, AclBinding | AclRow | None] = {}
        self._bindings = 0  # how many changes were recorded as a binding (the others: a row or None)
        # Runs of rows (``add_rows``) and of removals (``remove_later``) recorded after ``_changes``, in order, not
        # yet keyed by id: a replay of ACL creations onto an empty image groups them straight into its table
        # (``apply``), building no dict by id for them, and removals between them are checked against the runs there.
        self._runs: list[list[AclRow] | _Removals] = []
        # Changes from which ``apply`` onto an image read in place defers them (``acl_deferred``); time travel
        # defers any number, so that a replay of a few events keeps an answer read in place for the next one.
        self.defer_from = DEFER_FROM
        # The error of a removal recorded for later that did not fit: the runs after it were never keyed, so every
        # later read or apply raises it again rather than answer without them.
        self._misfit: InconsistentEventError | None = None
        # The ids of the changes the base image holds, when known (``of_net``), and how many ids the changes held
        # then, so an apply onto an image read in place looks the others up in no hash table (``Deferred.applied``);
        # an id recorded since (more ids) makes it unknown again.
        self._held: tuple[Container[str], int] | None = None

    def _keyed(self) -> dict[str, AclBinding | AclRow | None]:
        """The changes by id, the pending runs of rows recorded in them first (in order: a later row wins)."""
        if self._misfit is not None:
            raise self._misfit
        changes = self._changes
        if self._runs:
            runs, self._runs = self._runs, []
            for run in runs:
                if run.__class__ is list:
                    changes.update(zip(map(_ACL_ID, run), run))  # type: ignore[arg-type]
                    continue
                for acl_id, offset in zip(run.acl_ids, run.offsets):  # type: ignore[union-attr]
                    try:
                        self._check_removal(changes, acl_id, offset)
                    except InconsistentEventError as misfit:
                        self._misfit = misfit
                        raise
                    changes[acl_id] = None
        return changes

    @property
    def changes(self) -> Mapping[str, AclBinding | None]:
        """The recorded changes (None = removed)."""
        return MappingProxyType({acl_id: _binding(change) for acl_id, change in self._keyed().items()})

    def get(self, acl_id: str) -> AclBinding | None:
        """The binding of an id as the delta stands (image plus changes)."""
        changes = self._keyed()
        if acl_id in changes:
            return _binding(changes[acl_id])
        return self.image.get(acl_id)

    def add(self, acl_id: str, binding: AclBinding) -> None:
        """Record a new ACL (pattern type must be LITERAL or PREFIXED)."""
        if binding.pattern.pattern_type not in _INDEXED_PATTERNS:
            _indexable(binding)  # raises, naming the binding
        self._keyed()[acl_id] = binding
        self._bindings += 1

    def add_row(self, row: AclRow) -> None:
        """Record a new ACL given as its row (as ``add``)."""
        if row[3] not in _INDEXED_PATTERNS:
            _indexable(row_binding(row))  # raises, naming the binding
        (self._keyed() if self._runs else self._changes)[row[0]] = row

    def add_rows(self, rows: Sequence[AclRow]) -> None:
        """Record new ACLs given as rows, in order (as ``add_row`` for each, with C-level passes over them)."""
        if not _INDEXED_PATTERNS.issuperset(map(_PATTERN_TYPE, rows)):
            for row in rows:
                self.add_row(row)  # raises at the first row an image cannot hold, naming it
        self._runs.append(list(rows))  # a copy: the caller's list is its own

    def remove(self, acl_id: str) -> None:
        """Record the removal of an ACL by id."""
        changes = self._keyed()
        self._check_removal(changes, acl_id)
        self._changes[acl_id] = None

    def remove_later(self, acl_ids: Sequence[str], offsets: Sequence[int]) -> None:
        """Record the removals of ACLs by id, in order, their events at ``offsets``: as ``remove`` for each, except
        that while runs of rows are pending (``add_rows``) they are recorded after them unchecked, and checked where
        the changes are next read (``apply``, ``get``, ``changes``, or ``check``): a removal that does not fit then
        raises the InconsistentEventError that ``remove`` would have, naming its offset.  A replay of the diverse
        shape (a request of removals after each of creations) then keys no creation by id before ``apply``, which
        checks the removals in one pass over the runs (``_without_removed``)."""
        if self._runs:
            self._runs.append(_Removals(list(acl_ids), list(offsets)))
            return
        changes = self._keyed()
        for acl_id, offset in zip(acl_ids, offsets):
            self._check_removal(changes, acl_id, offset)
            changes[acl_id] = None

    def check(self) -> None:
        """Raise the InconsistentEventError of the first removal recorded for later that does not fit, if any."""
        self._keyed()

    def net(self) -> dict[str, AclRow | None]:
        """The net change to the base image, by id, in the order recorded: each ACL added or replaced as its row, and
        None for an ACL of the base removed (an ACL added and removed again by these changes is left out).  A delta
        ``of_net`` the base and this gives the same image as this one (a delta checkpoint file holds it)."""
        held = self.image.acls
        return {acl_id: _row(acl_id, change) for acl_id, change in self._keyed().items()
                if change is not None or acl_id in held}

    def held_of(self, acl_ids: Iterable[str]) -> set[str] | dict[str, tuple[int, int]]:
        """Those of ``acl_ids`` the base image holds; for a base read in place with no change deferred, as where its
        table holds each (``Deferred.where``: a delta checkpoint file records it, and its apply then looks none of
        them up)."""
        held = self.image.acls
        deferred = deferred_of(held, self.image.index)
        where = None if deferred is None else deferred.where(acl_ids)
        return {acl_id for acl_id in acl_ids if acl_id in held} if where is None else where

    @classmethod
    def of_net(cls, image: AclsImage, net: Mapping[str, AclRow | None], held: Container[str] | None = None
               ) -> AclsDelta:
        """A delta onto ``image`` holding ``net`` (what ``net`` gave for a delta onto the same image), deferred onto an
        image read in place however few the changes; ``held`` (when known: ``held_of`` of the ids) are the ids of
        ``net`` that ``image`` holds."""
        delta = cls(image)
        delta._changes = dict(net)
        delta.defer_from = 1
        delta._held = None if held is None else (held, len(delta._changes))
        return delta

    def _check_removal(self, changes: dict[str, AclBinding | AclRow | None], acl_id: str,
                       offset: int | None = None) -> None:
        """InconsistentEventError (naming ``offset`` when given) if ``acl_id`` is neither held nor added by now."""
        if (changes[acl_id] is None) if acl_id in changes else acl_id not in self.image.acls:
            error = InconsistentEventError(f"removal of ACL {acl_id!r}, which does not exist")
            raise error if offset is None else error.at(offset)

    def apply(self) -> AclsImage:
        """A new image with the changes; the delta's base image is left as it was."""
        base = self.image
        acls = base.acls
        if self._runs and not acls and not self._changes:  # creations (and removals of them), onto an empty image
            image = _of_runs(self._runs)
            if image is not None:
                return base if image is AclsImage.EMPTY else image
        changes = self._keyed()
        deferred = deferred_of(acls, base.index) if len(changes) >= min(self.defer_from, DEFER_FROM) else None
        if deferred is not None:  # a snapshot's image (and changes): merged, each node patched when first made
            held = self._held[0] if self._held is not None and self._held[1] == len(changes) else None
            deferred = deferred.applied(changes, held)  # rows as replay recorded them (no binding made per ACL)
            return AclsImage(deferred.acls, deferred.index)
        if not acls:
            with paused_gc(pause=len(changes) >= _BULK):
                rows = changes.values() if not self._bindings else (
                    _row(acl_id, change) for acl_id, change in changes.items())
                image = AclsImage.of_table(AclTable.of_rows(rows))  # type: ignore[arg-type]  # rows or None
                return base if image is AclsImage.EMPTY else image
        removed: list[tuple[str, Group]] = []
        added: list[AclRow] = []
        get = acls.get
        # which ids the image may hold, by the maps' own lookups: a batch of new ACLs asks get() of none
        held = frozenset(acls.held(changes)) if len(changes) >= TABLE_FROM else None
        items: Iterable[tuple[str, AclBinding | AclRow | None]] = changes.items()
        if held is not None and not self._bindings:
            # rows and removals only: an id the image does not hold adds its row (a removal's None is of an ACL this
            # delta added), so those rows are taken in one C-level pass and only the held ids are looked at
            if held:
                added = list(filter(None, [change for acl_id, change in items  # type: ignore[misc]  # rows
                                           if acl_id not in held]))
                items = [(acl_id, change) for acl_id, change in items if acl_id in held]
            else:
                added, items = list(filter(None, changes.values())), ()  # type: ignore[arg-type]  # rows
        for acl_id, change in items:
            old = get(acl_id) if held is None or acl_id in held else None
            if old is not None:
                if change is not None and old.binding(acl_id) == _binding(change):
                    continue
                removed.append((acl_id, old))
            if change is not None:
                added.append(_row(acl_id, change))  # type: ignore[arg-type]  # not None
        if not removed and not added:
            return base
        with paused_gc(pause=len(removed) + len(added) >= _BULK):
            return _updated(base, removed, added)


@dataclass(frozen=True, slots=True)
class _Removals:
    """Removals recorded for later (``AclsDelta.remove_later``): the ids, in order, and their events' offsets."""

    acl_ids: list[str]
    offsets: list[int]


def _of_runs(runs: list[list[AclRow] | _Removals]) -> AclsImage | None:
    """The image of these runs of new ACLs' rows less the ACLs the runs of removals between them remove, grouped into
    one table; None if an id is created twice (the later row replaces the earlier) or a removal is not of exactly one
    ACL created before it: the caller keys them by id first, in order, which names a removal that does not fit."""
    rows: Iterable[AclRow] | None
    if all(run.__class__ is list for run in runs):
        rows, count = chain.from_iterable(runs), sum(map(len, runs))  # type: ignore[arg-type]
    else:
        rows = _without_removed(runs)
        if rows is None:
            return None
        count = len(rows)
    with paused_gc(pause=count >= _BULK):
        try:
            return AclsImage.of_table(AclTable.of_rows(rows))
        except TableError:  # of_rows' own table is sound but for ids: an id comes twice
            return None


def _without_removed(runs: list[list[AclRow] | _Removals]) -> list[AclRow] | None:
    """The runs' rows less those of the removed ids, when each removal is of an id removed once, created once, and
    before it; else None (the keyed route decides).  One C-level pass over the rows' ids finds the removed ones'
    rows (a set of the removals, not a dict of every id)."""
    removed: dict[str, int] = {}  # removed id -> how many rows come before its removal
    pieces: list[list[AclRow]] = []
    before = 0
    for run in runs:
        if run.__class__ is list:
            pieces.append(run)  # type: ignore[arg-type]
            before += len(run)  # type: ignore[arg-type]
            continue
        for acl_id in run.acl_ids:  # type: ignore[union-attr]
            if acl_id in removed:
                return None  # removed twice: whether it was created again between is the keyed route's to say
            removed[acl_id] = before
    rows = list(chain.from_iterable(pieces))
    hits = list(compress(range(len(rows)), map(removed.__contains__, map(_ACL_ID, rows))))
    created = {rows[at][0]: at for at in hits}
    if len(created) != len(hits) or len(created) != len(removed):
        return None  # a removed id created twice, or never
    if any(at >= removed[acl_id] for acl_id, at in created.items()):
        return None  # created after its removal
    kept: list[AclRow] = []
    start = 0
    for at in hits:
        kept += rows[start:at]
        start = at + 1
    kept += rows[start:]
    return kept


def _updated(base: AclsImage, removed: list[tuple[str, Group]], added: list[AclRow]) -> AclsImage:
    """``base`` with ACLs removed (id, the group that held it) and added (their rows).

    An ACL on a pattern the image holds joins its node, whose touched groups are made anew
    (``AclIndex.updated``).  When many ACLs come on patterns the image does not hold (a follower catching up,
    a large write), those are grouped into columns in bulk, as a replay from empty groups them
    (``AclTable.of_rows``), and their nodes and ids added as the table's, each group made when first asked for:
    per ACL, what replay costs, not a group made and an index node edited each.
    """
    index, table, held = base.index, None, set()
    if len(added) >= TABLE_FROM:
        table = AclTable.of_rows(added)
        held = index.held(table.stores())  # the table's nodes whose pattern the image holds: their ACLs join it
        added = [row for i in held for row in table.rows(i)]
    index, rebuilt = index.updated(removed, added)
    if table is None:
        return AclsImage(base.acls.updated([acl_id for acl_id, _ in removed], rebuilt), index)
    index = index.with_nodes(table.made(held))
    return AclsImage(base.acls.updated([acl_id for acl_id, _ in removed], rebuilt, (table,)), index)


def _binding(change: AclBinding | AclRow | None) -> AclBinding | None:
    """The binding a recorded change adds (None for a removal)."""
    return row_binding(change) if isinstance(change, tuple) else change


def _row(acl_id: str, change: AclBinding | AclRow | None) -> AclRow | None:
    """The row a recorded change adds (None for a removal)."""
    return change if change is None or isinstance(change, tuple) else acl_row(acl_id, change)


_BULK = 10000  # changes from which applying a delta pauses the cyclic GC
TABLE_FROM = 64  # ACLs on patterns an image does not hold from which a delta adds them as a table's nodes
