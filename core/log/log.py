"""The segmented, append-only, fsync'd metadata log.

An append is one batch: encoded, framed with its CRC and chain link, written
with one pwrite, then made durable according to the fsync policy.  Under
``always``, concurrent appenders share fsyncs (group commit): whoever holds
the sync lock flushes everything written so far, so waiting appenders find
their batch already durable.  Readers only ever see durable, complete batches
under ``always``; under ``interval`` and ``never`` they see what was written.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from secmeta.core.errors import CorruptLogError, InvalidValueError, SecmetaError, StoreLockedError
from secmeta.core.log.anchor import ANCHOR_FILE, Anchor, read_anchor, write_anchor
from secmeta.core.log.format import MAX_FRAME, Batch, FrameError, encode_frame, genesis_link
from secmeta.core.log.highwater import HighWater, Mark, is_torn_tail
from secmeta.core.log.segment import Segment, segment_name
from secmeta.core.store.storedir import StoreDirectory
from secmeta.events.codec import EventCodec
from secmeta.events.durable import fsync_dir, write_atomically
from secmeta.events.errors import UnknownKeyError
from secmeta.events.keyring import Keyring
from secmeta.events.records import Envelope

logger = logging.getLogger("secmeta.log")
OPEN_ATTEMPTS = 3  # a read-only open retries when the writer deletes a file it was about to read


class FsyncPolicy(StrEnum):
    ALWAYS = "always"
    INTERVAL = "interval"
    NEVER = "never"


@dataclass(frozen=True)
class LogConfig:
    """How the log writes: segment size, fsync policy, index density."""

    segment_bytes: int = 64 * 1024 * 1024
    fsync: FsyncPolicy | str = FsyncPolicy.ALWAYS
    fsync_interval_ms: int = 100
    index_interval_bytes: int = 4096

    def __post_init__(self):
        try:
            object.__setattr__(self, "fsync", FsyncPolicy(self.fsync))
        except ValueError:
            raise InvalidValueError(f"fsync policy must be always, interval or never, not {self.fsync!r}") from None
        if self.segment_bytes < 1024:
            raise InvalidValueError(f"segment_bytes must be at least 1024, not {self.segment_bytes}")
        if self.fsync_interval_ms <= 0:
            raise InvalidValueError(f"fsync_interval_ms must be positive, not {self.fsync_interval_ms}")


@dataclass(frozen=True)
class AppendResult:
    """Where a batch landed: offsets [base_offset, next_offset)."""

    base_offset: int
    next_offset: int
    timestamp_ms: int
    link: bytes = field(repr=False)


@dataclass(frozen=True)
class RecoveryReport:
    """What opening the log had to repair (nothing, or a truncated tail)."""

    segment: str | None = None
    truncated_bytes: int = 0
    from_offset: int | None = None
    reason: str = ""

    def __bool__(self) -> bool:
        return self.truncated_bytes > 0

    def __str__(self) -> str:
        if not self:
            return "clean: nothing to recover"
        return (
            f"truncated {self.truncated_bytes} bytes of torn or corrupt tail in segment "
            f"{self.segment} from offset {self.from_offset} ({self.reason})"
        )


class LogFailedError(SecmetaError):
    """An fsync failed: the log's durable state is unknown, so it refuses further writes."""


class OffsetOutOfRangeError(SecmetaError):
    """A reader asked for offsets retention already deleted (Kafka's OFFSET_OUT_OF_RANGE)."""


def retention_configured(store: StoreDirectory) -> bool:
    """Whether the store's saved settings (config.json) enable deleting covered segments."""
    try:
        return json.loads((store.path / "config.json").read_text()).get("delete_covered_segments") is True
    except (OSError, ValueError, AttributeError):
        return False


class Log:
    """A store directory's log. Use ``Log.open``; one writer process per directory."""

    def __init__(self, store: StoreDirectory, keyring: Keyring, codec: EventCodec, config: LogConfig, read_only: bool,
                 retention: bool = False):
        self.store = store
        self.retention = retention
        self.keyring = keyring
        self.codec = codec
        self.config = config
        self.read_only = read_only
        self.recovery = RecoveryReport()
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._write_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._visible = threading.Condition(threading.Lock())
        self._next_offset = 0
        self._visible_end = 0
        self._start_offset = 0
        self._last_link = genesis_link(store.store_id)
        self._start_link = self._last_link
        self._failed: BaseException | None = None
        self._closed = False
        self._flusher: threading.Thread | None = None
        self._chain_key_id = keyring.newest_id
        self._chain_key = keyring.chain_key(self._chain_key_id)
        self._chain_keys = {self._chain_key_id: self._chain_key}
        self._high_water = HighWater(store.log_dir, store.store_id, keyring)
        self._anchor_stamp: tuple[int, int] | None = None

    # -- opening ---------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        *,
        keyring: Keyring,
        codec: EventCodec | None = None,
        config: LogConfig | None = None,
        create: bool = True,
        read_only: bool = False,
        retention: bool | None = None,
    ) -> Log:
        """Open the log of the store at ``path`` (creating the store if allowed).

        ``retention``: whether covered segments may have been deleted (a log that does not
        start at offset 0 is refused otherwise); None takes the store's saved setting.
        """
        for attempt in range(OPEN_ATTEMPTS):
            store = StoreDirectory.open(path, create=create and not read_only, writer=not read_only,
                                        initialise=lambda new: _write_genesis_mark(new, keyring))
            try:
                store.check_keyring(keyring, writer=not read_only)
                allowed = retention_configured(store) if retention is None else retention
                log = cls(store, keyring, codec or EventCodec(), config or LogConfig(), read_only, allowed)
                log._load_schemas()
                log._load_segments()
                break
            except FileNotFoundError:
                store.close()
                if not read_only or attempt == OPEN_ATTEMPTS - 1:
                    raise
            except BaseException:
                store.close()
                raise
        if not read_only and log.config.fsync == FsyncPolicy.INTERVAL:
            log._flusher = threading.Thread(target=log._flush_loop, name="secmeta-log-flush", daemon=True)
            log._flusher.start()
        return log

    def _load_schemas(self) -> None:
        schema_dir = self.store.schema_dir
        own = schema_dir / f"{self.codec.fingerprint.hex()}.avsc"
        for path in sorted(schema_dir.glob("*.avsc")) if schema_dir.exists() else ():
            if path != own:  # the codec knows its own schema (and trusts no file for it)
                self.codec.register_writer_schema(path.read_text())
        if not self.read_only and not own.exists():
            schema_dir.mkdir(exist_ok=True)
            write_atomically(own, self.codec.writer_schema_json.encode())

    def _load_segments(self) -> None:
        """Find the segments, check where the log starts and ends, recover the active segment's tail."""
        for seg in self._segments:
            seg.close()
        self._segments, self._bases = [], []
        log_dir = self.store.log_dir
        mark = self._high_water.read()  # before listing segments: a running writer only moves it forward
        self._take_anchor(self._read_anchor())
        bases = sorted(int(p.stem) for p in log_dir.glob("*.log"))
        bases = self._drop_covered(bases)
        if bases and bases[0] != self._start_offset:
            raise CorruptLogError(
                f"the log's first segment starts at offset {bases[0]} but the log starts at offset "
                f"{self._start_offset}: the oldest segments were deleted"
                + ("" if self._start_offset else " without a retention anchor"),
                segment=f"{segment_name(bases[0])}.log", offset=self._start_offset,
            )
        interval = self.config.index_interval_bytes
        unindexed = []
        for i, base in enumerate(bases):
            last = i == len(bases) - 1
            seg = Segment(log_dir, base, writable=last and not self.read_only, index_interval=interval)
            self._add_segment(seg)
            if last:
                self._recover_active(seg, mark)
            elif not seg.load_indexes(bases[i + 1], self.keyring, self.store.store_id):
                if seg.index_path.exists() or seg.timeindex_path.exists():
                    logger.warning("index files of segment %s fail their seal or check: rebuilt from the data", seg.name)
                self._scan_sealed(seg)
                unindexed.append(seg)
            if not last:
                self._check_contiguous(seg, bases[i + 1])
        self._next_offset = self._visible_end = self._segments[-1].next_offset if self._segments else self._start_offset
        link = self._last_batch_link()
        if link is not None:
            self._last_link = link
        self._check_first_batch()
        self._check_high_water(mark)
        if not self._segments and not self.read_only:
            self._add_segment(Segment(log_dir, self._start_offset, writable=True, index_interval=interval))
            fsync_dir(log_dir)
        if not self.read_only:  # the log is sound: clean up after a crash, record where it ends
            self.store.remove_crash_leftovers()
            self._drop_orphan_indexes(bases)
            for seg in unindexed:
                seg.write_indexes(self.keyring, self.store.store_id)
            self.store.check_locked()
            self._high_water.reset(Mark(self._next_offset, self._last_link))

    def _read_anchor(self) -> Anchor | None:
        anchor = read_anchor(self.store.log_dir, self.store.store_id, self.keyring)
        if anchor is not None and not self.retention:
            raise CorruptLogError(
                f"the log starts at offset {anchor.next_offset} after a retention anchor, but deleting "
                "covered segments (delete_covered_segments) is not configured for this store: "
                f"its history from offset 0 to {anchor.next_offset} is missing",
                offset=0,
            )
        return anchor

    def _take_anchor(self, anchor: Anchor | None) -> None:
        try:
            st = os.stat(self.store.log_dir / ANCHOR_FILE)
            self._anchor_stamp = (st.st_ino, st.st_mtime_ns)
        except FileNotFoundError:
            self._anchor_stamp = None
        if anchor is not None:
            self._start_offset, self._start_link = anchor.next_offset, anchor.link
        else:
            self._start_offset, self._start_link = 0, genesis_link(self.store.store_id)
        self._last_link = self._start_link

    def _drop_covered(self, bases: list[int]) -> list[int]:
        """Segments below the retention anchor: leftovers of an interrupted deletion."""
        keep = [b for b in bases if b >= self._start_offset]
        if not self.read_only:
            for base in bases[: len(bases) - len(keep)]:
                for suffix in (".log", ".index", ".timeindex"):
                    (self.store.log_dir / f"{segment_name(base)}{suffix}").unlink(missing_ok=True)
        return keep

    def _drop_orphan_indexes(self, bases: list[int]) -> None:
        """Index files whose segment is gone (a crash between deleting a segment and its indexes)."""
        names = {segment_name(b) for b in bases}
        for suffix in ("*.index", "*.timeindex"):
            for path in self.store.log_dir.glob(suffix):
                if path.stem not in names:
                    path.unlink(missing_ok=True)

    def _check_contiguous(self, seg: Segment, next_base: int) -> None:
        """A sealed segment must end exactly where the next one starts (else one is missing)."""
        batches = list(self._checked_frames(seg, seg.position_for(seg.next_offset), seg.size, None))
        end = batches[-1].next_offset if batches else seg.base_offset
        if end != next_base:
            raise CorruptLogError(
                f"segment {seg.name} ends at offset {end} but the next segment starts at {next_base}: "
                "a segment is missing or was altered",
                segment=seg.name, offset=end,
            )
        seg.next_offset = end
        seg.last_link = batches[-1].link if batches else None

    def _add_segment(self, seg: Segment) -> None:
        seg.prev_link = self._segments[-1].last_link if self._segments else self._start_link
        self._segments.append(seg)
        self._bases.append(seg.base_offset)

    def _scan_sealed(self, seg: Segment) -> None:
        for batch in self._chained(seg, 0, seg.base_offset, seg.prev_link, size=seg.size):
            seg.note(batch, batch.position)

    def _recover_active(self, seg: Segment, mark: Mark | None) -> None:
        """Scan the active segment, checking every batch's chain link; cut only a torn tail.

        A torn tail is an incomplete final batch (the data ends before its length says)
        beyond the high-water mark: a crash left it unacknowledged.  Anything else that
        does not parse, or a batch whose link is wrong, is refused with the offset.
        """
        expected, good_end, prev = seg.base_offset, 0, seg.prev_link
        try:
            for batch in seg.frames(0, seg.size):
                if batch.base_offset != expected:
                    raise CorruptLogError(
                        f"segment {seg.name}: batch at byte {batch.position} has offset {batch.base_offset} "
                        f"where {expected} was expected: a batch was deleted, duplicated or reordered",
                        segment=seg.name, offset=expected,
                    )
                self._check_link(seg, batch, prev)
                seg.note(batch, batch.position)
                expected, good_end, prev = batch.next_offset, batch.position + batch.size, batch.link
        except FrameError as exc:
            if not is_torn_tail(exc, expected, mark, self._start_offset):
                why = ("a complete batch that does not parse or fails its CRC is not a torn write" if not exc.truncated
                       else f"the high-water mark records offsets up to {mark.next_offset if mark else 0} as acknowledged")
                raise CorruptLogError(
                    f"segment {seg.name} is corrupt at offset {expected} (byte {good_end}): {exc}; {why}. "
                    f"Nothing was changed; `secmeta log recover --truncate-after {expected}` cuts the log "
                    "there (what it removes goes to a quarantine file)",
                    segment=seg.name, offset=expected,
                ) from None
            if not self.read_only:
                torn = seg.size - good_end
                seg.truncate(good_end)
                self.recovery = RecoveryReport(seg.name, torn, expected, str(exc))
                logger.warning("%s", self.recovery)
        seg.size = seg.visible_size = seg.synced_size = good_end

    def _check_first_batch(self) -> None:
        """The first batch chains from the genesis link (bound to the store id) or the sealed anchor."""
        if self._segments and self._segments[0].size:
            seg = self._segments[0]
            for _ in self._chained(seg, 0, seg.base_offset, self._start_link, size=seg.size):
                return

    def _check_high_water(self, mark: Mark | None) -> None:
        """The log must reach the acknowledged end, with the acknowledged batch at it."""
        end = self._next_offset
        if mark is None:
            raise CorruptLogError(
                f"the log's high-water file is missing (the log holds offsets {self._start_offset} to {end}): every "
                "store has one from its creation, so it was deleted, perhaps with the log itself, and the end of the "
                "log cannot be checked. Nothing was changed; if the log is known to be complete, "
                f"`secmeta log recover --truncate-after {end}` records its end again",
                offset=end,
            )
        if end < mark.next_offset:
            raise CorruptLogError(
                f"the log ends at offset {end} but its high-water mark records offsets up to "
                f"{mark.next_offset} as acknowledged: acknowledged batches were removed from the end",
                offset=end,
            )
        if mark.next_offset < self._start_offset or self.link_at(mark.next_offset) != mark.link:
            raise CorruptLogError(
                f"the batch ending at the high-water mark (offset {mark.next_offset}) is not the one "
                "that was acknowledged there: the log was rewritten",
                offset=mark.next_offset,
            )

    def _last_batch_link(self) -> bytes | None:
        for seg in reversed(self._segments):
            if seg.last_link is not None:
                return seg.last_link
            if seg.size:  # a sealed segment opened from its index: read its tail
                return self._last_batch_link_of(seg)
        return None

    # -- appending -------------------------------------------------------------

    def append(self, envelopes: Sequence[Envelope]) -> AppendResult:
        """Append one batch; returns once it is durable per the fsync policy.

        Encoding errors (an event that does not match its schema) raise before
        anything is written.
        """
        if not envelopes:
            raise InvalidValueError("cannot append an empty batch")
        with self._write_lock:
            self._check_writable()
            base = self._next_offset
            payload = self.codec.encode_batch(base, envelopes)
            ts = max(e.timestamp_ms for e in envelopes)
            frame, link = encode_frame(
                base, len(envelopes), ts, self.codec.fingerprint,
                self._chain_key_id, self._chain_key, self._last_link, payload,
            )
            if len(frame) - 4 > MAX_FRAME:
                raise InvalidValueError(f"a batch of {len(frame):,} bytes exceeds the {MAX_FRAME:,}-byte frame limit; split the request")
            seg = self._segments[-1]
            if seg.size and seg.size + len(frame) > self.config.segment_bytes:
                seg = self._roll()
            position = seg.write(frame)
            seg.note(_WrittenBatch(base, len(envelopes), ts, link, len(frame)), position)  # type: ignore[arg-type]
            self._next_offset = base + len(envelopes)
            self._last_link = link
            written_to = seg.size
            if self.config.fsync != FsyncPolicy.ALWAYS:
                self._publish(seg, seg.size, self._next_offset)
        if self.config.fsync == FsyncPolicy.ALWAYS:
            self._sync_through(seg, written_to)
        return AppendResult(base, base + len(envelopes), ts, link)

    def _check_writable(self) -> None:
        if self.read_only:
            raise SecmetaError("this log was opened read-only")
        if self._closed:
            raise SecmetaError("the log is closed")
        if self._failed is None and self._high_water.failed is not None:
            self._failed = self._high_water.failed
        if self._failed is not None:
            raise LogFailedError(f"an earlier write failed ({self._failed}); reopen the store to recover")

    def check_in_place(self) -> None:
        """Before creating a file by path: the store directory must still be the one locked, else the log fails."""
        try:
            self.store.check_locked()
        except StoreLockedError as exc:
            self._failed = exc
            raise

    def _sync_through(self, seg: Segment, size: int) -> None:
        """Group commit: make everything written so far durable unless someone already did."""
        with self._sync_lock:
            if seg.synced_size >= size:
                return
            with self._write_lock:
                active, active_size = self._segments[-1], self._segments[-1].size
                end, link = self._next_offset, self._last_link
            try:
                active.sync()
                self._high_water.record(Mark(end, link))  # only after the data it vouches for is durable
            except OSError as exc:
                self._failed = exc
                raise LogFailedError(f"fsync of {active.name} failed: {exc}") from exc
            active.synced_size = active_size
            self._publish(active, active_size, end)

    def _publish(self, seg: Segment, size: int, end: int) -> None:
        with self._visible:
            if size > seg.visible_size:
                seg.visible_size = size
            if end > self._visible_end:
                self._visible_end = end
            self._visible.notify_all()

    def _roll(self) -> Segment:
        old = self._segments[-1]
        try:
            old.sync()
        except OSError as exc:
            self._failed = exc
            raise LogFailedError(f"fsync of {old.name} failed while rolling: {exc}") from exc
        old.synced_size = old.size
        self._publish(old, old.size, self._next_offset)
        self.check_in_place()
        old.write_indexes(self.keyring, self.store.store_id)
        seg = Segment(self.store.log_dir, self._next_offset, writable=True, index_interval=self.config.index_interval_bytes)
        fsync_dir(self.store.log_dir)
        with self._visible:
            self._add_segment(seg)
        return seg

    def _flush_loop(self) -> None:
        interval = self.config.fsync_interval_ms / 1000
        while not self._closed:
            time.sleep(interval)
            self.flush()

    def flush(self) -> None:
        """Fsync everything written so far (any policy)."""
        if self.read_only or self._closed:
            return
        with self._write_lock:
            seg = self._segments[-1]
            size = seg.size
        if seg.synced_size < size:
            self._sync_through(seg, size)

    # -- reading ---------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._start_offset

    @property
    def end_offset(self) -> int:
        """The offset the next event will get, counting only what readers may see."""
        return self._visible_end

    @property
    def last_link(self) -> bytes:
        return self._last_link

    def link_at(self, next_offset: int) -> bytes | None:
        """The chain link of the batch ending at ``next_offset`` (None if no batch ends there)."""
        if next_offset == self._start_offset:
            return self._start_link
        for batch in self.batches(next_offset - 1, next_offset):
            return batch.link if batch.next_offset == next_offset else None
        return None

    def batches(self, start: int = 0, end: int | None = None, *, strict: bool = False) -> Iterator[Batch]:
        """Yield the visible batches holding offsets in [start, end).

        Offsets before the log's start (deleted by retention) are skipped, unless ``strict``: then
        they raise OffsetOutOfRangeError, for a reader that needs every event from ``start`` on
        (a replay onto an image at ``start``), checked against the segments it will read.
        """
        if self.read_only:
            self.refresh()
        with self._visible:
            segments = [(s, s.visible_size) for s in self._segments]
            first = max(bisect.bisect_right(self._bases, start) - 1, 0)
            stop = self._visible_end if end is None else min(end, self._visible_end)
            log_start = self._start_offset
        if strict and start < log_start:
            raise OffsetOutOfRangeError(
                f"offset {start} was asked for but the log now starts at offset {log_start}: "
                "retention deleted the events in between"
            )
        start = max(start, log_start)
        if start >= stop:
            return
        for seg, size in segments[first:]:
            if seg.base_offset >= stop:
                return
            for batch in self._chained(seg, *seg.anchor_for(start), size=size):
                if batch.base_offset >= stop:
                    return
                if batch.next_offset > start:
                    yield batch

    def _chained(self, seg: Segment, position: int, offset: int, prev: bytes | None, *, size: int) -> Iterator[Batch]:
        """The batches from byte ``position`` (where offset ``offset`` starts), each checked against
        the chain link before it; with ``prev`` None the first batch read only lends its link."""
        for batch in self._checked_frames(seg, position, size, offset):
            if prev is not None:
                self._check_link(seg, batch, prev)
                yield batch
            prev = batch.link

    def _check_link(self, seg: Segment, batch: Batch, prev: bytes | None) -> None:
        key = self._chain_keys.get(batch.key_id)
        if key is None:
            try:
                key = self._chain_keys[batch.key_id] = self.keyring.chain_key(batch.key_id)
            except UnknownKeyError:
                raise CorruptLogError(
                    f"segment {seg.name}: the batch at offset {batch.base_offset} is linked with key id "
                    f"{batch.key_id!r}, which is not in the keyring, so it cannot be checked",
                    segment=seg.name, offset=batch.base_offset,
                ) from None
        if prev is None or batch.expected_link(key, prev) != batch.link:
            raise CorruptLogError(
                f"segment {seg.name}: the batch at offset {batch.base_offset} fails its hash chain link: "
                "it or the batch before it was altered",
                segment=seg.name, offset=batch.base_offset,
            )

    def _checked_frames(self, seg: Segment, position: int, size: int, expected: int | None) -> Iterator[Batch]:
        try:
            for batch in seg.frames(position, size):
                if expected is not None and batch.base_offset != expected:
                    raise CorruptLogError(
                        f"segment {seg.name}: batch at byte {batch.position} has offset "
                        f"{batch.base_offset} where {expected} was expected",
                        segment=seg.name,
                        offset=expected,
                    )
                expected = batch.next_offset
                yield batch
        except FrameError as exc:
            at = expected if expected is not None else seg.base_offset
            raise CorruptLogError(
                f"segment {seg.name} is corrupt at byte {exc.position} (after offset {at}): {exc}",  # type: ignore[attr-defined]
                segment=seg.name,
                offset=at,
            ) from None

    def decode(self, batch: Batch) -> list[Envelope]:
        return self.codec.decode_batch(batch.payload, batch.schema_fp, batch.base_offset)

    def read(self, start: int = 0, end: int | None = None, *, strict: bool = False) -> Iterator[Envelope]:
        """Yield the visible events with offsets in [start, end), decoded (``strict`` as for ``batches``)."""
        for events in self.read_batches(start, end, strict=strict):
            yield from events

    def read_batches(self, start: int = 0, end: int | None = None, *,
                     strict: bool = False) -> Iterator[list[Envelope]]:
        """``read``'s events a batch at a time (a batch cut by ``start`` or ``end`` holds only its part)."""
        for batch in self.batches(start, end, strict=strict):
            events = self.decode(batch)
            if batch.base_offset < start or (end is not None and batch.next_offset > end):
                events = [e for e in events if start <= e.offset and (end is None or e.offset < end)]
            yield events

    def offset_for_timestamp(self, timestamp_ms: int) -> int:
        """The first offset of the first batch whose time is >= ``timestamp_ms`` (end_offset if none)."""
        with self._visible:
            segments = list(self._segments)
        for seg in segments:
            if seg.max_timestamp < timestamp_ms:
                continue
            for batch in self._chained(seg, *seg.anchor_for(seg.offset_for_time(timestamp_ms)), size=seg.visible_size):
                if batch.timestamp_ms >= timestamp_ms:
                    return batch.base_offset
        return self.end_offset

    def wait_for(self, offset: int, timeout: float | None) -> bool:
        """Block until ``end_offset > offset`` or the timeout passes; True if it did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.end_offset <= offset:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            if self.read_only:
                time.sleep(min(0.02, remaining) if remaining is not None else 0.02)
                self.refresh()
            else:
                with self._visible:
                    if self._visible_end <= offset:
                        self._visible.wait(remaining)
        return True

    def tail(self, start: int = 0) -> TailReader:
        return TailReader(self, start)

    def refresh(self) -> None:
        """For a read-only log: pick up batches and segments another process appended since."""
        if not self.read_only:
            return
        with self._visible:
            if not self._segments:
                self._load_segments()
                return
            self._follow_retention()
            seg = self._segments[-1]
            _take_new_batches(seg)
            newer = sorted(int(p.stem) for p in self.store.log_dir.glob("*.log") if int(p.stem) > seg.base_offset)
            for base in newer:
                if base != seg.next_offset or seg.visible_size < os.fstat(seg.fd).st_size:
                    break
                seg = Segment(self.store.log_dir, base, writable=False, index_interval=self.config.index_interval_bytes)
                seg.size = seg.visible_size = 0
                self._add_segment(seg)
                _take_new_batches(seg)
            self._visible_end = self._segments[-1].next_offset
            self._next_offset = self._visible_end

    def _follow_retention(self) -> None:
        """A read-only log drops the segments the writer's retention deleted since (caller holds _visible)."""
        try:
            st = os.stat(self.store.log_dir / ANCHOR_FILE)
        except FileNotFoundError:
            return
        if (st.st_ino, st.st_mtime_ns) == self._anchor_stamp:
            return
        anchor = self._read_anchor()
        if anchor is None or anchor.next_offset <= self._start_offset:
            return
        gone = [s for s in self._segments[:-1] if s.next_offset <= anchor.next_offset]
        for seg in gone:
            seg.close()
        self._segments, self._bases = self._segments[len(gone):], self._bases[len(gone):]
        self._take_anchor(anchor)
        self._last_link = self._segments[-1].last_link or self._last_link

    # -- retention -------------------------------------------------------------

    def delete_segments_before(self, offset: int) -> list[str]:
        """Delete sealed segments whose every event is below ``offset`` (covered by a snapshot).

        Only when retention is configured.  Writes a sealed anchor first (start offset,
        chain link, the retention that produced it) so the chain still starts from a
        link nobody without the key could have written.
        """
        self._check_writable()
        if not self.retention:
            raise SecmetaError("deleting covered segments is not configured for this store (delete_covered_segments)")
        self.flush()  # the high-water mark must not lag behind what is deleted
        with self._write_lock:
            self.check_in_place()
            doomed = [s for s in self._segments[:-1] if s.next_offset <= offset]
            if not doomed:
                return []
            keep_from = doomed[-1].next_offset
            last_link = self._last_batch_link_of(doomed[-1])
            names = tuple(s.name for s in doomed)
            anchor = Anchor(keep_from, last_link, offset, names, int(time.time() * 1000))
            write_anchor(self.store.log_dir, self.store.store_id, self.keyring, anchor)
            with self._visible:
                self._segments = self._segments[len(doomed):]
                self._bases = self._bases[len(doomed):]
                self._start_offset = keep_from
                self._start_link = last_link
            for seg in doomed:
                seg.close()
                for p in (seg.path, seg.index_path, seg.timeindex_path):
                    p.unlink(missing_ok=True)
            fsync_dir(self.store.log_dir)
            return list(names)

    def _last_batch_link_of(self, seg: Segment) -> bytes:
        """The link of a non-empty segment's last batch (read from its last indexed position)."""
        batches = list(self._checked_frames(seg, seg.position_for(seg.next_offset), seg.size, None))
        return batches[-1].link

    def segments(self) -> list[Segment]:
        with self._visible:
            return list(self._segments)

    # -- closing ---------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        try:
            if not self.read_only and self._failed is None:
                self.flush()
        finally:
            self._closed = True
        if self._flusher is not None:
            self._flusher.join(timeout=2)
        for seg in self._segments:
            seg.close()
        self._high_water.close()
        self.store.close()

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else f"fsync={self.config.fsync.value}"
        return f"<Log {self.store.path} offsets [{self._start_offset}, {self.end_offset}) {mode}>"


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


class TailReader:
    """Follows the log from an offset: ``poll`` returns new events as they become visible."""

    def __init__(self, log: Log, start: int = 0):
        self.log = log
        self.position = start

    def poll(self, timeout: float | None = 1.0, max_events: int | None = None) -> list[Envelope]:
        """Events from ``position`` on (waiting up to ``timeout`` for some).

        Raises OffsetOutOfRangeError when retention deleted offsets this reader had not read yet.
        """
        self.log.refresh()
        ready = self.log.wait_for(self.position, timeout)
        if self.position < self.log.start_offset:
            raise OffsetOutOfRangeError(
                f"this reader is at offset {self.position} but the log now starts at offset "
                f"{self.log.start_offset}: retention deleted the events in between before they were read"
            )
        if not ready:
            return []
        out: list[Envelope] = []
        for batch in self.log.batches(self.position, strict=True):  # retention may run after the check
            for env in self.log.decode(batch):
                if env.offset >= self.position:
                    out.append(env)
            self.position = batch.next_offset
            if max_events is not None and len(out) >= max_events:
                break
        return out

    def __iter__(self) -> Iterator[Envelope]:
        while not self.log._closed:
            yield from self.poll(timeout=0.5)


def _write_genesis_mark(store: StoreDirectory, keyring: Keyring) -> None:
    """A new store's high-water mark: the empty log, acknowledged (so a wiped log is never taken for a new one)."""
    HighWater(store.log_dir, store.store_id, keyring).write(Mark(0, genesis_link(store.store_id)))


def _take_new_batches(seg: Segment) -> None:
    """Make a read-only segment's complete batches past its visible end visible (stop at a partial one)."""
    size = os.fstat(seg.fd).st_size
    if size <= seg.visible_size:
        return
    try:
        for batch in seg.frames(seg.visible_size, size):
            if batch.base_offset != seg.next_offset:
                break
            seg.note(batch, batch.position)
            seg.visible_size = seg.size = batch.position + batch.size
    except FrameError:
        pass  # a batch still being written: picked up next time

