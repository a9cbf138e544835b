"""The tables directory: Delta Lake tables, and which of their Delta versions make one version.

    TABLES/history/                 every event, partitioned by event_date (appended)
    TABLES/snapshots/<table>/       per entity kind: the open intervals, the state after the version's events
    TABLES/<intervals_table>/       per entity kind: every interval: the closed ones (appended) and the open
                                    ones (valid_to null, under open/, replaced by each version)
    TABLES/_checkpoint/             the compaction stream's Spark checkpoint

The entity kinds and their two tables' names are declared in ``secmeta.events.entities.KINDS``
(``acls`` / ``acl_intervals``, ``scram_users`` / ``credential_intervals``, ``tokens`` /
``token_intervals``, ...).

Each table is a Delta table whose log (``_delta_log``) is written with the
``deltalake`` package: protocol reader 1 / writer 2 and no table features
(no deletion vectors, no column mapping, no timestamp_ntz), which Delta Spark
3.x and 4.x, delta-rs, DuckDB and Trino all read. Every table names the store
in its ``secmeta.storeId`` property.

A micro-batch makes one Delta commit per table; the history table's commit is
the last one and its commit info carries the *version record* (``secmeta``):
the log offsets it adds ``[lo, hi)``, the store id, the stream and batch id,
the Delta version of every other table that matches it, the store's authorizer
settings and the versions kept queryable. A version of the tables is such a
history commit: a reader reads each table at the Delta version it names, so it
sees one consistent state even while a later batch is half committed, and an
engine that reads the Delta tables directly reads them at those versions (or at
their latest ones once the compactor is idle).

A snapshot table holds the open intervals (``valid_to`` null) of its version; an
interval table holds every interval of its kind, open ones included (format 3;
format 2 held only the closed ones and is refused), so plain SQL over the raw
table at a Delta version answers for any earlier point (format 4 names a SCRAM mechanism as Kafka
does, SCRAM-SHA-256, where format 3 had the enum's SCRAM_SHA_256: refused too): the state as of offset N
is ``valid_from_offset < N AND (valid_to_offset IS NULL OR valid_to_offset >= N)``
(``secmeta.consumers.tables_query.rules.in_force``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from secmeta.core.errors import SecmetaError
from secmeta.events.entities import KINDS

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = ["FORMAT", "HISTORY", "INTERVAL_NAMES", "LEGACY_MANIFEST", "OPEN_INTERVALS", "SNAPSHOT_NAMES", "TABLE_NAMES", "Kept", "Tables",
           "TablesError", "Version", "local_files"]

# 1 was Parquet plus a manifest, 2 interval tables without the open intervals, 3 SCRAM mechanisms by the enum's
# name (SCRAM_SHA_256, not Kafka's SCRAM-SHA-256): development formats no release wrote, refused with a clear message.
FORMAT = 4
_OLD_FORMATS = {1: "Parquet with a manifest, not Delta", 2: "its interval tables lack the open intervals",
                3: "its SCRAM mechanisms are named SCRAM_SHA_256, not Kafka's SCRAM-SHA-256"}
OPEN_INTERVALS = "open/"  # where an interval table keeps the open intervals of its version
LEGACY_MANIFEST = "_secmeta_tables.json"  # format 1's manifest
HISTORY = "history"
SNAPSHOTS = "snapshots"
STORE_ID = "secmeta.storeId"  # table property naming the store
RECORD = "secmeta"  # commit info key of a version record
# The highest Delta protocol written and read: what Delta Spark 3.x/4.x readers accept without features.
READER_VERSION, WRITER_VERSION = 1, 2
SNAPSHOT_NAMES = tuple(kind.table for kind in KINDS)
INTERVAL_NAMES = tuple(kind.intervals_table for kind in KINDS)
# Commit order of a batch: the snapshot and interval tables, then the history table (the version's commit).
TABLE_NAMES = (*SNAPSHOT_NAMES, *INTERVAL_NAMES, HISTORY)


class TablesError(SecmetaError, ValueError):
    """A tables directory that cannot be used (not one, another store's, newer format or protocol, busy)."""


@dataclass(frozen=True)
class Kept:
    """A version still queryable: its history Delta version, offset and the other tables' Delta versions."""

    delta_version: int
    offset: int
    tables: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.delta_version, "offset": self.offset, "tables": dict(self.tables)}


@dataclass(frozen=True)
class Version:
    """One version of the tables: events [0, offset), the last ``events`` of them added by this commit.

    ``delta_version`` is the history table's; ``tables`` the Delta version of every table.
    ``timestamp_ms``: the time of its last event (None before any); ``committed_ms``: the commit's.
    """

    delta_version: int
    first_offset: int
    offset: int
    events: int
    timestamp_ms: int | None
    committed_ms: int
    store_id: str
    tables: Mapping[str, int]
    settings: Mapping[str, Any] = field(default_factory=dict)
    kept: tuple[Kept, ...] = ()
    stream: str | None = None
    batch: int | None = None

    def record(self) -> dict[str, Any]:
        """The commit info entry that stores this version (``from_commit``'s input)."""
        return {"format": FORMAT, "storeId": self.store_id, "offsets": [self.first_offset, self.offset],
                "events": self.events, "lastEventMs": self.timestamp_ms, "stream": self.stream,
                "batch": self.batch, "tables": dict(self.tables), "settings": dict(self.settings),
                "kept": [k.to_dict() for k in self.kept]}

    @classmethod
    def from_commit(cls, commit: Mapping[str, Any], where: Path) -> Version | None:
        """The version a history commit records; None for a commit without one (e.g. a vacuum)."""
        record = commit.get(RECORD)
        if record is None:
            return None
        written = record.get("format") if isinstance(record, Mapping) else None
        if isinstance(written, int) and written > FORMAT:
            raise TablesError(
                f"{where} was written by a newer secmeta (tables format {written}; this one reads "
                f"up to {FORMAT}); upgrade secmeta to read it")
        if isinstance(written, int) and written < FORMAT:
            raise TablesError(
                f"{where} holds tables in development format {written}, which no release wrote "
                f"({_OLD_FORMATS.get(written, 'an older layout')}); compact the store into a new tables directory "
                "(`secmeta spark compact --store DIR --tables NEW_DIR`)")
        try:
            if not isinstance(written, int):
                raise KeyError("format")
            lo, hi = record["offsets"]
            return cls(int(commit["version"]), int(lo), int(hi), int(record["events"]), record["lastEventMs"],
                       int(commit["timestamp"]), str(record["storeId"]),
                       {str(k): int(v) for k, v in record["tables"].items()}, dict(record["settings"]),
                       tuple(Kept(int(k["version"]), int(k["offset"]), {str(n): int(v) for n, v in k["tables"].items()})
                             for k in record["kept"]), record["stream"], record["batch"])
        except (KeyError, TypeError, ValueError) as exc:
            raise TablesError(f"the version record of {where} at Delta version {commit.get('version')} is "
                              f"damaged: {exc!r}") from None


class Tables:
    """A tables directory: its Delta tables, their versions and the files of each."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Tables({str(self.path)!r})"

    def table_path(self, name: str) -> Path:
        if name not in TABLE_NAMES:
            raise TablesError(f"no table {name!r}; tables: {', '.join(TABLE_NAMES)}")
        return self.path / SNAPSHOTS / name if name in SNAPSHOT_NAMES else self.path / name

    def exists(self) -> bool:
        """Whether the history table exists (it is created last, so the tables are complete)."""
        return (self.table_path(HISTORY) / "_delta_log").is_dir()

    def delta(self, name: str, version: int | None = None):
        """The Delta table ``name`` (at ``version``, default latest), its protocol checked."""
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError, TableNotFoundError

        path = self.table_path(name)
        try:
            table = DeltaTable(path, version=version)
        except TableNotFoundError:
            raise TablesError(f"{path} is not a Delta table: {self.path} misses its {name} table") from None
        except DeltaError as exc:
            raise TablesError(f"cannot read {path} at Delta version {version}: {exc}") from None
        protocol = table.protocol()
        if (protocol.min_reader_version > READER_VERSION or protocol.min_writer_version > WRITER_VERSION
                or protocol.reader_features or protocol.writer_features):
            features = sorted({*(protocol.reader_features or ()), *(protocol.writer_features or ())})
            raise TablesError(
                f"{path} uses Delta protocol reader {protocol.min_reader_version} / writer "
                f"{protocol.min_writer_version}{' with ' + ', '.join(features) if features else ''}, newer than "
                f"secmeta writes and reads (reader {READER_VERSION} / writer {WRITER_VERSION}, no table features)")
        return table

    def check(self, store_id: str | None = None) -> Version:
        """The current version, after checking this is a complete secmeta tables directory (of ``store_id``).

        Raises TablesError naming the directory otherwise: not a tables directory, the old
        manifest format, a Delta table of something else, a newer protocol or
        format, or another store's tables.
        """
        if (self.path / LEGACY_MANIFEST).exists():
            raise TablesError(
                f"{self.path} holds tables in a development format no release wrote (Parquet with "
                f"{LEGACY_MANIFEST}); secmeta reads Delta tables only: compact the store into a new tables "
                "directory (`secmeta spark compact --store DIR --tables NEW_DIR`)")
        if (self.path / "_delta_log").is_dir():
            raise TablesError(f"{self.path} is a Delta table itself, not a secmeta tables directory")
        if not self.exists():
            what = "does not exist" if not self.path.exists() else "has no history table"
            raise TablesError(f"{self.path} is not a secmeta tables directory (it {what}); "
                              "run `secmeta spark compact` first")
        self.owner(HISTORY, store_id)  # first: a foreign directory is named as such
        missing = [name for name in TABLE_NAMES[:-1] if not (self.table_path(name) / "_delta_log").is_dir()]
        if missing:  # a kind declared after these tables were written (the table set derives from KINDS)
            raise TablesError(
                f"{self.path} was compacted by an older secmeta and has no {', '.join(missing)} "
                f"table{'s' if len(missing) > 1 else ''}; compact the store into a new tables directory "
                "(`secmeta spark compact --store DIR --tables NEW_DIR`)")
        for name in TABLE_NAMES[:-1]:
            self.owner(name, store_id)
        return self.current()

    def owner(self, name: str, store_id: str | None = None) -> str:
        """The store id table ``name`` records; TablesError if it records none or not ``store_id``."""
        table = self.delta(name)
        owner = table.metadata().configuration.get(STORE_ID)
        if owner is None:
            raise TablesError(f"{self.table_path(name)} is a Delta table of something else (no {STORE_ID} "
                              "property): not a secmeta table; use another tables directory")
        if store_id is not None and owner != store_id:
            raise TablesError(f"{self.path} holds the tables of store {owner}, not of store {store_id}; "
                              "use another tables directory")
        return owner

    def current(self) -> Version:
        """The newest version (the newest history commit with a version record)."""
        table = self.delta(HISTORY)
        limit = 4
        while True:
            commits = table.history(limit)
            for commit in commits:
                version = Version.from_commit(commit, self.path)
                if version is not None:
                    return version
            if len(commits) < limit:
                raise TablesError(f"{self.table_path(HISTORY)} records no secmeta version: not a secmeta table")
            limit *= 4

    def versions(self) -> list[Version]:
        """Every version whose commit the history table's log still holds, oldest first."""
        commits = self.delta(HISTORY).history()
        return sorted((v for v in (Version.from_commit(c, self.path) for c in commits) if v is not None),
                      key=lambda v: v.delta_version)

    def version(self, delta_version: int) -> Version:
        """The version recorded by the history table's commit ``delta_version``."""
        table = self.delta(HISTORY)
        latest = table.version()
        if 0 <= delta_version <= latest:
            for commit in table.history(latest - delta_version + 1):
                if commit.get("version") == delta_version:
                    version = Version.from_commit(commit, self.path)
                    if version is not None:
                        return version
        raise TablesError(f"{self.path} has no version {delta_version} (history table versions with a "
                          f"secmeta record, up to {latest}); see `secmeta spark versions`")

    def files(self, name: str, version: Version | Kept) -> list[str]:
        """The data files of table ``name`` at ``version`` (absolute local paths: ``local_files``), as its Delta log
        lists them.

        Raises TablesError if retention has deleted them (a version older than the kept ones).
        """
        files = local_files(self.delta(name, version.tables[name]))
        self.require_kept(name, version, files)
        return files

    def require_kept(self, name: str, version: Version | Kept, files: list[str]) -> None:
        """Raise TablesError if retention has deleted any of ``files``, table ``name``'s at ``version``
        (``files``' answer, checked again by a reader that keeps the list)."""
        missing = [f for f in files if not os.path.exists(f)]
        if missing:
            raise TablesError(
                f"version {version.delta_version} of {self.path} (offset {version.offset}) is no longer kept: "
                f"retention deleted {len(missing)} of its {name} files; see `secmeta spark versions`")


def local_files(table: DeltaTable) -> list[str]:
    """The data files of a Delta table (a deltalake ``DeltaTable`` at the version it was loaded at) as local paths.

    deltalake's ``file_uris()`` joins the table's URI, percent-encoded (``/tmp/a%20b/acls/``), with each file's
    path as the Delta log holds it, decoded (a partition directory's own escapes, ``d=x%20y``, are its name on
    disk): only the table's part is decoded. A file outside the table's directory is refused, naming it.
    """
    root = table.table_uri.removeprefix("file://").rstrip("/") + "/"
    local = unquote(root)
    paths = []
    for uri in table.file_uris():
        path = uri.removeprefix("file://")
        if not path.startswith(root):
            raise TablesError(f"the Delta table {local} lists a data file outside its directory: {uri}")
        paths.append(local + path[len(root):])
    return paths
