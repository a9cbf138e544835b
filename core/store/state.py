"""Rebuilding state from the log: newest valid snapshot + replay of the tail.

A projection says how a batch of events changes a state; a snapshot codec
says how that state is stored.  Both the store and the CLI load state only
through here, so every reader reaches the same state by the same replay.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from secmeta.core.errors import InvalidValueError, SecmetaError
from secmeta.core.log import Log
from secmeta.core.log.fit import snapshot_misfit
from secmeta.core.snapshots.forked_snapshot import write_snapshot_forked
from secmeta.core.times import Clock, now_ms, wall_clock
from secmeta.events.records import Envelope
from secmeta.projections.snapshot import (
    SnapshotCodec,
    SnapshotError,
    SnapshotInfo,
    SnapshotPolicy,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)

S = TypeVar("S")
logger = logging.getLogger("secmeta.snapshots")
# Replay reads the log's batches into one delta and applies it every REPLAY_APPLY events
# (and at the end): a projection's result does not depend on how events are split into
# applies, and big applies let images build in bulk.
REPLAY_APPLY = 2_000_000
PRUNE_RETRIES = 3
CLOSE_GRACE_S = 5.0  # what close() gives a background snapshot under way before killing its child


class Delta(Protocol[S]):
    """A state plus events replayed into it so far."""

    def replay_events(self, first_offset: int, events: Sequence) -> None:
        """Replay one batch's events as ``Log.replay_batches`` reads them, the first at ``first_offset``."""
        ...

    def apply(self, next_offset: int) -> S: ...


class Projection(Protocol[S]):
    """How a batch of events changes a state (a pure function of both).

    A projection may also offer ``delta(state) -> Delta``: replay then reads
    many batches into one delta and applies it once (see REPLAY_APPLY).
    """

    empty: S

    def apply(self, state: S, envelopes: Sequence[Envelope]) -> S: ...


class _Applied(Generic[S]):
    """The Delta of a projection without its own: each batch's envelopes are applied at once."""

    def __init__(self, projection: Projection[S], state: S):
        self.projection, self.state = projection, state

    def replay_events(self, first_offset: int, envelopes: Sequence[Envelope]) -> None:
        self.state = self.projection.apply(self.state, envelopes)

    def apply(self, next_offset: int) -> S:
        return self.state


def _delta(projection: Projection[S], state: S) -> Delta[S]:
    delta = getattr(projection, "delta", None)
    return _Applied(projection, state) if delta is None else delta(state)


def _batches(log: Log, delta: Delta[S], start: int, end: int | None) -> Iterator[tuple[int, Sequence]]:
    """The batches in [start, end) as ``delta`` replays them: envelopes for a projection without a delta."""
    if isinstance(delta, _Applied):
        return ((events[0].offset, events) for events in log.read_batches(start, end) if events)
    return log.replay_batches(start, end)


@dataclass(frozen=True)
class LoadedState(Generic[S]):
    state: S
    next_offset: int
    snapshot: SnapshotInfo | None
    replayed_events: int
    rejected_snapshots: tuple[str, ...] = ()

    def __str__(self) -> str:
        """What was loaded.  The snapshots refused on the way are not repeated here: ``load_state`` has logged each
        with its reason and what the load did instead (a warning, which the CLI prints on stderr)."""
        base = f"snapshot at offset {self.snapshot.next_offset}" if self.snapshot else "an empty state"
        return f"loaded {base} + {self.replayed_events} replayed events, now at offset {self.next_offset}"


def newest_valid_snapshot(log: Log, codec: SnapshotCodec[S]) -> tuple[SnapshotInfo | None, S | None, list[str]]:
    """The newest snapshot that passes its CRC and HMAC and fits the log's chain, with reasons for skips.

    A snapshot the writer prunes while we read it is skipped, and the listing taken again.
    """
    for _ in range(PRUNE_RETRIES):
        try:
            return _newest_valid_snapshot(log, codec)
        except FileNotFoundError:
            continue
    return _newest_valid_snapshot(log, codec)


def _newest_valid_snapshot(log: Log, codec: SnapshotCodec[S]) -> tuple[SnapshotInfo | None, S | None, list[str]]:
    rejected: list[str] = []
    for path in reversed(list_snapshots(log.store.snapshot_dir)):
        try:
            info, state = read_snapshot(path, codec, log.keyring)
        except SnapshotError as exc:
            rejected.append(f"{path.name}: {exc}")
            continue
        misfit = snapshot_misfit(info.next_offset, info.link, log.start_offset, log.end_offset, log.link_at)
        if misfit is not None:
            rejected.append(f"{path.name}: {misfit}")
            continue
        return info, state, rejected
    return None, None, rejected


def load_state(log: Log, projection: Projection[S], codec: SnapshotCodec[S], *, end: int | None = None) -> LoadedState[S]:
    """Newest valid snapshot (at or before ``end``) plus replay of the log up to ``end``."""
    info, state, rejected = newest_valid_snapshot(log, codec)
    for reason in rejected:  # never silent: a refused snapshot costs a longer replay, and may be damage
        logger.warning("skipped %s; the state is loaded from an older snapshot or replayed from the log instead",
                       reason)
    if info is not None and end is not None and info.next_offset > end:
        info, state = None, None  # too new for the point asked: replay from the start
    if info is None:
        if log.start_offset > 0:
            raise SecmetaError(
                f"the log starts at offset {log.start_offset} (older segments were deleted) "
                "and no valid snapshot covers them: " + "; ".join(rejected or ["no snapshot found"])
            )
        state, start = projection.empty, log.start_offset
    else:
        start = info.next_offset
    replayed = pending = 0
    position = start
    delta = _delta(projection, state)
    for first, events in _batches(log, delta, start, end):
        if not events:
            continue
        delta.replay_events(first, events)
        replayed, pending, position = replayed + len(events), pending + len(events), first + len(events)
        if pending >= REPLAY_APPLY:
            state, pending = delta.apply(position), 0
            delta = _delta(projection, state)
    if pending:
        state = delta.apply(position)
    return LoadedState(state, position, info, replayed, tuple(rejected))  # type: ignore[arg-type]


class Snapshotter(Generic[S]):
    """Takes snapshots when the policy says so, and prunes old ones.

    ``child_timeout`` bounds a background snapshot's forked child in seconds (default:
    secmeta.core.snapshots.forked_snapshot.snapshot_timeout, scaled with the image).
    """

    def __init__(self, log: Log, codec: SnapshotCodec[S], policy: SnapshotPolicy, *, keep: int = 2,
                 delete_covered_segments: bool = False, clock: Clock = wall_clock, child_timeout: float | None = None):
        if keep < 1:
            raise InvalidValueError(f"keep must be at least 1, not {keep}")
        if child_timeout is not None and not child_timeout > 0:
            raise InvalidValueError(f"child_timeout must be a positive number of seconds, not {child_timeout!r}")
        self.log, self.codec, self.policy = log, codec, policy
        self.keep, self.delete_covered_segments = keep, delete_covered_segments
        self.child_timeout = child_timeout
        self._clock = clock
        existing = list_snapshots(log.store.snapshot_dir)
        self._last_offset = int(existing[-1].stem.split("-")[1]) if existing else log.start_offset
        self._last_bytes = self._log_bytes()
        self._last_time_ms = self._now_ms()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._abort = threading.Event()

    def _now_ms(self) -> int:
        return now_ms(self._clock)

    def _log_bytes(self) -> int:
        return sum(s.size for s in self.log.segments())

    def due(self, next_offset: int) -> bool:
        events = next_offset - self._last_offset
        return self.policy.due(events, self._log_bytes() - self._last_bytes, self._now_ms() - self._last_time_ms)

    def maybe_snapshot(self, state: S, next_offset: int, *, background: bool = False) -> SnapshotInfo | None:
        """Snapshot if the policy says so; with ``background``, in a thread (one at a time).

        States are immutable, so writing one in the background while newer batches
        are applied is safe.  The background thread encodes the state in a forked child
        (secmeta.core.snapshots.forked_snapshot): the same file, written without holding this process's
        GIL beside the writers.  A child that fails, hangs past ``child_timeout`` or is
        aborted by close() is killed and leaves no file; one warning is logged and the
        policy starts counting again, so its next trigger tries again.  It does not fall
        back to writing in this process: a snapshot is derived data (the log holds every
        event, a store without a fresh snapshot opens slower, never wrong), and encoding a
        large image here would stall the writers on the GIL for seconds, the very cost
        the child exists to avoid, on a machine the timeout already says is overloaded.
        """
        if not self.due(next_offset):
            return None
        if not background:
            return self.snapshot(state, next_offset)
        with self._thread_lock:
            if not self._abort.is_set() and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._background, args=(state, next_offset),
                                                name="secmeta-snapshot", daemon=True)
                self._thread.start()
        return None

    def _background(self, state: S, next_offset: int) -> None:
        def write(*args, **kwargs) -> SnapshotInfo:
            return write_snapshot_forked(*args, timeout=self.child_timeout, abort=self._abort, **kwargs)

        try:
            self._take(state, next_offset, write)
        except Exception as exc:  # noqa: BLE001 - a failed snapshot must never take the store down
            self._restart_policy(next_offset, self._now_ms())
            logger.warning("snapshot at offset %d failed (the policy's next trigger tries again): %s",
                           next_offset, exc)

    def wait(self) -> None:
        """Wait for a background snapshot in progress (its child ends at its timeout at the latest)."""
        thread = self._thread
        if thread is not None:
            thread.join()

    def close(self) -> None:
        """Start no more background snapshots; give one in progress ``CLOSE_GRACE_S`` to finish (a store
        closed just past a policy trigger still leaves its snapshot), then kill it (it leaves no file)."""
        thread = self._thread
        if thread is not None:
            thread.join(CLOSE_GRACE_S)
        self._abort.set()
        self.wait()

    def snapshot(self, state: S, next_offset: int) -> SnapshotInfo:
        """Write a snapshot of ``state`` (at ``next_offset``) now, in this thread."""
        return self._take(state, next_offset, write_snapshot)

    def _restart_policy(self, next_offset: int, time_ms: int) -> None:
        """The policy counts events, bytes and age from here on."""
        self._last_offset, self._last_bytes, self._last_time_ms = next_offset, self._log_bytes(), time_ms

    def _take(self, state: S, next_offset: int, write: Callable[..., SnapshotInfo]) -> SnapshotInfo:
        link = self.log.link_at(next_offset)
        if link is None:
            raise SecmetaError(f"no batch of the log ends at offset {next_offset}: cannot snapshot there")
        self.log.check_in_place()
        info = write(
            self.log.store.snapshot_dir, self.codec, state,
            next_offset=next_offset, link=link, timestamp_ms=self._now_ms(), keyring=self.log.keyring,
        )
        self._restart_policy(next_offset, info.timestamp_ms)
        for old in list_snapshots(self.log.store.snapshot_dir)[: -self.keep]:
            old.unlink(missing_ok=True)
        if self.delete_covered_segments:
            self.log.delete_segments_before(next_offset)
        return info
