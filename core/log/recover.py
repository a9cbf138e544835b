"""The explicit repair of a log: cut it at an offset, keep what was cut, and log that it happened.

``secmeta log recover --truncate-to N`` keeps the offsets below N (Kafka's naming) and is the
only way a log loses a complete batch.  ``Recovery`` takes the writer lock and plans the cut
(what it removes, whether the log opened cleanly: a clean log is only cut when forced);
``execute`` then

1. copies every byte from N's batch boundary on into ``DIR/quarantine/<id>/`` and takes their
   SHA-256,
2. writes the pending-recovery marker: the ``LogRecovered`` event (operator, reason, offsets
   cut, events, the link at the cut, the digest), sealed (secmeta.core.log.pending_recovery),
3. moves the derived files that record a point past N (snapshots, checkpoints, the history
   index: evidence of the cut, see secmeta.core.log.evidence) into the quarantine,
4. truncates the segment, deletes the later ones, records N as the high-water mark,
5. opens the log for writing, which logs the event as the first batch after the cut and
   removes the marker.

A crash after 2 leaves the marker: the next writer open logs the recovery (or, when the cut
was not made yet, refuses until the recovery is run again), so a repair never goes unlogged.
Deleting the quarantine afterwards leaves the logged event, chained like any other batch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from secmeta.core.errors import InvalidValueError, SecmetaError
from secmeta.core.forensics.index_seal import INDEX_DIR
from secmeta.core.log.anchor import read_anchor
from secmeta.core.log.config import LogConfig
from secmeta.core.log.evidence import derived_files_beyond
from secmeta.core.log.extent import log_extent
from secmeta.core.log.format import Batch, FrameError, genesis_link
from secmeta.core.log.highwater import HighWater, Mark
from secmeta.core.log.log import Log
from secmeta.core.log.pending_recovery import cut_span, recovered_envelope, write_pending
from secmeta.core.log.segment import Segment
from secmeta.core.operator import local_operator
from secmeta.core.store.storedir import StoreDirectory
from secmeta.core.times import Clock, ms_to_datetime, now_ms, wall_clock
from secmeta.events.codec import EventCodec
from secmeta.events.durable import fsync_dir, write_atomically
from secmeta.events.errors import UnknownKeyError
from secmeta.events.keyring import Keyring
from secmeta.events.records import LogRecovered

__all__ = ["QUARANTINE_DIR", "Recovery", "RecoveryPlan", "RecoveryRefusedError", "record_pending"]

logger = logging.getLogger("secmeta.log")
QUARANTINE_DIR = "quarantine"


class RecoveryRefusedError(SecmetaError):
    """A recovery that must not be made as asked (a log that opens cleanly, not forced)."""


@dataclass(frozen=True)
class Piece:
    """The bytes of segment ``segment`` from ``from_byte`` on (``size`` of them) are cut."""

    segment: str
    from_byte: int
    size: int


@dataclass(frozen=True)
class RecoveryPlan:
    """What cutting the log at ``offset`` removes; ``problem`` is why open refuses the log (None: it opens)."""

    offset: int
    to_offset: int  # the highest end the log, its high-water mark or a derived file records
    events: int
    pieces: tuple[Piece, ...]
    derived: tuple[Path, ...]
    link: bytes
    problem: str | None
    cut_link: bytes | None = None  # the link of the last intact batch cut (None: none was)

    @property
    def removed_bytes(self) -> int:
        return sum(p.size for p in self.pieces)

    def __str__(self) -> str:
        return (f"keep the offsets below {self.offset}; cut {cut_span(self.offset, self.to_offset)} ({self.events} "
                f"event(s) in {self.removed_bytes} bytes of the log); move them and {len(self.derived)} derived "
                "file(s) past the cut to the quarantine; log the recovery")


class Recovery:
    """A planned cut of the store at ``path`` at ``offset``, holding the writer lock until closed."""

    def __init__(self, path: str | os.PathLike, offset: int, *, keyring: Keyring, config: LogConfig | None = None,
                 clock: Clock = wall_clock):
        self.keyring, self.config, self.clock = keyring, config, clock
        self.codec = EventCodec.fresh()
        self.store = StoreDirectory.open(path, create=False, writer=True)
        try:
            self.store.check_keyring(keyring, writer=False)
            self.plan = self._plan(offset)
        except BaseException:
            self.store.close()
            raise

    def __enter__(self) -> Recovery:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    def _plan(self, offset: int) -> RecoveryPlan:
        store = self.store
        problem = _open_problem(store.path, self.keyring)
        anchor = read_anchor(store.log_dir, store.store_id, self.keyring)
        start, link = (anchor.next_offset, anchor.link) if anchor else (0, genesis_link(store.store_id))
        if offset < start:
            raise InvalidValueError(f"--truncate-to {offset} is before the log's start {start}")
        bases = [b for b in sorted(int(p.stem) for p in store.log_dir.glob("*.log")) if b >= start]
        cut_base, cut_at, link = _boundary(store.log_dir, bases, offset, start, link)
        pieces, events, end = [], 0, offset
        evidence, prev = None, link  # the newest authentic LogRecovered the cut would erase
        for base in bases:
            if base < cut_base:
                continue
            seg = Segment(store.log_dir, base, writable=False)
            try:
                begin = cut_at if base == cut_base else 0
                if seg.size > begin:
                    pieces.append(Piece(seg.path.name, begin, seg.size - begin))
                try:
                    for batch in seg.frames(begin, seg.size):
                        events, end = events + batch.count, max(end, batch.next_offset)
                        if _authentic(self.keyring, batch, prev):
                            evidence = _recovery_in(self.codec, batch) or evidence
                        prev = batch.link
                except FrameError:
                    pass  # the damage itself: its bytes are cut and digested, its events not counted
            finally:
                seg.close()
        if evidence is not None:
            at, earlier = evidence
            raise RecoveryRefusedError(
                f"--truncate-to {offset} would erase the logged recovery {earlier.recovery_id} at offset {at} "
                f"(it cut offsets from {earlier.from_offset}): a repair's record is never cut. Nothing was "
                f"changed; give an offset above {at} (--truncate-to {at + 1} keeps it)")
        try:
            mark = HighWater(store.log_dir, store.store_id, self.keyring).read()
        except SecmetaError:
            mark = None
        derived = derived_files_beyond(store, self.keyring, offset)
        end = max([end, mark.next_offset if mark else 0, *(e.offset for e in derived)])
        moved = tuple(dict.fromkeys(e.path.parent if e.path.parent.name == INDEX_DIR else e.path for e in derived))
        return RecoveryPlan(offset, end, events, tuple(pieces), moved, link, problem,
                            None if prev == link else prev)

    def refusal(self, force: bool) -> str | None:
        """Why the cut must not be made (None: it may): a log that opens cleanly is cut only when forced."""
        if self.plan.problem is None and not force:
            return (f"the log opens cleanly: nothing needs recovering, and cutting it at offset {self.plan.offset} "
                    "would roll back history. Nothing was changed; --force cuts it anyway")
        return None

    def execute(self, reason: str, *, force: bool = False) -> LogRecovered:
        """Cut the log as planned and log the recovery (see the module's docstring); the event logged.
        RecoveryRefusedError (nothing changed) for a log that opens cleanly, unless ``force``."""
        if why := self.refusal(force):
            raise RecoveryRefusedError(why)
        plan, store = self.plan, self.store
        when = now_ms(self.clock)
        stamp = ms_to_datetime(when).strftime("%Y%m%dT%H%M%SZ")
        recovery_id = str(uuid.uuid4())
        qdir = store.path / QUARANTINE_DIR / f"{stamp}-at-{plan.offset}-{recovery_id[:8]}"
        qdir.mkdir(parents=True)
        digest = hashlib.sha256()
        for piece in plan.pieces:
            with open(store.log_dir / piece.segment, "rb") as f:
                f.seek(piece.from_byte)
                data = f.read(piece.size)
            digest.update(data)
            write_atomically(qdir / piece.segment, data)
        event = LogRecovered(recovery_id, str(local_operator()), reason, plan.offset, plan.to_offset, plan.events,
                             plan.link.hex(), digest.hexdigest(), str(qdir.relative_to(store.path)),
                             plan.cut_link.hex() if plan.cut_link else "")
        write_pending(store, self.keyring, recovered_envelope(event, when))
        for path in plan.derived:
            target = qdir / _quarantined_as(store, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
        for directory in (store.snapshot_dir, store.checkpoint_dir, *store.checkpoint_delta_dirs()):
            if directory.exists():
                fsync_dir(directory)
        write_atomically(qdir / "recovery.json", json.dumps(
            {**asdict(event), "pieces": [asdict(p) for p in plan.pieces],
             "derived": [str(p.relative_to(store.path)) for p in plan.derived]}, indent=2).encode())
        self._cut()
        HighWater(store.log_dir, store.store_id, self.keyring).write(Mark(plan.offset, plan.link))
        logger.warning("log recover: %s (reason: %s); quarantine %s", plan, reason, qdir)
        self.close()  # the writer open below takes the lock and logs the event
        record_pending(store.path, self.keyring, self.config)
        return event

    def _cut(self) -> None:
        log_dir, pieces = self.store.log_dir, self.plan.pieces
        if not pieces:
            return
        cut_base = int(Path(pieces[0].segment).stem)  # a cut at a segment's end leaves no piece of it: none later
        for base in sorted(int(p.stem) for p in log_dir.glob("*.log")):
            if base < cut_base:
                continue
            seg_path = log_dir / f"{base:020d}.log"
            seg_path.with_suffix(".index").unlink(missing_ok=True)
            seg_path.with_suffix(".timeindex").unlink(missing_ok=True)
            if base > cut_base:
                seg_path.unlink()
            else:
                fd = os.open(seg_path, os.O_WRONLY)
                try:
                    os.ftruncate(fd, pieces[0].from_byte)
                    os.fsync(fd)
                finally:
                    os.close(fd)
        fsync_dir(log_dir)


def record_pending(path: str | os.PathLike, keyring: Keyring, config: LogConfig | None = None) -> bool:
    """Open the store's log for writing once: it logs a recovery whose event is still pending (True if one was)."""
    with Log.open(path, keyring=keyring, config=config, create=False) as log:
        return log.logged_recovery is not None


def _open_problem(path: Path, keyring: Keyring) -> str | None:
    """Why a read-only open refuses the log (None: it opens cleanly)."""
    try:
        Log.open(path, keyring=keyring, read_only=True, create=False).close()
    except SecmetaError as exc:
        return str(exc)
    return None


def _authentic(keyring: Keyring, batch: Batch, prev: bytes) -> bool:
    """Whether ``batch`` carries the chain link its contents and ``prev`` (the link stored before it) make:
    a batch nobody without the keys could have written (an altered neighbour does not change that)."""
    try:
        key = keyring.chain_key(batch.key_id)
    except UnknownKeyError:
        return False
    return batch.expected_link(key, prev) == batch.link


def _recovery_in(codec: EventCodec, batch: Batch) -> tuple[int, LogRecovered] | None:
    """The last LogRecovered event of ``batch`` with its offset (None: it holds none, or does not decode)."""
    try:
        found = [(e.offset, e.event) for e in codec.decode_batch(batch.payload, batch.schema_fp, batch.base_offset)
                 if type(e.event) is LogRecovered]
    except Exception:  # noqa: BLE001 - an undecodable batch is damage, cut like any other
        return None
    return found[-1] if found else None


def _boundary(log_dir: Path, bases: list[int], offset: int, start: int, link: bytes) -> tuple[int, int, bytes]:
    """(segment base, byte position, chain link) where the batches before ``offset`` end."""
    if offset == start:
        return (bases[0] if bases else start), 0, link
    if not bases:
        raise InvalidValueError(f"the log has no segments: it can only be recorded as ending at offset {start}")
    end, damaged = start, False
    for base in bases:
        seg = Segment(log_dir, base, writable=False)
        try:
            for batch in seg.frames(0, seg.size):
                end = max(end, batch.next_offset)
                if batch.next_offset == offset:
                    return base, batch.position + batch.size, batch.link
                if batch.next_offset > offset:
                    break
        except FrameError:
            damaged = True
        finally:
            seg.close()
    if offset > end and not damaged:
        raise InvalidValueError(f"--truncate-to {offset} is past the log's end ({end}): {log_extent(end)}")
    raise InvalidValueError(
        f"no intact batch of the log ends at offset {offset}; give the offset named by the error "
        "(the first offset of the damaged batch)"
    )


def _quarantined_as(store: StoreDirectory, path: Path) -> Path:
    """Where in the quarantine a derived file goes: at its place in the store (snapshots/, checkpoints/,
    checkpoints/deltas-<base>/, the history index), since a policy snapshot, a full checkpoint and a delta at the
    same offset share one file name; ``recovery.json`` lists the same relative paths."""
    return path.relative_to(store.path)
