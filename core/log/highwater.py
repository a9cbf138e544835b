"""The high-water mark: the end of the log as last acknowledged, sealed with the chain key.

After each batch is durable the writer records (next offset, chain link of the
batch that ends there) in ``log/high-water``, overwriting one small sealed
record in place.  At open a log that ends before the mark, or whose batch at
the mark carries another link, lost acknowledged batches (a rollback: the end
cut off, the last segment deleted or emptied) and is refused; only bytes
beyond the mark can be a torn tail.  The record is written after the segment
is synced, so a crash never leaves the mark ahead of the data.

The in-place write is visible to every process at once (the page cache); a
background thread fsyncs it right after, coalescing marks written meanwhile,
so a durable append costs one fsync, not two.  Only a power loss can lose the
newest mark, and then only for batches acknowledged in the last few milliseconds.
"""

from __future__ import annotations

import os
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

from secmeta.core.errors import CorruptLogError
from secmeta.core.log.format import FrameError
from secmeta.core.log.seal import BrokenSealError, seal, unseal
from secmeta.events.durable import write_atomically
from secmeta.events.keyring import Keyring

HIGH_WATER_FILE = "high-water"
BODY = struct.Struct(">q32s")
_datasync = getattr(os, "fdatasync", os.fsync)


@dataclass(frozen=True, slots=True)
class Mark:
    """Offsets [start, next_offset) were acknowledged; ``link`` is the chain link at next_offset."""

    next_offset: int
    link: bytes = field(repr=False)


def is_torn_tail(error: FrameError, offset: int, mark: Mark | None, start: int) -> bool:
    """May the unreadable batch at ``offset`` be cut as a torn write? Only when it is incomplete
    (the data ends before its length says) and lies beyond the acknowledged end."""
    return error.truncated and offset >= (mark.next_offset if mark is not None else start)


class HighWater:
    """The sealed high-water file of one store's log."""

    def __init__(self, log_dir: Path, store_id: str, keyring: Keyring):
        self.path = Path(log_dir) / HIGH_WATER_FILE
        self._context = b"secmeta/high-water:" + store_id.encode()
        self._keyring = keyring
        self._fd = -1
        self._dirty = False
        self._wake = threading.Condition()
        self._syncer: threading.Thread | None = None
        self.failed: OSError | None = None

    def read(self) -> Mark | None:
        """The recorded mark (None if there is no file); CorruptLogError if the file is not ours."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            body = unseal(self._keyring, self._context, data)
            if len(body) != BODY.size:
                raise BrokenSealError(f"its record has {len(body)} bytes, not {BODY.size}")
        except BrokenSealError as exc:
            raise CorruptLogError(
                f"the log's high-water file {self.path} is not valid ({exc}): it was altered or forged; "
                "`secmeta log recover --truncate-to N --reason TEXT` rewrites it"
            ) from None
        offset, link = BODY.unpack(body)
        return Mark(offset, link)

    def write(self, mark: Mark) -> None:
        """Replace the file atomically and durably with ``mark``."""
        write_atomically(self.path, self._sealed(mark))

    def reset(self, mark: Mark) -> None:
        """Replace the file with ``mark`` and keep it open for in-place updates (the syncer
        starts with the first ``record``: a writer that never appends starts no thread)."""
        self.write(mark)
        self.close()
        self._fd = os.open(self.path, os.O_WRONLY)

    def record(self, mark: Mark) -> None:
        """Overwrite the mark in place (same length as ``reset`` wrote); the syncer fsyncs it."""
        sealed = self._sealed(mark)
        if self._syncer is None:  # callers hold the appender's sync lock: one at a time
            self._syncer = threading.Thread(target=self._sync_loop, name="secmeta-high-water", daemon=True)
            self._syncer.start()
        with self._wake:
            os.pwrite(self._fd, sealed, 0)
            self._dirty = True
            self._wake.notify()

    def _sync_loop(self) -> None:
        with self._wake:
            while self._fd >= 0:
                if not self._dirty:
                    self._wake.wait()
                    continue
                self._dirty = False
                fd = self._fd
                self._wake.release()
                try:
                    _datasync(fd)
                except OSError as exc:
                    self.failed = exc
                finally:
                    self._wake.acquire()

    def _sealed(self, mark: Mark) -> bytes:
        return seal(self._keyring, self._context, BODY.pack(mark.next_offset, mark.link))

    def close(self) -> None:
        """Fsync the last mark, stop the syncer, close the file."""
        syncer, self._syncer = self._syncer, None
        with self._wake:
            fd, self._fd = self._fd, -1
            self._wake.notify()
        if syncer is not None:
            syncer.join()
        if fd >= 0:
            try:
                _datasync(fd)
            finally:
                os.close(fd)
