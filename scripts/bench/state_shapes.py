"""Open by replay, open from a snapshot and authorize, on every workload shape (issue 24, item 1).

    python -m scripts.bench.state_shapes [--sizes 200000 1000000] [--shapes current kafka diverse]
                                         [--repeat 3] [--peer /work/main/.venv/bin/python]

Per shape and size, on a copy of the shape's cached store (``scripts.bench.shapes``): a fresh
interpreter opens it by replaying the whole log; one takes a snapshot at the end; fresh
interpreters then open it from that snapshot and time ``authorize`` on the loaded image
(``authz_shapes.time_passes``: single calls over the shape's request mix, the strings copied as off the
wire, a first pass over the freshly loaded image, then the same calls again; each call's thread CPU,
p50/p99, and the wall p99).  Each open is timed as the CPU seconds of the opening thread (the
store's background threads start after the load and are not counted; the machine is shared,
so CPU is what the code costs) beside wall seconds; each figure is the median of ``--repeat``
runs, with the spread (max - min) beside it.  ``--peer PYTHON`` runs the same steps with
another interpreter (e.g. main's virtualenv: the code before a change) and prints its figures
beside, each snapshot written by the code that reads it.  Targets (issue 24) print beside each
figure: open from the snapshot <= 0.3 s CPU per 200k ACLs and >= 5x faster than replay; replay
>= 300k events/s; authorize p99 <= 20 us at 1M ACLs, the first pass's p99 within 1.5x the warm one's.  The
first pass's first call on each resource type (where the lazily opened image builds that type's lookup) prints
as its own row with no target, beside the p99 target (``authz_shapes.first_call_figures``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts.bench import authz_shapes, shapes
from scripts.bench.report import (
    REPO_ROOT,
    format_table,
    print_table,
    write_json,
)

SNAPSHOT_S_PER_ACL = 0.3 / 200_000
SNAPSHOT_VS_REPLAY = 5.0
REPLAY_TARGET = 300_000  # events/s
AUTHORIZE_CALLS = 20_000
HEADERS = ["shape", "ACLs", "measure", "after", "before", "target", "result", "detail"]


def _config():
    from secmeta.core.config import StoreConfig
    from secmeta.projections.snapshot import SnapshotPolicy

    return StoreConfig(snapshot_policy=SnapshotPolicy(every_events=None, every_bytes=None))


def child(step: str, store: Path, key_file: Path, shape: str, n: int) -> dict:
    """One step in this interpreter: ``open`` (timed; authorize too when it loaded a snapshot) or ``snapshot``."""
    from secmeta.core.store.facade import SecurityStore
    from secmeta.events.keyring import Keyring

    keyring = Keyring.from_file(key_file)
    if step == "snapshot":
        with SecurityStore.open(store, _config(), keyring=keyring) as opened:
            opened.snapshot()
            opened.wait_for_snapshots()
        return {}
    wall, cpu = time.perf_counter(), time.thread_time()
    opened = SecurityStore.open(store, _config(), keyring=keyring)
    out = {"wall_s": time.perf_counter() - wall, "cpu_s": time.thread_time() - cpu,
           "from_snapshot": opened.loaded.snapshot is not None, "events": opened.image.next_offset,
           "acls": len(opened.image.acls)}
    if out["from_snapshot"]:  # the first pass makes or reads the nodes it reaches; the second finds them made
        out.update(authz_shapes.time_passes(opened.image.acls, shapes.requests(shape, n, AUTHORIZE_CALLS)))
    return out


def _run(python: str, step: str, store: Path, key_file: Path, shape: str, n: int) -> dict:
    done = subprocess.run([python, "-m", "scripts.bench.state_shapes", "--child", step, str(store), str(key_file),
                           shape, str(n)], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{python} {step} {shape} {n} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _median(runs: list[dict], key: str) -> tuple[float, float]:
    values = [r[key] for r in runs]
    return statistics.median(values), max(values) - min(values)


def measure(python: str, shape: str, n: int, repeat: int, tmp: Path) -> dict:
    """Median (and spread) of replay and snapshot opens and of authorize, by ``python``'s secmeta."""
    runs: dict[str, list[dict]] = {"replay": [], "snapshot": []}
    for r in range(repeat):
        copy = shapes.copy_store(shape, n, tmp / f"{shape}-{n}-{r}")
        runs["replay"].append(_run(python, "open", copy.path, copy.key_file, shape, n))
        if r == 0:
            _run(python, "snapshot", copy.path, copy.key_file, shape, n)
            snapshotted = copy
        runs["snapshot"].append(_run(python, "open", snapshotted.path, snapshotted.key_file, shape, n))
        if r:
            _remove(copy.path)
    _remove(snapshotted.path)
    events = runs["replay"][0]["events"]
    row = {"shape": shape, "acls": n, "events": events}
    for kind in ("replay", "snapshot"):
        assert all(run["from_snapshot"] == (kind == "snapshot") for run in runs[kind]), runs[kind]
        row[f"{kind}_cpu_s"], row[f"{kind}_cpu_spread"] = _median(runs[kind], "cpu_s")
        row[f"{kind}_wall_s"], row[f"{kind}_wall_spread"] = _median(runs[kind], "wall_s")
    row["replay_events_per_s"] = events / row["replay_cpu_s"]
    for key in authz_shapes.timing_keys(runs["snapshot"][0]):
        row[key], row[f"{key}_spread"] = _median(runs["snapshot"], key)
    return row


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def table_rows(rows: list[dict], peers: dict[tuple[str, int], dict]) -> list[list]:
    out = []
    for r in rows:
        peer = peers.get((r["shape"], r["acls"]))
        snap_target = r["acls"] * SNAPSHOT_S_PER_ACL
        ratio = r["replay_cpu_s"] / r["snapshot_cpu_s"]

        def before(key: str, fmt: str = "{:.2f}", peer: dict | None = peer) -> str:
            return "" if peer is None else fmt.format(peer[key])

        out += [
            [r["shape"], r["acls"], "replay ev/s (CPU)", f"{r['replay_events_per_s']:,.0f}",
             before("replay_events_per_s", "{:,.0f}"), f">= {REPLAY_TARGET:,}",
             _verdict(r["replay_events_per_s"] >= REPLAY_TARGET),
             f"CPU {r['replay_cpu_s']:.2f} s +-{r['replay_cpu_spread']:.2f}, wall {r['replay_wall_s']:.2f} s"],
            [r["shape"], r["acls"], "open from snapshot CPU s", f"{r['snapshot_cpu_s']:.3f}", before("snapshot_cpu_s", "{:.3f}"),
             f"<= {snap_target:.2f}", _verdict(r["snapshot_cpu_s"] <= snap_target),
             f"+-{r['snapshot_cpu_spread']:.3f}, wall {r['snapshot_wall_s']:.2f} s"],
            [r["shape"], r["acls"], "replay / snapshot (CPU)", f"x{ratio:.1f}",
             "" if peer is None else f"x{peer['replay_cpu_s'] / peer['snapshot_cpu_s']:.1f}",
             f">= x{SNAPSHOT_VS_REPLAY:g}", _verdict(ratio >= SNAPSHOT_VS_REPLAY), ""],
        ]
        out += [[r["shape"], r["acls"], f"authorize {f['measure']}", f["p99"], f["p99 before"],
                 f["target"], f["result"], f"p50 {f['p50']} us (before {f['p50 before']}), {f['detail']}" if f["p50"]
                 else f["detail"]]
                for f in authz_shapes.pass_figures(r, peer)]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--shapes", nargs="+", choices=shapes.NAMES, default=list(shapes.NAMES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peer", help="another interpreter whose secmeta runs the same steps (e.g. main's .venv)")
    parser.add_argument("--child", nargs=5, metavar=("STEP", "STORE", "KEYS", "SHAPE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        step, store, keys, shape, n = args.child
        print(json.dumps(child(step, Path(store), Path(keys), shape, int(n))), flush=True)
        os._exit(0)  # the store's background work (history index, checkpoints) is not this step's
    rows, peers = [], {}
    with tempfile.TemporaryDirectory(dir=shapes.CACHE_DIR.parent if shapes.CACHE_DIR.parent.exists() else None) as tmp:
        for n in args.sizes:
            for shape in args.shapes:
                shapes.cached_store(shape, n)
                print(f"{shape}, {n:,} ACLs ...", flush=True)
                rows.append(measure(sys.executable, shape, n, args.repeat, Path(tmp)))
                if args.peer:
                    peers[(shape, n)] = measure(args.peer, shape, n, args.repeat, Path(tmp))
                print(format_table(f"{shape}, {n:,} ACLs (so far)", HEADERS, table_rows(rows[-1:], peers)), flush=True)
    print_table(f"state on every shape (median of {args.repeat}; machine shared: CPU of the opening thread)"
                + (f"; before = {args.peer}" if args.peer else ""),
                HEADERS, table_rows(rows, peers))
    print(f"wrote {write_json('state_shapes', {'rows': rows, 'peer': list(peers.values())})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
