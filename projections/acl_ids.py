"""ACL id -> index group: a plain dict built once, plus a persistent map of later changes.

A snapshot load or a replay from empty makes the whole id table at once, as
a dict (several times cheaper to build than a persistent map, and smaller);
every later image records only its changes in a persistent (HAMT) overlay
that shares structure with the image before it.  When the overlay holds as
many entries as the base, the next update folds both into a new base
(amortised O(1) per change).  The base dict is never mutated after it is
wrapped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import ClassVar

import immutables

from secmeta.projections.acl_index import EMPTY_MAP, Group

__all__ = ["AclIds"]

_GONE = object()  # overlay value of an id the base holds but the image does not
_MISSING = object()
_FOLD_FLOOR = 4096  # the overlay is folded into the base from this size, at the base's size


class AclIds:
    """An immutable mapping acl_id -> Group."""

    __slots__ = ("_base", "_overlay", "_size")
    EMPTY: ClassVar[AclIds]

    def __init__(self, base: dict[str, Group], overlay: immutables.Map = EMPTY_MAP, size: int | None = None):
        self._base = base
        self._overlay = overlay
        self._size = len(base) if size is None else size

    def get(self, acl_id: str, default=None):
        overlay = self._overlay
        if overlay:
            group = overlay.get(acl_id, _MISSING)
            if group is not _MISSING:
                return default if group is _GONE else group
        return self._base.get(acl_id, default)

    def __getitem__(self, acl_id: str) -> Group:
        group = self.get(acl_id)
        if group is None:
            raise KeyError(acl_id)
        return group

    def __contains__(self, acl_id: object) -> bool:
        return self.get(acl_id) is not None  # type: ignore[arg-type]

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def __iter__(self) -> Iterator[str]:
        overlay = self._overlay
        for acl_id in self._base:
            if acl_id not in overlay:
                yield acl_id
        for acl_id, group in overlay.items():
            if group is not _GONE:
                yield acl_id

    def items(self) -> Iterator[tuple[str, Group]]:
        for acl_id in self:
            yield acl_id, self[acl_id]

    def updated(self, removed: Iterable[str], groups: Iterable[Group]) -> AclIds:
        """The ids without ``removed`` (all held), then every id of each of ``groups`` mapped to it."""
        base, size = self._base, self._size
        mutation = self._overlay.mutate()
        for acl_id in removed:
            if acl_id in base:
                mutation[acl_id] = _GONE
            else:
                del mutation[acl_id]
            size -= 1
        for group in groups:
            for acl_id in group.acl_ids():
                held = mutation.get(acl_id, _MISSING)
                if held is _GONE or (held is _MISSING and acl_id not in base):
                    size += 1
                mutation[acl_id] = group
        overlay = mutation.finish()
        if len(overlay) >= max(_FOLD_FLOOR, len(base)):
            folded = {acl_id: group for acl_id, group in base.items() if acl_id not in overlay}
            folded.update((acl_id, group) for acl_id, group in overlay.items() if group is not _GONE)
            return AclIds(folded)
        return AclIds(base, overlay, size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AclIds):
            return NotImplemented
        return self._size == other._size and all(other.get(acl_id) == group for acl_id, group in self.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"AclIds(<{self._size} ids>)"


AclIds.EMPTY = AclIds({})
