"""The records of a store's log topic: what each carries, encoded and parsed in one place.

Every record names its kind in the ``secmeta.record`` header:

- ``store``: the first record of the topic: the store's identity (id, creation time, key checks), its
  saved settings (config.json, no secrets) and where its log starts (offset and chain link), as JSON, with
  a seal (``core.log.seal``: HMAC under the keyring's chain key) over all of it and the name of the topic it
  was written to: a joiner takes its settings only when the seal verifies for the topic it reads
  (``check_store_record``), so one who can write to Kafka but holds no key cannot give joiners other super
  users or ACL defaults, neither forged nor replayed from another topic of the store;
- ``schema``: a batch writer schema (JSON), before the first batch written with it;
- ``snapshot``: when the log starts after a retention anchor (the store record then carries the sealed
  anchor), the bytes of a snapshot at or after that start, in parts (``secmeta.snapshot``: its offset,
  ``secmeta.part``: "i/n"), so a joiner can load what the deleted segments held;
- ``seeded``: after the batches a first node seeded the topic with (its log as it was), their end offset and
  link as JSON: before it the topic holds an interrupted seed, which the next writer completes; after it
  the topic is the witness of the newest link;
- ``batch``: one store batch, its frame's bytes exactly as the local log stores them; headers name the
  writer node (``secmeta.node``), the batch's first offset (``secmeta.offset``) and its chain link
  (``secmeta.link``, hex).

A record that is none of these, or whose headers contradict its bytes, is refused (TopicFormatError).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from secmeta.core.config import CONFIG_FILE
from secmeta.core.errors import SecmetaError
from secmeta.core.log.format import Batch, FrameError, decode_frame
from secmeta.core.log.seal import BrokenSealError, seal_trailer, unseal
from secmeta.events.keyring import Keyring

__all__ = ["BatchRecord", "Headers", "Record", "SeededRecord", "SnapshotPart", "TopicRecord", "seeded_record",
           "snapshot_records", "SchemaRecord", "StoreRecord", "TopicFormatError", "batch_headers", "parse_record",
           "schema_record", "store_record", "check_store_record", "saved_config", "seal_store_record"]

Headers = list[tuple[str, str | bytes | None]]  # as confluent-kafka takes and gives them
Record = tuple[bytes, Headers]  # a value and its headers, to produce
KIND = "secmeta.record"
FORMAT = "secmeta-log-topic"
VERSION = 4  # 2: the seeded record (a version-1 topic, from before any release, is refused); 3: the store record's
# seal (versions 2 and 3 are refused: 3 sealed the record without its topic, so it could be replayed in another);
# 4: the seal covers the topic's name
_SEAL_CONTEXT = b"secmeta log topic store record"


class TopicFormatError(SecmetaError):
    """A record of the log topic that is not one secmeta wrote (the message names its Kafka offset)."""


@dataclass(frozen=True)
class StoreRecord:
    store_id: str
    created_ms: int
    key_checks: dict[str, str]
    config: dict[str, Any]
    start_offset: int
    start_link: bytes = field(repr=False)
    anchor: bytes | None = field(default=None, repr=False)  # the sealed retention anchor file, when start_offset > 0
    seal: bytes = field(default=b"", repr=False)  # seal_trailer over _store_body (seal_store_record makes it)


@dataclass(frozen=True)
class SchemaRecord:
    schema_json: str = field(repr=False)


@dataclass(frozen=True)
class SeededRecord:
    next_offset: int
    link: bytes = field(repr=False)


@dataclass(frozen=True)
class SnapshotPart:
    next_offset: int
    index: int
    total: int
    data: bytes = field(repr=False)


@dataclass(frozen=True)
class BatchRecord:
    node_id: str
    batch: Batch = field(repr=False)
    frame: bytes = field(repr=False)


TopicRecord = StoreRecord | SchemaRecord | SeededRecord | SnapshotPart | BatchRecord


def _store_fields(record: StoreRecord) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "store_id": record.store_id, "created_ms": record.created_ms,
            "key_checks": record.key_checks, "config": record.config, "start_offset": record.start_offset,
            "start_link": record.start_link.hex(), "anchor": None if record.anchor is None else record.anchor.hex()}


def _store_body(record: StoreRecord) -> bytes:
    """The bytes the store record's seal covers: every field, canonical JSON."""
    return json.dumps(_store_fields(record), sort_keys=True).encode()


def _seal_context(topic: str) -> bytes:
    """What the store record's seal covers besides its body: its kind and the topic it was written to (seal's
    context is length-prefixed, so the fixed kind and the name cannot run into each other)."""
    return _SEAL_CONTEXT + b"\0" + topic.encode()


def seal_store_record(record: StoreRecord, keyring: Keyring, topic: str) -> StoreRecord:
    """``record`` sealed for ``topic`` under the keyring's newest key (the chain key, through core.log.seal)."""
    return replace(record, seal=seal_trailer(keyring, _seal_context(topic), _store_body(record)))


def check_store_record(record: StoreRecord, keyring: Keyring, topic: str) -> None:
    """Refuse (TopicFormatError) a store record whose seal does not verify under ``keyring`` for ``topic``:
    altered or forged by someone without the store's keys, sealed for another store's keyring, or written to
    another topic and replayed in this one."""
    try:
        unseal(keyring, _seal_context(topic), _store_body(record) + record.seal)
    except BrokenSealError as exc:
        raise TopicFormatError(f"the log topic {topic}'s store record fails its seal ({exc}): it was not written to "
                               f"{topic} by a holder of this store's keys (altered, forged, or copied from another "
                               "topic); nothing is taken from it") from None


def saved_config(store_dir: str | os.PathLike) -> dict[str, Any]:
    """A store's saved settings as its config.json holds them (no file: none), which the store record carries."""
    path = Path(store_dir) / CONFIG_FILE
    return dict(json.loads(path.read_text())) if path.exists() else {}


def store_record(record: StoreRecord) -> Record:
    """The store record's value: its fields and its seal (``seal_store_record`` first)."""
    if not record.seal:
        raise ValueError("a store record is written sealed (seal_store_record)")
    body = dict(_store_fields(record), seal=record.seal.hex())
    return json.dumps(body, sort_keys=True).encode(), [(KIND, b"store")]


def schema_record(schema_json: str) -> Record:
    return schema_json.encode(), [(KIND, b"schema")]


def seeded_record(next_offset: int, link: bytes) -> Record:
    return json.dumps({"next_offset": next_offset, "link": link.hex()}).encode(), [(KIND, b"seeded")]


def snapshot_records(data: bytes, next_offset: int, part_bytes: int) -> list[Record]:
    """A snapshot file's bytes in parts of at most ``part_bytes``."""
    parts = [data[i:i + part_bytes] for i in range(0, len(data), part_bytes)] or [b""]
    return [(part, [(KIND, b"snapshot"), ("secmeta.snapshot", str(next_offset).encode()),
                    ("secmeta.part", f"{i}/{len(parts)}".encode())]) for i, part in enumerate(parts)]


def batch_headers(node_id: int | str, base_offset: int, link: bytes) -> Headers:
    return [(KIND, b"batch"), ("secmeta.node", str(node_id).encode()),
            ("secmeta.offset", str(base_offset).encode()), ("secmeta.link", link.hex().encode())]


def parse_record(value: bytes | None, headers: Headers | dict[str, str | bytes | None] | None,
                 kafka_offset: int) -> TopicRecord:
    named = {key: v.encode() if isinstance(v, str) else v
             for key, v in (headers.items() if isinstance(headers, dict) else headers or ())}
    kind = named.get(KIND)
    where = f"the log topic's record at Kafka offset {kafka_offset}"
    if value is None:
        raise TopicFormatError(f"{where} has no value: it was not written by secmeta")
    if kind == b"batch":
        try:
            batch = decode_frame(value, 0)
        except FrameError as exc:
            raise TopicFormatError(f"{where} is not a log batch: {exc}") from None
        if batch.size != len(value) or named.get("secmeta.offset") != str(batch.base_offset).encode() \
                or named.get("secmeta.link") != batch.link.hex().encode():
            raise TopicFormatError(f"{where}: its headers do not match the batch it carries")
        return BatchRecord((named.get("secmeta.node") or b"?").decode(errors="replace"), batch, value)
    if kind == b"schema":
        return SchemaRecord(value.decode())
    if kind == b"seeded":
        try:
            body = json.loads(value)
            return SeededRecord(int(body["next_offset"]), bytes.fromhex(body["link"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise TopicFormatError(f"{where} is not a readable seeded record: {exc}") from None
    if kind == b"snapshot":
        try:
            index, total = (int(n) for n in (named.get("secmeta.part") or b"").split(b"/"))
            return SnapshotPart(int(named.get("secmeta.snapshot") or b""), index, total, value)
        except ValueError:
            raise TopicFormatError(f"{where} is a snapshot part without a readable offset or part number") from None
    if kind == b"store":
        try:
            body = json.loads(value)
            if body.get("format") != FORMAT:
                raise ValueError(f"format {body.get('format')!r}")
            if int(body["version"]) > VERSION:
                raise TopicFormatError(f"{where} has log topic format version {body['version']}; this secmeta "
                                       f"reads versions up to {VERSION}: upgrade secmeta")
            if int(body["version"]) < VERSION:
                why = ("did not mark a completed seed" if int(body["version"]) < 2 else
                       "did not seal its store record, so its settings (super users, ACL defaults) cannot be "
                       "trusted" if int(body["version"]) < 3 else
                       "sealed its store record without the topic's name, so a record replayed from another topic "
                       "of the store would pass for this topic's")
                raise TopicFormatError(f"{where} has log topic format version {body['version']}, written by an "
                                       f"older secmeta that {why}: replicate to a new topic (--replication-topic), "
                                       "which the first node seeds from its local log")
            return StoreRecord(str(body["store_id"]), int(body["created_ms"]), dict(body["key_checks"]),
                               dict(body.get("config") or {}), int(body["start_offset"]),
                               bytes.fromhex(body["start_link"]),
                               None if body.get("anchor") is None else bytes.fromhex(body["anchor"]),
                               bytes.fromhex(body["seal"]))
        except TopicFormatError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise TopicFormatError(f"{where} is not a readable store record: {exc}") from None
    raise TopicFormatError(f"{where} is not a secmeta log record (header {KIND}={kind!r})")
