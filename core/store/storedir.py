"""The on-disk layout of a store directory, its format version and its writer lock.

    DIR/secmeta.json     format marker: format version, store id, key checks
    DIR/                 the directory itself is flock'd by the one writer process
                         (a lock on a file could be bypassed by deleting the file)
    DIR/log/             segments (secmeta.core.log)
    DIR/schemas/         every writer schema the log was written with, by fingerprint
    DIR/snapshots/       snapshots (secmeta.projections.snapshot)
    DIR/checkpoints/     time-travel checkpoints (secmeta.core.forensics.checkpoints)

A directory that is not a store may hold one a program keeps for readers (a follower's directory,
``secmeta kafka follow``, keeps a local log of the store it follows): its ``secmeta-local-store`` file
names that subdirectory. A read-only open of the directory opens the store in it; a writer is refused,
since only that program writes it.
"""

from __future__ import annotations

import fcntl
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from secmeta.core.errors import NewerFormatError, NotAStoreError, StoreLockedError
from secmeta.core.times import Clock, now_ms, wall_clock
from secmeta.events.durable import write_atomically
from secmeta.events.errors import KeyringError
from secmeta.events.keyring import Keyring

FORMAT_NAME = "secmeta-store"
FORMAT_VERSION = 1
META_FILE = "secmeta.json"
LOCAL_STORE_FILE = "secmeta-local-store"  # in a directory that is not a store: the subdirectory holding one
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_DELTA_PREFIX = "deltas-"  # DIR/checkpoints/deltas-<base>/: the delta checkpoints of the full one at base


@dataclass
class StoreDirectory:
    """An opened store directory: paths, metadata and (for writers) the lock."""

    path: Path
    store_id: str
    created_ms: int
    key_checks: dict[str, str] = field(default_factory=dict)
    _lock_fd: int | None = field(default=None, repr=False)

    @property
    def log_dir(self) -> Path:
        return self.path / "log"

    @property
    def schema_dir(self) -> Path:
        return self.path / "schemas"

    @property
    def snapshot_dir(self) -> Path:
        return self.path / "snapshots"

    @property
    def checkpoint_dir(self) -> Path:
        return self.path / CHECKPOINT_DIR

    def checkpoint_delta_dirs(self) -> list[Path]:
        """The directories of delta checkpoint files (one per full checkpoint they are against), by base."""
        return checkpoint_delta_dirs(self.checkpoint_dir)

    @classmethod
    def open(cls, path: str | os.PathLike, *, create: bool = True, writer: bool = True,
             initialise: Callable[[StoreDirectory], None] | None = None, clock: Clock = wall_clock,
             identity: tuple[str, int] | None = None) -> StoreDirectory:
        """Open (or with ``create`` initialise) a store directory; a writer takes the lock.

        A new store records its creation time from ``clock`` and gets a new id, or with ``identity``
        (store id, creation time) those of the store it is to be a replica of (secmeta.core.store.replica).
        ``initialise`` writes a new store's first files (the log's high-water mark) before
        the store's marker is published, so a store never exists without them.
        """
        root = local_store(Path(path), writer=writer)
        meta_path = root / META_FILE
        if not meta_path.exists():
            if root.exists() and not root.is_dir():
                raise NotAStoreError(f"{root} is not a directory, so it cannot be a secmeta store")
            if root.exists() and any(root.iterdir()):
                raise NotAStoreError(
                    f"{root} is not a secmeta store (it has no {META_FILE}) and is not empty; "
                    "refusing to write into it"
                )
            if not create:
                raise NotAStoreError(f"{root} is not a secmeta store (no {META_FILE} there)")
            store_id, created = identity or (str(uuid.uuid4()), now_ms(clock))
            return cls._create(root, initialise, store_id, created)
        if identity is not None:
            raise NotAStoreError(f"{root} is already a secmeta store; a replica is made in a new directory")
        store = cls._read(meta_path)
        if writer:
            store._lock()
        return store

    @classmethod
    def _create(cls, root: Path, initialise: Callable[[StoreDirectory], None] | None, store_id: str,
                created_ms: int) -> StoreDirectory:
        root.mkdir(parents=True, exist_ok=True)
        store = cls(root, store_id=store_id, created_ms=created_ms)
        store._lock()
        for sub in (store.log_dir, store.schema_dir, store.snapshot_dir):
            sub.mkdir(exist_ok=True)
        if initialise is not None:
            initialise(store)
        store.save_meta()
        return store

    @classmethod
    def _read(cls, meta_path: Path) -> StoreDirectory:
        try:
            meta = json.loads(meta_path.read_text())
            name, version = meta["format"], int(meta["format_version"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise NotAStoreError(f"{meta_path} is not a readable secmeta store marker: {exc}") from None
        if name != FORMAT_NAME:
            raise NotAStoreError(f"{meta_path} names format {name!r}, not {FORMAT_NAME!r}")
        if version > FORMAT_VERSION:
            raise NewerFormatError(
                f"store {meta_path.parent} has format version {version}; this secmeta reads "
                f"versions up to {FORMAT_VERSION}: upgrade secmeta to open it"
            )
        return cls(
            meta_path.parent,
            store_id=meta["store_id"],
            created_ms=int(meta["created_ms"]),
            key_checks=dict(meta.get("key_checks", {})),
        )

    def save_meta(self) -> None:
        meta = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "store_id": self.store_id,
            "created_ms": self.created_ms,
            "key_checks": self.key_checks,
        }
        write_atomically(self.path / META_FILE, json.dumps(meta, indent=2).encode())

    def _lock(self) -> None:
        """flock the store directory itself, then check the path still names the directory locked."""
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLockedError(
                f"store {self.path} is already open for writing by another process; one writer per store directory"
            ) from None
        if not _names(self.path, fd):
            os.close(fd)
            raise StoreLockedError(f"store {self.path} was replaced while it was being locked; open it again")
        self._lock_fd = fd

    def check_locked(self) -> None:
        """Before the writer creates files by path: the path must still name the directory it locked.

        A writer keeps appending through open handles, so a store moved away and copied back
        under its name would otherwise get segments and snapshots from two writers."""
        if self._lock_fd is None:
            raise StoreLockedError(f"store {self.path} was opened read-only: it holds no writer lock and writes nothing")
        if not _names(self.path, self._lock_fd):
            raise StoreLockedError(
                f"store directory {self.path} is no longer the directory this writer locked (it was moved or "
                "replaced); this writer stops writing: reopen the store"
            )

    def remove_crash_leftovers(self) -> list[Path]:
        """Delete temporary files a crashed writer left (only the lock holder writes them), and the partial
        checkpoint files of its time-travel fill (a forked child, killed with it), by their names alone."""
        from secmeta.projections.snapshot import list_partial_snapshots

        if self._lock_fd is None:
            raise StoreLockedError(f"store {self.path} is not locked by this process: it must not clean it")
        removed = []
        for directory in (self.path, self.log_dir, self.schema_dir, self.snapshot_dir):
            for tmp in directory.glob(".*.tmp"):
                tmp.unlink(missing_ok=True)
                removed.append(tmp)
        for directory in (self.checkpoint_dir, *self.checkpoint_delta_dirs()):
            for tmp in list_partial_snapshots(directory):
                tmp.unlink(missing_ok=True)
                removed.append(tmp)
        return removed

    def check_keyring(self, keyring: Keyring, *, writer: bool) -> None:
        """Fail clearly when the keyring's keys are not the ones this store was written with."""
        for key_id, check in self.key_checks.items():
            if key_id in keyring.ids and keyring.key_check(key_id) != check:
                raise KeyringError(
                    f"key {key_id!r} in the keyring does not match the key store {self.path} "
                    "was written with (same id, different material)"
                )
        if self.key_checks and not set(self.key_checks) & set(keyring.ids):
            raise KeyringError(
                f"the keyring has none of the keys store {self.path} was written with "
                f"(store uses: {', '.join(sorted(self.key_checks))}; keyring has: {', '.join(keyring.ids)})"
            )
        if writer and keyring.newest_id not in self.key_checks:
            self.key_checks[keyring.newest_id] = keyring.key_check(keyring.newest_id)
            self.save_meta()

    def close(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None


def local_store(root: Path, *, writer: bool) -> Path:
    """``root``, or the store a program keeps in it for readers (named by its LOCAL_STORE_FILE)."""
    pointer = root / LOCAL_STORE_FILE
    if (root / META_FILE).exists() or not pointer.is_file():
        return root
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise NotAStoreError(f"{pointer} cannot be read: {exc}") from None
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise NotAStoreError(f"{pointer} must name a subdirectory of {root}, not {name!r}")
    if writer:
        raise NotAStoreError(f"{root} is a follower's directory: the store in it ({root / name}) is a copy that "
                             "only `secmeta kafka follow` writes; read it (acls --list, history, --as-of, ...) "
                             "or write to the store it follows")
    return root / name


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` names the directory open as ``fd``."""
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    locked = os.fstat(fd)
    return (locked.st_dev, locked.st_ino) == (here.st_dev, here.st_ino)


def checkpoint_delta_dirs(checkpoint_dir: Path) -> list[Path]:
    """The directories of delta checkpoint files under ``checkpoint_dir``, by base."""
    return sorted(checkpoint_dir.glob(f"{CHECKPOINT_DELTA_PREFIX}*"))
