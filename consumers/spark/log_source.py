"""The ``secmeta`` Spark data source: a store's log as rows, in batch and streaming reads.

    spark.dataSource.register(SecmetaLogDataSource)
    spark.read.format("secmeta").option("path", STORE).option("keyFile", KEYS).load()
    spark.readStream.format("secmeta").option("path", STORE).option("keyFile", KEYS)
        .option("maxEventsPerTrigger", 10000).load()

Offsets are log offsets (``{"offset": N}`` in a streaming checkpoint); a read of
[start, end) is split at every log segment it touches, and into ranges of at most
``maxEventsPerPartition`` events (default 100,000), one Spark task each.
Options: ``path`` (required), ``keyFile`` (else $SECMETA_KEY_FILE / $SECMETA_KEYS),
``maxEventsPerTrigger`` (streaming), ``startOffset`` / ``endOffset`` (batch),
``maxEventsPerPartition``.

Rows have ``secmeta.consumers.spark.rows.SCHEMA`` (never a secret) and reach Spark as
Arrow record batches.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

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
from pyspark.sql.types import StructType

from secmeta.consumers.spark.options import SecmetaSourceError, int_option, option
from secmeta.consumers.spark.rows import SCHEMA, arrow_batches, event_row

__all__ = [
    "SCHEMA",
    "LogRange",
    "SecmetaLogDataSource",
    "SecmetaSourceError",
    "check_log",
    "event_row",
    "log_stream",
    "plan_ranges",
]

# Events per Spark task at most (a large segment is read by several tasks).
DEFAULT_EVENTS_PER_PARTITION = 100_000


def log_stream(spark, store_dir, key_file=None, max_events_per_trigger: int | None = None):
    """A streaming DataFrame of a store's log (registers the source with ``spark`` first)."""
    spark.dataSource.register(SecmetaLogDataSource)
    reader = spark.readStream.format("secmeta").option("path", str(store_dir))
    if key_file is not None:
        reader = reader.option("keyFile", str(key_file))
    if max_events_per_trigger is not None:
        reader = reader.option("maxEventsPerTrigger", max_events_per_trigger)
    return reader.load()


def check_log(store_dir, key_file=None) -> tuple[int, int]:
    """Open a store's log on the driver, before any Spark job: (start offset, end offset).

    Not a store, a wrong or missing keyring and a corrupt log raise here, with the store's own errors.
    """
    start, end, _bases = _Store(str(store_dir), None if key_file is None else str(key_file)).bounds()
    return start, end


@dataclass(frozen=True)
class LogRange(InputPartition):
    """The log offsets [start, end) one Spark task reads."""

    start: int
    end: int


def plan_ranges(segment_bases: Sequence[int], start: int, end: int,
                max_events: int = DEFAULT_EVENTS_PER_PARTITION) -> list[LogRange]:
    """Split [start, end) at every segment base inside it, and so no range holds more than ``max_events``."""
    if start >= end:
        return []
    cuts = {b for b in segment_bases if start < b < end}
    bounds = sorted(cuts | {start, end})
    for a, b in zip(bounds, bounds[1:]):
        cuts.update(range(a + max_events, b, max_events))
    cuts = sorted(cuts)
    bounds = [start, *cuts, end]
    return [LogRange(a, b) for a, b in zip(bounds, bounds[1:]) if a < b]


# -- access to the store (driver and workers) ----------------------------------


@dataclass(frozen=True)
class _Store:
    """Where the store is and how to open its log; picklable, holds no open file."""

    path: str
    key_file: str | None
    per_partition: int = DEFAULT_EVENTS_PER_PARTITION

    def open(self):
        from secmeta.core.log import Log
        from secmeta.events.keyring import Keyring

        keyring = Keyring.load(self.key_file)
        return Log.open(self.path, keyring=keyring, read_only=True)

    def bounds(self) -> tuple[int, int, list[int]]:
        """(start offset, end offset, segment base offsets) of the log now."""
        with self.open() as log:
            return log.start_offset, log.end_offset, [s.base_offset for s in log.segments()]

    def ranges(self, bases: Sequence[int], start: int, end: int) -> list[LogRange]:
        return plan_ranges(bases, start, end, self.per_partition)

    def batches(self, part: LogRange):
        """The rows of [part.start, part.end) as pyarrow RecordBatches."""
        if part.start >= part.end:
            return
        with self.open() as log:
            yield from arrow_batches(log.read(part.start, part.end))


class SecmetaLogDataSource(DataSource):
    """``format("secmeta")``: the events of a store's log; see the module docstring."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        path = option(options, "path")
        if not path:
            raise SecmetaSourceError('the secmeta data source needs .option("path", STORE_DIR)')
        per_partition = int_option(options, "maxEventsPerPartition")
        self.max_events = int_option(options, "maxEventsPerTrigger")
        self.store = _Store(path, option(options, "keyFile"), per_partition or DEFAULT_EVENTS_PER_PARTITION)
        self.start_offset = int_option(options, "startOffset", minimum=0)
        self.end_offset = int_option(options, "endOffset", minimum=0)
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
        return self.store.ranges(self.bases, self.start, self.end) or [LogRange(self.start, self.start)]

    def read(self, partition: InputPartition) -> Iterator:
        assert isinstance(partition, LogRange)
        return self.store.batches(partition)


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
        return self.store.ranges(bases, max(int(start["offset"]), log_start), int(end["offset"]))

    def read(self, partition: InputPartition) -> Iterator:
        assert isinstance(partition, LogRange)
        return self.store.batches(partition)

    def commit(self, end: dict) -> None:
        pass
