"""Generated benchmark logs, cached on disk by their parameters, copied fresh for each run.

    bench-cache/<name>-<digest>/store/      the store directory as the generator left it (log, schemas)
    bench-cache/<name>-<digest>/keys.json   its keyring
    bench-cache/<name>-<digest>/meta.json   the parameters and what the generator returned

A 10M-event log takes minutes to write; a benchmark asks ``cached(name, params, build)`` and gets
it written once (into a temporary directory renamed into place, so an interrupted build leaves
nothing half-made), then ``fresh_copy`` copies its log into a directory of the run's own, without
any derived file, so each run builds its own history index and checkpoints from the same events.
``params`` must name everything the log depends on, including the generator's version.
``$SECMETA_BENCH_CACHE`` moves the cache (default: ``bench-cache/`` at the repository's root).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scripts.bench.report import REPO_ROOT
from secmeta.events.keyring import Keyring

__all__ = ["CachedLog", "cache_dir", "cached", "fresh_copy"]

_LOG_PARTS = ("log", "schemas", "secmeta.json")  # what a copy takes: the log, never derived files


def cache_dir() -> Path:
    return Path(os.environ.get("SECMETA_BENCH_CACHE", REPO_ROOT / "bench-cache"))


@dataclass(frozen=True)
class CachedLog:
    """A generated store directory in the cache, its key file and what its generator returned."""

    store: Path
    key_file: Path
    meta: dict


def cached(name: str, params: dict, build: Callable[[Path, Keyring], dict]) -> CachedLog:
    """The cached log of ``name`` with ``params``, written by ``build(store_dir, keyring) -> meta`` if absent."""
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    home = cache_dir() / f"{name}-{digest}"
    if not (home / "meta.json").exists():
        print(f"generating {name} {params} into {home} (cached for later runs) ...", flush=True)
        partial = home.with_name(home.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        Keyring.generate_file(partial / "keys.json")
        meta = build(partial / "store", Keyring.from_file(partial / "keys.json"))
        (partial / "meta.json").write_text(json.dumps({"params": params, **meta}))
        shutil.rmtree(home, ignore_errors=True)
        partial.rename(home)
    return CachedLog(home / "store", home / "keys.json", json.loads((home / "meta.json").read_text()))


def fresh_copy(log: CachedLog, destination: Path) -> Path:
    """A copy of the cached log at ``destination`` (replaced if present), without derived files."""
    shutil.rmtree(destination, ignore_errors=True)
    destination.mkdir(parents=True)
    for part in _LOG_PARTS:
        source = log.store / part
        if source.is_dir():
            shutil.copytree(source, destination / part)
        elif source.exists():
            shutil.copy2(source, destination / part)
    return destination
