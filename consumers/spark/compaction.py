"""The compaction job: a stream from a store's log into history, snapshot and interval tables.

    query = compaction_stream(spark, STORE, TABLES, key_file=KEYS)   # runs until stopped
    manifest = compact(spark, STORE, TABLES, key_file=KEYS)          # everything now, then stop

Each micro-batch (``_Commit``) is one *commit*:

1. the batch's events are written as Parquet into a staging directory (the
   only pass over the source), counted on the way (``observe``: offsets, time,
   closing events per kind);
2. for ACLs, credentials and tokens, ``intervals.advance`` turns the previous
   snapshot version and the staged events into a new snapshot version
   (``snapshots/<kind>/v=<offset>``: the open intervals) and the intervals the
   batch closed, one job per kind, the three jobs running side by side;
3. staged history and closed-interval files move into their tables, named
   ``c<commit>-...``;
4. the manifest is replaced (write, fsync, rename): from here readers see the
   new version. Snapshot versions beyond ``retain_versions`` are then deleted.

A failure anywhere before step 4 leaves the previous version intact: its
files are untouched, and the failed attempt's files are ignored by readers and
removed by the next commit. A batch is applied once: Spark replays a batch
under the same batch id after a crash, and a batch whose events the manifest
already holds (same checkpoint and batch id, or offsets below the manifest's)
is skipped, so a replay changes nothing.
"""

from __future__ import annotations

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

from consumers.spark import intervals
from consumers.spark.intervals import KINDS
from consumers.spark.log_source import check_log, log_stream
from consumers.spark.tables import HISTORY, Manifest, Tables, TablesError, Version
from core.errors import InvalidValueError, SecmetaError

__all__ = ["DEFAULT_RETAIN_VERSIONS", "CompactionError", "compact", "compaction_stream", "open_tables", "wait"]

DEFAULT_RETAIN_VERSIONS = 10
_APPENDED = [HISTORY, *(k.intervals for k in KINDS)]
# Closing events of a single-use kind (ACL deletions) in one batch sent whole to every task, at most:
# ~150 bytes a row in the driver's and executors' memory (~40 MB at the limit); above it, a shuffle join.
BROADCAST_CLOSES = 250_000
_SINGLE_USE = [k for k in KINDS if k.single_use_keys]
_COMMITS: dict[str, _Commit] = {}  # by query id: the batch function of each running compaction stream


class CompactionError(SecmetaError):
    """A compaction stream failed; the tables keep their last version."""


def open_tables(store_dir: str | os.PathLike, tables_dir: str | os.PathLike, key_file: str | None = None) -> Tables:
    """The tables directory for ``store_dir``, created if new; checked before any Spark job.

    Raises TablesError for a tables directory of another store or of a newer format,
    or one whose next event the log no longer holds (removed by retention), and the
    store's own errors for a path that is not a store or a wrong keyring.
    """
    from core.config import StoreConfig
    from core.storedir import StoreDirectory

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
        manifest = tables.manifest()
        if manifest.store_id != store_id:
            raise TablesError(
                f"{tables.path} holds the tables of store {manifest.store_id} ({manifest.store_path}), "
                f"not of {store_dir} (store {store_id}); use another tables directory")
        if manifest.config != settings:
            manifest.config = settings
            tables.write_manifest(manifest)
    else:
        if tables.path.exists() and any(tables.path.iterdir()):
            raise TablesError(f"{tables.path} is not empty and is not a secmeta tables directory")
        tables.write_manifest(Manifest(store_id, str(Path(store_dir).resolve()), config=settings))
    offset = tables.manifest().offset
    if log_start > offset:
        raise TablesError(
            f"the log of {store_dir} starts at offset {log_start} (older events were removed by retention) but "
            f"{tables.path} needs every event from offset {offset} on: history and intervals cannot be built "
            f"without them")
    return tables


class _Commit:
    """The foreachBatch function: one micro-batch of events -> one published version."""

    def __init__(self, spark: SparkSession, tables: Tables, checkpoint: str, retain_versions: int,
                 after_step: Callable[[str], None] | None = None,
                 progress: Callable[[Version], None] | None = None) -> None:
        self.spark = spark
        self.progress = progress
        self.tables = tables
        self.checkpoint = checkpoint
        self.retain_versions = retain_versions
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
        manifest = tables.manifest()
        if (manifest.last_batch.get("checkpoint") == self.checkpoint
                and batch_id <= manifest.last_batch.get("batch_id", -1)):
            return  # a replay of a batch already committed
        commit = manifest.commits + 1
        tables.discard_uncommitted(manifest, _APPENDED)
        staging = tables.staging_dir(commit)

        # 1. the events, once, into staging (history rows; also the input of step 2), counted on the way
        observed = Observation(f"secmeta-commit-{commit}")
        events = batch.where(F.col("offset") >= manifest.offset).withColumn(
            "event_date", F.expr("date_from_unix_date(CAST(floor(timestamp_ms / 86400000) AS INT))")
        ).observe(observed, F.count(F.lit(1)).alias("n"), F.min("offset").alias("lo"),
                  F.max("offset").alias("hi"), F.max("timestamp_ms").alias("ts"),
                  *[F.count_if(F.col("event_type").isin(*k.closes)).alias(f"closes:{k.name}") for k in _SINGLE_USE])
        events.write.partitionBy("event_date").parquet(str(staging / HISTORY))
        stats = observed.get
        if not stats["n"]:  # an empty batch: no new version
            shutil.rmtree(staging.parent, ignore_errors=True)
            return
        self.after_step("staged")
        if stats["lo"] != manifest.offset or stats["hi"] - stats["lo"] + 1 != stats["n"]:
            raise TablesError(
                f"batch {batch_id} holds offsets {stats['lo']}..{stats['hi']} ({stats['n']} events) but the "
                f"tables continue at offset {manifest.offset}; the checkpoint {self.checkpoint} does not match "
                f"{tables.path}")
        new_offset = stats["hi"] + 1

        # 2. new snapshot versions (open intervals) and the intervals this batch closed: one job per
        # kind, run side by side (each is small next to Spark's per-job overhead)
        staged = self.spark.read.parquet(str(staging / HISTORY))

        def advance(kind: intervals.Kind) -> None:
            previous = intervals.empty(kind, staged)
            if manifest.versions:
                previous = self.spark.read.schema(previous.schema).parquet(
                    str(tables.snapshot_dir(kind.name, manifest.offset)))
            few_closes = kind.single_use_keys and stats[f"closes:{kind.name}"] <= BROADCAST_CLOSES
            out = intervals.advance(kind, previous, staged, few_closes=few_closes)
            out.withColumn("open", F.col("valid_to_offset").isNull()).write.partitionBy("open").parquet(
                str(staging / kind.name))
            tables.publish_files(staging / kind.name / "open=true", tables.snapshot_dir(kind.name, new_offset),
                                 commit, make=True)

        # threads that carry the stream's job group, so stopping the stream cancels their jobs too
        with ThreadPoolExecutor(len(KINDS), thread_name_prefix="secmeta-compact") as pool:
            list(pool.map(inheritable_thread_target(self.spark)(advance), KINDS))
        self.after_step("snapshots")

        # 3. appended tables; 4. the manifest
        tables.publish_files(staging / HISTORY, tables.table_dir(HISTORY), commit)
        for kind in KINDS:
            tables.publish_files(staging / kind.name / "open=false", tables.table_dir(kind.intervals), commit)
        self.after_step("published")
        manifest.commits = commit
        manifest.versions.append(Version(new_offset, commit, stats["ts"], stats["n"]))
        manifest.last_batch = {"checkpoint": self.checkpoint, "batch_id": batch_id}
        tables.write_manifest(manifest)
        shutil.rmtree(staging.parent, ignore_errors=True)
        tables.drop_versions(manifest, [k.name for k in KINDS], self.retain_versions)
        if self.progress is not None:
            self.progress(manifest.versions[-1])


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
    trigger_seconds: float = 5.0,
    after_step: Callable[[str], None] | None = None,
    progress: Callable[[Version], None] | None = None,
) -> StreamingQuery:
    """Start the compaction stream (``once``: everything in the log now, then stop).

    The checkpoint defaults to ``TABLES/_checkpoint``. Bad arguments, a path that
    is not a store and an unusable tables directory raise before any Spark job.
    ``progress`` is called on the driver with each version published, and
    ``after_step(name)`` after each step of a batch: "started" (Spark handed it
    over), "staged", "snapshots", "published" (timings; tests inject failures).
    Wait for the stream with ``wait`` to get secmeta's errors rather than Spark's.
    """
    if retain_versions < 1:
        raise InvalidValueError(f"retain_versions must be at least 1, not {retain_versions}")
    if max_events_per_trigger is not None and max_events_per_trigger < 1:
        raise InvalidValueError(f"max_events_per_trigger must be at least 1, not {max_events_per_trigger}")
    if not trigger_seconds > 0 or trigger_seconds == float("inf"):
        raise InvalidValueError(f"trigger_seconds must be a positive number of seconds, not {trigger_seconds}")
    tables = open_tables(store_dir, tables_dir, key_file)
    checkpoint = str(Path(checkpoint) if checkpoint is not None else tables.path / "_checkpoint")
    source = log_stream(spark, store_dir, key_file, max_events_per_trigger)
    commit = _Commit(spark, tables, checkpoint, retain_versions, after_step, progress)
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


def compact(spark: SparkSession, store_dir: str | os.PathLike, tables_dir: str | os.PathLike, **options) -> Manifest:
    """Compact everything the log holds now (an availableNow run) and return the new manifest.

    Raises as ``wait`` does if a batch failed (the tables keep their last version).
    """
    wait(compaction_stream(spark, store_dir, tables_dir, once=True, **options))
    return Tables(tables_dir).manifest()

