"""``secmeta spark migrate``: convert a tables directory of the old format (Parquet plus
``_secmeta_tables.json``) into Delta tables, once, in place.

The old layout already is the new one (history by event_date, snapshots under
``snapshots/<kind>/v=<offset>/``, closed intervals), with files named
``c<commit>-...``; the manifest listed the kept versions and the commit each
reached. The migration commits those files to Delta tables, one version per
kept version, oldest first, so each stays queryable at its offset; files of
commits the manifest does not hold (failed attempts), snapshot versions it no
longer kept and the staging directory are deleted. The manifest is removed
last: a migration that stops part-way is run again from the start (its Delta
logs are discarded). No Spark and no store are needed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from secmeta.consumers.spark.commits import BatchCommit, create
from secmeta.consumers.spark.tables import (
    HISTORY,
    INTERVAL_NAMES,
    LEGACY_MANIFEST,
    SNAPSHOT_NAMES,
    TABLE_NAMES,
    Tables,
    TablesError,
    Version,
)

__all__ = ["MIGRATION_STREAM", "migrate"]

MIGRATION_STREAM = "secmeta-migrate"  # the txn app id of the migration's commits
_LEGACY_FORMAT = ("secmeta-tables", 1)


def migrate(tables_dir: str | os.PathLike) -> Version:
    """Convert the old-format tables under ``tables_dir``; return the current version.

    Raises TablesError for a directory without the old manifest (naming what it is) or
    with a damaged or newer one; nothing is changed then.
    """
    tables = Tables(tables_dir)
    manifest = _manifest(tables)
    versions = sorted(manifest["versions"], key=lambda v: v["offset"])
    for name in TABLE_NAMES:  # an earlier migration that stopped part-way
        shutil.rmtree(tables.table_path(name) / "_delta_log", ignore_errors=True)
    shutil.rmtree(tables.path / "_staging", ignore_errors=True)
    _delete_uncommitted(tables, manifest["commits"], {v["offset"] for v in versions})
    create(tables, manifest["store_id"], manifest["config"])
    previous_commit, previous_offset = 0, 0
    for index, old in enumerate(versions):
        files = {}
        for name in (HISTORY, *INTERVAL_NAMES):
            root = tables.table_path(name)
            files[name] = [(f, f.relative_to(root).as_posix()) for f in _files(root)
                           if previous_commit < _commit_of(f) <= old["commit"]]
        for name in SNAPSHOT_NAMES:
            root = tables.table_path(name)
            files[name] = [(f, f.relative_to(root).as_posix()) for f in _files(root / f"v={old['offset']}")]
        BatchCommit(tables, MIGRATION_STREAM, index).commit(
            files, (previous_offset, old["offset"]), old["timestamp_ms"], keep=len(versions))
        previous_commit, previous_offset = old["commit"], old["offset"]
    (tables.path / LEGACY_MANIFEST).unlink()
    return tables.current()


def _manifest(tables: Tables) -> dict[str, Any]:
    path = tables.path / LEGACY_MANIFEST
    if not path.exists():
        if tables.exists():
            raise TablesError(f"{tables.path} holds Delta tables already: nothing to migrate")
        raise TablesError(f"{tables.path} is not a tables directory of the old format (it has no {LEGACY_MANIFEST})")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise TablesError(f"{path} is not a readable tables manifest: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != _LEGACY_FORMAT[0]:
        raise TablesError(f"{path} is not a secmeta tables manifest")
    if not isinstance(data.get("version"), int) or data["version"] > _LEGACY_FORMAT[1]:
        raise TablesError(f"{path} has manifest format {data.get('version')!r}, not {_LEGACY_FORMAT[1]}: "
                          "not one this secmeta migrates")
    try:
        return {"store_id": str(data["store_id"]), "commits": int(data["commits"]),
                "config": dict(data.get("config", {})),
                "versions": [{"offset": int(v["offset"]), "commit": int(v["commit"]),
                              "timestamp_ms": v.get("timestamp_ms")} for v in data["versions"]]}
    except (KeyError, TypeError, ValueError) as exc:
        raise TablesError(f"{path} is damaged: {exc!r}") from None


def _delete_uncommitted(tables: Tables, commits: int, kept: set[int]) -> None:
    """Delete the files of commits after ``commits`` and the snapshot versions not ``kept``."""
    for name in (HISTORY, *INTERVAL_NAMES):
        for file in _files(tables.table_path(name)):
            if _commit_of(file) > commits:
                file.unlink()
    for name in SNAPSHOT_NAMES:
        for version_dir in tables.table_path(name).glob("v=*"):
            if int(version_dir.name[2:]) not in kept:
                shutil.rmtree(version_dir)


def _files(directory: Path) -> list[Path]:
    return sorted(directory.rglob("c*-*.parquet")) if directory.exists() else []


def _commit_of(file: Path) -> int:
    try:
        return int(file.name[1:file.name.index("-")])
    except ValueError:
        return 0
