"""A snapshot written by a forked child while the caller goes on applying: start it, look, wait, or abort it.

``write_snapshot_forked`` blocks its calling thread until the child has written the file; here a thread of its
own makes that call, so the caller keeps working while the child encodes (on another core) an immutable image
it already holds.  This is how Kafka's brokers write their metadata snapshots (SnapshotGenerator, on a thread
of its own, while the broker keeps applying records).  The caller learns the outcome with ``done`` (never
blocks) and ``result`` (waits); it alone decides what a finished snapshot means (a follower's checkpoint names
it only then), so nothing outside the snapshot file is written here.  ``abort`` kills a child under way, which
leaves no file (``write_snapshot_forked`` removes its partial one).
"""

from __future__ import annotations

import threading
from pathlib import Path

from secmeta.core.snapshots.forked_snapshot import write_snapshot_forked
from secmeta.events.keyring import Keyring
from secmeta.projections.snapshot import SnapshotCodec, SnapshotInfo

__all__ = ["BackgroundSnapshot"]


class BackgroundSnapshot:
    """``write_snapshot_forked(directory, codec, state, ...)`` under way in a thread started here."""

    def __init__(self, directory: Path, codec: SnapshotCodec, state, *, next_offset: int, link: bytes,
                 timestamp_ms: int, keyring: Keyring | None = None, timeout: float | None = None):
        self.next_offset = next_offset
        self._abort = threading.Event()
        self._info: SnapshotInfo | None = None
        self._error: Exception | None = None
        self._thread = threading.Thread(
            target=self._write, name="secmeta-background-snapshot", daemon=True,
            args=(directory, codec, state),
            kwargs={"next_offset": next_offset, "link": link, "timestamp_ms": timestamp_ms, "keyring": keyring,
                    "timeout": timeout})
        self._thread.start()

    def _write(self, *args, **kwargs) -> None:
        try:
            self._info = write_snapshot_forked(*args, abort=self._abort, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the caller learns every failure from result()
            self._error = exc

    def done(self) -> bool:
        """Whether the child has finished (written the file or failed); never waits."""
        return not self._thread.is_alive()

    def result(self) -> SnapshotInfo:
        """Wait for the child; the snapshot written, or its failure raised (ForkedCallError: the child failed, died,
        timed out or was aborted, and left no file; OSError: it could not be started)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._info is not None
        return self._info

    def abort(self) -> None:
        """Kill the child if it is still writing (it leaves no file) and wait until it is gone."""
        self._abort.set()
        self._thread.join()
