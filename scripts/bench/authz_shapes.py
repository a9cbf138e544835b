"""authorize on a freshly opened store, per workload shape: the first pass and the warm one (issue 24, item 1).

    python -m scripts.bench.authz_shapes [--sizes 200000 1000000] [--shapes current kafka diverse]
                                         [--repeat 3] [--calls 20000] [--peer /work/main/.venv/bin/python]

Per shape and size, a copy of the shape's cached store (``scripts.bench.shapes``) gets a snapshot at its end,
written by each interpreter's own secmeta (the code that reads it).  Then ``--repeat`` times, the interpreters
in turns, a fresh interpreter opens the store read-only from that snapshot (as a serving process that
follows the log holds its image: a writer's open also starts the history index and the time-travel checkpoint
fill in threads, and the snapshot step's close stops the fill, so every timed writer open resumed it, a replay of
the whole log sharing the GIL and forking, 1-2 s of other threads' CPU during the passes at 1M, which the
"other threads" figure in the detail column shows) and calls ``authorize`` over the shape's
request mix (strings copied as off the wire; ``shapes.requests``) twice: the first pass over the freshly
loaded image (each index node made, or read, as it is first reached), then the same calls again (warm).
Each call is timed by its thread's CPU clock (``time.thread_time_ns``: the machine is shared, and CPU is what
the code costs; the wall p99 prints beside it).  A figure is the median of the runs' p50 / p99, with the
spread (max - min) and the load average beside it.  ``--peer PYTHON`` runs the same steps with another
interpreter (main's virtualenv: the code before a change), printed as "before".

Targets (issue 24): warm p99 <= 20 us at 1M ACLs on every shape; the first pass's p99 within 1.5x the warm
p99 of the same run.  The p99 cannot see a cost paid by a call or two: since the snapshot open became lazy, each
resource type's name lookup is built by the first authorize on that type, so that cost moved from the open to the
first request on each type (it did not vanish).  The "first call" row prints it: the first pass's first call on
each resource type and the pass's slowest call, CPU and wall.  No issue-24 target bounds it; it prints beside the
warm p99 target (how many times that target it is), so nobody reads the first pass's p99 ratio as covering it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scripts.bench import shapes
from scripts.bench.report import REPO_ROOT, format_table, percentiles, print_table, write_json

WARM_P99_US = 20.0  # at 1M ACLs
FIRST_VS_WARM = 1.5
CALLS = 20_000
PASSES = ("first", "warm")
HEADERS = ["shape", "ACLs", "pass", "p50 us", "before", "p99 us", "before", "target", "result", "detail"]


def cpu_latencies(fn: Callable[..., Any], calls: Sequence[Sequence[Any]]) -> tuple[list[int], list[int]]:
    """(thread CPU ns, wall ns) taken by each ``fn(*args)``."""
    cpu_clock, wall_clock = time.thread_time_ns, time.perf_counter_ns
    cpu, wall = [], []
    for args in calls:
        w, c = wall_clock(), cpu_clock()
        fn(*args)
        cpu.append(cpu_clock() - c)
        wall.append(wall_clock() - w)
    return cpu, wall


FIRST_CALL = "first_call_"  # time_passes' keys of the first call on each resource type: first_call_cpu_TOPIC, ...


def first_per_type(calls: Sequence[Sequence[Any]]) -> list[int]:
    """The index of the first call on each resource type (a request's fourth field), in call order."""
    seen: dict[Any, int] = {}
    for i, args in enumerate(calls):
        seen.setdefault(args[3], i)
    return sorted(seen.values())


def timing_keys(run: dict) -> list[str]:
    """The keys of ``time_passes``' figures in ``run`` (each pass's, prefixed by its name)."""
    return [key for key in run if key.startswith(tuple(f"{when}_" for when in PASSES))]


def first_calls(r: dict) -> dict[str, tuple[float, float]]:
    """resource type -> (CPU us, wall us) of the first pass's first call on it, from ``time_passes``' keys."""
    cpu = f"{FIRST_CALL}cpu_"
    return {key[len(cpu):]: (value, r[f"{FIRST_CALL}wall_{key[len(cpu):]}"]) for key, value in r.items()
            if key.startswith(cpu) and not key.endswith("_spread")}


def time_passes(acls, calls: Sequence[Sequence[Any]]) -> dict[str, float]:
    """authorize over ``calls`` twice on a freshly loaded ACL image: the first pass, then warm; p50/p99 (us) of
    each call's thread CPU, the wall p99, the mean CPU per call and the slowest call's CPU and wall, keyed
    ``first_cpu_p99`` and so on; the first pass's first call on each resource type (CPU and wall, ``first_call_cpu_TOPIC``
    and so on: where a lazily opened image builds that type's lookup, a cost the p99 cannot see); and
    ``background_cpu_s``, the CPU the process's other threads took meanwhile (they share the GIL and the caches)."""
    from secmeta.projections.authorizer import authorize

    gc.collect()
    out: dict[str, float] = {}
    process, thread = time.process_time(), time.thread_time()
    for when in PASSES:
        cpu, wall = cpu_latencies(lambda *r: authorize(acls, *r), calls)
        pct = percentiles(cpu, (50, 99))
        out[f"{when}_cpu_p50"], out[f"{when}_cpu_p99"] = pct["p50"] / 1000, pct["p99"] / 1000
        out[f"{when}_wall_p99"] = percentiles(wall, (99,))["p99"] / 1000
        out[f"{when}_cpu_mean"] = sum(cpu) / len(cpu) / 1000
        out[f"{when}_cpu_max"], out[f"{when}_wall_max"] = max(cpu) / 1000, max(wall) / 1000
        if when == "first":
            for i in first_per_type(calls):
                name = calls[i][3].name
                out[f"{FIRST_CALL}cpu_{name}"], out[f"{FIRST_CALL}wall_{name}"] = cpu[i] / 1000, wall[i] / 1000
    out["background_cpu_s"] = (time.process_time() - process) - (time.thread_time() - thread)
    return out


def child(store: Path, key_file: Path, shape: str, n: int, count: int) -> dict:
    """Open the store from its snapshot (in this interpreter) and time both passes."""
    from scripts.bench.state_shapes import _config as store_config
    from secmeta.core.store.facade import SecurityStore
    from secmeta.events.keyring import Keyring

    calls = shapes.requests(shape, n, count)
    # Read-only: the image loaded from the snapshot, without a writer's background catch-up (see the module's doc).
    opened = SecurityStore.open(store, store_config(), keyring=Keyring.from_file(key_file), read_only=True)
    if opened.loaded.snapshot is None:
        raise SystemExit(f"{store} opened by replay, not from its snapshot")
    out = time_passes(opened.image.acls, calls)
    out["load1"] = os.getloadavg()[0]
    return out


def _run(python: str, *args: str) -> dict:
    done = subprocess.run([python, "-m", "scripts.bench.authz_shapes", "--child", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{python} {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _snapshotted(python: str, shape: str, n: int, directory: Path) -> shapes.CachedStore:
    """A copy of the shape's store with a snapshot at its end, written by ``python``'s secmeta."""
    copy = shapes.copy_store(shape, n, directory)
    done = subprocess.run([python, "-m", "scripts.bench.state_shapes", "--child", "snapshot", str(copy.path),
                           str(copy.key_file), shape, str(n)], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"{python}: snapshot of {shape} {n} failed:\n{done.stderr[-3000:]}")
    return copy


def measure(pythons: dict[str, str], shape: str, n: int, repeat: int, count: int, tmp: Path) -> dict[str, dict]:
    """side -> figures (median and spread of each key over ``repeat`` runs, the sides in turns)."""
    stores = {side: _snapshotted(python, shape, n, tmp / f"{side}-{shape}-{n}") for side, python in pythons.items()}
    runs: dict[str, list[dict]] = {side: [] for side in pythons}
    for _ in range(repeat):
        for side, python in pythons.items():
            store = stores[side]
            runs[side].append(_run(python, str(store.path), str(store.key_file), shape, str(n), str(count)))
    for store in stores.values():
        _remove(store.path)
    figures = {}
    for side, got in runs.items():
        row: dict[str, Any] = {"shape": shape, "acls": n, "runs": got}
        for key in got[0]:
            values = [run[key] for run in got]
            row[key], row[f"{key}_spread"] = statistics.median(values), max(values) - min(values)
        figures[side] = row
    return figures


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def pass_figures(r: dict, peer: dict | None) -> list[dict[str, str]]:
    """Each pass's authorize figures (``time_passes``' keys, medians over runs with ``_spread``) as printed, with
    the target, the verdict and the peer's ("before") beside, then the first call per resource type as its own
    row: the one builder of authorize rows (this benchmark's table and ``state_shapes``')."""

    def before(key: str) -> str:
        return "" if peer is None else f"{peer[key]:.1f}"

    first_limit = FIRST_VS_WARM * r["warm_cpu_p99"]
    ratio = r["first_cpu_p99"] / r["warm_cpu_p99"]
    peer_ratio = "" if peer is None else f", before x{peer['first_cpu_p99'] / peer['warm_cpu_p99']:.2f}"
    background = "" if "background_cpu_s" not in r else f", other threads {r['background_cpu_s']:.2f} s CPU"
    load = "" if "load1" not in r else f", load avg {r['load1']:.1f}"
    at_scale = r["acls"] >= 1_000_000
    return [
        {"pass": "warm", "measure": "p99 us CPU (warm)", "p50": f"{r['warm_cpu_p50']:.1f}", "p50 before": before("warm_cpu_p50"),
         "p99": f"{r['warm_cpu_p99']:.1f}", "p99 before": before("warm_cpu_p99"),
         "target": f"p99 <= {WARM_P99_US:g} (at 1M)",
         "result": ("PASS" if r["warm_cpu_p99"] <= WARM_P99_US else "MISS") if at_scale else "",
         "detail": f"p99 spread {r['warm_cpu_p99_spread']:.1f}, wall p99 {r['warm_wall_p99']:.1f}, "
                   f"CPU/call {r['warm_cpu_mean']:.1f} (before {before('warm_cpu_mean')}){load}"},
        {"pass": "first", "measure": "p99 us CPU (first)", "p50": f"{r['first_cpu_p50']:.1f}", "p50 before": before("first_cpu_p50"),
         "p99": f"{r['first_cpu_p99']:.1f}", "p99 before": before("first_cpu_p99"),
         "target": f"p99 <= x{FIRST_VS_WARM:g} warm ({first_limit:.1f})",
         "result": "PASS" if r["first_cpu_p99"] <= first_limit else "MISS",
         "detail": f"x{ratio:.2f} warm{peer_ratio} (p99 only: the first call per type is the next row); "
                   f"p99 spread {r['first_cpu_p99_spread']:.1f}, "
                   f"wall p99 {r['first_wall_p99']:.1f}, CPU/call {r['first_cpu_mean']:.1f} "
                   f"(before {before('first_cpu_mean')}){background}"},
        first_call_figures(r, peer),
    ]


def first_call_figures(r: dict, peer: dict | None) -> dict[str, str]:
    """The row of the first pass's first call on each resource type (its slowest in the value column) and the
    pass's slowest call, CPU and wall: a one-off cost no issue-24 target bounds, printed beside the warm p99
    target it would miss (how many times that target), never as a ratio to the first pass's p99."""
    calls = first_calls(r)
    worst = max(cpu for cpu, _ in calls.values())
    peer_worst = "" if peer is None else f"{max(cpu for cpu, _ in first_calls(peer).values()):.0f}"
    per_type = ", ".join(f"{name} {cpu:,.0f}/{wall:,.0f}" for name, (cpu, wall) in calls.items())
    return {"pass": "first call", "measure": "first call per type, us CPU (slowest)", "p50": "", "p50 before": "",
            "p99": f"{worst:,.0f}", "p99 before": peer_worst,
            "target": f"none (one-off; p99 target {WARM_P99_US:g})", "result": "",
            "detail": f"x{worst / WARM_P99_US:,.0f} the p99 target, paid once per resource type after a lazy "
                      f"open and outside every p99 here; per type CPU/wall us: {per_type}; "
                      f"first pass's slowest call CPU {r['first_cpu_max']:,.0f} wall {r['first_wall_max']:,.0f} us "
                      f"(warm's CPU {r['warm_cpu_max']:,.0f} wall {r['warm_wall_max']:,.0f})"}


def table_rows(rows: list[dict[str, dict]]) -> list[list]:
    out = []
    for sides in rows:
        r = sides["after"]
        for f in pass_figures(r, sides.get("before")):
            out.append([r["shape"], r["acls"], f["pass"], f["p50"], f["p50 before"], f["p99"], f["p99 before"],
                        f["target"], f["result"], f["detail"]])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--shapes", nargs="+", choices=shapes.NAMES, default=list(shapes.NAMES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=CALLS)
    parser.add_argument("--peer", help="another interpreter whose secmeta runs the same steps (e.g. main's .venv)")
    parser.add_argument("--child", nargs=5, metavar=("STORE", "KEYS", "SHAPE", "N", "CALLS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        store, keys, shape, n, count = args.child
        print(json.dumps(child(Path(store), Path(keys), shape, int(n), int(count))), flush=True)
        os._exit(0)  # the store's background work (history index, checkpoints) is not this step's
    pythons = {"after": sys.executable, **({"before": args.peer} if args.peer else {})}
    rows = []
    with tempfile.TemporaryDirectory(dir=shapes.CACHE_DIR.parent if shapes.CACHE_DIR.parent.exists() else None) as tmp:
        for n in args.sizes:
            for shape in args.shapes:
                shapes.cached_store(shape, n)
                print(f"{shape}, {n:,} ACLs ...", flush=True)
                rows.append(measure(pythons, shape, n, args.repeat, args.calls, Path(tmp)))
                print(format_table(f"{shape}, {n:,} ACLs (so far)", HEADERS, table_rows(rows[-1:])), flush=True)
    print_table(f"authorize after a load, per shape (thread CPU per call, median of {args.repeat}; machine shared)"
                + (f"; before = {args.peer}" if args.peer else ""), HEADERS, table_rows(rows))
    print(f"wrote {write_json('authz_shapes', {'rows': rows})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
