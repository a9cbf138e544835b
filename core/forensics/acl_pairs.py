"""``AclPairs``: a diff's ACLs, (ACL id, binding) in id order, made when first read.

A diff over 100k events answers with up to 100k ACLs; building their bindings was most of its time
(issue 24: 1.0-1.4 s CPU, ~70% of it in making ~95k bindings), though a caller that counts them or
reads a few needs none of it. ``AclPairs`` holds the stored rows the backend found and one function
that makes pairs of rows: its length needs no pair, an item makes only its own, and the whole sequence
is made once (on the first iteration, comparison, hash or repr) and kept. It reads as the tuple of
those pairs: equal to it, hashing like it, indexed, sliced and concatenated like it. The rows may come
in any order with a sort key: they are put in order when first read by position or whole (sorting ~98k
ids was ~13% of a diff's CPU, and a caller that counts them needs no order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

from secmeta.events.types import AclBinding

__all__ = ["AclPair", "AclPairs"]

AclPair = tuple[str, AclBinding]


class AclPairs(Sequence[AclPair]):
    """(ACL id, binding) pairs made by ``make`` from ``rows`` (in the order wanted) when first read."""

    __slots__ = ("_rows", "_make", "_pairs", "_key")

    def __init__(self, rows: Sequence[Any], make: Callable[[Sequence[Any]], list[AclPair]],
                 key: Callable[[Any], Any] | None = None):
        """``rows`` in the order wanted, or in any order with ``key``, which orders them when first needed."""
        self._rows = rows
        self._make = make
        self._pairs: tuple[AclPair, ...] | None = None
        self._key = key

    def _ordered(self) -> Sequence[Any]:
        """The rows in the order wanted (sorted by the key once)."""
        if self._key is not None:
            self._rows, self._key = sorted(self._rows, key=self._key), None
        return self._rows

    def _all(self) -> tuple[AclPair, ...]:
        pairs = self._pairs
        if pairs is None:
            pairs = self._pairs = tuple(self._make(self._ordered()))
        return pairs

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> AclPair: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[AclPair, ...]: ...

    def __getitem__(self, index: int | slice) -> AclPair | tuple[AclPair, ...]:
        if self._pairs is not None:
            return self._pairs[index]
        rows = self._ordered()
        if isinstance(index, slice):
            return tuple(self._make(rows[index]))
        return self._make([rows[index]])[0]

    def __iter__(self) -> Iterator[AclPair]:
        return iter(self._all())

    def __bool__(self) -> bool:
        return bool(self._rows)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AclPairs):
            return self is other or self._all() == other._all()
        if isinstance(other, tuple):
            return self._all() == other
        return NotImplemented

    def __add__(self, other: object) -> tuple[AclPair, ...]:
        if isinstance(other, AclPairs | tuple):
            return self._all() + tuple(other)
        return NotImplemented

    def __radd__(self, other: object) -> tuple[AclPair, ...]:
        if isinstance(other, tuple):
            return other + self._all()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return repr(self._all())
