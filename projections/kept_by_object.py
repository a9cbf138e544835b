"""Values computed from the index's immutable objects (groups, nodes), kept by object while it lives.

A group or node of the ACL index never changes: a write makes a new object, and the images that
did not change it share the old one.  So what is computed from one (its wire encoding, its
bindings) may be kept by object and reused by every image that still holds it.  ``KeptByObject``
keeps such values by (object id, slot), each with its object, so no other object can take the id
while it is kept.  An object made from an index table (a table's group or node) holds its whole
table: when one of another table is kept (an image loaded or rebuilt since), every kept value is
dropped, so an old table is never pinned here (the table's id cannot be reused while a kept object
holds the table).  Bounded: at most ``limit`` values and ``budget`` units of size (the caller's
measure: bytes, bindings); past either, all are dropped.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["KeptByObject"]


class KeptByObject:
    """Values kept by immutable object and slot (see the module's docstring); thread-safe."""

    def __init__(self, limit: int, budget: int):
        self._limit, self._budget = limit, budget
        self._kept: dict[tuple[int, int], tuple[Any, Any]] = {}
        self._held = 0
        self._table: int | None = None    # id of the table the kept table objects belong to
        self._lock = threading.Lock()

    def find(self, obj: Any, slot: int) -> Any:
        """The value kept for ``obj`` in ``slot``, or None."""
        found = self._kept.get((id(obj), slot))
        return found[1] if found is not None and found[0] is obj else None

    def keep(self, obj: Any, slot: int, value: Any, size: int, table: Any = None) -> None:
        """Keep ``value`` (of ``size`` units) for ``obj`` in ``slot``; ``table``: the index table ``obj`` was made
        from (None: none)."""
        with self._lock:
            if table is not None and id(table) != self._table:
                self._kept.clear()
                self._held = 0
                self._table = id(table)
            if len(self._kept) >= self._limit or self._held + size > self._budget:
                self._kept.clear()
                self._held = 0
            self._kept[(id(obj), slot)] = (obj, value)
            self._held += size
