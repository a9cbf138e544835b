"""Points in time and the images at them: checkpoints in memory and on disk, replay, a byte-sized LRU.

A point is an offset N ("the store after the first N events", events with
offset < N) or a time T ("after every batch stamped <= T", found with the
log's time index).  ``TimeTravel.image_at(N)`` starts from whichever is
cheaper by estimated CPU, the nearest image in memory or the nearest
checkpoint file or policy snapshot on disk, and replays the events up to N.
Images are persistent maps that share their untouched parts, so a
checkpoint every ``interval`` events costs only what those events changed:
replays leave checkpoints behind, live commits add their own, and a
background replay of the whole log (``fill``) leaves them everywhere the
memory budget allows.  What is held is bounded in estimated bytes, least
recently used first out.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from secmeta.core.config import StoreConfig
from secmeta.core.errors import InvalidValueError, PointInTimeError
from secmeta.core.forensics.checkpoints import CheckpointFiles
from secmeta.core.forensics.history_index import HistoryIndex
from secmeta.core.log import Log, OffsetOutOfRangeError
from secmeta.core.times import Point, as_point, format_ms, require_point_int
from secmeta.core.times import now_ms as now_ms_of
from secmeta.projections.acl_deferred import deferred_of
from secmeta.projections.gc_pause import FREEZE_AFTER, paused_gc
from secmeta.projections.image import SecurityDelta, SecurityImage
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import SnapshotError, list_snapshots, read_snapshot

__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_MEMORY_BYTES",
    "TimeTravel",
    "image_bytes",
    "load_bytes",
    "step_bytes",
]

logger = logging.getLogger("secmeta.timetravel")
DEFAULT_INTERVAL = 10_000  # events between in-memory checkpoints: a replay of at most ~0.08 s CPU at 1M events
DEFAULT_MEMORY_BYTES = StoreConfig.time_travel_memory_bytes


# -- images at points ---------------------------------------------------------------------

# What holding an image costs (Python-allocated bytes, tracemalloc, on the mixed log of
# scripts.bench.history): a whole image per ACL (before its grants are built on first use),
# SCRAM user and token; and a step between two images of one lineage (derived from one
# another by replay, so they share every persistent-map node those events did not copy): on a
# 200k-ACL image 4.6 MB for 5k events, 6.8 MB for 10k, 10.7 MB for 20k, 20.3 MB for 50k, i.e.
# about 3 MB of upper map and index nodes that any spread of changes copies, plus 350 B per event.
# An image read in place from a file counts its table and its deferred changes (``Deferred.nbytes``,
# ``own_bytes``: issue 24, tracemalloc at 2M events of the mixed log, 72 MB held for a 34 MB file,
# 5-20 MB per answer past it, which the steps above counted at a third); a file about to be loaded is
# made room for at about twice its size (``load_bytes``), so the peak of the load stays in the budget.
_ACL_BYTES, _USER_BYTES, _TOKEN_BYTES = 280, 870, 420
_STEP_BYTES, _EVENT_BYTES = 3_000_000, 350
_OTHER_EVENT_BYTES = 100  # per event past a file's image, for its credentials' and tokens' persistent maps
_LOADED_PER_FILE_BYTE = 2
_KEPT_BESIDE_BYTES = 64 * 2**20

# Starting costs in CPU seconds, until this process has measured its own: replay of the mixed
# log (3.7 us per event from the empty image, up to ~10 us onto a 400k-ACL one) and loading a
# checkpoint file (0.03 us per byte: 0.65 s for the 21 MB file of a 366k-ACL image).
_REPLAY_S_PER_EVENT = 4.5e-6
_LOAD_S_PER_BYTE = 3e-8
# Reading and applying a delta checkpoint file: at 10M events of the mixed log ~6 us CPU and ~58 bytes per change
# (0.46 s for the 4.4 MB file of 76k changes, against ~12 us per event replayed).
_DELTA_S_PER_BYTE = 1e-7
_MIN_SAMPLE = 1000  # events (or bytes / 100) of work before a measurement moves a rate
_SPARSEST = 8  # the fill's widest spacing in intervals: 80k events, ~0.5 s CPU of replay at 1M events


def image_bytes(image: SecurityImage) -> int:
    """Estimated bytes an image holds on its own (shared with no other image): for ACLs read in place from a
    snapshot's section (``acl_deferred``), the section's bytes and the changes deferred onto it."""
    deferred = deferred_of(image.acls.acls, image.acls.index)
    if deferred is None:
        return built_bytes(image)
    return deferred.nbytes() + len(image.scram) * _USER_BYTES + len(image.tokens) * _TOKEN_BYTES


def built_bytes(image: SecurityImage) -> int:
    """Estimated bytes of ``image`` built whole by a replay (every ACL an object)."""
    return len(image.acls) * _ACL_BYTES + len(image.scram) * _USER_BYTES + len(image.tokens) * _TOKEN_BYTES


def step_bytes(events: int, image: SecurityImage | None) -> int:
    """Estimated bytes of an image ``events`` events past one it was replayed from, beyond that one's
    (at most the image's own bytes).  An image read in place from a file with changes deferred onto it
    counts what it holds of its own (``Deferred.own_bytes``: issue 24, the step of a replay estimated
    such an image at a third of what tracemalloc found), plus the other kinds' share of the events."""
    if image is not None:
        deferred = deferred_of(image.acls.acls, image.acls.index)
        if deferred is not None:
            return deferred.own_bytes() + events * _OTHER_EVENT_BYTES
    step = _STEP_BYTES + events * _EVENT_BYTES
    return step if image is None else min(step, image_bytes(image))


def load_bytes(size: int) -> int:
    """Estimated bytes of the image in a snapshot or checkpoint file of ``size`` bytes, read in place (its bytes
    and what a load makes of them: about twice the file on the mixed log at 2M and 10M events)."""
    return size * _LOADED_PER_FILE_BYTE


class _Rate:
    """Seconds per unit of work (CPU time of the thread that did it), learnt from this process's work."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float):
        self.seconds = seconds

    def observe(self, seconds: float, units: int, minimum: int) -> None:
        if units >= minimum:
            self.seconds += (seconds / units - self.seconds) * 0.3


@dataclass(frozen=True, slots=True)
class _Held:
    image: SecurityImage
    lineage: object  # images of one lineage were replayed from one another and share structure


_EMPTY = "empty"  # the lineage replayed from the empty image
_LIVE = "live"  # the writer's published images (their structure is the live image's)


def _release_table(image: SecurityImage) -> None:
    """Let the table of an image read in place from a file go with the last image of its lineage (``forget_made``:
    the nodes and groups it made refer back to it; a replay's ``paused_gc`` freezes that cycle out of the
    collector's reach, and at 10M events RSS went 380 MB past the budget with the estimate within it)."""
    deferred = deferred_of(image.acls.acls, image.acls.index)
    if deferred is not None:
        deferred.table.forget_made()


def _deferring(image: SecurityImage) -> SecurityDelta:
    """A delta onto ``image`` for a replay to a point: an image read in place stays so, however few the changes."""
    delta = SecurityDelta(image)
    delta.acls_delta().defer_from = 1
    return delta


class TimeTravel:
    """The image after any prefix of a log: in-memory images, checkpoint files and replay.

    Every image kept in memory (checkpoints left by replays and by the
    writer's commits, and recent answers) is in one LRU whose estimated bytes
    stay within ``memory_bytes``; ``held_bytes`` is that estimate.  A query
    starts from whichever is cheapest by estimated CPU: the nearest image in
    memory plus a replay, or the nearest checkpoint file or policy snapshot
    plus a replay (``replay_rate`` and ``load_rate`` are learnt from this
    process's own loads and replays).  With ``fill``, the first query that has
    to build an image starts one background replay of the whole log that leaves
    a checkpoint every ``fill_spacing`` events (``interval``, or sparser when
    the whole log would not fit the budget) while they fit, so later points
    need only a short replay.  ``live`` (optional) returns the writer's published
    image, used as is when asked for its offset.  Thread-safe: one query
    builds at a time, and ``note`` (called by the writer per commit) never
    waits for one.
    """

    def __init__(
        self,
        log: Log,
        *,
        now_ms: Callable[[], int] | None = None,
        interval: int = DEFAULT_INTERVAL,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        live: Callable[[], SecurityImage] | None = None,
        use_snapshots: bool = True,
        index: HistoryIndex | None = None,
        files: CheckpointFiles | None = None,
        fill: bool = False,
    ):
        if interval < 1:
            raise InvalidValueError(f"checkpoint interval must be positive, not {interval}")
        if memory_bytes < 0:
            raise InvalidValueError(f"time-travel memory must be at least 0 bytes, not {memory_bytes}")
        self.log = log
        self.index = index  # the history index, when the owner keeps one (secmeta.core.forensics.history_index)
        self.files = files  # checkpoint files on disk, when the owner keeps them (secmeta.core.forensics.checkpoints)
        self.interval = interval
        self.memory_bytes = memory_bytes
        self.replay_rate = _Rate(_REPLAY_S_PER_EVENT)
        self.load_rate = _Rate(_LOAD_S_PER_BYTE)
        self._now_ms = now_ms or (lambda: now_ms_of(log.clock))
        self._live = live
        self._use_snapshots = use_snapshots
        self._offsets: list[int] = []  # of held images, ascending
        self._held: dict[int, _Held] = {}
        self._lru: OrderedDict[int, None] = OrderedDict()  # held offsets, least recently used first
        self._root_bytes: dict[object, int] = {}  # a loaded image's own bytes, by its lineage
        self._lock = threading.Lock()  # held images
        self._build_lock = threading.Lock()  # one query's build at a time
        self._fill = fill
        self._filler: threading.Thread | None = None
        self._closed = threading.Event()
        self._first_ms: tuple[int, int] | None = None  # (log start offset, its event's time)
        self._loads = 0  # files read (``_load``): a build that read one freezes what it made (``_build``)
        if log.start_offset == 0:
            self._keep(SecurityImage.EMPTY, _EMPTY)

    # -- held images -------------------------------------------------------------------

    @property
    def checkpoints(self) -> list[int]:
        """The offsets that have an image in memory, ascending."""
        with self._lock:
            return list(self._offsets)

    def held_bytes(self) -> int:
        """Estimated bytes of the images held in memory (at most ``memory_bytes`` once a query returns).

        Each lineage costs its first image's own bytes (``image_bytes``; nothing for
        the empty image and the writer's lineage, whose structure is the live image's)
        plus, between consecutive images, what the events between them copied (``step_bytes``).
        """
        with self._lock:
            return self._estimate()

    def _estimate(self) -> int:
        members: dict[object, list[int]] = {}
        for offset in self._offsets:
            members.setdefault(self._held[offset].lineage, []).append(offset)
        total = 0
        for lineage, offsets in members.items():
            total += self._root_bytes.get(lineage, 0)
            for a, b in itertools.pairwise(offsets):
                total += step_bytes(b - a, self._held[b].image)
        return total

    def _keep(self, image: SecurityImage, lineage: object, *, root: bool = False) -> None:
        """Hold ``image`` (the first of its lineage when ``root``), then evict the least recently used
        images until the estimate is within the budget (the empty image costs nothing and stays)."""
        with self._lock:
            offset = image.next_offset
            if offset not in self._held:
                bisect.insort(self._offsets, offset)
                self._held[offset] = _Held(image, lineage)
                if root:
                    self._root_bytes[lineage] = image_bytes(image)
            if image is not SecurityImage.EMPTY:
                self._lru[offset] = None
                self._lru.move_to_end(offset)
            while self._lru and self._estimate() > self._for_images():
                self._drop(next(iter(self._lru)))

    def _for_images(self) -> int:
        """What of the budget the held images may take: all but a sixteenth (at most 64 MiB), left for what answers
        keep beside them (groups made from a file's table, kept bindings; issue 24: at 10M events RSS went 7 MB
        past the 1 GiB budget with the images' estimate within it)."""
        return self.memory_bytes - min(self.memory_bytes // 16, _KEPT_BESIDE_BYTES)

    def _make_room(self, nbytes: int) -> None:
        """Evict the least recently used images until ``nbytes`` more fit the budget (the peak of a load that
        follows stays within it; a query that still starts from an evicted image holds it until it returns)."""
        with self._lock:
            while self._lru and self._estimate() + nbytes > self._for_images():
                self._drop(next(iter(self._lru)))

    def _drop(self, offset: int) -> None:
        """Forget the image at ``offset`` (caller holds the lock)."""
        held = self._held.pop(offset)
        self._offsets.remove(offset)
        self._lru.pop(offset, None)
        if all(h.lineage != held.lineage for h in self._held.values()):
            if self._root_bytes.pop(held.lineage, None) is not None:
                _release_table(held.image)

    def note(self, image: SecurityImage) -> None:
        """A newly published image: kept as a checkpoint when ``interval`` events past the newest."""
        with self._lock:  # a query's eviction may empty the list between two unlocked reads
            due = not self._offsets or image.next_offset - self._offsets[-1] >= self.interval
        if due:
            self._keep(image, _LIVE)
            if self.files is not None:
                self.files.write_in_background(image)

    def _nearest(self, n: int) -> tuple[int, _Held] | None:
        """The held image nearest at or before ``n`` that a replay can start from, marked as used."""
        with self._lock:
            i = bisect.bisect_right(self._offsets, n) - 1
            if i < 0:
                return None
            offset = self._offsets[i]
            if offset < self.log.start_offset and offset != n:
                return None  # the events after it were deleted
            if offset in self._lru:
                self._lru.move_to_end(offset)
            return offset, self._held[offset]

    def _held_at(self, offset: int) -> _Held | None:
        """The held image at exactly ``offset``, marked as used, or None."""
        with self._lock:
            held = self._held.get(offset)
            if held is not None and offset in self._lru:
                self._lru.move_to_end(offset)
            return held

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
                kept = n in self._held
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
        require_point_int("timestamp", timestamp_ms)
        now = self._now_ms()
        if timestamp_ms > now:
            raise PointInTimeError(f"time {format_ms(timestamp_ms)} is in the future (now is {format_ms(now)})")
        begin = self.begin_ms() if self.log.start_offset == 0 else None
        if begin is not None and timestamp_ms < begin:
            raise PointInTimeError(
                f"time {format_ms(timestamp_ms)} is before the store began ({format_ms(begin)})")
        n = self.log.offset_for_timestamp(timestamp_ms + 1)
        if self.log.start_offset > 0 and n == self.log.start_offset:
            first = self.first_timestamp_ms()
            if first is None or timestamp_ms < first:
                raise PointInTimeError(
                    f"time {format_ms(timestamp_ms)} is before the log's retained history "
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
        held = self._nearest(n)
        if held is not None and held[0] == n:
            return held[1].image
        with self._build_lock:
            image, lineage = self._build(n)
        self._keep(image, lineage)
        if self._fill and self._filler is None and self._fill_fits():
            self._start_fill()
        return image

    def _fill_fits(self) -> bool:
        """Whether the in-memory fill is worth its replay of the whole log: the live image (the largest), built
        whole as the fill builds its images, takes at most a quarter of the budget.  Past that (issue 24: 4M ACLs at 10M events of the mixed log, over the
        1 GiB default on its own) the fill could hold checkpoints over a small part of the log only, after
        seconds of CPU beside the queries; points are built from the checkpoint files instead."""
        live = self._live() if self._live is not None else None
        return live is None or built_bytes(live) <= self.memory_bytes // 4

    def image_at_or_after(self, n: int) -> SecurityImage:
        """The image at the first offset at or after ``n`` (``n`` validated) that can be built.

        That is ``n`` itself unless retention deleted the events leading to it: then the oldest held
        image, policy snapshot or checkpoint file past ``n`` (the live image at the latest).  Who a
        token involves (owner, requester, renewers) never changes, so the tokens of this image plus
        the tokens issued from ``n`` on give the parties of every token alive at ``n`` and still
        alive at this image; a token issued before the log's start and removed before it is absent.
        """
        try:
            return self.image_at(n)
        except PointInTimeError:
            if n < self.log.start_offset:
                raise
        with self._lock:
            held = [offset for offset in self._offsets if offset > n]
        live = self._live() if self._live is not None else None
        later = {*held, *(offset for offset, _ in self._files_at_or_before(self.log.end_offset) if offset > n)}
        if live is not None:
            later.add(live.next_offset)
        for offset in sorted(later):
            try:
                return self.image_at(offset)
            except PointInTimeError:  # a file found bad and deleted: the next one
                continue
        raise PointInTimeError(self._unbuildable(n))

    def _build(self, n: int) -> tuple[SecurityImage, object]:
        """The image at ``n`` and its lineage, from the cheapest start (caller holds the build lock).

        The collector stays off from the start's load to the end of the replay, and what a file's load made is frozen
        with the result (``paused_gc``): it lives as long as the file's lineage is held.  Issue 24: re-enabled at the
        end of the load, the collector's first young collection traversed the table's per-ACL and per-group lists,
        ~0.04-0.05 s of the costliest point at 10M events, before the delta's apply froze them anyway."""
        with paused_gc() as paused:
            loads = self._loads
            start = self._start(n)
            if start is None:
                raise PointInTimeError(self._unbuildable(n))
            offset, held = start
            image = self._replay(held.image, offset, n, held.lineage)
            paused.freeze = self._loads != loads
        return image, held.lineage

    def _unbuildable(self, n: int) -> str:
        """Why no image at ``n`` can be built (nothing held or on disk to replay to it from)."""
        start = self.log.start_offset
        if n < start:
            return f"offset {n} is before the log's start ({start}) and no valid snapshot covers it"
        where = (f"exactly at the log's start (offset {start})" if n == start
                 else f"between the log's start (offset {start}) and offset {n}")
        return (f"offset {n} cannot be built: retention deleted the events before offset {start}, and no image "
                f"is held and no valid snapshot or checkpoint file is {where} to replay from")

    def _start(self, n: int) -> tuple[int, _Held] | None:
        """Where to start for ``n``: the nearest held image, unless loading a file (and its newest delta file at or
        before ``n``, or a delta file onto a held image at a full file's offset) and replaying from there is
        estimated to cost less CPU (files are listed only past ``interval`` events)."""
        base = self._nearest(n)
        if not self._use_snapshots or (base is not None and n - base[0] <= self.interval):
            return base
        per_event = self.replay_rate.seconds
        best = None if base is None else (n - base[0]) * per_event
        for offset, path in self._files_at_or_before(n):
            delta = self._delta_at_or_before(offset, path, n)
            if base is not None and offset < base[0] and (delta is None or delta[0] <= base[0]):
                break  # neither this file nor its delta is nearer than the held image; nor are earlier files
            after = (n - offset) * per_event if delta is None else delta[2] + (n - delta[0]) * per_event
            held = self._held_at(offset)
            if held is not None:  # the image there is held (a file's, an answer's): a delta onto it, if one is nearer
                if delta is not None and best is not None and after < best:
                    return self._with_delta(held, offset, delta[0]) or base
                break
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if best is not None and size * self.load_rate.seconds + after >= best:
                continue
            self._make_room(load_bytes(size))
            loaded = self._load(offset, path, size)
            if loaded is not None:
                lineage = ("file", offset)
                self._keep(loaded, lineage, root=True)
                held = _Held(loaded, lineage)
                return (None if delta is None else self._with_delta(held, offset, delta[0])) or (offset, held)
        return base

    def _delta_at_or_before(self, base: int, path: Path, n: int) -> tuple[int, Path, float] | None:
        """The newest delta file at or before ``n`` of the checkpoint file at ``base`` (``path``): its offset, path and
        estimated CPU to apply, or None (none, or ``path`` is a policy snapshot, which has no delta files)."""
        if self.files is None or path.parent != self.files.directory:
            return None
        found = self.files.delta_at_or_before(base, n)
        if found is None:
            return None
        try:
            size = found[1].stat().st_size
        except OSError:
            return None
        return found[0], found[1], size * _DELTA_S_PER_BYTE

    def _with_delta(self, held: _Held, base: int, offset: int) -> tuple[int, _Held] | None:
        """The image at ``offset``, from the delta file there onto ``held``'s image (at ``base``), held in its lineage;
        None when the delta file is found bad (reported and deleted by ``CheckpointFiles.load_delta``) or gone."""
        assert self.files is not None
        net = self.files.load_delta(base, offset)
        if net is None:
            return None
        with paused_gc() as paused:
            paused.freeze = len(net) >= FREEZE_AFTER
            image = SecurityDelta.of_net(held.image, net).apply(offset)
        self._keep(image, held.lineage)
        return offset, _Held(image, held.lineage)

    def _files_at_or_before(self, n: int) -> list[tuple[int, Path]]:
        """Policy snapshots and checkpoint files at or before ``n``: (offset, path), nearest first, and at one offset
        the checkpoint file before the policy snapshot: only it may have delta files, and ``_start`` stops at the
        first file whose image is held (listed after it, the checkpoint's deltas were never looked at)."""
        directories = [self.log.store.snapshot_dir] + ([self.files.directory] if self.files is not None else [])
        found = [(int(path.stem.rsplit("-", 1)[-1]), number, path) for number, directory in enumerate(directories)
                 for path in list_snapshots(directory)]
        return [(offset, path) for offset, _, path in sorted((f for f in found if f[0] <= n), reverse=True)]

    def _load(self, offset: int, path: Path, size: int) -> SecurityImage | None:
        """The image in a checkpoint file (bad ones reported and deleted) or policy snapshot, or None."""
        began = time.thread_time()
        self._loads += 1
        if self.files is not None and path.parent == self.files.directory:
            image = self.files.load(offset)
        else:
            try:
                info, image = read_snapshot(path, SecurityImageSnapshot(), self.log.keyring)
            except (SnapshotError, OSError):
                return None  # the store's own open reports a bad policy snapshot
            link = self.log.link_at(info.next_offset)
            if info.next_offset != offset or link is None or link != info.link:
                return None
            image = replace(image, next_offset=offset)
        if image is not None:
            self.load_rate.observe(time.thread_time() - began, size, _MIN_SAMPLE * 100)
        return image

    def _replay(self, image: SecurityImage, start: int, n: int, lineage: object) -> SecurityImage:
        """Replay events [start, n) onto ``image``, leaving checkpoints every ``interval`` events unless
        the background fill leaves them (each costs an index update: a replay leaving them every 10k
        events takes about twice the CPU of one that does not) or ``image`` is read in place from a file
        (``acl_deferred``: each checkpoint would gather every change since the file again, so a replay of
        100k events leaving ten of them cost five times one that does not; the answer is held)."""
        if start == n:
            return image
        began = time.thread_time()
        checkpoints = not self._fill and deferred_of(image.acls.acls, image.acls.index) is None
        with paused_gc() as paused:
            delta, since = _deferring(image), start
            for first, events in self._batches(start, n):  # replay's bulk route: no envelopes, creations as rows
                delta.replay_events(first, events)
                end = first + len(events)
                if checkpoints and end < n and end - since >= self.interval:
                    checkpoint = delta.apply(end)
                    self._keep(checkpoint, lineage)
                    if self.files is not None:
                        self.files.write_in_background(checkpoint)
                    delta, since = _deferring(checkpoint), end
            # The result (held) and any checkpoints live long: keep full collections off them.
            paused.freeze = n - start >= FREEZE_AFTER
            result = delta.apply(n)
        self.replay_rate.observe(time.thread_time() - began, n - start, _MIN_SAMPLE)
        return result

    def _batches(self, start: int, n: int) -> Iterator[tuple[int, list]]:
        """The events [start, n) a batch at a time as replay reads them (``Log.replay_batches``) for a replay onto
        the image at ``start``: a PointInTimeError naming ``n`` when retention deleted events from ``start`` on
        since the image was chosen."""
        try:
            yield from self.log.replay_batches(start, n, strict=True)
        except OffsetOutOfRangeError as exc:
            raise PointInTimeError(
                f"offset {n} cannot be built: the image it would be replayed from is at offset {start}, "
                f"and retention has since deleted the events after it ({exc})") from None

    # -- the background fill -------------------------------------------------------------

    def _start_fill(self) -> None:
        with self._lock:
            if self._filler is not None or self._closed.is_set():
                return
            filler = threading.Thread(target=self._fill_quietly, name="secmeta-timetravel-fill", daemon=True)
            filler.start()
            self._filler = filler  # only a started thread: wait() and close() may read it without the lock

    def _fill_quietly(self) -> None:
        try:
            self._fill_memory()
        except Exception as exc:  # noqa: BLE001 - checkpoints are an optimisation: never take the store down
            logger.warning("time-travel checkpoints not filled: %s", exc)

    def fill_spacing(self, events: int) -> int:
        """The densest spacing (``interval``, doubled until it fits) at which checkpoints over ``events``
        events fit in what the budget has left, by ``step_bytes`` (capped at the live image's bytes).
        Never sparser than ``_SPARSEST`` intervals: a longer replay from a checkpoint would cost about
        what loading a file does, so past that the fill covers what fits from the log's start."""
        room = self.memory_bytes - self.held_bytes()
        largest = self._live() if self._live is not None else None
        spacing = self.interval
        while (spacing < min(events, _SPARSEST * self.interval)
               and events // spacing * step_bytes(spacing, largest) > room):
            spacing *= 2
        return spacing

    def _fill_memory(self) -> None:
        """Replay the log once from its start (or the first image past it), keeping a checkpoint every ``fill_spacing`` events until
        the next would not fit the budget.  Images of other loaded lineages the replay has passed are
        dropped: a checkpoint of this one is as near, without a loaded image's own bytes."""
        start, end = self.log.start_offset, self.log.end_offset
        spacing = self.fill_spacing(end - start)
        try:
            with self._build_lock:
                image, lineage = self._build(start)
        except PointInTimeError:  # retention left no image at the log's start: fill from the first past it
            start = self.image_at_or_after(start).next_offset
            with self._build_lock:
                image, lineage = self._build(start)
        since = start
        delta = SecurityDelta(image)
        for first, events in self.log.replay_batches(start, end, strict=True):  # not onto an image retention cut off
            if self._closed.is_set():
                return
            with paused_gc():
                delta.replay_events(first, events)
            if first + len(events) - since < spacing:
                continue
            with paused_gc(freeze=True):
                checkpoint = delta.apply(first + len(events))
            with self._lock:
                passed = [o for o in self._offsets if o <= checkpoint.next_offset
                          and isinstance(self._held[o].lineage, tuple) and self._held[o].lineage != lineage]
                for offset in passed:
                    self._drop(offset)
                fits = (checkpoint.next_offset in self._held or self._estimate()
                        + step_bytes(checkpoint.next_offset - since, checkpoint) <= self.memory_bytes)
            if not fits:
                return
            self._keep(checkpoint, lineage)
            delta, since = SecurityDelta(checkpoint), checkpoint.next_offset

    def wait(self) -> None:
        """Wait for the background fill, if one was started."""
        filler = self._filler
        if filler is not None:
            filler.join()

    def close(self) -> None:
        """Stop the background fill and wait for it."""
        self._closed.set()
        self.wait()
