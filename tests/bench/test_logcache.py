"""The benchmarks' log cache: a log is generated once per parameters, and each run copies the log alone."""

from __future__ import annotations

from scripts.bench import logcache
from scripts.bench.history import build_log
from secmeta.core.log import Log
from secmeta.events.keyring import Keyring


def test_a_log_is_generated_once_per_parameters_and_copied_without_derived_files(tmp_path, monkeypatch):
    """A second ask with the same parameters reuses the cached log; other parameters make another; a copy
    holds the log's events and none of the derived files a run left in the cache."""
    monkeypatch.setenv("SECMETA_BENCH_CACHE", str(tmp_path / "cache"))
    built = []

    def build(store, keyring):
        built.append(store)
        return {"last_ts": build_log(store, keyring, 50)}

    first = logcache.cached("mixed", {"events": 50}, build)
    again = logcache.cached("mixed", {"events": 50}, build)
    other = logcache.cached("mixed", {"events": 50, "seed": 1}, build)
    assert len(built) == 2 and again == first and other.store != first.store
    assert first.meta["params"] == {"events": 50} and first.meta["last_ts"] > 0
    (first.store / "history").mkdir()  # as if a run had opened the cached store itself
    (first.store / "checkpoints").mkdir()
    copy = logcache.fresh_copy(first, tmp_path / "run")
    assert not (copy / "history").exists() and not (copy / "checkpoints").exists()
    with Log.open(copy, keyring=Keyring.from_file(first.key_file)) as log:
        assert log.end_offset == 50
    assert not list(tmp_path.joinpath("cache").glob("*.partial"))
