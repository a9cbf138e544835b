"""The first as_of in a cold process, mid-log, on every workload shape: CPU, wall and memory beside the target.

    python -m scripts.bench.as_of_shapes [--shapes current kafka diverse] [--sizes 200000] [--mixed 1000000]
        [--repeat 3] [--before-python /work/main/.venv/bin/python]

Per shape (scripts.bench.shapes; ``--mixed N`` adds the history benchmark's mixed log of N events) a fresh
copy of its cached log is opened once by a first process that writes the derived files (history index,
checkpoint files), then ``--repeat`` fresh interpreters (scripts.bench.as_of --first-only) each open the
store and ask as_of at the middle of the log: its wall and CPU seconds (the querying thread), the RSS it
left behind and the peak RSS while it ran, both beyond the opened store's (an open by replay leaves freed
memory that the query reuses, so one more run counts the query's own Python allocations with tracemalloc:
held after it and at its peak).  Issue 24's target is beside
each figure: <= 1 s and <= 100 MB.  ``--before-python`` runs the same steps with another checkout's
interpreter (its ``secmeta``; these scripts stay this checkout's), side by side: before and after.
Figures are medians with their spread (min-max); the machine may be shared, so CPU is the figure to trust.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scripts.bench import as_of, logcache, shapes
from scripts.bench.history import mixed_log
from scripts.bench.report import REPO_ROOT, print_table, write_json

MEASURES = (("first_as_of_cpu_s", "CPU s", as_of.FIRST_AS_OF_S), ("first_as_of_s", "wall s", as_of.FIRST_AS_OF_S),
            ("first_as_of_rss_mb", "+RSS MB", as_of.FIRST_AS_OF_MB),
            ("first_as_of_peak_rss_mb", "peak +RSS MB", as_of.FIRST_AS_OF_MB))


def _run(python: str, *args: str) -> dict:
    done = subprocess.run([python, "-m", "scripts.bench.as_of", *args], check=True, stdout=subprocess.PIPE,
                          text=True, cwd=REPO_ROOT)
    return json.loads(done.stdout.splitlines()[-1])


def logs(names: list[str], sizes: list[int], mixed: list[int]) -> list[tuple[str, Path, Path, dict]]:
    """(label, store, key file, facts with events / first_ts / last_ts) of every log to measure."""
    out = []
    for n in sizes:
        for name in names:
            cached = shapes.cached_store(name, n)
            out.append((f"{name} {n:,} ACLs", cached.path, cached.key_file, cached.facts))
    for n in mixed:
        cached = mixed_log(n)
        out.append((f"mixed {n:,} events", cached.store, cached.key_file,
                    {"events": n, **cached.meta}))
    return out


def measure(python: str, store: Path, key_file: Path, facts: dict, copy: Path, repeat: int, memory_mb: int) -> dict:
    """Prepare a fresh copy of ``store`` with ``python``, then ``repeat`` cold first as_of mid-log."""
    logcache.fresh_copy(logcache.CachedLog(store, key_file, facts), copy)
    common = [str(copy), str(key_file), "--first-ts", str(facts["first_ts"]), "--last-ts", str(facts["last_ts"]),
              "--memory-mb", str(memory_mb)]
    out = _run(python, *common, "--prepare")
    runs = [_run(python, *common, "--first-only", "--first-offset", str(facts["events"] // 2))
            for _ in range(repeat)]
    for key, _, _ in MEASURES:
        values = [r[key] for r in runs]
        out[key] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
    out["open_cpu_s"] = statistics.median(r["open_cpu_s"] for r in runs)
    traced = _run(python, *common, "--first-only", "--first-offset", str(facts["events"] // 2),
                  "--trace-memory", str(copy.parent / "traced.txt"))  # a slower run: only its memory counts
    out["traced_mb"], out["traced_peak_mb"] = traced["first_as_of_traced_mb"], traced["first_as_of_traced_peak_mb"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", choices=shapes.NAMES, default=list(shapes.NAMES))
    parser.add_argument("--sizes", type=int, nargs="*", default=[200_000], help="ACLs held at each shape's end")
    parser.add_argument("--mixed", type=int, nargs="*", default=[], help="sizes of the mixed log (events)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-mb", type=int, default=as_of.StoreConfig.time_travel_memory_bytes // 2**20)
    parser.add_argument("--before-python", help="another checkout's interpreter, measured side by side (before)")
    parser.add_argument("--dir", default=None, help="where to put the copies (default: a temp dir)")
    args = parser.parse_args(argv)
    sides = ([("before", args.before_python)] if args.before_python else []) + [("after", sys.executable)]
    results: list[dict] = []
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for label, store, key_file, facts in logs(args.shapes, args.sizes, args.mixed):
            for side, python in sides:
                print(f"{label}: {side} ...", flush=True)
                r = measure(python, store, key_file, facts, Path(tmp) / "store", args.repeat, args.memory_mb)
                results.append({"log": label, "side": side, "events": facts["events"], **r})
                cells = []
                for key, _, target in MEASURES:
                    m = r[key]
                    cells.append(f"{m['median']:.2f} ({m['min']:.2f}-{m['max']:.2f}) "
                                 f"{'PASS' if m['median'] <= target else 'MISS'}")
                rows.append([label, f"{facts['events']:,}", side, *cells,
                             f"{r['traced_mb']:.0f} / {r['traced_peak_mb']:.0f}", f"{r['open_cpu_s']:.1f}"])
    print_table(f"first as_of in a cold process at the log's middle, median (min-max) of {args.repeat}; "
                f"targets: <= {as_of.FIRST_AS_OF_S} s, <= +{as_of.FIRST_AS_OF_MB} MB",
                ["log", "events", "side", *(f"{name} (<= {t})" for _, name, t in MEASURES),
                 "Python MB held / peak (tracemalloc)", "open CPU s"], rows)
    print(f"wrote {write_json('as_of_shapes', {'runs': results})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
