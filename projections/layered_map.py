"""An immutable mapping built once as a plain dict, whose values may be made on first use, plus a persistent
overlay of later changes.

A snapshot load or a replay from empty makes a whole table at once, as a dict (several times cheaper
to build than a persistent map, and smaller); a value may be a placeholder int that the map's
``resolve`` turns into the real value when it is first asked for (an index node or group that a
columnar ``AclTable`` makes only when touched).  Every later image records only its changes in a
persistent (HAMT) overlay that shares structure with the image before it.  When the overlay holds as
many entries as the base, the next change folds both into a new base (amortised O(1) per change).
A large batch of keys the map does not hold (``LayeredMapMutation.add_new``: a follower's round of new ACL
ids) is added as a level of its own instead, a plain dict between the overlay and the base: levels are
merged as in a log-structured merge tree (a level absorbs the ones before it no larger than itself, each
a C-level dict copy), and fold into the base with the overlay (issue 24: the overlay's per-key insert cost
a diverse round's apply about 0.3 us per ACL id, a third of it).  Lookups read the overlay, then the levels,
newest first, then the base; the overlay is always newer than a level for the same key.
The base dict is never changed after it is wrapped but for a placeholder, which its value replaces when
first made (the same meaning, so every map sharing the dict may see either).  Values are never ints or None.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import chain
from typing import Any, ClassVar, Generic, Self, TypeVar

import immutables

__all__ = ["LayeredMap", "LayeredMapMutation"]

EMPTY_MAP: immutables.Map = immutables.Map()
_GONE = object()  # overlay value of a key the base holds but the map does not
_MISSING = object()
_FOLD_FLOOR = 4096  # the overlay is folded into the base from this size, at the base's size
_LEVEL_FROM = 1024  # keys added at once (``add_new``) from which they make a level, not overlay entries


def _in_levels(levels: tuple[dict, ...], key) -> Any:
    """The value the newest level holding ``key`` gives, or _MISSING."""
    for level in reversed(levels):
        value = level.get(key, _MISSING)
        if value is not _MISSING:
            return value
    return _MISSING


def _unresolvable(placeholder: int) -> Any:
    raise LookupError(f"a placeholder ({placeholder}) in a map that makes no values on first use")


class LayeredMap:
    """An immutable mapping: a base dict (values, or int placeholders made by ``resolve``) under an overlay."""

    __slots__ = ("_base", "_overlay", "_size", "_resolve", "_levels")
    EMPTY: ClassVar[LayeredMap]

    def __init__(self, base: dict, resolve: Callable[[int], Any] = _unresolvable,
                 overlay: immutables.Map = EMPTY_MAP, size: int | None = None, levels: tuple[dict, ...] = ()):
        self._base = base
        self._resolve = resolve
        self._overlay = overlay
        self._size = len(base) if size is None else size
        self._levels = levels  # dicts of keys added in bulk (``add_new``), oldest first: never changed once made

    def _with(self, base: dict, overlay: immutables.Map, size: int | None, levels: tuple[dict, ...] = ()) -> Self:
        """A map of the same class and resolver (subclasses keep their type through changes)."""
        return type(self)(base, self._resolve, overlay, size, levels)

    def get(self, key, default=None):
        overlay = self._overlay
        if overlay:
            value = overlay.get(key, _MISSING)
            if value is not _MISSING:
                return default if value is _GONE else value
        if self._levels and (value := _in_levels(self._levels, key)) is not _MISSING:
            return value
        base = self._base
        value = base.get(key, default)
        if type(value) is int:
            value = base[key] = self._resolve(value)  # the placeholder's value from now on (same meaning)
        return value

    def peek(self, key):
        """The value at ``key`` as held, without making it: a placeholder int not made yet, the value, or None."""
        overlay = self._overlay
        if overlay:
            value = overlay.get(key, _MISSING)
            if value is not _MISSING:
                return None if value is _GONE else value
        if self._levels and (value := _in_levels(self._levels, key)) is not _MISSING:
            return value
        return self._base.get(key)

    def __getitem__(self, key):
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        value = self._overlay.get(key, _MISSING)
        if value is not _MISSING:
            return value is not _GONE
        return key in self._base or any(key in level for level in self._levels)

    def held(self, keys: Iterable) -> Iterator:
        """The keys among ``keys`` this map may hold, tested by the dicts' own lookups (no Python call per key):
        every key held is given, some maybe twice, and some no longer held (``get`` says which)."""
        contains = self._base.__contains__
        overlay, levels = self._overlay, self._levels
        if not overlay and not levels:
            return filter(contains, keys)
        keys = tuple(keys)
        return chain(filter(contains, keys), *(filter(level.__contains__, keys) for level in levels),
                     filter(overlay.__contains__, keys))

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def __iter__(self) -> Iterator:
        if self._levels:
            for key, _ in self.raw_items():
                yield key
            return
        overlay = self._overlay
        for key in self._base:
            if key not in overlay:
                yield key
        for key, value in overlay.items():
            if value is not _GONE:
                yield key

    def keys(self) -> Iterator:
        return iter(self)

    def items(self) -> Iterator[tuple]:
        get = self.get
        for key in self:
            yield key, get(key)

    def raw_items(self) -> Iterator[tuple]:
        """(key, value) pairs where a value not made yet is its placeholder int (see ``source``)."""
        overlay, levels = self._overlay, self._levels
        for at, layer in enumerate((self._base, *levels)):
            newer = levels[at:]  # the levels that hide a key of this layer
            if not newer:
                for key, value in layer.items():
                    if key not in overlay:
                        yield key, value
                continue
            for key, value in layer.items():
                if key not in overlay and not any(key in level for level in newer):
                    yield key, value
        for key, value in overlay.items():
            if value is not _GONE:
                yield key, value

    @property
    def base(self) -> dict:
        """The base dict (placeholders, or the values made for them): the map's items when ``changed`` is false."""
        return self._base

    def changed(self) -> bool:
        """Whether an overlay of changes (or a level) lies over the base."""
        return bool(self._overlay) or bool(self._levels)

    @property
    def source(self) -> Callable[[int], Any]:
        """What makes a placeholder's value."""
        return self._resolve

    def values(self) -> Iterator:
        get = self.get
        for key in self:
            yield get(key)

    def mutate(self) -> LayeredMapMutation[Self]:
        return LayeredMapMutation(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LayeredMap | immutables.Map):
            return NotImplemented
        return len(self) == len(other) and all(other.get(key) == value for key, value in self.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<{self._size} entries>)"


LayeredMap.EMPTY = LayeredMap({})


M = TypeVar("M", bound=LayeredMap)


class LayeredMapMutation(Generic[M]):
    """Changes to a LayeredMap, made into a new one of its class by ``finish`` (the map itself is left as it was)."""

    __slots__ = ("_map", "_overlay", "_size", "_levels")

    def __init__(self, layered: M):
        self._map = layered
        self._overlay = layered._overlay.mutate()
        self._size = layered._size
        self._levels = layered._levels

    def _below(self, key) -> bool:
        """Whether the base or a level holds ``key`` (whatever the overlay says of it)."""
        return key in self._map._base or any(key in level for level in self._levels)

    def get(self, key, default=None):
        value = self._overlay.get(key, _MISSING)
        if value is not _MISSING:
            return default if value is _GONE else value
        if self._levels and (value := _in_levels(self._levels, key)) is not _MISSING:
            return value
        layered = self._map
        base = layered._base
        value = base.get(key, default)
        if type(value) is int:
            value = base[key] = layered._resolve(value)
        return value

    def __contains__(self, key: object) -> bool:
        """Whether the key is held (without making a placeholder's value)."""
        value = self._overlay.get(key, _MISSING)
        if value is not _MISSING:
            return value is not _GONE
        return self._below(key)

    def __len__(self) -> int:
        return self._size

    def __setitem__(self, key, value) -> None:
        if key not in self:
            self._size += 1
        self._overlay[key] = value

    def update(self, items: Mapping) -> None:
        """``self[key] = value`` for every item, in bulk (the overlay's own update)."""
        base, overlay = self._map._base, self._overlay
        if self._levels:
            held = sum(map(self.__contains__, items))
        else:
            held = sum(map(base.__contains__, items))
            for key in filter(overlay.__contains__, items):  # the keys the overlay decides (mostly none)
                held += (overlay[key] is not _GONE) - (key in base)
        self._size += len(items) - held
        overlay.update(items)

    def add_new(self, items: dict) -> None:
        """Add ``items``, none of whose keys the map holds now (the caller's word: each is new, or removed before in
        this mutation), as a level of their own: the dict is kept as it is (the caller hands it over) and levels no
        larger than it are merged into it, C-level copies, instead of one overlay insert per key."""
        if len(items) < _LEVEL_FROM:
            self.update(items)
            return
        self._size += len(items)
        overlay = self._overlay
        for key in [key for key in filter(overlay.__contains__, items)]:  # removed before (GONE): the level decides
            del overlay[key]
        levels = list(self._levels)
        while levels and len(levels[-1]) <= len(items):
            merged = dict(levels.pop())
            merged.update(items)
            items = merged
        levels.append(items)
        self._levels = tuple(levels)

    def __delitem__(self, key) -> None:
        if key not in self:
            raise KeyError(key)
        if self._below(key):
            self._overlay[key] = _GONE
        else:
            del self._overlay[key]
        self._size -= 1

    def pop(self, key, default=None):
        value = self.get(key)
        if value is None:
            return default
        del self[key]
        return value

    def finish(self) -> M:
        layered = self._map
        overlay = self._overlay.finish()
        base, levels = layered._base, self._levels
        if len(overlay) + sum(map(len, levels)) >= max(_FOLD_FLOOR, len(base)):
            folded = dict(base)
            for level in levels:
                folded.update(level)
            folded.update(overlay)
            if len(folded) != self._size:  # keys the overlay removed from the base or a level
                for key in [key for key, value in overlay.items() if value is _GONE]:
                    del folded[key]
            return layered._with(folded, EMPTY_MAP, None)
        return layered._with(base, overlay, self._size, levels)
