"""Values computed from the index's immutable objects (groups, nodes), kept by object while it lives.

A group or node of the ACL index never changes: a write makes a new object, and the images that
did not change it share the old one.  So what is computed from one (its wire encoding, its
bindings) may be kept by object and reused by every image that still holds it.

Objects made from an index table (``AclTable``: a snapshot's, a replay's, or one per batch of an
image's incremental apply, so an image may hold many) hold their table's columns (a node its table, a group
its table's ``AclColumns``), so they are never kept themselves: a table's group (``TableGroup``) or node
(``Lazy``) is fully named by (its columns or table, its position there), and its values are kept in that
one's bucket, which holds it only weakly and goes with it.  So a table no image holds any more is never pinned here, and the tables an image does
hold keep their values side by side (issue 24's review: one table at a time, cleared whenever another
table's object was seen, kept nothing for an answer spanning the batch tables of a follower's image).
Any other object (made by a write: it holds no table) is kept with its value by (object id, slot), so
no other object can take the id while it is kept; one that holds a table's group (a write's node whose
other groups are a table's) is not kept at all, as it would pin that table.

Bounded: at most ``limit`` values and ``budget`` units of size (the caller's measure: bytes,
bindings); past either, all are dropped.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from secmeta.projections.acl_index import Group, Lazy
from secmeta.projections.acl_table import AclColumns, AclTable, TableGroup

__all__ = ["KeptByObject", "holds_a_table"]


def _named(obj: Any) -> tuple[AclTable | AclColumns, int] | None:
    """(table, position) naming a table's group (by its table's ``AclColumns``) or node (its position as ~i), or
    None for any other object."""
    cls = obj.__class__
    if cls is TableGroup:
        return obj.columns, obj.at
    if cls is Lazy:
        return obj.source, ~obj.at
    return None


def holds_a_table(obj: Any) -> bool:
    """Whether ``obj``, not itself a table's group or node, holds one (a write's node of some table's groups)."""
    if isinstance(obj, Group) or _named(obj) is not None:
        return False
    return any(group.__class__ is TableGroup for group in obj.groups())


class _Bucket:
    """One table's kept values: (position, slot) -> value, and how many units they hold."""

    __slots__ = ("ref", "values", "held")

    def __init__(self, ref: weakref.ref):
        self.ref = ref
        self.values: dict[tuple[int, int], Any] = {}
        self.held = 0


class KeptByObject:
    """Values kept by immutable object and slot (see the module's docstring); thread-safe."""

    def __init__(self, limit: int, budget: int):
        self._limit, self._budget = limit, budget
        self._kept: dict[tuple[int, int], tuple[Any, Any]] = {}   # objects that hold no table
        self._tables: dict[int, _Bucket] = {}                      # id(table) -> its bucket
        self._count = self._held = 0
        self.hits = 0  # finds that found a value (a measure for tests and benchmarks)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many values are kept (those of tables gone since excluded)."""
        return len(self._kept) + sum(len(bucket.values) for bucket in list(self._tables.values()))

    def find(self, obj: Any, slot: int) -> Any:
        """The value kept for ``obj`` in ``slot``, or None."""
        named = _named(obj)
        if named is None:
            found = self._kept.get((id(obj), slot))
            value = found[1] if found is not None and found[0] is obj else None
        else:
            table, at = named
            bucket = self._tables.get(id(table))
            value = None if bucket is None or bucket.ref() is not table else bucket.values.get((at, slot))
        if value is not None:
            self.hits += 1
        return value

    def keep(self, obj: Any, slot: int, value: Any, size: int) -> None:
        """Keep ``value`` (of ``size`` units) for ``obj`` in ``slot`` (nothing for an object that would pin a
        table: ``holds_a_table``)."""
        named = _named(obj)
        if named is None and holds_a_table(obj):
            return
        with self._lock:
            if self._count >= self._limit or self._held + size > self._budget:
                self._kept, self._tables = {}, {}
                self._count = self._held = 0
            self._count += 1
            self._held += size
            if named is None:
                self._kept[(id(obj), slot)] = (obj, value)
                return
            table, at = named
            key = id(table)
            bucket = self._tables.get(key)
            if bucket is None or bucket.ref() is not table:
                bucket = self._tables[key] = _Bucket(weakref.ref(table, self._dropper(key)))
            bucket.values[(at, slot)] = value
            bucket.held += size

    def _dropper(self, key: int):
        """The callback that drops a table's bucket when the table is freed (no lock: it may run inside ``keep``)."""
        def drop(ref: weakref.ref) -> None:
            bucket = self._tables.get(key)
            if bucket is not None and bucket.ref is ref:
                del self._tables[key]
                self._count -= len(bucket.values)
                self._held -= bucket.held
        return drop
