"""Writing the tables' Delta logs: creating the tables, one batch's commits, settings, retention.

    version = create(tables, store_id, settings)                 # the empty tables: version 0
    batch = BatchCommit(tables, stream_id, batch_id)             # pins every table's latest Delta version
    if not batch.done:
        version = batch.commit({name: [(file, path in table)]}, (lo, hi), last_event_ms, keep=10)
    retain(tables, version, safety_hours=1)                      # Delta vacuum outside the kept versions

A batch makes one Delta write transaction per table (``create_write_transaction``:
add actions for its files, remove actions for the snapshot it replaces), in
``tables.TABLE_NAMES`` order, the history table last; the history commit
carries the version record naming every table's new Delta version (``tables``).

Exactly once: every commit carries Delta's application transaction (``txn``,
app id = the stream's id, version = the batch id). A batch whose history
commit exists is a replay and commits nothing (``done``). After a crash
between two tables, Spark replays the batch: the tables whose txn already
holds it keep that commit (checked: same offsets), the others get theirs, and
the history commit then names them all. Until then readers see the previous
version, since they read every table at the Delta version history names.

Mutual consistency without a lock: a batch's commits are made on the Delta
versions read when the batch began, with no retry (``max_commit_retries=0``).
If another compactor committed to a table in between, the commit fails
(optimistic concurrency) and the batch stops with TablesError: the other
compactor's version stands. A commit never merely appends to whatever a table
holds: it makes the table equal to the content at the version history names,
plus the batch's files (removing files of commits no version names, left by a
failed or losing batch, and re-adding files such a commit removed).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from secmeta.consumers.spark.schemas import delta_schema, partition_columns
from secmeta.consumers.spark.tables import (
    HISTORY,
    OPEN_INTERVALS,
    RECORD,
    SNAPSHOT_NAMES,
    STORE_ID,
    TABLE_NAMES,
    Kept,
    Tables,
    TablesError,
    Version,
)
from secmeta.core.times import Clock, now_ms, wall_clock

__all__ = ["BATCH", "BatchCommit", "create", "record_settings", "retain"]

BATCH = "secmetaBatch"  # commit info key of a batch's commit to a table other than history
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def create(tables: Tables, store_id: str, settings: Mapping[str, Any]) -> Version:
    """Create the missing tables of ``store_id`` (the history table last) and return version 0.

    A directory where an earlier creation stopped part-way is completed.
    """
    from deltalake import DeltaTable
    from deltalake.transaction import CommitProperties

    tables.path.mkdir(parents=True, exist_ok=True)   # an OSError naming the path, not one from delta-rs
    versions = {}
    for name in TABLE_NAMES:
        path = tables.table_path(name)
        if (path / "_delta_log").is_dir():
            tables.owner(name, store_id)
            versions[name] = tables.delta(name).version()
            continue
        versions[name] = 0
        metadata = None
        if name == HISTORY:
            version = Version(0, 0, 0, 0, None, 0, store_id, versions, dict(settings),
                              (Kept(0, 0, versions),))
            metadata = CommitProperties(custom_metadata={RECORD: version.record()})
        DeltaTable.create(path, delta_schema(name), mode="error", partition_by=partition_columns(name),
                          configuration={STORE_ID: store_id}, raise_if_key_not_exists=False,
                          commit_properties=metadata)
    return tables.current()


def record_settings(tables: Tables, settings: Mapping[str, Any]) -> Version:
    """A new version with the store's current authorizer ``settings`` (if they changed) and no new events."""
    current = tables.current()
    if current.settings == settings:
        return current
    changed = replace(current, first_offset=current.offset, events=0, settings=dict(settings), stream=None,
                      batch=None)
    _commit(tables, HISTORY, tables.delta(HISTORY), [], {RECORD: changed.record()}, None)
    return tables.current()


class BatchCommit:
    """One batch's commits to every table, made on the Delta versions read when it began."""

    def __init__(self, tables: Tables, stream: str, batch: int, *, clock: Clock = wall_clock) -> None:
        self.tables = tables
        self.clock = clock  # stamps the Delta add/remove actions
        self.stream = stream
        self.batch = batch
        self.pinned = {name: tables.delta(name) for name in TABLE_NAMES}
        self.current = tables.current()

    @property
    def done(self) -> bool:
        """Whether this batch was committed already (a replay: commit nothing)."""
        return self._holds_batch(self.pinned[HISTORY])

    def _holds_batch(self, table) -> bool:
        """Whether ``table`` holds this batch (or a later one) of the stream: its Delta application transaction for
        the stream is at this batch id or past it. Spark numbers batches from 0, so a transaction version of 0 is
        batch 0 committed; None is no batch committed."""
        committed = table.transaction_version(self.stream)
        return committed is not None and committed >= self.batch

    def commit(self, files: Mapping[str, Sequence[tuple[Path, str]]], offsets: tuple[int, int],
               timestamp_ms: int | None, keep: int,
               after_table: Callable[[str], None] = lambda name: None) -> Version:
        """Commit ``files`` (per table: a file and its path in the table) as the version after events
        [``offsets``); keep the newest ``keep`` versions queryable. Files are moved in first.

        ``after_table(name)`` runs after each table's commit (tests inject crashes there).
        """
        lo, hi = offsets
        batch = {"stream": self.stream, "batch": self.batch, "offsets": [lo, hi]}
        versions = {}
        for name in TABLE_NAMES[:-1]:
            versions[name] = self._table(name, files.get(name, ()), batch)
            after_table(name)
        versions[HISTORY] = self.pinned[HISTORY].version() + 1
        kept = (*self.current.kept, Kept(versions[HISTORY], hi, versions))[-keep:]
        version = Version(versions[HISTORY], lo, hi, hi - lo, timestamp_ms, 0, self.current.store_id, versions,
                          self.current.settings, kept, self.stream, self.batch)
        _commit(self.tables, HISTORY, self.pinned[HISTORY], self._actions(HISTORY, files.get(HISTORY, ())),
                {RECORD: version.record()}, self._txn())
        after_table(HISTORY)
        return self.tables.current()

    def _table(self, name: str, files: Sequence[tuple[Path, str]], batch: dict) -> int:
        table = self.pinned[name]
        if self._holds_batch(table):
            # an earlier attempt of this batch committed this table, then stopped: keep that commit
            last = table.history(1)[0]
            if last.get(BATCH) != batch:
                raise TablesError(
                    f"{self.tables.table_path(name)} holds batch {self.batch} of stream {self.stream} but its "
                    f"last commit ({last.get(BATCH)}) is not that batch's {batch}: another compactor wrote to "
                    f"{self.tables.path}; stop it and restart this one")
            return table.version()
        _commit(self.tables, name, table, self._actions(name, files), {BATCH: batch}, self._txn())
        return table.version() + 1

    def _txn(self):
        from deltalake.transaction import Transaction

        return Transaction(self.stream, self.batch)

    def _actions(self, name: str, files: Sequence[tuple[Path, str]]) -> list:
        """Remove and add actions making table ``name`` the content at the current version plus ``files``."""
        from deltalake.transaction import AddAction, RemoveAction

        table, named = self.pinned[name], self.current.tables[name]
        latest = _listing(table)
        if name in SNAPSHOT_NAMES:
            base: dict[str, int] = {}  # a snapshot's content is replaced
        else:
            base = latest if table.version() == named else _listing(self.tables.delta(name, named))
            # an interval table's open intervals are replaced (the batch brings them again, some now closed)
            base = {path: size for path, size in base.items() if not path.startswith(OPEN_INTERVALS)}
        now = now_ms(self.clock)
        partitions = partition_columns(name)
        actions: list = [RemoveAction(path, True, now, size, _partition_values(path, partitions))
                         for path, size in latest.items() if path not in base]
        actions += [AddAction(path, size, _partition_values(path, partitions), now, True, "{}")
                    for path, size in base.items() if path not in latest]
        root = self.tables.table_path(name)
        for source, relative in files:
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if source != target:
                os.replace(source, target)
            actions.append(_add(target, relative, partitions))
        return actions


def retain(tables: Tables, version: Version, safety_hours: int) -> None:
    """Delete the files no kept version reads (Delta vacuum), once removed ``safety_hours`` ago or more.

    Also deletes files in a table's directory that no commit added (a failed batch's),
    past the same window; the window protects readers still reading an older version.
    """
    for name in TABLE_NAMES:
        keep = sorted({k.tables[name] for k in version.kept} | {version.tables[name]})
        table = tables.delta(name)
        options: dict[str, Any] = {"retention_hours": safety_hours, "enforce_retention_duration": False,
                                   "keep_versions": keep}
        if table.vacuum(dry_run=True, **options):  # vacuum commits only when it deletes something
            table.vacuum(dry_run=False, **options)


def _commit(tables: Tables, name: str, table, actions: list, metadata: dict, txn) -> None:
    """One Delta write transaction on ``table``'s loaded version: fails if anyone committed since."""
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import CommitProperties

    properties = CommitProperties(custom_metadata=metadata, max_commit_retries=0,
                                  app_transactions=None if txn is None else [txn])
    try:
        table.create_write_transaction(actions, "append", delta_schema(name), partition_by=partition_columns(name),
                                       commit_properties=properties)
    except CommitFailedError as exc:
        latest = tables.delta(name).version()
        if latest > table.version():
            raise TablesError(
                f"another compactor committed Delta version {latest} of {tables.table_path(name)} while this one "
                f"worked on version {table.version()}: this compaction stops and the tables keep the other's "
                "versions; run one compactor per tables directory") from None
        raise TablesError(f"committing to {tables.table_path(name)} failed: {exc}") from None


def _listing(table) -> dict[str, int]:
    """The files of a Delta table at its loaded version: path in the table -> size."""
    import pyarrow as pa

    actions = pa.table(table.get_add_actions(flatten=True))
    return dict(zip(actions["path"].to_pylist(), actions["size_bytes"].to_pylist(), strict=True))


def _partition_values(path: str, columns: list[str]) -> dict[str, str | None]:
    """Partition values from a Hive-style path (``event_date=2027-01-15/part-...``), as Spark lays them out."""
    values: dict[str, str | None] = {}
    for part in path.split("/")[:-1]:
        key, sep, value = part.partition("=")
        if sep and key in columns:
            values[key] = None if value == _HIVE_NULL else unquote(value)
    return {c: values.get(c) for c in columns}


def _add(file: Path, relative: str, partitions: list[str]):
    import pyarrow.parquet as pq
    from deltalake.transaction import AddAction

    stat = file.stat()
    stats = json.dumps({"numRecords": pq.read_metadata(file).num_rows})
    return AddAction(quote(relative, safe="/="), stat.st_size, _partition_values(relative, partitions),
                     int(stat.st_mtime * 1000), True, stats)
