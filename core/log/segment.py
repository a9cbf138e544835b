"""One segment file of the log with its sparse offset index and time index.

Files are named by the segment's base offset: ``00000000000000001000.log``
with ``.index`` (relative offset u32, position u32) and ``.timeindex``
(newest timestamp so far i64, relative offset u32) written when the
segment is sealed.  The active segment's indexes live in memory and are
rebuilt from the data on open (recovery scans that segment anyway).
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterator
from pathlib import Path

from core.log.format import Batch, FrameError, decode_frame
from events.durable import write_atomically

INDEX_ENTRY = struct.Struct(">II")
TIME_ENTRY = struct.Struct(">qI")
READ_CHUNK = 1 << 20


_datasync = getattr(os, "fdatasync", os.fsync)


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class Segment:
    """A segment file; readers use pread on a shared descriptor, the writer appends."""

    def __init__(self, directory: Path, base_offset: int, *, writable: bool, index_interval: int = 4096):
        self.base_offset = base_offset
        self.path = directory / f"{segment_name(base_offset)}.log"
        self.index_interval = index_interval
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        self.fd = os.open(self.path, flags, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.visible_size = self.size
        self.synced_size = self.size
        self.next_offset = base_offset
        self.last_link: bytes | None = None
        self.last_batch_offset = -1
        self._offsets: list[int] = []
        self._positions: list[int] = []
        self._times: list[int] = []
        self._time_offsets: list[int] = []
        self._max_ts = -1
        self._since_index = index_interval  # index the first batch

    @property
    def index_path(self) -> Path:
        return self.path.with_suffix(".index")

    @property
    def timeindex_path(self) -> Path:
        return self.path.with_suffix(".timeindex")

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def max_timestamp(self) -> int:
        return self._max_ts

    # -- reading ---------------------------------------------------------------

    def frames(self, start: int = 0, stop: int | None = None) -> Iterator[Batch]:
        """Yield frames from byte ``start`` up to ``stop`` (default: visible size).

        Raises FrameError (with ``.position``) at the first frame that does not parse.
        """
        stop = self.visible_size if stop is None else stop
        pos = start
        buf = b""
        buf_start = start
        while pos < stop:
            rel = pos - buf_start
            try:
                batch = decode_frame(buf, rel, buf_start)
            except FrameError as exc:
                if not exc.truncated or buf_start + len(buf) >= stop:
                    exc.position = pos  # type: ignore[attr-defined]
                    raise
                need = max(READ_CHUNK, _frame_length(buf, rel))
                buf = os.pread(self.fd, min(need, stop - pos), pos)
                buf_start = pos
                continue
            yield batch
            pos = buf_start + rel + batch.size

    def position_for(self, offset: int) -> int:
        """Byte position of the last indexed batch starting at or before ``offset``."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        return self._positions[i] if i >= 0 else 0

    def position_for_time(self, timestamp_ms: int) -> int:
        """Byte position from which batches with newest timestamp >= ``timestamp_ms`` start."""
        i = bisect.bisect_left(self._times, timestamp_ms) - 1
        if i < 0:
            return 0
        return self.position_for(self._time_offsets[i])

    # -- writing ---------------------------------------------------------------

    def note(self, batch: Batch, position: int) -> None:
        """Account for a batch at ``position`` (written now, or found while scanning)."""
        if self._since_index >= self.index_interval:
            self._offsets.append(batch.base_offset)
            self._positions.append(position)
            self._since_index = 0
        self._since_index += batch.size
        if batch.timestamp_ms > self._max_ts:
            self._max_ts = batch.timestamp_ms
            self._times.append(batch.timestamp_ms)
            self._time_offsets.append(batch.base_offset)
        self.next_offset = batch.next_offset
        self.last_link = batch.link
        self.last_batch_offset = batch.base_offset

    def write(self, frame: bytes) -> int:
        """Append ``frame``; on a failed write, cut the file back and re-raise. Returns its position."""
        position = self.size
        view = memoryview(frame)
        written = 0
        try:
            while written < len(frame):
                written += os.pwrite(self.fd, view[written:], position + written)
        except OSError:
            os.ftruncate(self.fd, position)
            raise
        self.size = position + len(frame)
        return position

    def sync(self) -> None:
        """Flush data and the file size (fdatasync skips only timestamps)."""
        _datasync(self.fd)

    def truncate(self, position: int) -> None:
        os.ftruncate(self.fd, position)
        os.fsync(self.fd)
        self.size = self.visible_size = self.synced_size = position

    # -- indexes ---------------------------------------------------------------

    def write_indexes(self) -> None:
        base = self.base_offset
        write_atomically(
            self.index_path,
            b"".join(INDEX_ENTRY.pack(o - base, p) for o, p in zip(self._offsets, self._positions)),
        )
        write_atomically(
            self.timeindex_path,
            b"".join(TIME_ENTRY.pack(t, o - base) for t, o in zip(self._times, self._time_offsets)),
        )

    def load_indexes(self, next_offset: int) -> bool:
        """Load a sealed segment's index files; False when missing or inconsistent."""
        try:
            raw = self.index_path.read_bytes()
            traw = self.timeindex_path.read_bytes()
        except FileNotFoundError:
            return False
        if len(raw) % INDEX_ENTRY.size or len(traw) % TIME_ENTRY.size or not raw:
            return False
        entries = [INDEX_ENTRY.unpack_from(raw, i) for i in range(0, len(raw), INDEX_ENTRY.size)]
        times = [TIME_ENTRY.unpack_from(traw, i) for i in range(0, len(traw), TIME_ENTRY.size)]
        positions = [p for _, p in entries]
        if positions != sorted(positions) or positions[-1] >= self.size or positions[0] != 0:
            return False
        self._offsets = [self.base_offset + o for o, _ in entries]
        self._positions = positions
        self._times = [t for t, _ in times]
        self._time_offsets = [self.base_offset + o for _, o in times]
        self._max_ts = self._times[-1] if self._times else -1
        self.next_offset = next_offset
        return True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _frame_length(buf: bytes, rel: int) -> int:
    if len(buf) - rel >= 4:
        return int.from_bytes(buf[rel : rel + 4], "big") + 4
    return 0

