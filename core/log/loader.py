"""Opening the log (as Kafka's LogLoader): a store directory becomes recovered segments,
the checked high-water mark and the chain's state at both ends.

Every sealed segment is opened from its sealed indexes (or rescanned when they fail
their seal) and must end where the next begins; the active segment is scanned with
every chain link checked and only a torn tail beyond the high-water mark is cut.
A writer then cleans up after a crash and records where the log ends.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from secmeta.core.errors import CorruptLogError
from secmeta.core.log.anchor import Anchor, anchor_stamp, read_anchor
from secmeta.core.log.chain import Chain
from secmeta.core.log.config import LogConfig
from secmeta.core.log.evidence import refuse_evidence, truncation_message
from secmeta.core.log.format import Batch, FrameError, genesis_link
from secmeta.core.log.highwater import HighWater, Mark, is_torn_tail
from secmeta.core.log.pending_recovery import read_pending
from secmeta.core.log.reading import Reader
from secmeta.core.log.segment import Segment, segment_name
from secmeta.core.log.state import LogState
from secmeta.core.store.storedir import StoreDirectory
from secmeta.events.codec import EventCodec
from secmeta.events.durable import fsync_dir, write_atomically
from secmeta.events.keyring import Keyring
from secmeta.events.records import Envelope

KEEP_VERIFIED_BYTES = 32 * 1024 * 1024  # an active segment up to this size keeps its checked batches for the replay
logger = logging.getLogger("secmeta.log")


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


def write_genesis_mark(store: StoreDirectory, keyring: Keyring) -> None:
    """A new store's high-water mark: the empty log, acknowledged (so a wiped log is never taken for a new one)."""
    HighWater(store.log_dir, store.store_id, keyring).write(Mark(0, genesis_link(store.store_id)))


class LogLoader:
    """Loads a store directory's log; a writer (``read_only`` False) also repairs and records its end."""

    def __init__(self, store: StoreDirectory, keyring: Keyring, codec: EventCodec, chain: Chain, config: LogConfig,
                 high_water: HighWater, *, read_only: bool, retention: bool):
        self.store = store
        self.keyring = keyring
        self.codec = codec
        self.chain = chain
        self.config = config
        self.high_water = high_water
        self.read_only = read_only
        self.retention = retention
        self.pending: Envelope | None = None  # a recovery's event the writer must log first (pending_recovery)
        # The active segment's batches as its scan checked them (a writer's open, a segment of up to
        # KEEP_VERIFIED_BYTES): the open's replay reads them from here, checked once (``Reader.keep_verified``).
        self.verified: tuple[Segment, list[Batch]] | None = None

    def load_schemas(self) -> None:
        """Teach the codec the writer schemas the log's batches were written with (a writer adds its own)."""
        schema_dir = self.store.schema_dir
        own = schema_dir / f"{self.codec.fingerprint.hex()}.avsc"
        for path in sorted(schema_dir.glob("*.avsc")) if schema_dir.exists() else ():
            if path != own:  # the codec knows its own schema (and trusts no file for it)
                self.codec.register_writer_schema(path.read_text())
        if not self.read_only and not own.exists():
            schema_dir.mkdir(exist_ok=True)
            write_atomically(own, self.codec.writer_schema_json.encode())

    def add_schema(self, schema_json: str) -> None:
        """Teach the codec a writer schema another copy of the log wrote batches with, and keep it beside the log."""
        path = self.store.schema_dir / f"{self.codec.register_writer_schema(schema_json).hex()}.avsc"
        if not path.exists():
            write_atomically(path, schema_json.encode())

    def writer_schemas(self) -> list[str]:
        """The writer schemas of the log's batches (the codec's own included), as stored."""
        own = self.codec.writer_schema_json
        found = [p.read_text() for p in sorted(self.store.schema_dir.glob("*.avsc"))]
        return [*(text for text in found if text != own), own]

    def read_anchor(self) -> Anchor | None:
        """The retention anchor, refused when retention is not configured for this store."""
        anchor = read_anchor(self.store.log_dir, self.store.store_id, self.keyring)
        if anchor is not None and not self.retention:
            raise CorruptLogError(
                f"the log starts at offset {anchor.next_offset} after a retention anchor, but deleting "
                "covered segments (delete_covered_segments) is not configured for this store: "
                f"its history from offset 0 to {anchor.next_offset} is missing",
                offset=0,
            )
        return anchor

    def load(self) -> tuple[LogState, RecoveryReport]:
        """Find the segments, check where the log starts and ends, recover the active segment's tail."""
        state = LogState(self.store.store_id)
        recovery = RecoveryReport()
        log_dir = self.store.log_dir
        mark = self.high_water.read()  # before listing segments: a running writer only moves it forward
        state.start_at(self.read_anchor(), anchor_stamp(log_dir))
        bases = sorted(int(p.stem) for p in log_dir.glob("*.log"))
        bases = self._drop_covered(bases, state.start_offset)
        if bases and bases[0] != state.start_offset:
            raise CorruptLogError(
                f"the log's first segment starts at offset {bases[0]} but the log starts at offset "
                f"{state.start_offset}: the oldest segments were deleted"
                + ("" if state.start_offset else " without a retention anchor"),
                segment=f"{segment_name(bases[0])}.log", offset=state.start_offset,
            )
        interval = self.config.index_interval_bytes
        unindexed = []
        try:
            for i, base in enumerate(bases):
                last = i == len(bases) - 1
                seg = Segment(log_dir, base, writable=last and not self.read_only, index_interval=interval)
                state.add_segment(seg)
                if last:
                    recovery = self._recover_active(seg, mark, state.start_offset)
                elif not seg.load_indexes(bases[i + 1], self.keyring, self.store.store_id):
                    if seg.index_path.exists() or seg.timeindex_path.exists():
                        logger.warning("index files of segment %s fail their seal or check: rebuilt from the data",
                                       seg.name)
                    self._scan_sealed(seg)
                    unindexed.append(seg)
                if not last:
                    self._check_contiguous(seg, bases[i + 1])
            state.next_offset = state.visible_end = state.segments[-1].next_offset if state.segments else state.start_offset
            link = self._last_batch_link(state)
            if link is not None:
                state.last_link = link
            self._check_first_batch(state)
            self._check_high_water(state, mark)
            refuse_evidence(self.store, self.keyring, state.next_offset,
                            live=self.high_water if self.read_only else None)
            self.pending = self._check_pending(state)
        except BaseException:
            state.close()
            raise
        if not state.segments and not self.read_only:
            state.add_segment(Segment(log_dir, state.start_offset, writable=True, index_interval=interval))
            fsync_dir(log_dir)
        if not self.read_only:  # the log is sound: clean up after a crash, record where it ends
            self.store.remove_crash_leftovers()
            self._drop_orphan_indexes(bases)
            for seg in unindexed:
                seg.write_indexes(self.keyring, self.store.store_id)
            self.store.check_locked()
            self.high_water.reset(Mark(state.next_offset, state.last_link))
        return state, recovery

    def _check_pending(self, state: LogState) -> Envelope | None:
        """A recovery cut the log but is not logged yet: a writer logs it first, a reader waits for that."""
        pending = read_pending(self.store, self.keyring)
        if pending is None:
            return None
        cut = pending.event
        if self.read_only:
            raise CorruptLogError(
                f"a recovery cut the log at offset {cut.from_offset} (reason: {cut.reason!r}) but is not yet "
                f"recorded in it: open the store for writing once (`secmeta log recover --store {self.store.path} "
                "--resume`) to log it; until then the log is not served",
                offset=cut.from_offset,
            )
        if cut.from_offset != state.next_offset or cut.link != state.last_link.hex():
            raise CorruptLogError(
                f"a recovery was interrupted: it was to cut the log at offset {cut.from_offset}, but the log ends "
                f"at offset {state.next_offset} (or with another batch there). Nothing was changed; run the same "
                "`secmeta log recover --truncate-to "
                f"{cut.from_offset}` again to finish it",
                offset=state.next_offset,
            )
        return pending.envelope

    def _drop_covered(self, bases: list[int], start: int) -> list[int]:
        """Segments below the retention anchor: leftovers of an interrupted deletion."""
        keep = [b for b in bases if b >= start]
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
        batches = self.chain.tail_batches(seg)
        end = batches[-1].next_offset if batches else seg.base_offset
        if end != next_base:
            raise CorruptLogError(
                f"segment {seg.name} ends at offset {end} but the next segment starts at {next_base}: "
                "a segment is missing or was altered",
                segment=seg.name, offset=end,
            )
        seg.next_offset = end
        seg.last_link = batches[-1].link if batches else None

    def _scan_sealed(self, seg: Segment) -> None:
        for batch in self.chain.chained(seg, 0, seg.base_offset, seg.prev_link, size=seg.size):
            seg.note(batch, batch.position)

    def _recover_active(self, seg: Segment, mark: Mark | None, start: int) -> RecoveryReport:
        """Scan the active segment, checking every batch's chain link; cut only a torn tail.

        A torn tail is an incomplete final batch (the data ends before its length says)
        beyond the high-water mark: a crash left it unacknowledged.  Anything else that
        does not parse, or a batch whose link is wrong, is refused with the offset.
        """
        recovery = RecoveryReport()
        expected, good_end, prev = seg.base_offset, 0, seg.prev_link
        kept: list[Batch] | None = [] if not self.read_only and seg.size <= KEEP_VERIFIED_BYTES else None
        try:
            for batch in seg.frames(0, seg.size):
                if batch.base_offset != expected:
                    raise CorruptLogError(
                        f"segment {seg.name}: batch at byte {batch.position} has offset {batch.base_offset} "
                        f"where {expected} was expected: a batch was deleted, duplicated or reordered",
                        segment=seg.name, offset=expected,
                    )
                self.chain.check_link(seg, batch, prev)
                seg.note(batch, batch.position)
                expected, good_end, prev = batch.next_offset, batch.position + batch.size, batch.link
                if kept is not None:
                    kept.append(batch)
        except FrameError as exc:
            if not is_torn_tail(exc, expected, mark, start):
                why = ("a complete batch that does not parse or fails its CRC is not a torn write" if not exc.truncated
                       else f"the high-water mark records offsets up to {mark.next_offset if mark else 0} as acknowledged")
                raise CorruptLogError(
                    f"segment {seg.name} is corrupt at offset {expected} (byte {good_end}): {exc}; {why}. "
                    f"Nothing was changed; `secmeta log recover --truncate-to {expected} --reason TEXT` cuts the "
                    "log there, keeping the offsets below it (what it removes goes to the quarantine, and the "
                    "cut is logged)",
                    segment=seg.name, offset=expected,
                ) from None
            if not self.read_only:
                torn = seg.size - good_end
                seg.truncate(good_end)
                recovery = RecoveryReport(seg.name, torn, expected, str(exc))
                logger.warning("%s", recovery)
        seg.size = seg.visible_size = seg.synced_size = good_end
        if kept:
            self.verified = (seg, kept)
        return recovery

    def _last_batch_link(self, state: LogState) -> bytes | None:
        for seg in reversed(state.segments):
            if seg.last_link is not None:
                return seg.last_link
            if seg.size:  # a sealed segment opened from its index: read its tail
                return self.chain.last_link_of(seg)
        return None

    def _check_first_batch(self, state: LogState) -> None:
        """The first batch chains from the genesis link (bound to the store id) or the sealed anchor."""
        if state.segments and state.segments[0].size:
            seg = state.segments[0]
            for _ in self.chain.chained(seg, 0, seg.base_offset, state.start_link, size=seg.size):
                return

    def _check_high_water(self, state: LogState, mark: Mark | None) -> None:
        """The log must reach the acknowledged end, with the acknowledged batch at it."""
        end = state.next_offset
        if mark is None:
            raise CorruptLogError(
                f"the log's high-water file is missing (the log holds offsets {state.start_offset} to {end}): every "
                "store has one from its creation, so it was deleted, perhaps with the log itself, and the end of the "
                "log cannot be checked. Nothing was changed; if the log is known to be complete, "
                f"`secmeta log recover --truncate-to {end} --reason TEXT` records its end again",
                offset=end,
            )
        if end < mark.next_offset:
            raise CorruptLogError(truncation_message(f"the log's high-water mark (file {self.high_water.path})",
                                                     mark.next_offset, end), offset=end)
        if mark.next_offset < state.start_offset or Reader(state, self.chain, self.codec).link_at(mark.next_offset) != mark.link:
            raise CorruptLogError(
                f"the batch ending at the high-water mark (offset {mark.next_offset}) is not the one "
                "that was acknowledged there: the log was rewritten",
                offset=mark.next_offset,
            )
