"""Snapshots: the full state at a log offset, as an Avro container file.

A snapshot of the events [0, next_offset) is ``snapshot-<next_offset>.avro``:
an Avro object container (rows described by the state's own record schema,
metadata naming the offset, the chain link of the batch that ends there, the
time and the state kind), followed by an 8-byte trailer ``SMSN`` + CRC-32 of
everything before it.  Written atomically (temp file, fsync, rename, fsync
of the directory); a file whose CRC fails is never loaded.
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import fastavro

from events.durable import fsync_dir

SNAPSHOT_FORMAT = 1
TRAILER = struct.Struct(">4sI")
TRAILER_MAGIC = b"SMSN"
PREFIX = "snapshot-"
SUFFIX = ".avro"

S = TypeVar("S")


class SnapshotError(Exception):
    """A snapshot that cannot be used."""


class CorruptSnapshotError(SnapshotError):
    pass


class SnapshotCodec(Protocol[S]):
    """How a state becomes rows of one Avro record schema and back."""

    kind: str
    schema: dict

    def rows(self, state: S) -> Iterable[dict]: ...

    def build(self, rows: Iterable[dict]) -> S: ...


@dataclass(frozen=True)
class SnapshotInfo:
    path: Path
    next_offset: int
    link: bytes = field(repr=False)
    timestamp_ms: int
    kind: str
    rows: int
    size: int


@dataclass(frozen=True)
class SnapshotPolicy:
    """When to take a snapshot: after enough events or bytes, or when the last one is old.

    Any threshold set to None is ignored; all None means never automatically.
    """

    every_events: int | None = 100_000
    every_bytes: int | None = 64 * 1024 * 1024
    max_age_ms: int | None = None

    def __post_init__(self):
        for name in ("every_events", "every_bytes", "max_age_ms"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"SnapshotPolicy.{name} must be positive or None, not {value}")

    def due(self, events_since: int, bytes_since: int, age_ms: int) -> bool:
        if events_since <= 0:
            return False
        return (
            (self.every_events is not None and events_since >= self.every_events)
            or (self.every_bytes is not None and bytes_since >= self.every_bytes)
            or (self.max_age_ms is not None and age_ms >= self.max_age_ms)
        )


def snapshot_path(directory: Path, next_offset: int) -> Path:
    return Path(directory) / f"{PREFIX}{next_offset:020d}{SUFFIX}"


def list_snapshots(directory: str | os.PathLike) -> list[Path]:
    """Snapshot files in ``directory``, oldest first."""
    d = Path(directory)
    if not d.exists():
        return []
    return sorted(p for p in d.glob(f"{PREFIX}*{SUFFIX}") if p.stem[len(PREFIX) :].isdigit())


def write_snapshot(
    directory: str | os.PathLike,
    codec: SnapshotCodec[S],
    state: S,
    *,
    next_offset: int,
    link: bytes,
    timestamp_ms: int,
) -> SnapshotInfo:
    """Write ``state`` as the snapshot at ``next_offset``, atomically."""
    final = snapshot_path(Path(directory), next_offset)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp")
    counter = _Counting(codec.rows(state))
    with open(tmp, "wb") as raw:
        out = _CrcWriter(raw)
        fastavro.writer(
            out,
            fastavro.parse_schema(codec.schema),
            counter,
            metadata=_metadata(codec, next_offset, link, timestamp_ms),
            codec="null",
        )
        raw.write(TRAILER.pack(TRAILER_MAGIC, out.crc))
        raw.flush()
        os.fsync(raw.fileno())
        size = raw.tell()
    os.replace(tmp, final)
    fsync_dir(final.parent)
    return SnapshotInfo(final, next_offset, link, timestamp_ms, codec.kind, counter.count, size)


class _CrcWriter:
    """A write-only file wrapper that keeps the CRC-32 of what passed through."""

    def __init__(self, raw):
        self._raw = raw
        self.crc = 0

    def write(self, data) -> int:
        self.crc = zlib.crc32(data, self.crc)
        return self._raw.write(data)

    def flush(self) -> None:
        self._raw.flush()

    def seekable(self) -> bool:
        return False


def _metadata(
    codec: SnapshotCodec, next_offset: int, link: bytes, timestamp_ms: int
) -> dict[str, str]:
    return {
        "secmeta.format": str(SNAPSHOT_FORMAT),
        "secmeta.kind": codec.kind,
        "secmeta.next_offset": str(next_offset),
        "secmeta.link": link.hex(),
        "secmeta.timestamp_ms": str(timestamp_ms),
    }


def read_snapshot(path: str | os.PathLike, codec: SnapshotCodec[S]) -> tuple[SnapshotInfo, S]:
    """Verify and load a snapshot; raise CorruptSnapshotError or SnapshotError naming the file."""
    info, reader = _open(Path(path))
    if info.kind != codec.kind:
        raise SnapshotError(
            f"snapshot {info.path.name} holds a {info.kind!r} state, not {codec.kind!r}"
        )
    counter = _Counting(reader)
    state = codec.build(counter)
    return replace(info, rows=counter.count), state


def read_snapshot_info(path: str | os.PathLike) -> SnapshotInfo:
    """Verify a snapshot's CRC and read its metadata without loading the state."""
    return _open(Path(path))[0]


def _open(path: Path) -> tuple[SnapshotInfo, Any]:
    data = path.read_bytes()
    if len(data) < TRAILER.size:
        raise CorruptSnapshotError(f"snapshot {path.name} is truncated ({len(data)} bytes)")
    magic, crc = TRAILER.unpack_from(data, len(data) - TRAILER.size)
    body = memoryview(data)[: len(data) - TRAILER.size]
    if magic != TRAILER_MAGIC or zlib.crc32(body) != crc:
        raise CorruptSnapshotError(f"snapshot {path.name} fails its CRC check")
    try:
        reader = fastavro.reader(io.BytesIO(body))
        meta = {k: v.decode() if isinstance(v, bytes) else v for k, v in reader.metadata.items()}
        fmt = int(meta["secmeta.format"])
        info = SnapshotInfo(
            path=path,
            next_offset=int(meta["secmeta.next_offset"]),
            link=bytes.fromhex(meta["secmeta.link"]),
            timestamp_ms=int(meta["secmeta.timestamp_ms"]),
            kind=meta["secmeta.kind"],
            rows=-1,
            size=len(data),
        )
    except (ValueError, KeyError, TypeError, EOFError) as exc:
        raise CorruptSnapshotError(
            f"snapshot {path.name} is not a readable snapshot: {exc}"
        ) from None
    if fmt > SNAPSHOT_FORMAT:
        raise SnapshotError(
            f"snapshot {path.name} has format {fmt}; this secmeta reads up to {SNAPSHOT_FORMAT}"
        )
    return info, reader


class _Counting:
    """Iterates rows while counting them."""

    def __init__(self, rows: Iterable[Any]):
        self._rows = rows
        self.count = 0

    def __iter__(self):
        for row in self._rows:
            self.count += 1
            yield row
