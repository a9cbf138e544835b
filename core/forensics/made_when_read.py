"""``MadeWhenRead``: a diff's entries (its ACLs' (id, binding) pairs, its tokens), made when first read.

A diff over 100k events answers with up to 100k ACLs and thousands of tokens; building their values was
most of its time (issue 24: 1.0-1.4 s CPU, ~70% of it in making ~95k bindings; later the tokens' parsed
payloads and ``TokenInfo`` values were the largest part), though a caller that counts them or reads a few
needs none of it. ``MadeWhenRead`` holds the stored rows the backend found and one function that makes
values of rows: its length needs no value, an item makes only its own, and the whole sequence is made once
(on the first iteration, comparison, hash or repr) and kept. It reads as the tuple of those values: equal
to it, hashing like it, indexed, sliced and concatenated like it. The rows may come in any order with a
sort key: they are put in order when first read by position or whole (sorting ~98k ids was ~13% of a
diff's CPU, and a caller that counts them needs no order).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, Generic, TypeVar, cast, overload

from secmeta.events.types import AclBinding

__all__ = ["AclPair", "MadeWhenRead"]

AclPair = tuple[str, AclBinding]
T = TypeVar("T")


class MadeWhenRead(Sequence[T], Generic[T]):
    """The values ``make`` makes of ``rows`` (in the order wanted), made when first read; one value a row."""

    __slots__ = ("_rows", "_make", "_made", "_key")

    def __init__(self, rows: Collection[Any], make: Callable[[Sequence[Any]], list[T]],
                 key: Callable[[Any], Any] | None = None):
        """``rows`` in the order wanted (a sequence), or in any order with ``key``, which orders them when first
        needed."""
        self._rows = rows
        self._make = make
        self._made: tuple[T, ...] | None = None
        self._key = key

    def _ordered(self) -> Sequence[Any]:
        """The rows in the order wanted (sorted by the key once)."""
        if self._key is not None:
            self._rows, self._key = sorted(self._rows, key=self._key), None
        return cast(Sequence[Any], self._rows)  # rows without a key are given as a sequence

    def _all(self) -> tuple[T, ...]:
        made = self._made
        if made is None:
            made = self._made = tuple(self._make(self._ordered()))
        return made

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if self._made is not None:
            return self._made[index]
        rows = self._ordered()
        if isinstance(index, slice):
            return tuple(self._make(rows[index]))
        return self._make([rows[index]])[0]

    def __iter__(self) -> Iterator[T]:
        return iter(self._all())

    def __bool__(self) -> bool:
        return bool(self._rows)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MadeWhenRead):
            return self is other or self._all() == other._all()
        if isinstance(other, tuple):
            return self._all() == other
        return NotImplemented

    def __add__(self, other: object) -> tuple[T, ...]:
        if isinstance(other, MadeWhenRead | tuple):
            return self._all() + tuple(other)
        return NotImplemented

    def __radd__(self, other: object) -> tuple[T, ...]:
        if isinstance(other, tuple):
            return other + self._all()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return repr(self._all())
