"""The on-disk batch frame: length, CRC, header, hash-chain link, payload.

    length      u32  bytes after this field
    crc         u32  CRC-32 of every byte after this field
    magic       u8   frame format version (1)
    base_offset i64  offset of the first event in the batch
    count       u32  number of events
    timestamp   i64  newest event time in the batch (epoch ms)
    schema_fp   8s   fingerprint of the writer schema of the payload
    key_id_len  u8   then key_id: the keyring id of the chain key
    link        32s  HMAC-SHA256(chain key, previous link || header || payload)
    payload          Avro array of envelopes

The CRC catches torn writes and bit rot cheaply; the keyed link makes any
edit, deletion, duplication or reordering of batches detectable by whoever
holds the key (``secmeta log verify``).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
import zlib
from dataclasses import dataclass, field

from secmeta.core.errors import SecmetaError

MAGIC = 1
PREFIX = struct.Struct(">II")  # length, crc
FIXED = struct.Struct(">BqIq8sB")  # magic, base_offset, count, timestamp, schema_fp, key_id_len
PREFIX_SIZE = PREFIX.size
LINK_SIZE = 32
MIN_FRAME = PREFIX_SIZE + FIXED.size + LINK_SIZE
MAX_FRAME = 256 * 1024 * 1024


def genesis_link(store_id: str) -> bytes:
    """The link the first batch of a store chains from."""
    return hashlib.sha256(b"secmeta-chain-genesis:" + store_id.encode()).digest()


def chain_link(chain_key: bytes, prev_link: bytes, header: bytes | memoryview, payload: bytes | memoryview) -> bytes:
    mac = hmac.new(chain_key, prev_link, hashlib.sha256)
    mac.update(header)
    mac.update(payload)
    return mac.digest()


@dataclass(frozen=True, slots=True)
class Batch:
    """One decoded frame header plus its raw payload and where it lies."""

    base_offset: int
    count: int
    timestamp_ms: int
    schema_fp: bytes
    key_id: str
    link: bytes = field(repr=False)
    header: bytes = field(repr=False)
    payload: bytes = field(repr=False)
    position: int = 0
    size: int = 0

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count

    def expected_link(self, chain_key: bytes, prev_link: bytes) -> bytes:
        return chain_link(chain_key, prev_link, self.header, self.payload)

    def frame(self) -> bytes:
        """The frame's bytes as the log stores them (what ``Log.append_frame`` takes)."""
        return _framed(b"".join((self.header, self.link, self.payload)))


def encode_frame(
    base_offset: int,
    count: int,
    timestamp_ms: int,
    schema_fp: bytes,
    key_id: str,
    chain_key: bytes,
    prev_link: bytes,
    payload: bytes,
) -> tuple[bytes, bytes]:
    """Return (frame bytes, link) for a batch."""
    kid = key_id.encode()
    header = FIXED.pack(MAGIC, base_offset, count, timestamp_ms, schema_fp, len(kid)) + kid
    link = chain_link(chain_key, prev_link, header, payload)
    return _framed(b"".join((header, link, payload))), link


def _framed(body: bytes) -> bytes:
    return PREFIX.pack(len(body) + 4, zlib.crc32(body)) + body


class FrameError(SecmetaError, ValueError):
    """A frame that does not parse or fails its CRC (``truncated`` when the data ends early)."""

    def __init__(self, message: str, *, truncated: bool = False):
        super().__init__(message)
        self.truncated = truncated


def decode_frame(buf: bytes | memoryview, pos: int, origin: int = 0) -> Batch:
    """Parse the frame at ``pos`` in ``buf`` (which starts at file position ``origin``).

    Raises FrameError if the frame is torn or corrupt.
    """
    end_of_buf = len(buf)
    if end_of_buf - pos < PREFIX_SIZE:
        raise FrameError("frame header is cut short", truncated=True)
    length, crc = PREFIX.unpack_from(buf, pos)
    if length < MIN_FRAME - 4 or length > MAX_FRAME:
        raise FrameError(f"implausible frame length {length}")
    end = pos + 4 + length
    if end > end_of_buf:
        raise FrameError(f"frame of {length} bytes runs past the end of the data", truncated=True)
    body = memoryview(buf)[pos + PREFIX_SIZE : end]  # read in place: only the parts kept are copied, once
    if zlib.crc32(body) != crc:
        raise FrameError("CRC mismatch")
    magic, base, count, ts, fp, klen = FIXED.unpack_from(body, 0)
    if magic != MAGIC:
        raise FrameError(f"unknown frame format {magic}")
    hlen = FIXED.size + klen
    if hlen + LINK_SIZE > len(body):
        raise FrameError("key id runs past the frame")
    return Batch(
        base_offset=base,
        count=count,
        timestamp_ms=ts,
        schema_fp=fp,
        key_id=str(body[FIXED.size:hlen], "utf-8", "replace"),
        link=bytes(body[hlen : hlen + LINK_SIZE]),
        header=bytes(body[:hlen]),
        payload=bytes(body[hlen + LINK_SIZE :]),
        position=origin + pos,
        size=end - pos,
    )
