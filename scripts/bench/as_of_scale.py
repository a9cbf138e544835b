"""as_of at random points of a large mixed log, within the default memory budget (issue 24, item 4).

    python -m scripts.bench.as_of_scale [--events 10000000] [--points 40] [--repeat 1] [--dir DIR]
        [--before-python /work/main/.venv/bin/python] [--keep]

The mixed log of ``--events`` events (scripts.bench.history's generator, cached under bench-cache/ by its
parameters: written once, ~4 min CPU at 10M) is copied fresh; a first process opens it and writes its
derived files (history index, checkpoint files: their count, size on disk and the time taken) and a
policy snapshot at the log's end (which a store's default policy would have); then
``--repeat`` fresh interpreters (scripts.bench.as_of) each open it and answer: a first as_of mid-log
(CPU, wall, the RSS it left and its peak beyond the opened store's), as_of alone at ``--points`` random
offsets, and as_of at ``--points`` more random offsets followed by what a forensic user asks there
(authorize, authorized_operations and describe about a few resources: ``as_of.QUESTIONS``), p50/p99 CPU
and wall with the peak RSS beyond the opened store's beside the budget.  ``--before-python`` prepares and
measures a second copy with another checkout's interpreter (e.g. main's), side by side.  The machine may
be shared: CPU is the figure to trust.  Targets print beside each figure: as_of p99 <= 1 s at 10M events
within the default budget (``StoreConfig.time_travel_memory_bytes``); the first as_of <= 1 s, <= 100 MB.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scripts.bench import as_of, logcache
from scripts.bench.history import mixed_log
from scripts.bench.report import REPO_ROOT, print_table, write_json
from secmeta.core import StoreConfig

AS_OF_P99_S, AS_OF_TARGET = as_of.AS_OF_P99_10M_S, f"<= {as_of.AS_OF_P99_10M_S:g} ({as_of.AS_OF_P99_10M_ISSUE})"
BUDGET_MB = StoreConfig.time_travel_memory_bytes // 2**20
HEADERS = ["measure", "after", "before", "target", "result", "detail"]


def _run(python: str, *args: str) -> dict:
    done = subprocess.run([python, "-m", "scripts.bench.as_of", *args], check=True, stdout=subprocess.PIPE,
                          text=True, cwd=REPO_ROOT)
    return json.loads(done.stdout.splitlines()[-1])


def measure(python: str, events: int, points: int, repeat: int, copy: Path) -> dict:
    """Prepare a fresh copy with ``python``'s secmeta, then ``repeat`` cold processes measuring as_of."""
    generated = mixed_log(events)
    logcache.fresh_copy(generated, copy)
    common = [str(copy), str(generated.key_file), "--first-ts", str(generated.meta["first_ts"]),
              "--last-ts", str(generated.meta["last_ts"])]
    out = {"events": events, **_run(python, *common, "--prepare", "--snapshot")}
    out["checkpoint_mb"] = sum(f.stat().st_size for f in (copy / "checkpoints").glob("*")) / 2**20
    out["runs"] = [_run(python, *common, "--points", str(points), "--first-offset", str(events // 2))
                   for _ in range(repeat)]
    return out


def _median(row: dict, *path: str) -> float:
    values = []
    for run in row["runs"]:
        value = run
        for key in path:
            value = value[key]
        values.append(value)
    return statistics.median(values)


def _cell(row: dict | None, fmt: str, *path: str) -> str:
    return "" if row is None else fmt.format(_median(row, *path))


def table_rows(after: dict, before: dict | None) -> list[list]:
    def verdict(value: float, target: float) -> str:
        return "PASS" if value <= target else "MISS"

    p99 = _median(after, "as_of_answers", "p99_cpu_s")
    peak = _median(after, "as_of_answers_peak_rss_mb")
    first = _median(after, "first_as_of_cpu_s")
    first_peak = _median(after, "first_as_of_peak_rss_mb")
    return [
        ["first as_of mid-log, CPU s", f"{first:.2f}", _cell(before, "{:.2f}", "first_as_of_cpu_s"),
         f"<= {as_of.FIRST_AS_OF_S:g}", verdict(first, as_of.FIRST_AS_OF_S),
         f"wall {_median(after, 'first_as_of_s'):.2f} s (before {_cell(before, '{:.2f}', 'first_as_of_s')})"],
        ["first as_of, peak +RSS MB", f"{first_peak:.0f}", _cell(before, "{:.0f}", "first_as_of_peak_rss_mb"),
         f"<= {as_of.FIRST_AS_OF_MB}", verdict(first_peak, as_of.FIRST_AS_OF_MB),
         f"+{_median(after, 'first_as_of_rss_mb'):.0f} MB held after it"],
        ["as_of + answers, random point, p99 CPU s", f"{p99:.2f}", _cell(before, "{:.2f}", "as_of_answers", "p99_cpu_s"),
         AS_OF_TARGET, verdict(p99, AS_OF_P99_S),
         f"p50 {_median(after, 'as_of_answers', 'p50_cpu_s'):.2f} s CPU; wall p50 "
         f"{_median(after, 'as_of_answers', 'p50_s'):.2f} / p99 {_median(after, 'as_of_answers', 'p99_s'):.2f} s"],
        ["as_of alone, random offset, p99 CPU s", f"{_median(after, 'as_of_offset', 'p99_cpu_s'):.2f}",
         _cell(before, "{:.2f}", "as_of_offset", "p99_cpu_s"), AS_OF_TARGET, "",
         f"p50 {_median(after, 'as_of_offset', 'p50_cpu_s'):.2f} s CPU, wall p99 "
         f"{_median(after, 'as_of_offset', 'p99_s'):.2f} s"],
        ["peak +RSS while answering, MB", f"{peak:.0f}", _cell(before, "{:.0f}", "as_of_answers_peak_rss_mb"),
         f"<= {BUDGET_MB} (budget)", verdict(peak, BUDGET_MB),
         f"process peak {_median(after, 'peak_rss_mb'):.0f} MB; held estimate {_median(after, 'end_held_mb'):.0f} MB"],
        ["derived files", f"{len(after['checkpoint_files'])} files", "" if before is None else
         f"{len(before['checkpoint_files'])} files", "", "",
         f"{after['checkpoint_mb']:,.0f} MB of checkpoints (before "
         f"{'' if before is None else format(before['checkpoint_mb'], ',.0f')}), prepared in "
         f"{after['prepare_cpu_s']:.0f} s CPU"],
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--points", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--dir", type=Path, help="where to copy the log (default: a temporary directory)")
    parser.add_argument("--before-python", help="another checkout's interpreter, measured side by side")
    parser.add_argument("--keep", action="store_true", help="keep the copies (and their derived files)")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        after = measure(sys.executable, args.events, args.points, args.repeat, home / "after")
        before = None
        if args.before_python:
            before = measure(args.before_python, args.events, args.points, args.repeat, home / "before")
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    print_table(f"as_of at {args.events:,} events of the mixed log, budget {BUDGET_MB} MB (median of {args.repeat}; "
                "machine shared: CPU of the querying thread)", HEADERS, table_rows(after, before))
    print(f"wrote {write_json('as_of_scale', {'after': after, 'before': before})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
