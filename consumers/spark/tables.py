"""The tables directory the compaction job maintains, its manifest, and how to read it consistently.

    TABLES/_secmeta_tables.json                       the manifest (replaced atomically)
    TABLES/history/event_date=YYYY-MM-DD/c<N>-*.parquet  every event (append-only)
    TABLES/acl_intervals/c<N>-*.parquet               closed intervals (append-only)
    TABLES/credential_intervals/c<N>-*.parquet
    TABLES/token_intervals/c<N>-*.parquet
    TABLES/snapshots/<acls|scram_users|tokens>/v=<offset>/*.parquet
                                                      open intervals = state after <offset> events

The manifest names the current version (the log offset the tables reflect:
events [0, offset) are in them) and the snapshot versions still kept. A
commit writes its files first, then replaces the manifest; files of a commit
that failed before that are ignored by readers (they hold offsets at or past
the manifest's) and removed by the next commit. So a reader that reads the
manifest once always sees one consistent version.

A snapshot holds the open intervals (``valid_to`` null) of its version. The
interval tables a reader gets (``TableReader.intervals``) are the closed
intervals plus the current snapshot; state
as of offset N is ``valid_from_offset < N AND (valid_to_offset IS NULL OR
valid_to_offset >= N)``; state as of time T is the same with T's offset.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import SecmetaError
from events.durable import write_atomically

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "MANIFEST", "Manifest", "Tables", "TablesError", "Version"]

FORMAT_NAME = "secmeta-tables"
FORMAT_VERSION = 1
MANIFEST = "_secmeta_tables.json"
HISTORY = "history"
SNAPSHOTS = "snapshots"
STAGING = "_staging"


class TablesError(SecmetaError, ValueError):
    """A tables directory that cannot be used (not one, newer format, another store's, no version)."""


@dataclass(frozen=True)
class Version:
    """One published state: events [0, offset) compacted, by commit ``commit``."""

    offset: int
    commit: int
    timestamp_ms: int | None
    events: int

    def to_dict(self) -> dict[str, Any]:
        return {"offset": self.offset, "commit": self.commit, "timestamp_ms": self.timestamp_ms,
                "events": self.events}


@dataclass
class Manifest:
    """What a tables directory holds; ``versions`` oldest first, the last one current."""

    store_id: str
    store_path: str
    commits: int = 0
    versions: list[Version] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # super users, allow-if-no-ACL: for who_could
    last_batch: dict[str, Any] = field(default_factory=dict)  # {"checkpoint": path, "batch_id": n}

    @property
    def offset(self) -> int:
        """The log offset the current version reflects (0 before any event)."""
        return self.versions[-1].offset if self.versions else 0

    @property
    def current(self) -> Version | None:
        return self.versions[-1] if self.versions else None

    def to_json(self) -> bytes:
        return (json.dumps({
            "format": FORMAT_NAME, "version": FORMAT_VERSION, "store_id": self.store_id,
            "store_path": self.store_path, "commits": self.commits,
            "versions": [v.to_dict() for v in self.versions], "config": self.config,
            "last_batch": self.last_batch,
        }, indent=2) + "\n").encode()

    @classmethod
    def from_json(cls, path: Path) -> Manifest:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise TablesError(f"{path} is not a readable tables manifest: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            raise TablesError(f"{path} is not a secmeta tables manifest")
        version = data.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise TablesError(
                f"{path.parent} was written by a newer secmeta (tables format {version}; this one reads "
                f"up to {FORMAT_VERSION}); upgrade secmeta to read it")
        try:
            return cls(data["store_id"], data["store_path"], int(data["commits"]),
                       [Version(**v) for v in data["versions"]], dict(data.get("config", {})),
                       dict(data.get("last_batch", {})))
        except (KeyError, TypeError, ValueError) as exc:
            raise TablesError(f"{path} is damaged: {exc!r}") from None


class Tables:
    """A tables directory: its manifest and DataFrames of one consistent version."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Tables({str(self.path)!r})"

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def manifest(self) -> Manifest:
        """The manifest; TablesError naming the directory if it is not a tables directory."""
        if not self.manifest_path.exists():
            what = "does not exist" if not self.path.exists() else f"has no {MANIFEST}"
            raise TablesError(f"{self.path} is not a secmeta tables directory (it {what}); "
                              "run `secmeta spark compact` first")
        return Manifest.from_json(self.manifest_path)

    def write_manifest(self, manifest: Manifest) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomically(self.manifest_path, manifest.to_json())

    # -- paths ----------------------------------------------------------------------

    def table_dir(self, name: str) -> Path:
        return self.path / name

    def snapshot_dir(self, kind: str, offset: int) -> Path:
        return self.path / SNAPSHOTS / kind / f"v={offset}"

    def staging_dir(self, commit: int) -> Path:
        return self.path / STAGING / f"c{commit}"

    # -- commit protocol (the compaction job) ----------------------------------------

    def discard_uncommitted(self, manifest: Manifest, names: list[str]) -> None:
        """Remove files and snapshot versions left by commits after ``manifest.commits`` (failed attempts)."""
        shutil.rmtree(self.path / STAGING, ignore_errors=True)
        kept = {v.offset for v in manifest.versions}
        for name in names:
            for file in _files(self.table_dir(name)):
                if _commit_of(file.name) > manifest.commits:
                    file.unlink()
        for kind_dir in (self.path / SNAPSHOTS).glob("*"):
            for version_dir in kind_dir.glob("v=*"):
                if int(version_dir.name[2:]) not in kept:
                    shutil.rmtree(version_dir, ignore_errors=True)

    def publish_files(self, staged: Path, target: Path, commit: int, make: bool = False) -> int:
        """Move the Parquet files Spark wrote under ``staged`` into ``target`` (keeping partition dirs).

        ``make``: create ``target`` even if nothing was staged (an empty snapshot version).
        """
        moved = 0
        if make:
            target.mkdir(parents=True, exist_ok=True)
        if not staged.exists():
            return 0
        for file in staged.rglob("*.parquet"):
            relative = file.parent.relative_to(staged)
            target_dir = target / relative
            target_dir.mkdir(parents=True, exist_ok=True)
            os.replace(file, target_dir / f"c{commit}-{file.name}")
            moved += 1
        return moved

    def drop_versions(self, manifest: Manifest, kinds: list[str], keep: int) -> Manifest:
        """Keep the newest ``keep`` versions in the manifest; delete older snapshot directories after."""
        if len(manifest.versions) <= keep:
            return manifest
        dropped, manifest.versions = manifest.versions[:-keep], manifest.versions[-keep:]
        self.write_manifest(manifest)
        for version in dropped:
            for kind in kinds:
                shutil.rmtree(self.snapshot_dir(kind, version.offset), ignore_errors=True)
        return manifest


def _files(directory: Path):
    return (f for f in directory.rglob("c*-*.parquet")) if directory.exists() else iter(())


def _commit_of(name: str) -> int:
    try:
        return int(name[1:name.index("-")])
    except ValueError:
        return 0
