"""The records of a store's log topic: what each carries, encoded and parsed in one place.

Every record names its kind in the ``secmeta.record`` header:

- ``store``: the first record of the topic: the store's identity (id, creation time, key checks), its
  saved settings (config.json, no secrets) and where its log starts (offset and chain link), as JSON;
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
from dataclasses import dataclass, field
from typing import Any

from secmeta.core.errors import SecmetaError
from secmeta.core.log.format import Batch, FrameError, decode_frame

__all__ = ["BatchRecord", "Headers", "Record", "SeededRecord", "SnapshotPart", "TopicRecord", "seeded_record",
           "snapshot_records", "SchemaRecord", "StoreRecord", "TopicFormatError", "batch_headers", "parse_record",
           "schema_record", "store_record"]

Headers = list[tuple[str, str | bytes | None]]  # as confluent-kafka takes and gives them
Record = tuple[bytes, Headers]  # a value and its headers, to produce
KIND = "secmeta.record"
FORMAT = "secmeta-log-topic"
VERSION = 2  # 2: the seeded record (a version-1 topic, from before any release, is refused)


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


def store_record(record: StoreRecord) -> Record:
    body = {"format": FORMAT, "version": VERSION, "store_id": record.store_id, "created_ms": record.created_ms,
            "key_checks": record.key_checks, "config": record.config, "start_offset": record.start_offset,
            "start_link": record.start_link.hex(), "anchor": None if record.anchor is None else record.anchor.hex()}
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
                raise TopicFormatError(f"{where} has log topic format version {body['version']}, written by a "
                                       "pre-release secmeta that did not mark a completed seed: replicate to a new "
                                       "topic (--replication-topic)")
            return StoreRecord(str(body["store_id"]), int(body["created_ms"]), dict(body["key_checks"]),
                               dict(body.get("config") or {}), int(body["start_offset"]),
                               bytes.fromhex(body["start_link"]),
                               None if body.get("anchor") is None else bytes.fromhex(body["anchor"]))
        except TopicFormatError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise TopicFormatError(f"{where} is not a readable store record: {exc}") from None
    raise TopicFormatError(f"{where} is not a secmeta log record (header {KIND}={kind!r})")
