"""Benchmark of time travel and forensics: as_of, history, diff, who_could, access_timeline.

    python -m scripts.bench.history [--sizes 100000 1000000] [--points 40] [--dir /tmp]

Per log size (mixed events in batches of 100-1000 with increasing times, written
with the Log API; 1M and 10M for issue 15): a first process opens the store and
builds the derived files (history index, checkpoint files; time and size on disk);
then a fresh process (scripts.bench.as_of) opens it and answers its first as_of at a
random point (time and RSS growth), waits for the background fill of checkpoints
(time, memory), then as_of at random offsets and times (p50 / p99 / max); history
over a narrow window and by principal over the whole log, diff over 1k / 10k / 100k
events and access_timeline over the whole log.  Each target of issue 15 is printed
beside its figure, but as_of's p99 at 10M events, whose target is issue 24's (``as_of.as_of_target``).  who_could is measured over an image of 100k ACLs in the
shape of Kafka's AuthorizerBenchmark.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts.bench import as_of, authz_core, logcache
from scripts.bench.report import percentiles, print_table, write_json
from secmeta.core import AclOperation, ResourceType, StoreConfig
from secmeta.core.forensics.timetravel import DEFAULT_INTERVAL
from secmeta.core.log import Log, LogConfig
from secmeta.core.store.facade import SecurityStore
from secmeta.events.keyring import Keyring, SealedSecret
from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    DelegationTokenRenewed,
    Envelope,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
    TokenRemovalReason,
)
from secmeta.events.types import AclBinding, AclPermissionType, PatternType, ScramMechanism
from secmeta.projections.image import SecurityImage

WINDOW_MS = 5_000  # a history window: 5 batches, about 2,750 events
T0 = 1_700_000_000_000
OPS = (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALL)


def _uuid4(rng: random.Random) -> str:
    """A random version-4 UUID string from ``rng`` (uuid.UUID's own checks cost more than the rest of an event)."""
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


class _Generator:
    """Mixed events: 60% ACL created, 20% ACL deleted, 10% SCRAM, 10% tokens."""

    def __init__(self, seed: int = 0, key_id: str = "k-bench"):
        self.rng = random.Random(seed)
        self.key_id = key_id
        self.acls: list[tuple[str, AclBinding]] = []
        self.tokens: list[str] = []
        self.credentials: set[tuple[str, ScramMechanism]] = set()
        self.n = 0

    def below(self, n: int) -> int:
        """A random int in [0, n) (random.randrange costs more than the rest of an event)."""
        return int(self.rng.random() * n)

    def binding(self) -> AclBinding:
        rng, below = self.rng, self.below
        prefixed = rng.random() < 0.2
        name = f"topic-{below(20_000)}" if not prefixed else f"topic-{below(200)}"
        return AclBinding.of(
            ResourceType.TOPIC if rng.random() < 0.9 else ResourceType.GROUP, name,
            PatternType.PREFIXED if prefixed else PatternType.LITERAL, f"User:svc-{below(500)}", "*",
            OPS[below(len(OPS))], AclPermissionType.DENY if rng.random() < 0.1 else AclPermissionType.ALLOW,
        )

    def event(self, ts: int):
        rng = self.rng
        self.n += 1
        roll = rng.random()
        if roll < 0.6 or (roll < 0.8 and not self.acls):
            pair = (_uuid4(rng), self.binding())
            self.acls.append(pair)
            return AclCreated(*pair)
        if roll < 0.8:
            i = self.below(len(self.acls))
            self.acls[i], self.acls[-1] = self.acls[-1], self.acls[i]
            return AclDeleted(*self.acls.pop())
        user = f"user-{self.below(5000)}"
        mechanism = ScramMechanism.SCRAM_SHA_256 if rng.random() < 0.5 else ScramMechanism.SCRAM_SHA_512
        if roll < 0.88 or (roll < 0.9 and (user, mechanism) not in self.credentials):
            secret = SealedSecret(self.key_id, rng.randbytes(12), rng.randbytes(80))
            self.credentials.add((user, mechanism))
            return ScramCredentialUpserted(user, mechanism, 4096, secret)
        if roll < 0.9:
            self.credentials.discard((user, mechanism))
            return ScramCredentialDeleted(user, mechanism)
        if roll < 0.95 or not self.tokens:
            token_id = f"{rng.getrandbits(88):022x}"
            self.tokens.append(token_id)
            owner = f"User:svc-{self.below(500)}"
            return DelegationTokenIssued(token_id, owner, owner, (), ts, ts + 86_400_000, ts + 7 * 86_400_000)
        if roll < 0.98:
            return DelegationTokenRenewed(self.tokens[self.below(len(self.tokens))], -1, ts + 86_400_000)
        i = self.below(len(self.tokens))
        self.tokens[i], self.tokens[-1] = self.tokens[-1], self.tokens[i]
        return DelegationTokenRemoved(self.tokens.pop(), TokenRemovalReason.EXPIRED_BY_REQUEST)


def build_log(directory: Path, keyring: Keyring, events: int, seed: int = 0) -> int:
    """Write ``events`` mixed events in batches of 100-1000, one second apart; returns the last time."""
    gen, rng = _Generator(seed, keyring.newest_id), random.Random(seed + 1)
    ts = T0
    with Log.open(directory, keyring=keyring, config=LogConfig(fsync="never")) as log:
        written = 0
        while written < events:
            size = min(rng.randint(100, 1000), events - written)
            log.append([Envelope(-1, ts, "User:admin", "10.0.0.1", f"req-{written}", gen.event(ts))
                        for _ in range(size)])
            written += size
            ts += 1000
        log.flush()
    return ts - 1000


GENERATOR_VERSION = 2  # bump when build_log writes other events for the same parameters (the cache key)


def mixed_log(events: int, seed: int = 0) -> logcache.CachedLog:
    """The cached log of ``events`` mixed events (written once by ``build_log``; meta: its last batch's time)."""
    def build(store: Path, keyring: Keyring) -> dict:
        return {"first_ts": T0, "last_ts": build_log(store, keyring, events, seed)}

    return logcache.cached("mixed", {"events": events, "seed": seed, "generator": GENERATOR_VERSION}, build)


def _timed(fn, *args, **kwargs) -> float:
    start = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - start


def _stats(samples: list[float]) -> dict:
    pct = percentiles(samples, (50, 99))
    return {"p50_s": pct["p50"], "p99_s": pct["p99"], "max_s": max(samples), "n": len(samples)}


def log_rows(events: int, points: int, directory: Path, memory_mb: int) -> dict:
    """Every measure that needs a log of ``events`` events (a fresh copy of the cached one in ``directory``)."""
    generated = mixed_log(events)
    path = logcache.fresh_copy(generated, directory / f"log-{events}")
    keyring, last_ts = Keyring.from_file(generated.key_file), generated.meta["last_ts"]
    clock_s = (last_ts + 60_000) / 1000
    config = StoreConfig(clock=lambda: clock_s, snapshot_policy=_no_snapshots())
    rng = random.Random(7)
    out: dict = {"events": events}
    start = time.perf_counter()
    with SecurityStore.open(path, config, keyring=keyring) as first:  # a first process builds the derived files
        first.timetravel.index.wait()
        out["index_build_s"] = time.perf_counter() - start
        first.timetravel.files.wait()
        out["derived_files_s"] = time.perf_counter() - start
    out["index_mb"] = sum(f.stat().st_size for f in (path / "history").glob("*")) / 2**20
    out["checkpoint_files_mb"] = sum(f.stat().st_size for f in (path / "checkpoints").glob("*")) / 2**20
    out |= _cold_as_of(path, generated.key_file, last_ts, points, memory_mb)
    store = SecurityStore.open(path, config, keyring=keyring)  # forensic queries
    try:
        store.timetravel.index.wait()
        windows = [rng.randrange(T0, last_ts - WINDOW_MS) for _ in range(10)]
        out["history_window"] = _stats([_timed(lambda t=t: list(store.history(start_ms=t, end_ms=t + WINDOW_MS)))
                                        for t in windows])
        out["history_window_entries"] = len(list(store.history(start_ms=windows[0], end_ms=windows[0] + WINDOW_MS)))
        out["history_principal_window"] = _stats(
            [_timed(lambda t=t: list(store.history(principal="User:svc-7", start_ms=t, end_ms=t + 60_000)))
             for t in windows])
        out["history_principal_full_scan"] = _stats(
            [_timed(lambda p=p: list(store.history(principal=p))) for p in ("User:svc-7", "User:svc-8", "User:svc-9")])
        diffs = {}
        for span in (1_000, 10_000, 100_000):
            if span < events:
                starts = [rng.randrange(events - span) for _ in range(5)]
                diffs[span] = _stats([_timed(store.diff, a, a + span) for a in starts])
        out["diff"] = diffs
        out["access_timeline"] = _stats([_timed(store.access_timeline, "User:svc-7", AclOperation.READ,
                                                ResourceType.TOPIC, f"topic-{n}") for n in (42, 43, 44)])
        out["who_could_at"] = _stats([_timed(store.who_could, AclOperation.READ, ResourceType.TOPIC, f"topic-{n}",
                                             at=rng.randrange(events)) for n in range(10)])
    finally:
        store.close()
    out["index_alone"] = _index_alone(path, keyring)
    return out


def _index_alone(path: Path, keyring: Keyring) -> dict:
    """The history index rebuilt from the log with nothing else running, then opened twice as a store opens it:
    after a clean close (its MAC matches: the meta row is checked) and after a crash (no MAC: every row, the
    schema and SQLite's integrity check)."""
    from secmeta.core.forensics.history_index import HistoryIndex

    shutil.rmtree(path / "history")
    with Log.open(path, keyring=keyring, config=LogConfig(fsync="never")) as log:
        index = HistoryIndex(log)
        wall, cpu = time.perf_counter(), time.process_time()
        index.start(background=False)
        out = {"build_s": time.perf_counter() - wall, "build_cpu_s": time.process_time() - cpu}
        index.close()  # leaves the file's MAC beside it
        for label, crashed in (("sealed", False), ("check", True)):
            if crashed:
                Path(f"{index.path}.mac").unlink()
            index = HistoryIndex(log)
            wall, cpu = time.perf_counter(), time.process_time()
            index.start(background=False)
            out |= {f"{label}_s": time.perf_counter() - wall, f"{label}_cpu_s": time.process_time() - cpu}
            index.close()
            if index.problem is not None or index.rows_checked != crashed:
                raise RuntimeError(f"the rebuilt history index was not opened as expected ({label}): "
                                   f"rows checked {index.rows_checked}, problem {index.problem}")
    return out


def _cold_as_of(path: Path, key_file: Path, last_ts: int, points: int, memory_mb: int) -> dict:
    """as_of measured in a fresh interpreter (scripts.bench.as_of): nothing of this process is resident there."""
    done = subprocess.run(
        [sys.executable, "-m", "scripts.bench.as_of", str(path), str(key_file), "--first-ts", str(T0),
         "--last-ts", str(last_ts), "--points", str(points), "--memory-mb", str(memory_mb)],
        check=True, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    return json.loads(done.stdout.splitlines()[-1])


def _as_of_rows(n: str, r: dict) -> list[list]:
    """The table rows of scripts.bench.as_of's figures, each target beside its figure."""
    target, issue = as_of.as_of_target(r["events"])

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "MISS"

    def random_row(label: str, s: dict) -> list:
        return [n, f"{label} (p99 target <= {target:g} s, {issue})", s["p50_s"], s["p99_s"], s["max_s"],
                f"{verdict(s['p99_s'] <= target)}; CPU p50 {s['p50_cpu_s']:.3f} p99 {s['p99_cpu_s']:.3f} s"]

    first_ok = r["first_as_of_s"] <= as_of.FIRST_AS_OF_S and r["first_as_of_rss_mb"] <= as_of.FIRST_AS_OF_MB
    return [
        [n, "open store (cold process)", r["open_s"], "", "",
         f"{r['open_cpu_s']:.1f} s CPU; RSS {r['rss_open_mb']:.0f} MB ({r['rss_before_open_mb']:.0f} before)"],
        [n, f"first as_of, cold process (target <= {as_of.FIRST_AS_OF_S} s, <= +{as_of.FIRST_AS_OF_MB} MB)",
         r["first_as_of_s"], "", "", f"{verdict(first_ok)}; {r['first_as_of_cpu_s']:.2f} s CPU; "
         f"+{r['first_as_of_rss_mb']:.0f} MB RSS, {r['first_as_of_held_mb']:.0f} MB held (estimate)"],
        [n, f"background fill: checkpoint every {DEFAULT_INTERVAL:,} events, budget {r['memory_budget_mb']} MB",
         r["fill_s"], "", "", f"{r['fill_cpu_s']:.1f} s CPU; {r['checkpoints']} images held; "
         f"+{r['fill_rss_mb']:.0f} MB RSS, {r['fill_held_mb']:.0f} MB held"],
        random_row("as_of(offset=random)", r["as_of_offset"]),
        random_row("as_of(timestamp_ms=random)", r["as_of_time"]),
        [n, "as_of, recently asked point", r["as_of_cached"]["p50_s"], r["as_of_cached"]["p99_s"],
         r["as_of_cached"]["max_s"], f"after all: +{r['end_rss_mb']:.0f} MB RSS, {r['end_held_mb']:.0f} MB held, "
         f"peak RSS {r['peak_rss_mb']:.0f} MB"],
    ]


def _no_snapshots():
    from secmeta.projections.snapshot import SnapshotPolicy

    return SnapshotPolicy(every_events=None, every_bytes=None)


def who_could_row(acls: int, queries: int) -> dict:
    """who_could over an image of ``acls`` ACLs (AuthorizerBenchmark shape), random resources."""
    from secmeta.core.forensics.queries import who_could

    image = SecurityImage(acls=authz_core.build_image(acls))
    config = StoreConfig()
    requests = authz_core.random_requests(acls, queries)
    samples = [_timed(who_could, image, config, op, rtype, name) for _, _, op, rtype, name in requests]
    grants = [len(who_could(image, config, op, rtype, name)) for _, _, op, rtype, name in requests[:50]]
    return {"acls": acls, **_stats(samples), "mean_grants": sum(grants) / len(grants)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="log sizes in events")
    parser.add_argument("--points", type=int, default=40, help="random points per as_of measure")
    parser.add_argument("--who-could-acls", type=int, default=100_000)
    parser.add_argument("--dir", default=None, help="where to put the logs (default: a temp dir)")
    parser.add_argument("--memory-mb", type=int, default=StoreConfig.time_travel_memory_bytes // 2**20,
                        help="time travel's memory budget in the cold process (StoreConfig.time_travel_memory_bytes)")
    args = parser.parse_args(argv)

    results: dict = {"checkpoint_interval": DEFAULT_INTERVAL, "logs": [], "who_could": None}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for size in args.sizes:
            results["logs"].append(log_rows(size, args.points, Path(tmp), args.memory_mb))
            gc.collect()
    print(f"who_could over {args.who_could_acls:,} ACLs ...", flush=True)
    results["who_could"] = who_could_row(args.who_could_acls, 2000)

    def verdict(seconds: float, target: float) -> str:
        return "PASS" if seconds <= target else "MISS"

    rows = []
    for r in results["logs"]:
        n = f"{r['events']:,}"
        rows += [
            [n, "first open: history index ready", r["index_build_s"], "", "", f"{r['index_mb']:.0f} MB on disk"],
            [n, "first open: checkpoint files written", r["derived_files_s"], "", "",
             f"{r['checkpoint_files_mb']:.0f} MB on disk"],
            *_as_of_rows(n, r),
            [n, f"history, 5 s window ({r['history_window_entries']:,} entries)", r["history_window"]["p50_s"],
             r["history_window"]["p99_s"], r["history_window"]["max_s"], ""],
            [n, "history(principal=...), 60 s window", r["history_principal_window"]["p50_s"],
             r["history_principal_window"]["p99_s"], r["history_principal_window"]["max_s"], ""],
            [n, "history(principal=...), whole log (target <= 0.3 s)", r["history_principal_full_scan"]["p50_s"],
             "", r["history_principal_full_scan"]["max_s"], verdict(r["history_principal_full_scan"]["max_s"], 0.3)],
        ]
        for span, s in r["diff"].items():
            note = verdict(s["p99_s"], 0.3) if span == 100_000 else ""
            rows.append([n, f"diff over {span:,} events" + (" (target <= 0.3 s)" if note else ""), s["p50_s"],
                         s["p99_s"], s["max_s"], note])
        rows.append([n, "access_timeline, whole log (target <= 0.3 s)", r["access_timeline"]["p50_s"], "",
                     r["access_timeline"]["max_s"], verdict(r["access_timeline"]["max_s"], 0.3)])
        w = r["who_could_at"]
        rows.append([n, "who_could at a random point (target: reads only the resource's ACL rows)", w["p50_s"],
                     w["p99_s"], w["max_s"], f"as_of p50 {r['as_of_offset']['p50_s']:.3f} s"])
        i = r["index_alone"]
        rows += [
            [n, "history index built alone (1M was 17 s alone, 121 s in a first open)", i["build_s"], "", "",
             f"{i['build_cpu_s']:.1f} s CPU"],
            [n, "history index opened after a clean close (its MAC matches)", i["sealed_s"], "", "",
             f"{i['sealed_cpu_s']:.1f} s CPU"],
            [n, "history index opened after a crash: every row, schema, integrity check (1M was 3.5 s)",
             i["check_s"], "", "", f"{i['check_cpu_s']:.1f} s CPU"],
        ]
    w = results["who_could"]
    rows.append([f"{w['acls']:,} ACLs", f"who_could (~{w['mean_grants']:.1f} grants)", w["p50_s"], w["p99_s"],
                 w["max_s"], ""])
    print_table("time travel and forensics (wall seconds; as_of in a fresh process per log)",
                ["log", "measure", "p50 s", "p99 s", "max s", "note"], rows)
    path = write_json("history", results)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
