"""DataFrames of one version of a tables directory, and SQL views over them, in plain pyspark.

    reader = TableReader(spark, TABLES)            # the current version (or version=<history Delta version>)
    reader.register_views()                        # secmeta_history, secmeta_acls, secmeta_acl_intervals, ...
    spark.sql("SELECT * FROM secmeta_acl_intervals WHERE valid_from <= TIMESTAMP'2026-01-01 00:00:00' "
              "AND (valid_to IS NULL OR valid_to > TIMESTAMP'2026-01-01 00:00:00')")

No Delta jars are needed: the reader asks ``deltalake`` for the data files of
each table at the Delta version the tables' version names, and Spark reads
those Parquet files. Every DataFrame a reader returns reflects its version,
even while the compaction job commits newer ones. Where the Delta Spark jars
are installed, ``spark.read.format("delta").option("versionAsOf", v).load(path)``
reads the same tables natively (``Version.tables`` gives each table's ``v``).
"""

from __future__ import annotations

import os

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from secmeta.consumers.spark.intervals import KINDS, Kind
from secmeta.consumers.spark.schemas import empty, schema
from secmeta.consumers.spark.tables import HISTORY, Kept, Tables, TablesError, Version

__all__ = ["VIEWS", "TableReader"]

_KIND = {k.name: k for k in KINDS} | {k.intervals: k for k in KINDS}
VIEWS = ("history", *(k.name for k in KINDS), *(k.intervals for k in KINDS))


class TableReader:
    """Read-side access to a tables directory at one version (default: the current one when made)."""

    def __init__(self, spark: SparkSession, tables_dir: str | os.PathLike, version: int | None = None) -> None:
        self.spark = spark
        self.tables = Tables(tables_dir)
        current = self.tables.check()
        self.version: Version = current if version is None else self.tables.version(version)
        self._frames: dict[tuple[str, int], tuple[list[str], DataFrame]] = {}  # (table, Delta version): files, frame

    @property
    def offset(self) -> int:
        """Events [0, offset) are in the tables read."""
        return self.version.offset

    def _read(self, name: str, at: Version | Kept) -> DataFrame:
        """Table ``name`` at the Delta version ``at`` names: read once per reader (a Delta version's files do not
        change), its files checked on every read (TablesError once retention has deleted them)."""
        key = (name, at.tables[name])
        if key in self._frames:
            files, frame = self._frames[key]
            self.tables.require_kept(name, at, files)
            return frame
        files = self.tables.files(name, at)
        if not files:
            frame = empty(self.spark, name)
        else:
            reader = self.spark.read.schema(schema(name))
            if name == HISTORY:  # event_date, the partition column, comes from the files' directories
                reader = reader.option("basePath", str(self.tables.table_path(name)))  # as the files: a path
            frame = reader.parquet(*files)
        self._frames[key] = (files, frame)
        return frame

    def history(self) -> DataFrame:
        """Every event compacted, redacted (the source schema plus ``event_date``, its partition)."""
        return self._read(HISTORY, self.version)

    def snapshot(self, name: str, offset: int | None = None) -> DataFrame:
        """The state table ``name`` (acls, scram_users, tokens) at a kept version's offset (default: this one)."""
        kind = self._kind(name)
        if offset is None or offset == self.offset:
            return self._read(kind.name, self.version)
        kept = [k for k in self.version.kept if k.offset == offset]
        if not kept:
            raise TablesError(f"the state at offset {offset} is not a kept version of {kind.name}; kept: "
                              f"{', '.join(str(k.offset) for k in self.version.kept) or 'none'}")
        return self._read(kind.name, kept[-1])

    def intervals(self, name: str) -> DataFrame:
        """The validity intervals of a kind (by snapshot or interval table name): closed ones and open ones."""
        return self._read(self._kind(name).intervals, self.version)

    def register_views(self, prefix: str = "secmeta_") -> list[str]:
        """Temporary views of every table at this version; returns their names."""
        names = []
        for view in VIEWS:
            df = self.history() if view == HISTORY else (
                self.snapshot(view) if view in (k.name for k in KINDS) else self.intervals(view))
            df.createOrReplaceTempView(prefix + view)
            names.append(prefix + view)
        return names

    def offset_at_time(self, timestamp_ms: int) -> int:
        """N such that events [0, N) are the ones stamped <= ``timestamp_ms`` (the store's rule)."""
        day = F.expr(f"date_from_unix_date(CAST(floor({int(timestamp_ms)} / 86400000) AS INT))")
        later = (self.history().where((F.col("event_date") >= day) & (F.col("timestamp_ms") > timestamp_ms))
                 .agg(F.min("offset").alias("n")).first())
        return self.offset if later is None or later.n is None else int(later.n)

    def _kind(self, name: str) -> Kind:
        try:
            return _KIND[name]
        except KeyError:
            raise TablesError(f"no table {name!r}; tables: {', '.join(VIEWS)}") from None
