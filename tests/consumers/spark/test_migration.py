"""``secmeta spark migrate``: tables of the old format (Parquet + _secmeta_tables.json) become Delta tables.

The old-format directory is made from a Delta compaction (``compacted``) the way the old compaction job
laid it out: files named ``c<commit>-<part>`` (history by event_date, snapshots under ``v=<offset>``),
timestamps as Spark's default INT96, the manifest listing the kept versions; plus what a failed
commit left (a later commit's file, a staging directory) and snapshot versions no longer kept.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from secmeta.consumers.spark.compaction import open_tables
from secmeta.consumers.spark.migration import migrate
from secmeta.consumers.spark.table_reader import TableReader
from secmeta.consumers.spark.tables import (
    HISTORY,
    INTERVAL_NAMES,
    SNAPSHOT_NAMES,
    Tables,
    TablesError,
)
from tests.consumers.spark.sparkkit import acl_state


def _relative(table: Path, uri: str) -> Path:
    return Path(uri.removeprefix("file://")).relative_to(table)


def _legacy_copy(tables: Path, target: Path) -> tuple[int, list[int]]:
    """Rewrite the Delta tables under ``tables`` into ``target`` in the old format; (commits, kept offsets)."""
    from deltalake import DeltaTable

    layout = Tables(tables)
    versions = layout.versions()
    current = versions[-1]
    kept = {k.offset for k in current.kept}
    commits = len(versions) - 1  # version 0 is the empty tables
    for name in (HISTORY, *INTERVAL_NAMES):
        root = layout.table_path(name)
        seen: set[Path] = set()
        for commit, version in enumerate(versions[1:], 1):
            files = {_relative(root, f) for f in DeltaTable(root, version=version.tables[name]).file_uris()}
            for relative in sorted(files - seen):
                _write_int96(root / relative, target / name / relative.parent / f"c{commit}-{relative.name}")
            seen |= files
    for name in SNAPSHOT_NAMES:
        root = layout.table_path(name)
        for commit, version in enumerate(versions[1:], 1):
            if version.offset in kept:
                files = DeltaTable(root, version=version.tables[name]).file_uris()
                for relative in (_relative(root, f) for f in files):
                    _write_int96(root / relative, target / "snapshots" / name / f"v={version.offset}" /
                                 f"c{commit}-{relative.name}")
            (target / "snapshots" / name / f"v={version.offset}").mkdir(parents=True, exist_ok=True)
    manifest = {"format": "secmeta-tables", "version": 1, "store_id": current.store_id, "store_path": "/gone",
                "commits": commits, "config": dict(current.settings), "last_batch": {},
                "versions": [{"offset": v.offset, "commit": c, "timestamp_ms": v.timestamp_ms, "events": v.events}
                             for c, v in enumerate(versions[1:], 1) if v.offset in kept]}
    (target / "_secmeta_tables.json").write_text(json.dumps(manifest))
    return commits, sorted(kept)


def _write_int96(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pq.ParquetFile(source).read(), target, use_deprecated_int96_timestamps=True)


def _state(spark, tables: Path) -> dict:
    reader = TableReader(spark, tables)
    state = {"offset": reader.offset, "kept": [k.offset for k in reader.version.kept],
             "history": sorted(tuple(r) for r in reader.history().collect())}
    for name in (*SNAPSHOT_NAMES, *INTERVAL_NAMES):
        frame = reader.snapshot(name) if name in SNAPSHOT_NAMES else reader.intervals(name)
        state[name] = sorted(map(tuple, frame.collect()), key=repr)
    return state


@pytest.fixture
def legacy(compacted, tmp_path):
    space, tables, _ = compacted
    old = tmp_path / "old"
    commits, kept = _legacy_copy(tables, old)
    _write_int96(next((old / "acl_intervals").glob("c1-*.parquet")), old / "acl_intervals" / f"c{commits + 1}-x.parquet")
    (old / "_staging" / f"c{commits + 1}").mkdir(parents=True)
    return space, tables, old, kept


def test_old_tables_are_refused_until_migrated(compacted, legacy, spark):
    """Compaction and queries refuse the old format naming the migrate command; nothing is written."""
    space, _, old, _ = legacy
    before = sorted(p.relative_to(old) for p in old.rglob("*"))
    for attempt in (lambda: open_tables(space.store_dir, old, space.key_file), lambda: TableReader(spark, old)):
        with pytest.raises(TablesError, match=rf"old format .*_secmeta_tables.json.*`secmeta spark migrate --tables {old}`"):
            attempt()
    assert sorted(p.relative_to(old) for p in old.rglob("*")) == before


def test_migrate_gives_the_same_tables_with_each_kept_version(compacted, legacy, spark):
    """Each kept version becomes a Delta version equal to the store there; the current one reads as the
    Delta compaction did; failed-commit files, staging and versions no longer kept are gone; the
    manifest is removed; a second migrate refuses; deltalake reads the INT96 timestamps."""
    from deltalake import DeltaTable

    space, tables, old, kept = legacy
    migrated = migrate(old)
    assert migrated.offset == kept[-1] and [k.offset for k in migrated.kept] == kept
    assert _state(spark, old) == _state(spark, tables)
    with space.open() as store:
        reader = TableReader(spark, old)
        for offset in kept:
            rows = reader.snapshot("acls", offset).collect()
            assert {(r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host, r.operation,
                     r.permission_type) for r in rows} == acl_state(store.as_of(offset=offset))
    assert not (old / "_secmeta_tables.json").exists() and not (old / "_staging").exists()
    assert not [p for p in (old / "acl_intervals").glob("c*-x.parquet")]
    assert sorted(int(p.name[2:]) for p in (old / "snapshots" / "acls").glob("v=*")) == kept
    expiry = DeltaTable(old / "snapshots" / "tokens").to_pyarrow_table()["expiry_timestamp"].to_pylist()
    assert all(e is None or e.year > 2000 for e in expiry)
    with pytest.raises(TablesError, match="holds Delta tables already: nothing to migrate"):
        migrate(old)
    open_tables(space.store_dir, old, space.key_file)  # the compaction job takes them


def test_a_migration_that_stopped_part_way_runs_again(compacted, legacy, spark, monkeypatch):
    """A crash after some Delta commits leaves the manifest: migrate again starts over and completes."""
    from secmeta.consumers.spark import migration

    _, tables, old, kept = legacy
    real = migration.BatchCommit.commit

    def crash_on_second(self, *args, **kwargs):
        if self.batch == 1:
            raise RuntimeError("stopped")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(migration.BatchCommit, "commit", crash_on_second)
    with pytest.raises(RuntimeError, match="stopped"):
        migrate(old)
    assert (old / "_secmeta_tables.json").exists()
    monkeypatch.undo()
    assert migrate(old).offset == kept[-1]
    assert _state(spark, old) == _state(spark, tables)


def test_migrate_refuses_what_it_cannot_convert(tmp_path):
    with pytest.raises(TablesError, match="is not a tables directory of the old format"):
        migrate(tmp_path)
    (tmp_path / "_secmeta_tables.json").write_text(json.dumps({"format": "secmeta-tables", "version": 2}))
    with pytest.raises(TablesError, match="manifest format 2, not 1: not one this secmeta migrates"):
        migrate(tmp_path)
    (tmp_path / "_secmeta_tables.json").write_text("{")
    with pytest.raises(TablesError, match="is not a readable tables manifest"):
        migrate(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_secmeta_tables.json"]


def test_migrate_and_versions_commands(legacy, capsys):
    """`secmeta spark migrate` converts and says so; `secmeta spark versions` then lists each kept version
    (Delta version, log offsets, rows), newest first, as DESCRIBE HISTORY does."""
    from secmeta.core.cli import main

    _, _, old, kept = legacy
    assert main(["spark", "migrate", "--tables", str(old)]) == 0
    out = capsys.readouterr().out
    assert out == f"{old}: converted to Delta tables at version {kept[-1]} (3 versions, Delta version 3)\n"
    assert main(["spark", "versions", "--tables", str(old), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(v["delta_version"], v["offset"], v["kept"]) for v in listed] == [
        (3, kept[2], True), (2, kept[1], True), (1, kept[0], True), (0, 0, False)]
    assert [v["rows"] for v in listed] == [kept[2] - kept[1], kept[1] - kept[0], kept[0], 0]
    assert main(["spark", "migrate", "--tables", str(old)]) == 2
    assert "holds Delta tables already: nothing to migrate" in capsys.readouterr().err
