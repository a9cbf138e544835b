"""The schema of each table in a tables directory, as Spark reads it and as its Delta log declares it.

The history table is the source's schema (``rows.SCHEMA``) plus ``event_date``,
its partition column (absent from the data files, as Delta and Hive lay
partitions out); the snapshot and interval tables of a kind share
``intervals.schema``. In the Delta log every column is nullable and timestamps
are Delta's ``timestamp`` (UTC microseconds), so no table feature is needed.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DateType, StructField, StructType

from secmeta.consumers.spark import intervals
from secmeta.consumers.spark.intervals import KINDS
from secmeta.consumers.spark.rows import SCHEMA
from secmeta.consumers.spark.tables import HISTORY

__all__ = ["HISTORY_SCHEMA", "delta_schema", "empty", "partition_columns", "schema"]

HISTORY_SCHEMA = StructType([*SCHEMA.fields, StructField("event_date", DateType(), True)])
_KIND = {k.name: k for k in KINDS} | {k.intervals: k for k in KINDS}


def schema(name: str) -> StructType:
    """The Spark schema of table ``name`` (one of ``tables.TABLE_NAMES``)."""
    return HISTORY_SCHEMA if name == HISTORY else intervals.schema(_KIND[name])


def empty(spark: SparkSession, name: str) -> DataFrame:
    """Table ``name`` with no rows, in its schema: a local relation (from Arrow), so no query over it starts a
    Spark job (``createDataFrame([])`` makes an RDD, and each query a job over it: ~0.5 s on a loaded machine)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return spark.createDataFrame(to_arrow_schema(schema(name), timezone="UTC").empty_table())


def partition_columns(name: str) -> list[str]:
    return ["event_date"] if name == HISTORY else []


def delta_schema(name: str):
    """The ``deltalake.Schema`` table ``name`` is created with."""
    import pyarrow as pa
    from deltalake import Schema
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema(name), timezone="UTC")  # timestamps with a zone: Delta's timestamp
    return Schema.from_arrow(pa.schema([f.with_nullable(True) for f in arrow]))

