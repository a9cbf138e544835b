"""SQL over one version of the tables with Polars: the views ``secmeta spark query sql`` names.

    columns, rows = run_sql(ArrowReader(TABLES), "SELECT count(*) AS n FROM secmeta_acls", limit=1000)

The views are Spark's (``TableReader.register_views``): ``secmeta_history``, the snapshot tables
(``secmeta_acls``, ...: the state at the version) and the interval tables (``secmeta_acl_intervals``, ...:
every interval, closed and open), each at the Delta version the tables' version names. Timestamps are
UTC; compare them with text that carries its zone (``valid_from <= '2027-01-15 14:00:00+00:00'``), which
Spark, Polars and DuckDB read alike.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from secmeta.consumers.spark.tables import HISTORY, TablesError
from secmeta.consumers.tables_query.reader import ArrowReader
from secmeta.events.entities import KINDS

__all__ = ["VIEWS", "run_sql", "views"]

VIEWS = (HISTORY, *(k.table for k in KINDS), *(k.intervals_table for k in KINDS))


def views(reader: ArrowReader, statement: str | None = None, prefix: str = "secmeta_") -> dict[str, pl.LazyFrame]:
    """The views of the version by name: every one, or those ``statement`` names (the tables a query reads)."""
    def frame(view: str) -> pl.DataFrame:
        if view == HISTORY:
            return reader.history()
        return reader.snapshot(view) if view in (k.table for k in KINDS) else reader.intervals(view)

    return {prefix + v: frame(v).lazy() for v in VIEWS if statement is None or prefix + v in statement}


def run_sql(reader: ArrowReader, statement: str, limit: int) -> tuple[list[str], list[dict[str, Any]]]:
    """The columns and at most ``limit`` rows of ``statement``; TablesError for SQL Polars refuses."""
    context = pl.SQLContext(views(reader, statement))
    try:
        result = context.execute(statement).limit(limit).collect()
    except (pl.exceptions.PolarsError, ValueError) as exc:
        raise TablesError(f"the SQL failed: {str(exc).splitlines()[0]}") from None
    return result.columns, result.to_dicts()
