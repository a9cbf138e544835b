"""Snapshots: the full state at a log offset, as an Avro container file.

A snapshot of the events [0, next_offset) is ``snapshot-<next_offset>.avro``.  Since format 6:

    preamble   ``SMSN``, 0, 0, 0, 6; the size of the section (u64) and of the HMAC key id (u16), big-endian;
               the key id (UTF-8, empty when unauthenticated), zero-padded to a multiple of 8 bytes
    section    a binary section the state's codec reads in place (``SnapshotCodec.section``; empty for a
               codec without one)
    container  an Avro object container: rows described by the state's own record schema, metadata naming
               the format, the offset, the chain link of the batch that ends there, the time, the state
               kind and the key id
    trailer    40 bytes: an HMAC-SHA256 of everything before it under that keyring key (zeros when
               unauthenticated), ``SMSN`` and a CRC-32 of everything before the CRC

The HMAC makes a forged, edited or truncated snapshot fail to load for anyone with the key, before any
byte of it is parsed: the key id is in the fixed-size preamble, so a reader given a keyring checks the
HMAC alone (issue 24: the CRC cost a third of reading a large file again, and proved nothing the HMAC
does not).  A reader without a keyring checks the CRC, which catches damage; so does one whose keyring lacks
the key id the preamble names, so that a damaged key id is reported as damage rather than as an unknown
key (issue 24).  Written atomically
(temp file, fsync, rename, fsync of the directory).

Formats 3 to 5 still load (CRC first, then the HMAC named in the container's metadata): format 5
began with a 16-byte preamble (``SMSN``, 0, 0, 0, 5, the section's size) when it had a section, and
3 and 4 had none.

A snapshot is read into memory once; its HMAC (or CRC) is checked over those
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
from fastavro.read import SchemaResolutionError
from fastavro.schema import SchemaParseException

from secmeta.events.durable import fsync_dir
from secmeta.events.errors import InvalidValueError, SecmetaError
from secmeta.events.keyring import Keyring
from secmeta.projections.gc_pause import paused_gc

# 6: the key id in a preamble every file has, so the HMAC alone is checked given a keyring (issue 24)
SNAPSHOT_FORMAT = 6
READ_FORMATS = (3, 4, 5, 6)  # 3 and 4: ACL index chunks as Avro rows; 5: a section; 1 and 2 were development formats
TRAILER = struct.Struct(">32s4sI")  # HMAC, magic, CRC
PREAMBLE = struct.Struct(">8sQH")  # PREAMBLE_MAGIC, the section's size in bytes, the key id's size in bytes
PREAMBLE_MAGIC = b"SMSN\x00\x00\x00\x06"
PREAMBLE5 = struct.Struct(">8sQ")  # format 5's: PREAMBLE5_MAGIC, the section's size in bytes
PREAMBLE5_MAGIC = b"SMSN\x00\x00\x00\x05"
MAC_LABEL = b"secmeta/snapshot"
TRAILER_MAGIC = b"SMSN"
PREFIX = "snapshot-"
SUFFIX = ".avro"

S = TypeVar("S")


class SnapshotError(SecmetaError):
    """A snapshot that cannot be used."""


class CorruptSnapshotError(SnapshotError):
    """A snapshot whose bytes fail their CRC, HMAC or schema (not written by us, or damaged)."""


#: What reading a snapshot's rows (fastavro) or building its state (a codec) raises on bytes that are no snapshot's:
#: a file whose CRC is valid but whose content is crafted (or damaged and the CRC fixed up), when no keyring's HMAC
#: was there to refuse it first. ``read_snapshot`` refuses it as CorruptSnapshotError naming the file, as a bad CRC.
#: Not OSError (a read that failed says nothing of the file) nor MemoryError.
DECODE_ERRORS: tuple[type[Exception], ...] = (
    EOFError, ValueError, KeyError, IndexError, TypeError, AttributeError, OverflowError, struct.error,
    SchemaParseException, SchemaResolutionError)


class SnapshotCodec(Protocol[S]):
    """How a state becomes rows of one Avro record schema and back."""

    kind: str
    schema: dict

    def rows(self, state: S) -> Iterable[dict]: ...

    def build(self, rows: Iterable[dict], section: memoryview | None = None, *, vouched: bool = True) -> S:
        """The state of these rows (and the section ``section`` wrote, if it has one; ``vouched``: an HMAC was
        checked over them, else only a CRC, which anyone can compute, and the section is checked whole)."""
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


def misnamed(path: Path, next_offset: int) -> str | None:
    """Why the snapshot file at ``path``, which holds the state at ``next_offset``, is not the file its name names
    (``snapshot_path``), or None."""
    named = int(path.stem[len(PREFIX):])
    return None if named == next_offset else f"it holds offset {next_offset}, not {named}"


def partial_snapshot_path(directory: Path, next_offset: int) -> Path:
    """Where write_snapshot writes the snapshot at ``next_offset`` before renaming it into place."""
    final = snapshot_path(directory, next_offset)
    return final.with_name(f".{final.name}.tmp")


def list_partial_snapshots(directory: str | os.PathLike) -> list[Path]:
    """The files in ``directory`` named as write_snapshot names a snapshot before its rename
    (``partial_snapshot_path``): left by a writer killed mid-write, and by nothing else."""
    return sorted(p for p in Path(directory).glob(f".{PREFIX}*{SUFFIX}.tmp")
                  if p.name[len(PREFIX) + 1:-len(SUFFIX) - len(".tmp")].isdigit())


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
    mac, key_id = None, b""
    if keyring is not None:
        metadata["secmeta.mac_key_id"] = keyring.newest_id
        mac, key_id = _mac(keyring, keyring.newest_id), keyring.newest_id.encode()
    # Paused collector: a snapshot written in the background beside writers would otherwise
    # trigger full collections that rescan the live image while holding the GIL.
    with paused_gc(), open(tmp, "wb") as raw:
        out = _CrcWriter(raw, mac)
        section = codec_section(codec, state) or []
        out.write(_preamble(sum(map(len, section)), key_id))
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


def _preamble(section_size: int, key_id: bytes) -> bytes:
    """The format-6 preamble: magic, sizes and the key id, padded to a multiple of 8 bytes."""
    head = PREAMBLE.pack(PREAMBLE_MAGIC, section_size, len(key_id)) + key_id
    return head + bytes(-len(head) % 8)


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


def read_snapshot(path: str | os.PathLike, codec: SnapshotCodec[S], keyring: Keyring | None = None, *,
                  check_crc: bool = False) -> tuple[SnapshotInfo, S]:
    """Verify and load a snapshot; raise CorruptSnapshotError or SnapshotError naming the file.

    Given a keyring, the snapshot must carry a valid HMAC under one of its keys (and, with ``check_crc``, as a
    verification asks, a valid CRC too).  The state is checked as its codec reads it: a verification that loads
    it reports what an open would refuse.
    """
    try:
        return _read(Path(path), codec, keyring, check_crc)
    except SnapshotError:
        raise
    except DECODE_ERRORS as exc:  # content its CRC (no keyring) let through, which fastavro or the codec cannot read
        raise CorruptSnapshotError(f"snapshot {Path(path).name} is not a readable snapshot: its content does not "
                                   f"decode ({type(exc).__name__}: {exc})") from None


def _read(path: Path, codec: SnapshotCodec[S], keyring: Keyring | None, check_crc: bool) -> tuple[SnapshotInfo, S]:
    info, reader, section = _open(path, keyring, check_crc=check_crc)
    if info.kind != codec.kind:
        raise SnapshotError(
            f"snapshot {info.path.name} holds a {info.kind!r} state, not {codec.kind!r}"
        )
    if section is None and info.format >= 5 and getattr(codec, "section", None) is not None:
        raise CorruptSnapshotError(f"snapshot {info.path.name} is not a readable snapshot: format {info.format} "
                                   f"of a {codec.kind!r} state without its section")
    counter = _Counting(reader)
    try:
        with paused_gc():  # the state is built from many new acyclic objects
            state = codec.build(counter) if section is None else codec.build(counter, section,
                                                                             vouched=keyring is not None)
    except CorruptSnapshotError as exc:  # the codec's reason, named for the file it is about
        raise CorruptSnapshotError(f"snapshot {info.path.name} is not a readable snapshot: {exc}") from None
    return replace(info, rows=counter.count), state


def read_snapshot_info(path: str | os.PathLike, keyring: Keyring | None = None) -> SnapshotInfo:
    """Verify a snapshot's CRC (and HMAC, given a keyring) and read its metadata, not its state."""
    try:
        return _open(Path(path), keyring, check_crc=True)[0]
    except SnapshotError:
        raise
    except DECODE_ERRORS as exc:
        raise CorruptSnapshotError(f"snapshot {Path(path).name} is not a readable snapshot: its metadata does not "
                                   f"decode ({type(exc).__name__}: {exc})") from None


def _mac(keyring: Keyring, key_id: str):
    return hmac.new(keyring.chain_key(key_id), MAC_LABEL, hashlib.sha256)


def _open(path: Path, keyring: Keyring | None, check_crc: bool) -> tuple[SnapshotInfo, Any, memoryview | None]:
    """A snapshot's info, its rows' reader and its section (a view of the file's bytes), checked: by the HMAC
    alone when a keyring is given and the file names one of its keys up front (format 6) unless ``check_crc`` (a
    verification: the CRC too), else by the CRC (and then the HMAC, given a keyring)."""
    data = path.read_bytes()
    size = len(data)
    if (framed_as := _preamble_format(data)) is not None and framed_as > SNAPSHOT_FORMAT:
        _check_crc(path, data, int.from_bytes(data[-4:], "big"), f"it names format {framed_as}, newer than this "
                   "secmeta reads, but ")  # a flipped format byte is damage; a newer file is read no further
        raise SnapshotError(_unread_format(path, framed_as))
    if size < TRAILER.size:
        raise CorruptSnapshotError(f"snapshot {path.name} is truncated ({size} bytes)")
    digest, magic, stored_crc = TRAILER.unpack_from(data, size - TRAILER.size)
    body = memoryview(data)[: size - TRAILER.size]
    framed = _Framed.of(path, body) if body[:len(PREAMBLE_MAGIC)] == PREAMBLE_MAGIC else None
    authenticated = framed is not None and keyring is not None
    if magic != TRAILER_MAGIC:
        raise CorruptSnapshotError(f"snapshot {path.name} has no snapshot trailer: it is truncated or no snapshot")
    if framed is not None and keyring is not None:  # it fails on any damage the CRC would catch but the CRC's own
        if framed.key_id and framed.key_id not in keyring.ids:  # damage to the key id itself, or another keyring's
            _check_crc(path, data, stored_crc)
        _check_mac(path, keyring, framed.key_id, body, digest)
    if check_crc or not authenticated:
        _check_crc(path, data, stored_crc)
    if framed is None:
        framed = _Framed.of5(path, body)
    try:
        reader = fastavro.reader(io.BytesIO(framed.container))
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
    if (fmt >= 6) != (framed.form == 6) or framed.section is not None and fmt < 5:
        raise CorruptSnapshotError(f"snapshot {path.name} is not a readable snapshot: format {fmt} "
                                   f"framed as format {framed.form}")
    if keyring is not None and not authenticated:
        key_id = meta.get("secmeta.mac_key_id")
        if key_id is None:
            raise CorruptSnapshotError(f"snapshot {path.name} is not authenticated (no HMAC key id)")
        _check_mac(path, keyring, key_id, body, digest)
    return info, reader, framed.section


def _check_crc(path: Path, data: bytes, stored_crc: int, but: str = "") -> None:
    """Raise unless ``stored_crc`` is the CRC-32 of everything in the file before it (``but``: what the file
    claims that the failure belies)."""
    if len(data) < 4 or zlib.crc32(memoryview(data)[:len(data) - 4]) != stored_crc:
        raise CorruptSnapshotError(f"snapshot {path.name} is corrupt: {but}it fails its CRC check")


def _check_mac(path: Path, keyring: Keyring, key_id: str | None, body: memoryview, digest: bytes) -> None:
    """Raise unless ``digest`` is the HMAC of ``body`` under the keyring's key ``key_id``."""
    if not key_id:
        raise CorruptSnapshotError(f"snapshot {path.name} is not authenticated (no HMAC key id)")
    if key_id not in keyring.ids:
        raise SnapshotError(f"snapshot {path.name} is authenticated with key {key_id!r}, which is not in the keyring")
    mac = _mac(keyring, key_id)
    mac.update(body)
    if not hmac.compare_digest(mac.digest(), digest):
        raise CorruptSnapshotError(f"snapshot {path.name} fails its HMAC check: it was altered, truncated or forged")


@dataclass(frozen=True)
class _Framed:
    """A snapshot's body split into its section (None when it has none) and its Avro container."""

    form: int  # the framing's format: 6, or 5 for formats 3 to 5
    key_id: str | None
    section: memoryview | None
    container: bytes

    @classmethod
    def of(cls, path: Path, body: memoryview) -> _Framed:
        """A format-6 body (its preamble's sizes checked against the body before anything is read)."""
        if len(body) < PREAMBLE.size:
            raise CorruptSnapshotError(f"snapshot {path.name} is truncated: its preamble is incomplete")
        _, section_size, key_size = PREAMBLE.unpack_from(body)
        at = PREAMBLE.size + key_size
        start = at + -at % 8
        if start + section_size > len(body):
            raise CorruptSnapshotError(f"snapshot {path.name} is not a readable snapshot: its section runs past it")
        try:
            key_id = str(body[PREAMBLE.size:at], "utf-8")
        except UnicodeDecodeError:
            raise CorruptSnapshotError(f"snapshot {path.name} is corrupt: its key id is not UTF-8") from None
        section = body[start:start + section_size] if section_size else None
        return cls(6, key_id, section, bytes(body[start + section_size:]))

    @classmethod
    def of5(cls, path: Path, body: memoryview) -> _Framed:
        """A body of format 3 to 5: a format-5 preamble and section, or none."""
        if body[:len(PREAMBLE5_MAGIC)] != PREAMBLE5_MAGIC or len(body) < PREAMBLE5.size:
            return cls(5, None, None, bytes(body))
        _, section_size = PREAMBLE5.unpack_from(body)
        if PREAMBLE5.size + section_size > len(body):
            raise CorruptSnapshotError(f"snapshot {path.name} is not a readable snapshot: its section runs past it")
        section = body[PREAMBLE5.size:PREAMBLE5.size + section_size]
        return cls(5, None, section, bytes(body[PREAMBLE5.size + section_size:]))


def _preamble_format(data: bytes) -> int | None:
    """The format a file's preamble names (``SMSN`` and a big-endian u32: formats 5 and later), or None."""
    tag = PREAMBLE_MAGIC[:4]
    if data[:len(tag)] != tag or len(data) < len(PREAMBLE_MAGIC):
        return None
    return int.from_bytes(data[len(tag):len(PREAMBLE_MAGIC)], "big")


def _unread_format(path: Path, fmt: int) -> str:
    """Why a snapshot of format ``fmt`` is refused (a store then takes an older snapshot or replays the log)."""
    if fmt > SNAPSHOT_FORMAT:
        return (f"snapshot {path.name} has format {fmt}, newer than this secmeta reads (formats up to "
                f"{SNAPSHOT_FORMAT}): a newer secmeta wrote it")
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
