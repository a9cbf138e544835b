"""One version of a tables directory as Polars DataFrames, read with deltalake (no JVM).

    reader = ArrowReader(TABLES)                    # the current version (or version=<history Delta version>)
    reader.table("acls")                            # a table at the Delta version the version names
    reader.intervals("acl_intervals")               # every validity interval of a kind at this version

The same reads as Spark's ``TableReader``: each table at the Delta version the tables' version names, so
a reader sees one consistent state even while the compaction job commits newer ones.
"""

from __future__ import annotations

import os

import polars as pl

from secmeta.consumers.spark.tables import HISTORY, Kept, Tables, TablesError, Version
from secmeta.events.entities import KINDS, EntityKind

__all__ = ["ArrowReader"]

_KIND = {k.table: k for k in KINDS} | {k.intervals_table: k for k in KINDS}


class ArrowReader:
    """Read-side access to a tables directory at one version (default: the current one when made)."""

    def __init__(self, tables_dir: str | os.PathLike, version: int | None = None) -> None:
        self.tables = Tables(tables_dir)
        current = self.tables.check()
        self.version: Version = current if version is None else self.tables.version(version)
        self._read: dict[tuple[str, int], pl.DataFrame] = {}

    @property
    def offset(self) -> int:
        """Events [0, offset) are in the tables read."""
        return self.version.offset

    def table(self, name: str, at: Version | Kept | None = None) -> pl.DataFrame:
        """Table ``name`` at the Delta version ``at`` (default: this reader's version) names."""
        at = at or self.version
        key = (name, at.tables[name])
        if key not in self._read:
            self._read[key] = self._load(name, at)
        return self._read[key]

    def _load(self, name: str, at: Version | Kept) -> pl.DataFrame:
        """The table's Parquet files as its Delta log lists them (as Spark's reader reads them), in its schema.

        Polars reads them natively: no pyarrow dataset (which loads pandas), no JVM.
        """
        from arro3.core import Table

        files = self.tables.files(name, at)  # local paths; TablesError if vacuumed
        schema = pl.DataFrame(Table.from_batches([], schema=self.tables.delta(name, at.tables[name]).schema()
                                                 .to_arrow())).schema
        if not files:
            return pl.DataFrame(schema=schema)
        data = pl.read_parquet(files, hive_partitioning=name == HISTORY, missing_columns="insert")
        return data.select([pl.col(c).cast(t) if c in data.columns else pl.lit(None, t).alias(c)
                            for c, t in schema.items()])

    def history(self) -> pl.DataFrame:
        """Every event compacted, redacted, in offset order."""
        return self.table(HISTORY).sort("offset")

    def snapshot(self, name: str, offset: int | None = None) -> pl.DataFrame:
        """The state table ``name`` (acls, scram_users, tokens) at a kept version's offset (default: this one)."""
        kind = self._kind(name)
        if offset is None or offset == self.offset:
            return self.table(kind.table)
        kept = [k for k in self.version.kept if k.offset == offset]
        if not kept:
            raise TablesError(f"the state at offset {offset} is not a kept version of {kind.table}; kept: "
                              f"{', '.join(str(k.offset) for k in self.version.kept) or 'none'}")
        return self.table(kind.table, kept[-1])

    def intervals(self, name: str) -> pl.DataFrame:
        """The validity intervals of a kind (by snapshot or interval table name): closed ones and open ones."""
        return self.table(self._kind(name).intervals_table)

    def offset_at_time(self, timestamp_ms: int) -> int:
        """N such that events [0, N) are the ones stamped <= ``timestamp_ms`` (the store's rule)."""
        later = self.table(HISTORY).filter(pl.col("timestamp_ms") > timestamp_ms)["offset"].min()
        return self.offset if later is None else int(later)  # type: ignore[arg-type]

    def _kind(self, name: str) -> EntityKind:
        try:
            return _KIND[name]
        except KeyError:
            raise TablesError(f"no table {name!r}; tables: {', '.join(_KIND)}") from None
