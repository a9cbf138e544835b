"""The compaction job: a stream from a store's log into history, snapshot and interval Delta tables.

    query = compaction_stream(spark, STORE, TABLES, key_file=KEYS)   # runs until stopped
    version = compact(spark, STORE, TABLES, key_file=KEYS)           # everything now, then stop

Each micro-batch (``_Commit``) becomes one version of the tables:

1. the driver pins the current version and every table's Delta version
   (``commits.BatchCommit``); a batch whose history commit exists (Delta txn:
   app id = the stream's id, version = the batch id) is a replay: nothing to do;
2. Spark writes the batch's events as Parquet into a staging directory (the
   only pass over the source), counted on the way (``observe``: offsets, time,
   closing events per kind);
3. for each entity kind (``secmeta.events.entities.KINDS``: ACLs, credentials,
   tokens, ...), ``intervals.advance`` turns the snapshot of the pinned version
   and the staged events into the new snapshot (the open intervals) and the
   intervals the batch closed, one Spark job per kind, all running side by side;
   a kind with no event in the batch keeps its snapshot's files (linked, no job);
4. the driver moves the files into the tables (the new snapshot's files also into the interval tables,
   replacing the previous version's open intervals there) and commits them, one Delta
   commit per table, the history table's last (see ``commits``): from there
   readers see the new version;
5. retention: files that no kept version reads are vacuumed (``commits.retain``).

A failure before the history commit leaves the previous version for readers;
restarting on the same checkpoint replays the batch and completes it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.util import inheritable_thread_target

from secmeta.consumers.spark import intervals
from secmeta.consumers.spark.commits import BatchCommit, create, record_settings, retain
from secmeta.consumers.spark.intervals import KINDS
from secmeta.consumers.spark.log_source import check_log, log_stream
from secmeta.consumers.spark.schemas import schema
from secmeta.consumers.spark.tables import (
    HISTORY,
    OPEN_INTERVALS,
    TABLE_NAMES,
    Tables,
    TablesError,
    Version,
)
from secmeta.core.errors import InvalidValueError, SecmetaError

__all__ = ["DEFAULT_RETAIN_HOURS", "DEFAULT_RETAIN_VERSIONS", "CompactionError", "compact", "compaction_stream",
           "open_tables", "wait"]

DEFAULT_RETAIN_VERSIONS = 10
DEFAULT_RETAIN_HOURS = 1  # a removed file stays at least this long, for readers of an older version
STAGING = "_staging"
# Closing events of a single-use kind (ACL deletions) in one batch sent whole to every task, at most:
# ~150 bytes a row in the driver's and executors' memory (~40 MB at the limit); above it, a shuffle join.
BROADCAST_CLOSES = 250_000
_SINGLE_USE = [k for k in KINDS if k.single_use_keys]
_COMMITS: dict[str, _Commit] = {}  # by query id: the batch function of each running compaction stream
_OURS = {"snapshots", "_checkpoint", STAGING, *TABLE_NAMES}  # what a tables directory may hold


class CompactionError(SecmetaError):
    """A compaction stream failed; the tables keep their last version."""


def open_tables(store_dir: str | os.PathLike, tables_dir: str | os.PathLike, key_file: str | None = None) -> Tables:
    """The tables directory for ``store_dir``, created if new; checked before any Spark job.

    Raises TablesError for a directory that is not (only) secmeta's tables, tables of
    another store, of a newer format or Delta protocol, of the old manifest format, or
    whose next event the log no longer holds (removed by retention); and the store's
    own errors for a path that is not a store or a wrong keyring. Records the store's
    authorizer settings if they changed (a version with no new events).
    """
    from secmeta.core.config import StoreConfig
    from secmeta.core.store.storedir import StoreDirectory

    log_start, _log_end = check_log(store_dir, key_file)
    store = StoreDirectory.open(store_dir, create=False, writer=False)
    try:
        store_id = store.store_id
    finally:
        store.close()
    config = StoreConfig.load(store_dir)
    settings = {"super_users": sorted(config.super_users),
                "allow_everyone_if_no_acl_found": bool(config.allow_everyone_if_no_acl_found)}
    tables = Tables(tables_dir)
    if tables.exists():
        offset = tables.check(store_id).offset
    else:
        if tables.path.exists() and not set(os.listdir(tables.path)) <= _OURS:
            tables.check(store_id)  # raises, naming what the directory is instead
        offset = 0
    if log_start > offset:
        raise TablesError(
            f"the log of {store_dir} starts at offset {log_start} (older events were removed by retention) but "
            f"{tables.path} needs every event from offset {offset} on: history and intervals cannot be built "
            f"without them")
    if not tables.exists():
        create(tables, store_id, settings)
    record_settings(tables, settings)
    return tables


def _stream_id(checkpoint: str) -> str:
    """The id of the stream a checkpoint belongs to (Spark keeps it across restarts): the Delta txn app id."""
    try:
        return str(json.loads((Path(checkpoint) / "metadata").read_text())["id"])
    except (OSError, ValueError, KeyError) as exc:
        raise TablesError(f"the checkpoint {checkpoint} has no readable stream id: {exc}") from None


class _Commit:
    """The foreachBatch function: one micro-batch of events -> one version of the tables."""

    def __init__(self, spark: SparkSession, tables: Tables, checkpoint: str, retain_versions: int,
                 retain_hours: int = DEFAULT_RETAIN_HOURS, after_step: Callable[[str], None] | None = None,
                 progress: Callable[[Version], None] | None = None) -> None:
        self.spark = spark
        self.progress = progress
        self.tables = tables
        self.checkpoint = checkpoint
        self.retain_versions = retain_versions
        self.retain_hours = retain_hours
        self.after_step = after_step or (lambda step: None)  # timing, and failures injected by tests
        self.failure: BaseException | None = None  # the error of the batch that stopped the stream

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        try:
            self._commit(batch, batch_id)
        except BaseException as exc:
            self.failure = exc
            raise

    def _commit(self, batch: DataFrame, batch_id: int) -> None:
        self.after_step("started")  # Spark has planned the batch and handed it over
        tables = self.tables
        pinned = BatchCommit(tables, _stream_id(self.checkpoint), batch_id)
        if pinned.done:
            return  # a replay of a batch already committed
        current = pinned.current
        shutil.rmtree(tables.path / STAGING, ignore_errors=True)  # a failed attempt's
        staging = tables.path / STAGING / f"b{batch_id}"

        # the events, once, into staging (history rows; also the input of the intervals), counted on the way
        observed = Observation(f"secmeta-batch-{batch_id}")
        events = batch.where(F.col("offset") >= current.offset).withColumn(
            "event_date", F.expr("date_from_unix_date(CAST(floor(timestamp_ms / 86400000) AS INT))")
        ).observe(observed, F.count(F.lit(1)).alias("n"), F.min("offset").alias("lo"),
                  F.max("offset").alias("hi"), F.max("timestamp_ms").alias("ts"),
                  *[F.count_if(F.col("event_type").isin(*k.closes)).alias(f"closes:{k.name}") for k in _SINGLE_USE],
                  *[F.count_if(F.col("event_type").isin(*k.event_types)).alias(f"events:{k.name}") for k in KINDS])
        events.write.partitionBy("event_date").parquet(str(staging / HISTORY))
        stats = observed.get
        if not stats["n"]:  # an empty batch: no new version
            shutil.rmtree(staging.parent, ignore_errors=True)
            return
        self.after_step("staged")
        if stats["lo"] != current.offset or stats["hi"] - stats["lo"] + 1 != stats["n"]:
            raise TablesError(
                f"batch {batch_id} holds offsets {stats['lo']}..{stats['hi']} ({stats['n']} events) but the "
                f"tables continue at offset {current.offset}; the checkpoint {self.checkpoint} does not match "
                f"{tables.path}")
        new_offset = stats["hi"] + 1

        # new snapshots (open intervals) and the intervals this batch closed: one job per kind, side by
        # side (each is small next to Spark's per-job overhead)
        staged = self.spark.read.parquet(str(staging / HISTORY))

        def advance(kind: intervals.Kind) -> None:
            files = tables.files(kind.name, current)
            if not stats[f"events:{kind.name}"]:
                # no event of this kind: its snapshot is the pinned one and it closes nothing (advance would
                # return the same rows), so its files are linked as the new snapshot, with no Spark job
                _link_files(files, staging / kind.name / "open=true")
                return
            reader = self.spark.read.schema(schema(kind.name))
            previous = reader.parquet(*files) if files else self.spark.createDataFrame([], schema(kind.name))
            few_closes = kind.single_use_keys and stats[f"closes:{kind.name}"] <= BROADCAST_CLOSES
            out = intervals.advance(kind, previous, staged, few_closes=few_closes)
            out.withColumn("open", F.col("valid_to_offset").isNull()).write.partitionBy("open").parquet(
                str(staging / kind.name))

        # threads that carry the stream's job group, so stopping the stream cancels their jobs too
        with ThreadPoolExecutor(len(KINDS), thread_name_prefix="secmeta-compact") as pool:
            list(pool.map(inheritable_thread_target(self.spark)(advance), KINDS))
        self.after_step("snapshots")

        files = {HISTORY: _staged(staging / HISTORY, "")}
        for kind in KINDS:
            opened = staging / kind.name / "open=true"
            files[kind.name] = _staged(opened, f"v={new_offset}/")
            # the interval table is complete: the closed intervals, and the open ones (the snapshot's rows, a
            # second link to its files), which the next version's commit replaces
            _link_tree(opened, staging / "open" / kind.intervals)
            files[kind.intervals] = (_staged(staging / kind.name / "open=false", "")
                                     + _staged(staging / "open" / kind.intervals, f"{OPEN_INTERVALS}v={new_offset}/"))
        version = pinned.commit(files, (current.offset, new_offset), stats["ts"], self.retain_versions,
                                after_table=lambda name: self.after_step(f"committed {name}"))
        shutil.rmtree(staging.parent, ignore_errors=True)
        retain(tables, version, self.retain_hours)
        self.after_step("retained")
        if self.progress is not None:
            self.progress(version)


def _link_tree(source: Path, target: Path) -> None:
    """The Parquet files under ``source`` also under ``target`` (partition directories kept)."""
    if not source.exists():
        return
    for file in source.rglob("*.parquet"):
        _link(file, target / file.relative_to(source))


def _link_files(files: list[str], target: Path) -> None:
    """``files`` (a snapshot's Parquet files, distinct names) also in ``target``."""
    for file in files:
        _link(Path(file), target / Path(file).name)


def _link(file: Path, to: Path) -> None:
    """A hard link ``to`` to ``file`` (a copy where links fail)."""
    to.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(file, to)
    except OSError:
        shutil.copyfile(file, to)


def _staged(directory: Path, prefix: str) -> list[tuple[Path, str]]:
    """The Parquet files Spark wrote under ``directory``, with their paths in a table (partition dirs kept)."""
    if not directory.exists():
        return []
    return [(f, prefix + f.relative_to(directory).as_posix()) for f in sorted(directory.rglob("*.parquet"))]


def compaction_stream(
    spark: SparkSession,
    store_dir: str | os.PathLike,
    tables_dir: str | os.PathLike,
    *,
    key_file: str | None = None,
    checkpoint: str | os.PathLike | None = None,
    once: bool = False,
    max_events_per_trigger: int | None = None,
    retain_versions: int = DEFAULT_RETAIN_VERSIONS,
    retain_hours: int = DEFAULT_RETAIN_HOURS,
    trigger_seconds: float = 5.0,
    after_step: Callable[[str], None] | None = None,
    progress: Callable[[Version], None] | None = None,
) -> StreamingQuery:
    """Start the compaction stream (``once``: everything in the log now, then stop).

    The checkpoint defaults to ``TABLES/_checkpoint``. Bad arguments, a path that
    is not a store and an unusable tables directory raise before any Spark job.
    The newest ``retain_versions`` versions stay queryable; files no kept version
    reads are deleted once removed ``retain_hours`` ago. ``progress`` is called on
    the driver with each new version, and ``after_step(name)`` after each step of
    a batch: "started" (Spark handed it over), "staged", "snapshots", "committed
    <table>" (one per table, history last), "retained" (timings; tests inject
    failures). Wait for the stream with ``wait`` to get secmeta's errors rather than Spark's.
    """
    if retain_versions < 1:
        raise InvalidValueError(f"retain_versions must be at least 1, not {retain_versions}")
    if retain_hours < 0:
        raise InvalidValueError(f"retain_hours must be 0 or more, not {retain_hours}")
    if max_events_per_trigger is not None and max_events_per_trigger < 1:
        raise InvalidValueError(f"max_events_per_trigger must be at least 1, not {max_events_per_trigger}")
    if not trigger_seconds > 0 or trigger_seconds == float("inf"):
        raise InvalidValueError(f"trigger_seconds must be a positive number of seconds, not {trigger_seconds}")
    tables = open_tables(store_dir, tables_dir, key_file)
    checkpoint = str(Path(checkpoint) if checkpoint is not None else tables.path / "_checkpoint")
    # Delta's timestamp is microseconds since the epoch (Spark's default INT96 is not in the protocol)
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    source = log_stream(spark, store_dir, key_file, max_events_per_trigger)
    commit = _Commit(spark, tables, checkpoint, retain_versions, retain_hours, after_step, progress)
    writer = (source.writeStream.queryName(f"secmeta-compact-{tables.path.name}")
              .foreachBatch(commit).option("checkpointLocation", checkpoint))
    writer = writer.trigger(availableNow=True) if once else writer.trigger(processingTime=f"{trigger_seconds} seconds")
    query = writer.start()
    _COMMITS[query.id] = commit
    return query


def wait(query: StreamingQuery) -> None:
    """Wait until a compaction stream ends (stopped, or done with ``once``).

    A failed batch raises its own error if it is secmeta's (TablesError, ...),
    else a CompactionError naming it; either way the tables keep their last version.
    """
    try:
        query.awaitTermination()
    except StreamingQueryException as exc:
        commit = _COMMITS.get(query.id)
        failure = commit.failure if commit is not None else None
        if isinstance(failure, SecmetaError):
            raise failure from None
        cause = f"{type(failure).__name__}: {failure}" if failure is not None else str(exc).splitlines()[0]
        raise CompactionError(f"the compaction stream failed and the tables keep their last version: "
                              f"{cause}") from failure
    finally:
        if not query.isActive:
            _COMMITS.pop(query.id, None)


def compact(spark: SparkSession, store_dir: str | os.PathLike, tables_dir: str | os.PathLike, **options) -> Version:
    """Compact everything the log holds now (an availableNow run) and return the tables' version.

    Raises as ``wait`` does if a batch failed (the tables keep their last version).
    """
    wait(compaction_stream(spark, store_dir, tables_dir, once=True, **options))
    return Tables(tables_dir).current()
