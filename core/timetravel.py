"""Points in time and the images at them: checkpoints, replay and a cache of recent images.

A point is an offset N ("the store after the first N events", events with
offset < N) or a time T ("after every batch stamped <= T", found with the
log's time index).  ``TimeTravel.image_at(N)`` starts from the nearest
in-memory checkpoint at or before N (or a snapshot, or the empty image)
and replays the events up to N.  Images are persistent maps that share
their untouched parts, so a checkpoint every ``interval`` events costs
only what changed; the first query that needs a region replays it once
and leaves checkpoints behind, and live commits add their own.
"""

from __future__ import annotations

import bisect
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from core.checkpoints import CheckpointFiles
from core.errors import InvalidValueError, PointInTimeError
from core.history_index import HistoryIndex
from core.log import Log
from projections.gc_pause import FREEZE_AFTER, paused_gc
from projections.image import SecurityDelta, SecurityImage
from projections.image_snapshot import SecurityImageSnapshot
from projections.snapshot import SnapshotError, list_snapshots, read_snapshot

__all__ = [
    "DEFAULT_INTERVAL",
    "Point",
    "TimeTravel",
    "as_point",
    "parse_offset",
    "parse_time",
]

DEFAULT_INTERVAL = 20_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_SNAPSHOT_BYTES_PER_EVENT = 64  # loading a snapshot row costs about as much as replaying an event


# -- points ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Point:
    """An offset (the store after its first N events) or a time in epoch ms (after every batch <= T)."""

    offset: int | None = None
    timestamp_ms: int | None = None

    def __post_init__(self):
        if (self.offset is None) == (self.timestamp_ms is None):
            raise PointInTimeError("a point in time needs exactly one of an offset or a timestamp")
        _require_int("offset", self.offset)
        _require_int("timestamp", self.timestamp_ms)

    @classmethod
    def at_offset(cls, offset: int) -> Point:
        return cls(offset=offset)

    @classmethod
    def at_time(cls, timestamp_ms: int) -> Point:
        return cls(timestamp_ms=timestamp_ms)

    def __str__(self) -> str:
        return f"offset {self.offset}" if self.offset is not None else f"time {_iso(self.timestamp_ms)}"


def as_point(value: object) -> Point:
    """A Point from an int offset, a Point, or a mapping with "offset" or "timestamp_ms"."""
    if isinstance(value, Point):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Point(offset=value)
    if isinstance(value, Mapping):
        unknown = set(value) - {"offset", "timestamp_ms"}
        if unknown:
            raise PointInTimeError(f"a point is given by 'offset' or 'timestamp_ms', not {sorted(unknown)}")
        return Point(offset=value.get("offset"), timestamp_ms=value.get("timestamp_ms"))
    raise PointInTimeError(f"not a point in time: {value!r} (give an offset, Point.at_time(ms) or "
                           "{'timestamp_ms': ms})")


def _require_int(name: str, value: object) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise PointInTimeError(f"the {name} of a point in time must be an integer, not {value!r}")


def parse_time(text: str | int) -> int:
    """Epoch milliseconds from ISO-8601 with a zone ("2024-05-01T14:00:00Z", "...+02:00") or epoch ms."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    if not isinstance(text, str):
        raise PointInTimeError(f"a time must be text, not {text!r}")
    raw = text.strip()
    if re.fullmatch(r"[0-9]+", raw):
        return int(raw)
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise PointInTimeError(
            f"malformed time {text!r}: give ISO-8601 with a zone (e.g. 2024-05-01T14:00:00Z) "
            "or epoch milliseconds") from None
    if moment.tzinfo is None:
        raise PointInTimeError(f"time {text!r} has no zone: add one (Z, +02:00, ...) so it means one instant")
    return (moment - _EPOCH) // _MS


def parse_offset(text: str | int) -> int:
    """A log offset (a non-negative integer) from text."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif isinstance(text, str) and re.fullmatch(r"\s*[0-9]+\s*", text):
        value = int(text)
    else:
        raise PointInTimeError(f"malformed offset {text!r}: give a non-negative integer")
    if value < 0:
        raise PointInTimeError(f"offset {value} is negative")
    return value


def _iso(ms: int | None) -> str:
    if ms is None:
        return "-"
    try:
        return (_EPOCH + ms * _MS).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except OverflowError:
        return f"{ms} ms"


# -- images at points ---------------------------------------------------------------------


class TimeTravel:
    """The image after any prefix of a log: checkpoints + replay, with an LRU of recent results.

    ``live`` (optional) returns the writer's published image, used as is
    when asked for its offset.  Thread-safe: one replay at a time builds,
    and ``note`` (called by the writer per commit) never waits for one.
    """

    def __init__(
        self,
        log: Log,
        *,
        now_ms: Callable[[], int] | None = None,
        interval: int = DEFAULT_INTERVAL,
        cache_size: int = 16,
        live: Callable[[], SecurityImage] | None = None,
        use_snapshots: bool = True,
        index: HistoryIndex | None = None,
        files: CheckpointFiles | None = None,
    ):
        if interval < 1:
            raise InvalidValueError(f"checkpoint interval must be positive, not {interval}")
        self.log = log
        self.index = index  # the history index, when the owner keeps one (core.history_index)
        self.files = files  # checkpoint files on disk, when the owner keeps them (core.checkpoints)
        self.interval = interval
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._live = live
        self._use_snapshots = use_snapshots
        self._offsets: list[int] = []
        self._images: dict[int, SecurityImage] = {}
        self._cache: OrderedDict[int, SecurityImage] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()  # checkpoints and cache
        self._build_lock = threading.Lock()  # one replay at a time
        self._first_ms: tuple[int, int] | None = None  # (log start offset, its event's time)
        if log.start_offset == 0:
            self._add(SecurityImage.EMPTY)

    # -- checkpoints -------------------------------------------------------------------

    @property
    def checkpoints(self) -> list[int]:
        """The offsets that have an in-memory checkpoint, ascending."""
        with self._lock:
            return list(self._offsets)

    def _add(self, image: SecurityImage) -> None:
        with self._lock:
            offset = image.next_offset
            if offset not in self._images:
                bisect.insort(self._offsets, offset)
            self._images[offset] = image

    def note(self, image: SecurityImage) -> None:
        """A newly published image: kept as a checkpoint when ``interval`` events past the newest."""
        offsets = self._offsets
        if not offsets or image.next_offset - offsets[-1] >= self.interval:
            self._add(image)
            if self.files is not None:
                self.files.write_in_background(image)

    def _nearest(self, n: int) -> tuple[int, SecurityImage] | None:
        with self._lock:
            i = bisect.bisect_right(self._offsets, n) - 1
            if i < 0:
                return None
            offset = self._offsets[i]
            return offset, self._images[offset]

    # -- resolving points ----------------------------------------------------------------

    def resolve(self, offset: int | None = None, timestamp_ms: int | None = None) -> int:
        """The offset N a point names (exactly one of ``offset`` and ``timestamp_ms``), validated."""
        point = Point(offset=offset, timestamp_ms=timestamp_ms)
        return self.resolve_point(point)

    def resolve_point(self, point: object) -> int:
        """Like ``resolve`` for a Point, an int offset or {"timestamp_ms": T}."""
        point = as_point(point)
        if point.offset is not None:
            return self._check_offset(point.offset)
        return self.offset_at_time(point.timestamp_ms)  # type: ignore[arg-type]

    def _check_offset(self, n: int) -> int:
        end = self.log.end_offset
        if n < 0:
            raise PointInTimeError(f"offset {n} is negative")
        if n > end:
            raise PointInTimeError(f"offset {n} is past the end of the log ({end} events)")
        start = self.log.start_offset
        if n < start:
            with self._lock:
                kept = n in self._images
            if not kept:
                raise PointInTimeError(
                    f"offset {n} is before the log's start ({start}): older segments were deleted "
                    "and no snapshot covers that point")
        return n

    def first_timestamp_ms(self) -> int | None:
        """The time of the log's first retained event (None for an empty log)."""
        start = self.log.start_offset
        if self._first_ms is None or self._first_ms[0] != start:
            for envelope in self.log.read(start, start + 1):
                self._first_ms = (start, envelope.timestamp_ms)
        return None if self._first_ms is None or self._first_ms[0] != start else self._first_ms[1]

    def begin_ms(self) -> int:
        """When the store began: its creation or its first event, whichever is earlier."""
        created = self.log.store.created_ms
        first = self.first_timestamp_ms()
        return created if first is None else min(created, first)

    def offset_at_time(self, timestamp_ms: int) -> int:
        """N such that events [0, N) are every batch stamped <= ``timestamp_ms``."""
        _require_int("timestamp", timestamp_ms)
        now = self._now_ms()
        if timestamp_ms > now:
            raise PointInTimeError(f"time {_iso(timestamp_ms)} is in the future (now is {_iso(now)})")
        begin = self.begin_ms() if self.log.start_offset == 0 else None
        if begin is not None and timestamp_ms < begin:
            raise PointInTimeError(
                f"time {_iso(timestamp_ms)} is before the store began ({_iso(begin)})")
        n = self.log.offset_for_timestamp(timestamp_ms + 1)
        if self.log.start_offset > 0 and n == self.log.start_offset:
            first = self.first_timestamp_ms()
            if first is None or timestamp_ms < first:
                raise PointInTimeError(
                    f"time {_iso(timestamp_ms)} is before the log's retained history "
                    f"(events before offset {n} were deleted)")
        return n

    def timestamp_before(self, n: int) -> int | None:
        """The time of event n - 1, the last event in the state at N (None for N = 0)."""
        if n <= self.log.start_offset:
            return None
        for envelope in self.log.read(n - 1, n):
            return envelope.timestamp_ms
        return None

    # -- images --------------------------------------------------------------------------

    def image_at(self, n: int) -> SecurityImage:
        """The image after the events [0, n) (``n`` already validated)."""
        live = self._live() if self._live is not None else None
        if live is not None and live.next_offset == n:
            return live
        with self._lock:
            cached = self._cache.get(n)
            if cached is not None:
                self._cache.move_to_end(n)
                return cached
        with self._build_lock:
            image = self._build(n)
        with self._lock:
            self._cache[n] = image
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return image

    def _build(self, n: int) -> SecurityImage:
        base = self._nearest(n)
        if base is not None and base[0] < self.log.start_offset and base[0] != n:
            base = None  # the events after that checkpoint were deleted
        with self._lock:  # a recently built image may be nearer than any checkpoint
            for offset, image in self._cache.items():
                if (base is None or base[0] < offset) and self.log.start_offset <= offset <= n:
                    base = (offset, image)
        gap = n - base[0] if base is not None else None
        if self._use_snapshots and (gap is None or gap > self.interval):
            snap = self._snapshot_at_or_before(n)
            if snap is not None:
                offset, path = snap
                cost = path.stat().st_size // _SNAPSHOT_BYTES_PER_EVENT + (n - offset)
                if gap is None or (base is not None and offset > base[0] and cost < gap):
                    loaded = (self.files.load(offset) if self.files is not None and path.parent == self.files.directory
                              else self._load_snapshot(offset, path))
                    if loaded is not None:
                        self._add(loaded)
                        base = (offset, loaded)
        if base is None:
            raise PointInTimeError(
                f"offset {n} is before the log's start ({self.log.start_offset}) and no valid snapshot covers it")
        return self._replay(base[1], base[0], n)

    def _snapshot_at_or_before(self, n: int):
        """The nearest policy snapshot or checkpoint file at or before ``n``: (offset, path), or None."""
        if not self._use_snapshots:
            return None
        found = None
        directories = [self.log.store.snapshot_dir] + ([self.files.directory] if self.files is not None else [])
        for directory in directories:
            for path in reversed(list_snapshots(directory)):
                offset = int(path.stem.rsplit("-", 1)[-1])
                if offset <= n:
                    if found is None or offset > found[0]:
                        found = (offset, path)
                    break
        return found

    def _load_snapshot(self, offset: int, path) -> SecurityImage | None:
        try:
            info, image = read_snapshot(path, SecurityImageSnapshot(), self.log.keyring)
        except (SnapshotError, OSError):
            return None
        link = self.log.link_at(info.next_offset)
        if info.next_offset != offset or link is None or link != info.link:
            return None
        return replace(image, next_offset=offset)

    def _replay(self, image: SecurityImage, start: int, n: int) -> SecurityImage:
        """Replay events [start, n) onto ``image``, leaving checkpoints every ``interval`` events."""
        if start == n:
            return image
        with paused_gc() as paused:
            delta = SecurityDelta(image)
            since = start
            for batch in self.log.batches(start, n):
                envelopes = self.log.decode(batch)
                if batch.base_offset < start or batch.next_offset > n:
                    envelopes = [e for e in envelopes if start <= e.offset < n]
                delta.replay_all(envelopes)
                if batch.next_offset < n and batch.next_offset - since >= self.interval:
                    checkpoint = delta.apply(batch.next_offset)
                    self._add(checkpoint)
                    if self.files is not None:
                        self.files.write_in_background(checkpoint)
                    delta, since = SecurityDelta(checkpoint), batch.next_offset
            # The result (cached) and any checkpoints live long: keep full collections off them.
            paused.freeze = n - start >= FREEZE_AFTER
            return delta.apply(n)
