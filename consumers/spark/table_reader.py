"""DataFrames of one consistent version of a tables directory, and SQL views over them.

    reader = TableReader(spark, TABLES)          # reads the manifest once
    reader.register_views()                      # secmeta_history, secmeta_acls, secmeta_acl_intervals, ...
    spark.sql("SELECT * FROM secmeta_acl_intervals WHERE valid_from <= TIMESTAMP'2026-01-01 00:00:00' "
              "AND (valid_to IS NULL OR valid_to > TIMESTAMP'2026-01-01 00:00:00')")

Every DataFrame a reader returns reflects the version its manifest named when
it was made, even while the compaction job publishes newer ones.
"""

from __future__ import annotations

import os

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, StructField, StructType

from consumers.spark import intervals
from consumers.spark.intervals import KINDS, Kind
from consumers.spark.rows import SCHEMA
from consumers.spark.tables import HISTORY, Tables, TablesError

__all__ = ["HISTORY_SCHEMA", "VIEWS", "TableReader"]

HISTORY_SCHEMA = StructType([*SCHEMA.fields, StructField("event_date", DateType(), True)])
_KIND = {k.name: k for k in KINDS} | {k.intervals: k for k in KINDS}
VIEWS = ("history", *(k.name for k in KINDS), *(k.intervals for k in KINDS))


class TableReader:
    """Read-side access to a tables directory at the version current when it was made."""

    def __init__(self, spark: SparkSession, tables_dir: str | os.PathLike) -> None:
        self.spark = spark
        self.tables = Tables(tables_dir)
        self.manifest = self.tables.manifest()

    @property
    def offset(self) -> int:
        """Events [0, offset) are in the tables read."""
        return self.manifest.offset

    def _parquet(self, path, schema: StructType) -> DataFrame:
        if not path.exists() or not any(path.rglob("*.parquet")):
            return self.spark.createDataFrame([], schema)
        return self.spark.read.schema(schema).parquet(str(path))

    def history(self) -> DataFrame:
        """Every event compacted, redacted (the source schema plus ``event_date``, its partition)."""
        return (self._parquet(self.tables.table_dir(HISTORY), HISTORY_SCHEMA)
                .where(F.col("offset") < self.offset))

    def snapshot(self, name: str, offset: int | None = None) -> DataFrame:
        """The state table ``name`` (acls, scram_users, tokens) at a kept version (default: current)."""
        kind = self._kind(name)
        offset = self.offset if offset is None else offset
        kept = [v.offset for v in self.manifest.versions]
        if offset not in kept:
            if not kept and offset == 0:
                return self._empty_snapshot(kind)
            raise TablesError(f"version {offset} of {kind.name} is not kept; kept versions: "
                              f"{', '.join(map(str, kept)) or 'none'}")
        return self._parquet(self.tables.snapshot_dir(kind.name, offset), self._empty_snapshot(kind).schema)

    def intervals(self, name: str) -> DataFrame:
        """The validity intervals of a kind (by snapshot or interval table name): closed ones and open ones."""
        kind = self._kind(name)
        current = self.snapshot(kind.name)
        closed = self._parquet(self.tables.table_dir(kind.intervals), current.schema)
        return closed.where(F.col("valid_to_offset") < self.offset).unionByName(current)

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

    def _empty_snapshot(self, kind: Kind) -> DataFrame:
        return intervals.empty(kind, self.spark.createDataFrame([], SCHEMA))
