"""Snapshots: the full state at a log offset, as an Avro container file.

A snapshot of the events [0, next_offset) is ``snapshot-<next_offset>.avro``:
since format 5, a 16-byte preamble (``SMSN``, 0, 0, 0, 5 and the size of the
section that follows, big-endian) and a binary section the state's codec reads
in place (``SnapshotCodec.section``; a codec without one writes none: then the
file starts with the container), then
an Avro object container (rows described by the state's own record schema,
metadata naming the offset, the chain link of the batch that ends there, the
time, the state kind and the key id), followed by a 40-byte trailer: an
HMAC-SHA256 of the container under that keyring key, ``SMSN``, and a CRC-32
of everything before the CRC.  The CRC catches damage cheaply; the HMAC makes
a forged or edited snapshot fail to load for anyone without the key.  Written
atomically (temp file, fsync, rename, fsync of the directory).

A snapshot is read into memory once; its CRC and HMAC are checked over those
bytes and the section is handed to the codec as a view of them, which the
state reads in place (issue 24).  Not a memory map: a file truncated or
rewritten in place under a map would end the process (SIGBUS) or change what
was checked, and the file's bytes cost about a fifth of a built image.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import os
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import fastavro

from secmeta.events.durable import fsync_dir
from secmeta.events.errors import InvalidValueError, SecmetaError
from secmeta.events.keyring import Keyring
from secmeta.projections.gc_pause import paused_gc

SNAPSHOT_FORMAT = 5  # 5: a binary section the codec reads in place (the ACL index's columns, issue 24)
READ_FORMATS = (3, 4, 5)  # 3 and 4 still load (ACL index chunks as Avro rows); 1 and 2 were development formats
TRAILER = struct.Struct(">32s4sI")  # HMAC, magic, CRC
PREAMBLE = struct.Struct(">8sQ")  # PREAMBLE_MAGIC, the section's size in bytes
PREAMBLE_MAGIC = b"SMSN\x00\x00\x00\x05"
MAC_LABEL = b"secmeta/snapshot"
TRAILER_MAGIC = b"SMSN"
PREFIX = "snapshot-"
SUFFIX = ".avro"

S = TypeVar("S")


class SnapshotError(SecmetaError):
    """A snapshot that cannot be used."""


class CorruptSnapshotError(SnapshotError):
    """A snapshot whose bytes fail their CRC, HMAC or schema (not written by us, or damaged)."""


class SnapshotCodec(Protocol[S]):
    """How a state becomes rows of one Avro record schema and back."""

    kind: str
    schema: dict

    def rows(self, state: S) -> Iterable[dict]: ...

    def build(self, rows: Iterable[dict], section: memoryview | None = None) -> S:
        """The state of these rows (and the section ``section`` wrote, if it has one)."""
        ...


def codec_section(codec: SnapshotCodec[S], state: S) -> list[bytes] | None:
    """The binary section a codec writes before its rows (None for a codec without one)."""
    section = getattr(codec, "section", None)
    return None if section is None else section(state)


@dataclass(frozen=True)
class SnapshotInfo:
    path: Path
    next_offset: int
    link: bytes = field(repr=False)
    timestamp_ms: int
    kind: str
    rows: int
    size: int
    format: int = SNAPSHOT_FORMAT


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
                raise InvalidValueError(f"SnapshotPolicy.{name} must be positive or None, not {value}")

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


def partial_snapshot_path(directory: Path, next_offset: int) -> Path:
    """Where write_snapshot writes the snapshot at ``next_offset`` before renaming it into place."""
    final = snapshot_path(directory, next_offset)
    return final.with_name(f".{final.name}.tmp")


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
    keyring: Keyring | None = None,
) -> SnapshotInfo:
    """Write ``state`` as the snapshot at ``next_offset``, atomically (authenticated given a keyring)."""
    final = snapshot_path(Path(directory), next_offset)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_snapshot_path(final.parent, next_offset)
    counter = _Counting(codec.rows(state))
    metadata = _metadata(codec, next_offset, link, timestamp_ms)
    mac = None
    if keyring is not None:
        metadata["secmeta.mac_key_id"] = keyring.newest_id
        mac = _mac(keyring, keyring.newest_id)
    # Paused collector: a snapshot written in the background beside writers would otherwise
    # trigger full collections that rescan the live image while holding the GIL.
    with paused_gc(), open(tmp, "wb") as raw:
        out = _CrcWriter(raw, mac)
        section = codec_section(codec, state)
        if section is not None:
            out.write(PREAMBLE.pack(PREAMBLE_MAGIC, sum(map(len, section))))
            for chunk in section:
                out.write(chunk)
        fastavro.writer(out, fastavro.parse_schema(codec.schema), counter, metadata=metadata, codec="null")
        digest = mac.digest() if mac is not None else bytes(32)
        raw.write(TRAILER.pack(digest, TRAILER_MAGIC, zlib.crc32(digest + TRAILER_MAGIC, out.crc)))
        raw.flush()
        os.fsync(raw.fileno())
        size = raw.tell()
    os.replace(tmp, final)
    fsync_dir(final.parent)
    return SnapshotInfo(final, next_offset, link, timestamp_ms, codec.kind, counter.count, size)


class _CrcWriter:
    """A write-only file wrapper that keeps the CRC-32 of what passed through."""

    def __init__(self, raw, mac=None):
        self._raw = raw
        self._mac = mac
        self.crc = 0

    def write(self, data) -> int:
        self.crc = zlib.crc32(data, self.crc)
        if self._mac is not None:
            self._mac.update(data)
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


def read_snapshot(path: str | os.PathLike, codec: SnapshotCodec[S], keyring: Keyring | None = None) -> tuple[SnapshotInfo, S]:
    """Verify and load a snapshot; raise CorruptSnapshotError or SnapshotError naming the file.

    Given a keyring, the snapshot must carry a valid HMAC under one of its keys.
    """
    info, reader, section = _open(Path(path), keyring)
    if info.kind != codec.kind:
        raise SnapshotError(
            f"snapshot {info.path.name} holds a {info.kind!r} state, not {codec.kind!r}"
        )
    if section is None and info.format >= 5 and getattr(codec, "section", None) is not None:
        raise CorruptSnapshotError(f"snapshot {info.path.name} is not a readable snapshot: format {info.format} "
                                   f"of a {codec.kind!r} state without its section")
    counter = _Counting(reader)
    with paused_gc():  # the state is built from many new acyclic objects
        state = codec.build(counter) if section is None else codec.build(counter, section)
    return replace(info, rows=counter.count), state


def read_snapshot_info(path: str | os.PathLike, keyring: Keyring | None = None) -> SnapshotInfo:
    """Verify a snapshot's CRC (and HMAC, given a keyring) and read its metadata, not its state."""
    return _open(Path(path), keyring)[0]


def _mac(keyring: Keyring, key_id: str):
    return hmac.new(keyring.chain_key(key_id), MAC_LABEL, hashlib.sha256)


def _open(path: Path, keyring: Keyring | None) -> tuple[SnapshotInfo, Any, memoryview | None]:
    """A snapshot's info, its rows' reader and its section (a view of the file's bytes), checked."""
    data = path.read_bytes()
    size = len(data)
    if size < TRAILER.size:
        raise CorruptSnapshotError(f"snapshot {path.name} is truncated ({size} bytes)")
    digest, magic, stored_crc = TRAILER.unpack_from(data, size - TRAILER.size)
    if magic != TRAILER_MAGIC or zlib.crc32(memoryview(data)[:size - 4]) != stored_crc:
        raise CorruptSnapshotError(f"snapshot {path.name} fails its CRC check")
    body = memoryview(data)[: size - TRAILER.size]
    section = None
    if body[:len(PREAMBLE_MAGIC)] == PREAMBLE_MAGIC and len(body) >= PREAMBLE.size:
        _, section_size = PREAMBLE.unpack_from(body)
        if PREAMBLE.size + section_size > len(body):
            raise CorruptSnapshotError(f"snapshot {path.name} is not a readable snapshot: its section runs past it")
        section = body[PREAMBLE.size:PREAMBLE.size + section_size]
        container = bytes(body[PREAMBLE.size + section_size:])
    else:
        container = bytes(body)
    try:
        reader = fastavro.reader(io.BytesIO(container))
        meta = {k: v.decode() if isinstance(v, bytes) else v for k, v in reader.metadata.items()}
        fmt = int(meta["secmeta.format"])
        info = SnapshotInfo(
            path=path,
            next_offset=int(meta["secmeta.next_offset"]),
            link=bytes.fromhex(meta["secmeta.link"]),
            timestamp_ms=int(meta["secmeta.timestamp_ms"]),
            kind=meta["secmeta.kind"],
            rows=-1,
            size=size,
            format=fmt,
        )
    except (ValueError, KeyError, TypeError, EOFError) as exc:
        raise CorruptSnapshotError(
            f"snapshot {path.name} is not a readable snapshot: {exc}"
        ) from None
    if fmt not in READ_FORMATS:
        raise SnapshotError(_unread_format(path, fmt))
    if section is not None and fmt < 5:
        raise CorruptSnapshotError(f"snapshot {path.name} is not a readable snapshot: format {fmt} with a section")
    if keyring is not None:
        key_id = meta.get("secmeta.mac_key_id")
        if key_id is None:
            raise CorruptSnapshotError(f"snapshot {path.name} is not authenticated (no HMAC key id)")
        if key_id not in keyring.ids:
            raise SnapshotError(f"snapshot {path.name} is authenticated with key {key_id!r}, which is not in the keyring")
        mac = _mac(keyring, key_id)
        mac.update(body)
        if not hmac.compare_digest(mac.digest(), digest):
            raise CorruptSnapshotError(f"snapshot {path.name} fails its HMAC check: it was altered or forged")
    return info, reader, section


def _unread_format(path: Path, fmt: int) -> str:
    """Why a snapshot of format ``fmt`` is refused (a store then takes an older snapshot or replays the log)."""
    if fmt > SNAPSHOT_FORMAT:
        return f"snapshot {path.name} has format {fmt}, newer than this secmeta reads ({SNAPSHOT_FORMAT})"
    readable = ", ".join(map(str, READ_FORMATS[:-1])) + f" and {READ_FORMATS[-1]}"
    return (f"snapshot {path.name} has format {fmt}, a development format no release wrote; this secmeta "
            f"reads formats {readable} (`secmeta log snapshot` writes a new one)")


class _Counting:
    """Iterates rows while counting them."""

    def __init__(self, rows: Iterable[Any]):
        self._rows = rows
        self.count = 0

    def __iter__(self):
        for row in self._rows:
            self.count += 1
            yield row
