"""Full verification of a log: every CRC, offset continuity, the keyed hash chain, decoding, replay.

Every event is also replayed into the security image, so an event that does not
fit the state before it (the removal of an unknown ACL or token, the deletion of
a missing credential) is reported with its offset. Replay starts from the empty
image, or, when older segments were deleted, from the oldest readable snapshot
at or after the log's start.

Read-only: it never repairs anything, it reports the first problem and where it is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from secmeta.core.errors import CorruptLogError
from secmeta.core.log.anchor import read_anchor
from secmeta.core.log.evidence import derived_files_beyond, truncation_message
from secmeta.core.log.extent import log_extent
from secmeta.core.log.fit import snapshot_misfit
from secmeta.core.log.format import FrameError, genesis_link
from secmeta.core.log.highwater import HIGH_WATER_FILE, HighWater, is_torn_tail
from secmeta.core.log.pending_recovery import cut_span, read_pending
from secmeta.core.log.retention import retention_configured
from secmeta.core.log.segment import Segment
from secmeta.core.log.witness import WitnessLine, witnesses_problem
from secmeta.core.store.storedir import StoreDirectory
from secmeta.events.codec import EventCodec
from secmeta.events.errors import EventsError
from secmeta.events.keyring import Keyring
from secmeta.events.records import LogRecovered
from secmeta.projections.errors import InconsistentEventError
from secmeta.projections.image import SecurityDelta, SecurityImage
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import SnapshotError, list_snapshots, read_snapshot


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    batches: int
    events: int
    end_offset: int
    first_bad_offset: int | None = None
    segment: str | None = None
    problem: str | None = None
    replayed_from: int | None = None  # where the replay check began; None: no snapshot to begin from
    recoveries: tuple[str, ...] = ()  # each logged repair (LogRecovered) up to where the check went

    def __str__(self) -> str:
        logged = "".join(f"\n{line}" for line in self.recoveries)
        if self.ok:
            replay = ("every event replays" if self.replayed_from == 0 else
                      f"every event from offset {self.replayed_from} replays" if self.replayed_from is not None else
                      "events not replayed: no readable snapshot covers the log's start")
            return (f"OK: {self.batches} batches, {self.events} events, CRCs and hash chain intact "
                    f"({log_extent(self.end_offset)}), {replay}{logged}")
        where = f" in segment {self.segment}" if self.segment else ""
        return f"FAILED at offset {self.first_bad_offset}{where}: {self.problem}{logged}"


def recovery_line(offset: int, event: LogRecovered) -> str:
    """How verify reports a logged repair."""
    return (f"recovery logged at offset {offset}: {event.operator} cut {cut_span(event.from_offset, event.to_offset)} "
            f"({event.events} event(s), quarantined bytes sha256 {event.digest}); reason: {event.reason!r}")


def verify_log(
    path: str | os.PathLike,
    *,
    keyring: Keyring,
    codec: EventCodec | None = None,
    checkpoints: Iterable[tuple[int, bytes]] = (),
    retention: bool | None = None,
    witnesses: Sequence[WitnessLine] = (),
) -> VerifyReport:
    """Check the whole log of the store at ``path`` as open does, and more.

    ``checkpoints`` are (next_offset, link) pairs recorded elsewhere (snapshots):
    each must fit the log as open requires (secmeta.core.log.fit), which also exposes
    batches cut off the tail.  ``retention`` (None: the store's saved setting)
    allows a log that starts after a sealed retention anchor.  Sealed index files
    must describe their segment's batches; the log must reach its high-water mark, and no
    derived file may record a point past its end (secmeta.core.log.evidence).  ``witnesses``
    (secmeta.core.log.witness: the lines of a witness file) are heads the log must all still hold.
    """
    store = StoreDirectory.open(path, create=False, writer=False)
    store.check_keyring(keyring, writer=False)
    codec = codec or EventCodec.fresh()
    for schema in sorted(store.schema_dir.glob("*.avsc")):
        codec.register_writer_schema(schema.read_text())
    expected, link = 0, genesis_link(store.store_id)
    try:
        mark = HighWater(store.log_dir, store.store_id, keyring).read()
        anchor = read_anchor(store.log_dir, store.store_id, keyring)
    except CorruptLogError as exc:
        return VerifyReport(False, 0, 0, 0, exc.offset, None, str(exc))
    if anchor is not None:
        if not (retention_configured(store) if retention is None else retention):
            return VerifyReport(False, 0, 0, 0, 0, None, f"the log starts at offset {anchor.next_offset} after a "
                                "retention anchor, but delete_covered_segments is not configured: history is missing")
        expected, link = anchor.next_offset, anchor.link
    start = expected
    links = {expected: link}
    batches = events = 0
    recoveries: list[str] = []
    replayed_from, image = _replay_start(store, expected, keyring)

    def failed(problem: str, segment: str | None = None, offset: int | None = None) -> VerifyReport:
        bad = expected if offset is None else offset
        return VerifyReport(False, batches, events, expected, bad, segment, problem, replayed_from, tuple(recoveries))

    bases = sorted(int(p.stem) for p in store.log_dir.glob("*.log"))
    for base in bases:
        seg = Segment(store.log_dir, base, writable=False)
        seg_batches = []
        try:
            if base != expected:
                return failed(f"segment starts at offset {base} but offset {expected} was expected "
                              "(a segment is missing, duplicated or renamed)", seg.name)
            for batch in seg.frames(0, seg.size):
                if batch.base_offset != expected:
                    return failed(f"batch at byte {batch.position} has offset {batch.base_offset} where "
                                  f"{expected} was expected (a batch was deleted, duplicated or reordered)", seg.name)
                if batch.key_id not in keyring.ids:
                    return failed(f"batch is linked with key id {batch.key_id!r}, which is not in the keyring", seg.name)
                if batch.expected_link(keyring.chain_key(batch.key_id), link) != batch.link:
                    return failed("hash chain broken: this batch or one before it was altered", seg.name)
                try:
                    decoded = codec.decode_batch(batch.payload, batch.schema_fp, batch.base_offset)
                except EventsError as exc:
                    return failed(f"batch does not decode: {exc}", seg.name)
                if [e.offset for e in decoded] != list(range(batch.base_offset, batch.next_offset)):
                    return failed("the events inside the batch do not carry the batch's offsets", seg.name)
                recoveries += [recovery_line(e.offset, e.event) for e in decoded if type(e.event) is LogRecovered]
                if image is not None and batch.base_offset >= replayed_from:
                    delta = SecurityDelta(image)
                    try:
                        delta.replay_all(decoded)
                    except InconsistentEventError as exc:
                        return failed(f"inconsistent event: {exc.detail}", seg.name, exc.offset)
                    image = delta.apply(batch.next_offset)
                link, expected = batch.link, batch.next_offset
                links[expected] = link
                batches += 1
                events += batch.count
                seg_batches.append(batch)
            if base != bases[-1] and (problem := seg.index_problem(seg_batches, keyring, store.store_id)):
                return failed(problem, seg.name)
        except FrameError as exc:
            if not (base == bases[-1] and is_torn_tail(exc, expected, mark, start)):
                acknowledged = mark.next_offset if mark is not None else start
                kind = f"torn (incomplete) before the acknowledged end {acknowledged}" if exc.truncated else "corrupt"
                return failed(f"{kind} batch at byte {exc.position}: {exc}", seg.name)  # type: ignore[attr-defined]
            # an incomplete final batch beyond the high-water mark: a torn write the next writer open cuts
        finally:
            seg.close()
    if mark is None:
        return failed("the log's high-water file is missing (every store has one from its creation): "
                      "its end cannot be checked")
    if mark.next_offset > expected:
        return failed(truncation_message(f"the log's high-water mark (file {store.log_dir / HIGH_WATER_FILE})",
                                         mark.next_offset, expected))
    if links.get(mark.next_offset) != mark.link:
        return failed(f"{log_extent(expected)}, but not the batch its high-water mark acknowledged (ending before "
                      f"offset {mark.next_offset}): acknowledged batches were removed or rewritten")
    if found := derived_files_beyond(store, keyring, expected,
                                     live=HighWater(store.log_dir, store.store_id, keyring)):
        return failed(truncation_message(str(found[0].path), found[0].offset, expected))
    try:
        pending = read_pending(store, keyring)
    except CorruptLogError as exc:
        return failed(str(exc))
    if pending is not None:
        return failed(f"a recovery cut the log at offset {pending.event.from_offset} but is not logged yet "
                      "(the next writer open logs it)")
    if witnesses and (contradicted := witnesses_problem(list(witnesses), store.store_id, start, expected,
                                                       links.get)):
        return failed(f"witness {contradicted[1]}", offset=contradicted[0])
    for offset, want in checkpoints:
        if offset < start:
            continue  # superseded by retention: open does not use it, and it contradicts nothing
        if misfit := snapshot_misfit(offset, want, start, expected, links.get):
            return failed(f"a snapshot does not fit the log: {misfit}")
    return VerifyReport(True, batches, events, expected, replayed_from=replayed_from, recoveries=tuple(recoveries))


def _replay_start(store: StoreDirectory, start: int, keyring: Keyring) -> tuple[int | None, SecurityImage | None]:
    """Where the replay check begins and the image there (None, None when nothing covers the log's start)."""
    if start == 0:
        return 0, SecurityImage.EMPTY
    for path in list_snapshots(store.snapshot_dir):
        try:
            info, image = read_snapshot(path, SecurityImageSnapshot(), keyring)
        except SnapshotError:
            continue
        if info.next_offset >= start:
            return info.next_offset, image
    return None, None
