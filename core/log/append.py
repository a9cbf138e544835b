"""Appending batches, with group commit.

An append is one batch: encoded, framed with its CRC and chain link, written
with one pwrite, then made durable according to the fsync policy.  Under
``always``, concurrent appenders share fsyncs (group commit): whoever holds
the sync lock flushes everything written so far, so waiting appenders find
their batch already durable.  Readers only ever see durable, complete batches
under ``always``; under ``interval`` and ``never`` they see what was written.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from secmeta.core.errors import InvalidValueError, SecmetaError, StoreLockedError
from secmeta.core.log.chain import Chain, check_extends
from secmeta.core.log.config import FsyncPolicy, LogConfig
from secmeta.core.log.errors import LogFailedError
from secmeta.core.log.format import MAX_FRAME, decode_frame, encode_frame
from secmeta.core.log.highwater import HighWater, Mark
from secmeta.core.log.segment import Segment
from secmeta.core.log.state import LogState
from secmeta.core.store.commit_gate import PendingBatch
from secmeta.core.store.storedir import StoreDirectory
from secmeta.events.codec import EventCodec
from secmeta.events.durable import fsync_dir
from secmeta.events.keyring import Keyring
from secmeta.events.records import Envelope


@dataclass(frozen=True)
class AppendResult:
    """Where a batch landed: offsets [base_offset, next_offset)."""

    base_offset: int
    next_offset: int
    timestamp_ms: int
    link: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class _WrittenBatch:
    """The fields Segment.note needs, for a batch we just wrote."""

    base_offset: int
    count: int
    timestamp_ms: int
    link: bytes
    size: int

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count


class Appender:
    """The writer's side of an open log; after a failed fsync it refuses every write."""

    def __init__(self, state: LogState, store: StoreDirectory, keyring: Keyring, codec: EventCodec, chain: Chain,
                 config: LogConfig, high_water: HighWater):
        self.state = state
        self.store = store
        self.keyring = keyring
        self.codec = codec
        self.chain = chain
        self.config = config
        self.high_water = high_water
        self.write_lock = threading.Lock()  # held to write, and by retention to cut the log's front
        self._sync_lock = threading.Lock()
        self.failed: BaseException | None = None
        self.closed = False

    def append(self, envelopes: Sequence[Envelope], gate: Callable[[PendingBatch], None] | None = None) -> AppendResult:
        """Append one batch; returns once it is durable per the fsync policy.

        Encoding errors (an event that does not match its schema) raise before
        anything is written. ``gate`` (replicated mode, secmeta.core.store.commit_gate) is handed the
        batch exactly as it will be written, before it is: when it raises, nothing is written.
        """
        state = self.state
        with self.write_lock:
            self.check_writable()
            base = state.next_offset
            frame, link, ts = self.frame_batch(envelopes, base, state.last_link)
            if gate is not None:
                gate(PendingBatch(base, base + len(envelopes), ts, frame, state.last_link, link))
            seg, written_to = self._write_frame(frame, _WrittenBatch(base, len(envelopes), ts, link, len(frame)))
        if self.config.fsync == FsyncPolicy.ALWAYS:
            self._sync_through(seg, written_to)
        return AppendResult(base, base + len(envelopes), ts, link)

    def frame_batch(self, envelopes: Sequence[Envelope], base: int, prev_link: bytes) -> tuple[bytes, bytes, int]:
        """The frame of a batch of ``envelopes`` at offset ``base`` chained from ``prev_link``, its link and timestamp;
        nothing is written (InvalidValueError for an empty or oversized batch)."""
        if not envelopes:
            raise InvalidValueError("cannot append an empty batch")
        payload = self.codec.encode_batch(base, envelopes)
        ts = max(e.timestamp_ms for e in envelopes)
        frame, link = encode_frame(base, len(envelopes), ts, self.codec.fingerprint, self.chain.key_id, self.chain.key,
                                   prev_link, payload)
        if len(frame) - 4 > MAX_FRAME:
            raise InvalidValueError(f"a batch of {len(frame):,} bytes exceeds the {MAX_FRAME:,}-byte frame limit; split the request")
        return frame, link, ts

    def append_frame(self, frame: bytes) -> tuple[list[Envelope], AppendResult]:
        """Append a batch another writer framed (a replica's copy of the commit point), byte for byte, once
        it extends this log: its first offset is this log's end and its link chains from this log's last
        link under a key of the keyring, and its events decode (their writer schema is known). Else
        DivergedError naming the offset and both links (or the decoding error), and nothing is written.
        Returns the batch's events and where it landed; durable as ``append``'s."""
        return self.append_frames([frame])[0]

    def append_frames(self, frames: Sequence[bytes]) -> list[tuple[list[Envelope], AppendResult]]:
        """``append_frame`` for consecutive batches (a replicated writer's group, committed together elsewhere),
        made durable with one sync after the last. A frame that does not extend the log raises as there; the
        frames before it are written, not yet synced."""
        state = self.state
        appended: list[tuple[list[Envelope], AppendResult]] = []
        with self.write_lock:
            self.check_writable()
            for frame in frames:
                batch = decode_frame(frame, 0)
                if batch.size != len(frame):
                    raise InvalidValueError(f"a frame of {len(frame)} bytes holds {batch.size} bytes of batch: not one "
                                            "batch")
                check_extends(self.chain, batch, state.next_offset, state.last_link)
                envelopes = self.codec.decode_batch(batch.payload, batch.schema_fp, batch.base_offset)
                ts = batch.timestamp_ms
                seg, written_to = self._write_frame(frame, _WrittenBatch(batch.base_offset, batch.count, ts,
                                                                         batch.link, len(frame)))
                appended.append((envelopes, AppendResult(batch.base_offset, batch.next_offset, ts, batch.link)))
        if appended and self.config.fsync == FsyncPolicy.ALWAYS:
            self._sync_through(seg, written_to)
        return appended

    def _write_frame(self, frame: bytes, written: _WrittenBatch) -> tuple[Segment, int]:
        """Write a framed batch at the log's end (rolling the segment when full); the caller holds write_lock."""
        state = self.state
        seg = state.segments[-1]
        if seg.size and seg.size + len(frame) > self.config.segment_bytes:
            seg = self._roll()
        position = seg.write(frame)
        seg.note(written, position)  # type: ignore[arg-type]
        state.next_offset = written.next_offset
        state.last_link = written.link
        if self.config.fsync != FsyncPolicy.ALWAYS:
            state.publish(seg, seg.size, state.next_offset)
        return seg, seg.size

    def check_writable(self) -> None:
        if self.closed:
            raise SecmetaError("the log is closed")
        if self.failed is None and self.high_water.failed is not None:
            self.failed = self.high_water.failed
        if self.failed is not None:
            raise LogFailedError(f"an earlier write failed ({self.failed}); reopen the store to recover")

    def check_in_place(self) -> None:
        """Before creating a file by path: the store directory must still be the one locked, else the log fails."""
        try:
            self.store.check_locked()
        except StoreLockedError as exc:
            self.failed = exc
            raise

    def flush(self) -> None:
        """Fsync everything written so far (any policy)."""
        if self.closed:
            return
        with self.write_lock:
            seg = self.state.segments[-1]
            size = seg.size
        if seg.synced_size < size:
            self._sync_through(seg, size)

    def flush_every(self, interval_s: float) -> None:
        """The ``interval`` policy's flusher thread: fsync what was written, until the log closes."""
        while not self.closed:
            time.sleep(interval_s)
            self.flush()

    def _sync_through(self, seg: Segment, size: int) -> None:
        """Group commit: make everything written so far durable unless someone already did."""
        with self._sync_lock:
            if seg.synced_size >= size:
                return
            with self.write_lock:
                active, active_size = self.state.segments[-1], self.state.segments[-1].size
                end, link = self.state.next_offset, self.state.last_link
            try:
                active.sync()
                self.high_water.record(Mark(end, link))  # only after the data it vouches for is durable
            except OSError as exc:
                self.failed = exc
                raise LogFailedError(f"fsync of {active.name} failed: {exc}") from exc
            active.synced_size = active_size
            self.state.publish(active, active_size, end)

    def _roll(self) -> Segment:
        old = self.state.segments[-1]
        try:
            old.sync()
        except OSError as exc:
            self.failed = exc
            raise LogFailedError(f"fsync of {old.name} failed while rolling: {exc}") from exc
        old.synced_size = old.size
        self.state.publish(old, old.size, self.state.next_offset)
        self.check_in_place()
        old.write_indexes(self.keyring, self.store.store_id)
        seg = Segment(self.store.log_dir, self.state.next_offset, writable=True,
                      index_interval=self.config.index_interval_bytes)
        fsync_dir(self.store.log_dir)
        with self.state.visible:
            self.state.add_segment(seg)
        return seg
