"""One segment file of the log with its sparse offset index and time index.

Files are named by the segment's base offset: ``00000000000000001000.log``
with ``.index`` (relative offset u32, position u32) and ``.timeindex``
(newest timestamp so far i64, relative offset u32) written when the
segment is sealed.  Both are sealed with the chain key and bound to the
store and the segment's offsets and size (secmeta.core.log.seal); one that fails
its seal is rebuilt from the data.  The active segment's indexes live in
memory and are rebuilt from the data on open (recovery scans that segment anyway).
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterator
from pathlib import Path

from secmeta.core.log.format import Batch, FrameError, decode_frame
from secmeta.core.log.seal import BrokenSealError, seal, unseal
from secmeta.events.durable import write_atomically
from secmeta.events.keyring import Keyring

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
        self.prev_link: bytes | None = None  # the link of the batch before this segment's first
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

    def anchor_for(self, offset: int) -> tuple[int, int, bytes | None]:
        """Where to start reading to check the chain of the batch holding ``offset``.

        (position, base offset of the batch there, link before it): at the start of the
        segment the link is ``prev_link``; otherwise reading starts one index entry
        earlier and the link is None: the first batch read only lends its link.
        """
        i = bisect.bisect_right(self._offsets, offset) - 1
        if i <= 0:
            return 0, self.base_offset, self.prev_link
        return self._positions[i - 1], self._offsets[i - 1], None

    def offset_for_time(self, timestamp_ms: int) -> int:
        """An offset at or before the first batch whose newest timestamp is >= ``timestamp_ms``."""
        i = bisect.bisect_left(self._times, timestamp_ms) - 1
        return self._time_offsets[i] if i >= 0 else self.base_offset

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

    def _index_context(self, suffix: str, store_id: str, next_offset: int, size: int) -> bytes:
        return f"secmeta/{suffix}:{store_id}:{self.base_offset}:{next_offset}:{size}".encode()

    def write_indexes(self, keyring: Keyring, store_id: str) -> None:
        """Write the sealed segment's index files (after its last batch is durable)."""
        for path, body in self._index_bodies():
            context = self._index_context(path.suffix, store_id, self.next_offset, self.size)
            write_atomically(path, seal(keyring, context, body))

    def _index_bodies(self) -> tuple[tuple[Path, bytes], tuple[Path, bytes]]:
        base = self.base_offset
        return (
            (self.index_path, b"".join(INDEX_ENTRY.pack(o - base, p) for o, p in zip(self._offsets, self._positions))),
            (self.timeindex_path, b"".join(TIME_ENTRY.pack(t, o - base) for t, o in zip(self._times, self._time_offsets))),
        )

    def _read_index_file(self, path: Path, keyring: Keyring, store_id: str, next_offset: int) -> bytes | None:
        """The body of an index file if it is present and sealed for this segment as it is now."""
        try:
            return unseal(keyring, self._index_context(path.suffix, store_id, next_offset, self.size), path.read_bytes())
        except (FileNotFoundError, BrokenSealError):
            return None

    def load_indexes(self, next_offset: int, keyring: Keyring, store_id: str) -> bool:
        """Load a sealed segment's index files; False when missing, not sealed for it, or inconsistent."""
        raw = self._read_index_file(self.index_path, keyring, store_id, next_offset)
        traw = self._read_index_file(self.timeindex_path, keyring, store_id, next_offset)
        if raw is None or traw is None or len(raw) % INDEX_ENTRY.size or len(traw) % TIME_ENTRY.size or not raw:
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

    def index_problem(self, batches: list[Batch], keyring: Keyring, store_id: str) -> str | None:
        """Why this sealed segment's index files do not describe ``batches`` (its every batch), or None.

        Missing files are no problem (open rebuilds them); present ones must carry our seal
        for this segment, index only batch starts, and hold every rise of the newest timestamp.
        """
        next_offset = batches[-1].next_offset if batches else self.base_offset
        starts = {(b.base_offset - self.base_offset, b.position) for b in batches}
        rises, newest = [], -1
        for b in batches:
            if b.timestamp_ms > newest:
                newest = b.timestamp_ms
                rises.append(TIME_ENTRY.pack(newest, b.base_offset - self.base_offset))
        for path in (self.index_path, self.timeindex_path):
            if not path.exists():
                continue
            body = self._read_index_file(path, keyring, store_id, next_offset)
            if body is None:
                return f"index file {path.name} is not sealed for this segment: altered, forged or stale"
            if path == self.index_path:
                entries = [INDEX_ENTRY.unpack_from(body, i) for i in range(0, len(body) - len(body) % 8, 8)]
                if len(body) % 8 or not entries or entries[0] != (0, 0) or not set(entries) <= starts:
                    return f"index file {path.name} points at positions where no batch starts"
            elif body != b"".join(rises):
                return f"time index file {path.name} does not match the batches' timestamps"
        return None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _frame_length(buf: bytes, rel: int) -> int:
    if len(buf) - rel >= 4:
        return int.from_bytes(buf[rel : rel + 4], "big") + 4
    return 0

