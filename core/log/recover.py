"""The explicit repair of a log that open refuses: cut it after an offset, keep what was cut.

``secmeta log recover --truncate-after N`` is the only way a log loses a
complete batch.  It takes the writer lock, copies every byte after offset N
(the rest of the segment holding N's batch boundary, every later segment) and
every snapshot past N into ``DIR/quarantine/``, with a JSON record of what was
removed and why, then truncates, deletes the later segments, and records N as
the high-water mark.  Batches up to N are not checked here: the next open does.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from secmeta.core.errors import InvalidValueError
from secmeta.core.log.anchor import read_anchor
from secmeta.core.log.format import FrameError, genesis_link
from secmeta.core.log.highwater import HighWater, Mark
from secmeta.core.log.segment import Segment
from secmeta.core.store.storedir import StoreDirectory
from secmeta.events.durable import fsync_dir, write_atomically
from secmeta.events.keyring import Keyring
from secmeta.projections.snapshot import SnapshotError, list_snapshots, read_snapshot_info

logger = logging.getLogger("secmeta.log")
QUARANTINE_DIR = "quarantine"


@dataclass(frozen=True)
class TruncateReport:
    offset: int
    removed_bytes: int
    quarantine: Path
    removed_segments: tuple[str, ...]
    removed_snapshots: tuple[str, ...]

    def __str__(self) -> str:
        return (f"cut the log after offset {self.offset}: {self.removed_bytes} bytes "
                f"({len(self.removed_segments)} segment(s) touched) and {len(self.removed_snapshots)} snapshot(s) "
                f"moved to {self.quarantine}")


def truncate_after(path: str | os.PathLike, offset: int, *, keyring: Keyring, reason: str = "") -> TruncateReport:
    """Cut the log of the store at ``path`` after ``offset`` (a batch boundary), quarantining the rest."""
    store = StoreDirectory.open(path, create=False, writer=True)
    try:
        store.check_keyring(keyring, writer=False)
        anchor = read_anchor(store.log_dir, store.store_id, keyring)
        start, link = (anchor.next_offset, anchor.link) if anchor else (0, genesis_link(store.store_id))
        if offset < start:
            raise InvalidValueError(f"offset {offset} is before the log's start {start}")
        bases = [b for b in sorted(int(p.stem) for p in store.log_dir.glob("*.log")) if b >= start]
        cut_base, cut_at, link = _boundary(store.log_dir, bases, offset, start, link)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        qdir = store.path / QUARANTINE_DIR / f"log-after-{offset}-{stamp}"
        qdir.mkdir(parents=True)
        pieces, removed = [], 0
        for base in bases:
            if base < cut_base:
                continue
            seg_path = store.log_dir / f"{base:020d}.log"
            data = seg_path.read_bytes()[cut_at if base == cut_base else 0:]
            if data:
                write_atomically(qdir / seg_path.name, data)
                pieces.append({"segment": seg_path.name, "from_byte": cut_at if base == cut_base else 0, "bytes": len(data)})
                removed += len(data)
        snapshots = []
        for snap in list_snapshots(store.snapshot_dir):
            try:
                past = read_snapshot_info(snap, keyring).next_offset > offset
            except SnapshotError:
                past = int(snap.stem.split("-")[1]) > offset
            if past:
                os.replace(snap, qdir / snap.name)
                snapshots.append(snap.name)
        record = {"truncated_after": offset, "reason": reason, "time": stamp, "pieces": pieces, "snapshots": snapshots}
        write_atomically(qdir / "recovery.json", json.dumps(record, indent=2).encode())
        fsync_dir(store.snapshot_dir)
        for base in bases:
            seg_path = store.log_dir / f"{base:020d}.log"
            for index in (seg_path.with_suffix(".index"), seg_path.with_suffix(".timeindex")):
                if base >= cut_base:
                    index.unlink(missing_ok=True)
            if base > cut_base:
                seg_path.unlink()
            elif base == cut_base:
                fd = os.open(seg_path, os.O_WRONLY)
                try:
                    os.ftruncate(fd, cut_at)
                    os.fsync(fd)
                finally:
                    os.close(fd)
        fsync_dir(store.log_dir)
        HighWater(store.log_dir, store.store_id, keyring).write(Mark(offset, link))
        report = TruncateReport(offset, removed, qdir, tuple(p["segment"] for p in pieces), tuple(snapshots))
        logger.warning("log recover: %s", report)
        return report
    finally:
        store.close()


def _boundary(log_dir: Path, bases: list[int], offset: int, start: int, link: bytes) -> tuple[int, int, bytes]:
    """(segment base, byte position, chain link) where the batches before ``offset`` end."""
    if offset == start:
        return (bases[0] if bases else start), 0, link
    if not bases:
        raise InvalidValueError(f"the log has no segments: it can only be recorded as ending at offset {start}")
    for base in bases:
        seg = Segment(log_dir, base, writable=False)
        try:
            for batch in seg.frames(0, seg.size):
                if batch.next_offset == offset:
                    return base, batch.position + batch.size, batch.link
                if batch.next_offset > offset:
                    break
        except FrameError:
            pass
        finally:
            seg.close()
    raise InvalidValueError(
        f"no intact batch of the log ends at offset {offset}; give the offset named by the error "
        "(the first offset of the damaged batch)"
    )
