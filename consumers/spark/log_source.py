"""The ``secmeta`` Spark data source: a store's log as rows, in batch and streaming reads.

    spark.dataSource.register(SecmetaLogDataSource)
    spark.read.format("secmeta").option("path", STORE).option("keyFile", KEYS).load()
    spark.readStream.format("secmeta").option("path", STORE).option("keyFile", KEYS)
        .option("maxEventsPerTrigger", 10000).load()

Offsets are log offsets (``{"offset": N}`` in a streaming checkpoint); a read of
[start, end) is split into one Spark partition per log segment it touches.
Options: ``path`` (required), ``keyFile`` (else $SECMETA_KEY_FILE / $SECMETA_KEYS),
``maxEventsPerTrigger`` (streaming), ``startOffset`` / ``endOffset`` (batch).

Every row has the same schema (``SCHEMA``): the envelope, then the payload
flattened into nullable columns. Secrets never appear: a SCRAM credential row
carries the mechanism and iteration count only, tokens carry no HMAC.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = [
    "SCHEMA",
    "LogRange",
    "SecmetaLogDataSource",
    "SecmetaSourceError",
    "event_row",
    "plan_ranges",
]

_ENVELOPE_COLUMNS = [
    ("offset", LongType()),
    ("timestamp", TimestampType()),
    ("timestamp_ms", LongType()),
    ("actor_principal", StringType()),
    ("actor_host", StringType()),
    ("request_id", StringType()),
    ("event_type", StringType()),
    ("entity_key", StringType()),
]

# Payload columns, in order: name -> (Spark type, payload field it comes from).
# Timestamps in milliseconds become Spark timestamps (UTC, exact to the millisecond).
_PAYLOAD_COLUMNS: list[tuple[str, Any, str]] = [
    ("acl_id", StringType(), "acl_id"),
    ("resource_type", StringType(), "resource_type"),
    ("resource_name", StringType(), "resource_name"),
    ("pattern_type", StringType(), "pattern_type"),
    ("principal", StringType(), "principal"),
    ("host", StringType(), "host"),
    ("operation", StringType(), "operation"),
    ("permission_type", StringType(), "permission_type"),
    ("user", StringType(), "user"),
    ("mechanism", StringType(), "mechanism"),
    ("iterations", IntegerType(), "iterations"),
    ("token_id", StringType(), "token_id"),
    ("owner", StringType(), "owner"),
    ("requester", StringType(), "requester"),
    ("renewers", ArrayType(StringType()), "renewers"),
    ("issue_timestamp", TimestampType(), "issue_timestamp_ms"),
    ("expiry_timestamp", TimestampType(), "expiry_timestamp_ms"),
    ("max_timestamp", TimestampType(), "max_timestamp_ms"),
    ("renew_period_ms", LongType(), "renew_period_ms"),
    ("expiry_period_ms", LongType(), "expiry_period_ms"),
    ("reason", StringType(), "reason"),
]

SCHEMA = StructType(
    [StructField(name, dtype, nullable=True) for name, dtype in _ENVELOPE_COLUMNS]
    + [StructField(name, dtype, nullable=True) for name, dtype, _ in _PAYLOAD_COLUMNS]
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SecmetaSourceError(ValueError):
    """A secmeta data source was given bad options (no path, a bad number)."""


def _time(ms: int | None) -> datetime | None:
    return None if ms is None else _EPOCH + timedelta(milliseconds=ms)


def _name(value: Any) -> Any:
    return value.name if isinstance(value, Enum) else value


_BINDING_FIELDS: dict[str, Any] = {
    "resource_type": lambda b: b.restype.name,
    "resource_name": lambda b: b.name,
    "pattern_type": lambda b: b.resource_pattern_type.name,
    "principal": lambda b: b.principal,
    "host": lambda b: b.host,
    "operation": lambda b: b.operation.name,
    "permission_type": lambda b: b.permission_type.name,
}


def _extractor(source: str, dtype: Any, event_type: type):
    """How one payload column is read from an event of ``event_type`` (None: the column is null)."""
    names = {f.name for f in fields(event_type)}
    if source in _BINDING_FIELDS and "binding" in names:
        get = _BINDING_FIELDS[source]
        return lambda event: get(event.binding)
    if source not in names:
        return None
    if isinstance(dtype, TimestampType):
        return lambda event: _time(getattr(event, source))
    if isinstance(dtype, ArrayType):
        return lambda event: [str(v) for v in getattr(event, source)]
    return lambda event: _name(getattr(event, source))


_PLANS: dict[type, list[tuple[int, Any]]] = {}


def _plan(event_type: type) -> list[tuple[int, Any]]:
    """(column index, extractor) for every payload column an event type fills.

    Only the columns of ``_PAYLOAD_COLUMNS`` are ever read, so fields outside them
    (the sealed SCRAM ``secret``) cannot reach a row.
    """
    plan = _PLANS.get(event_type)
    if plan is None:
        plan = []
        for i, (_column, dtype, source) in enumerate(_PAYLOAD_COLUMNS):
            get = _extractor(source, dtype, event_type)
            if get is not None:
                plan.append((len(_ENVELOPE_COLUMNS) + i, get))
        _PLANS[event_type] = plan
    return plan


_WIDTH = len(_ENVELOPE_COLUMNS) + len(_PAYLOAD_COLUMNS)


def event_row(envelope) -> tuple:
    """One row of ``SCHEMA`` for a decoded envelope (secrets left out by construction)."""
    event = envelope.event
    row: list[Any] = [None] * _WIDTH
    row[0] = envelope.offset
    row[1] = _time(envelope.timestamp_ms)
    row[2] = envelope.timestamp_ms
    row[3] = envelope.actor_principal
    row[4] = envelope.actor_host
    row[5] = envelope.request_id
    row[6] = type(event).__name__
    row[7] = event.entity_key
    for index, get in _plan(type(event)):
        row[index] = get(event)
    return tuple(row)


@dataclass(frozen=True)
class LogRange(InputPartition):
    """The log offsets [start, end) one Spark task reads."""

    start: int
    end: int


def plan_ranges(segment_bases: Sequence[int], start: int, end: int) -> list[LogRange]:
    """Split [start, end) at every segment base offset inside it (empty list for an empty range)."""
    if start >= end:
        return []
    cuts = sorted({b for b in segment_bases if start < b < end})
    bounds = [start, *cuts, end]
    return [LogRange(a, b) for a, b in zip(bounds, bounds[1:]) if a < b]


# -- access to the store (driver and workers) ----------------------------------


@dataclass(frozen=True)
class _Store:
    """Where the store is and how to open its log; picklable, holds no open file."""

    path: str
    key_file: str | None

    def open(self):
        from core.log import Log
        from events.keyring import Keyring

        keyring = Keyring.load(self.key_file)
        return Log.open(self.path, keyring=keyring, read_only=True)

    def bounds(self) -> tuple[int, int, list[int]]:
        """(start offset, end offset, segment base offsets) of the log now."""
        with self.open() as log:
            return log.start_offset, log.end_offset, [s.base_offset for s in log.segments()]

    def rows(self, part: LogRange) -> Iterator[tuple]:
        if part.start >= part.end:
            return
        with self.open() as log:
            for envelope in log.read(part.start, part.end):
                yield event_row(envelope)


def _option(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name)
    if value is None:
        value = options.get(name.lower())
    return value


def _int_option(options: Mapping[str, str], name: str) -> int | None:
    text = _option(options, name)
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        raise SecmetaSourceError(f"option {name} must be an integer, not {text!r}") from None
    if value < 0:
        raise SecmetaSourceError(f"option {name} must be >= 0, not {value}")
    return value


class SecmetaLogDataSource(DataSource):
    """``format("secmeta")``: the events of a store's log; see the module docstring."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        path = _option(options, "path")
        if not path:
            raise SecmetaSourceError('the secmeta data source needs .option("path", STORE_DIR)')
        self.store = _Store(path, _option(options, "keyFile"))
        self.max_events = _int_option(options, "maxEventsPerTrigger")
        if self.max_events == 0:
            raise SecmetaSourceError("option maxEventsPerTrigger must be > 0")
        self.start_offset = _int_option(options, "startOffset")
        self.end_offset = _int_option(options, "endOffset")
        # Fail here, on the driver, before any Spark job: not a store, wrong keyring, corrupt log.
        self.store.bounds()

    @classmethod
    def name(cls) -> str:
        return "secmeta"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _BatchReader(self.store, self.start_offset, self.end_offset)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _StreamReader(self.store, self.max_events)


class _BatchReader(DataSourceReader):
    def __init__(self, store: _Store, start: int | None, end: int | None) -> None:
        self.store = store
        log_start, log_end, self.bases = store.bounds()
        self.start = log_start if start is None else max(start, log_start)
        self.end = log_end if end is None else min(end, log_end)

    def partitions(self) -> Sequence[InputPartition]:
        # Spark expects at least one partition for a batch scan: an empty log reads one empty range.
        return plan_ranges(self.bases, self.start, self.end) or [LogRange(self.start, self.start)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, LogRange)
        return self.store.rows(partition)


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over log offsets; admission control by maxEventsPerTrigger."""

    def __init__(self, store: _Store, max_events: int | None) -> None:
        self.store = store
        self.max_events = max_events
        self.target: int | None = None  # the end fixed by Trigger.AvailableNow

    def initialOffset(self) -> dict:
        start, _end, _bases = self.store.bounds()
        return {"offset": start}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable() if self.max_events is None else ReadMaxRows(self.max_events)

    def prepareForTriggerAvailableNow(self) -> None:
        _start, end, _bases = self.store.bounds()
        self.target = end

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = int(start["offset"])
        _log_start, end, _bases = self.store.bounds()
        if self.target is not None:
            end = min(end, self.target)
        if isinstance(limit, ReadMaxRows):
            end = min(end, begin + limit.max_rows)
        return {"offset": max(begin, end)}

    def reportLatestOffset(self) -> dict | None:
        _start, end, _bases = self.store.bounds()
        return {"offset": end}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        log_start, _end, bases = self.store.bounds()
        # Offsets before the log's start were removed by retention: nothing left to read there.
        return plan_ranges(bases, max(int(start["offset"]), log_start), int(end["offset"]))

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, LogRange)
        return self.store.rows(partition)

    def commit(self, end: dict) -> None:
        pass
