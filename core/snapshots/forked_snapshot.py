"""Writing a snapshot file in a forked child, with a deadline and nothing partial left behind.

Policy snapshots (secmeta.core.store.state's Snapshotter) and time-travel checkpoint files
(secmeta.core.forensics.checkpoints) are both encoded off the writers' GIL by secmeta.core.snapshots.forked.  A
child may hang (a lock another thread held at fork time) or be aborted by a
closing store; it is then killed, and its half-written temporary file removed
here, so the snapshot directory never holds a partial file of a child that
is gone.

The default deadline scales with the image.  Encoding a million ACLs takes
~1.2 s of CPU, ~1.2 us an entry, and an image holds at most one entry per event
ever appended (``next_offset`` counts them, retained or not).  At
CHILD_NICENESS +10 beside busy writers a child gets about a tenth of a core,
so ``PER_EVENT_S`` (60 us, 50 times the CPU cost) leaves room for that, a cold
page cache and a slow fsync; ``MIN_TIMEOUT_S`` covers a small image on a stalled
disk.  The deadline only ends a child that is stuck (no CPU used for that long)
or runs away (that much CPU used): one that keeps working is waited for however
little of a core it gets (issue 24: a fixed deadline ended a checkpoint child at
2M events under load, which stopped the whole fill).  A closing store does not
wait for it (it sets the abort event).
"""

from __future__ import annotations

import threading
from pathlib import Path

from secmeta.core.snapshots.forked import ForkedCallError, call_forked
from secmeta.events.keyring import Keyring
from secmeta.projections.snapshot import (
    SnapshotCodec,
    SnapshotInfo,
    partial_snapshot_path,
    write_snapshot,
)

__all__ = ["MIN_TIMEOUT_S", "PER_EVENT_S", "snapshot_timeout", "write_snapshot_forked"]

MIN_TIMEOUT_S = 60.0
PER_EVENT_S = 60e-6


def snapshot_timeout(next_offset: int) -> float:
    """Seconds a child may take to write the snapshot of an image at ``next_offset``."""
    return max(MIN_TIMEOUT_S, PER_EVENT_S * next_offset)


def write_snapshot_forked(directory: Path, codec: SnapshotCodec, state, *, next_offset: int, link: bytes,
                          timestamp_ms: int, keyring: Keyring | None = None, timeout: float | None = None,
                          abort: threading.Event | None = None) -> SnapshotInfo:
    """write_snapshot in a forked child, killed past ``timeout`` (default: snapshot_timeout) or on ``abort``.

    A child that fails, hangs or is aborted raises ForkedCallError, and its temporary file is removed.
    """
    try:
        return call_forked(write_snapshot, directory, codec, state, next_offset=next_offset, link=link,
                           timestamp_ms=timestamp_ms, keyring=keyring,
                           timeout=snapshot_timeout(next_offset) if timeout is None else timeout, abort=abort)
    except ForkedCallError:
        partial_snapshot_path(Path(directory), next_offset).unlink(missing_ok=True)
        raise
