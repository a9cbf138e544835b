"""Small helpers shared by the benchmarks: timing, percentiles, a text table, JSON results.

Every benchmark prints a table for people and writes ``bench-results/<name>.json`` (with
the machine it ran on) for later comparison. Nothing here is a test: timings are only
reported, never asserted.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO_ROOT / "bench-results"


# ---------------------------------------------------------------- timing


def rate(count: int, seconds: float) -> float:
    """Operations per second for ``count`` operations taking ``seconds`` in total."""
    return count / seconds if seconds > 0 else math.inf


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """Call ``fn`` once; return (its result, wall seconds) measured with perf_counter."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def timeit_rate(fn: Callable[[], Any], n: int, *, repeat: int = 3, warmup: int = 1) -> float:
    """Calls per second of ``fn()`` called ``n`` times in a loop; best of ``repeat`` rounds.

    ``warmup`` untimed calls run first (imports, caches, lazy set-up).
    """
    if n <= 0:
        raise ValueError("n must be positive")
    for _ in range(warmup):
        fn()
    best = math.inf
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - start)
    return rate(n, best)


def latencies_ns(fn: Callable[..., Any], calls: Iterable[Sequence[Any]]) -> list[int]:
    """Nanoseconds taken by each ``fn(*args)`` for every ``args`` in ``calls``."""
    clock = time.perf_counter_ns
    samples = []
    for args in calls:
        start = clock()
        fn(*args)
        samples.append(clock() - start)
    return samples


def percentiles(samples: Iterable[float], ps: Iterable[float] = (50, 99)) -> dict[str, float]:
    """Nearest-rank percentiles of ``samples``, keyed ``"p50"``, ``"p99"``, ``"p99.9"``, ...."""
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("no samples")
    out = {}
    for p in ps:
        if not 0 < p <= 100:
            raise ValueError(f"percentile out of range: {p}")
        rank = max(1, math.ceil(p / 100 * len(ordered)))
        out[f"p{p:g}"] = ordered[rank - 1]
    return out


def spread(values: Iterable[float], fmt: str = ".2f") -> str:
    """The median of repeated measurements and their range: ``"median (min-max)"``, each as ``fmt`` formats it."""
    values = list(values)
    if not values:
        raise ValueError("no values")
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


# ---------------------------------------------------------------- output


def _cell(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            return str(value)
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def format_table(title: str, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The text :func:`print_table` prints: numbers right-aligned, text left-aligned."""
    rows = [list(r) for r in rows]
    for r in rows:
        if len(r) != len(headers):
            raise ValueError(f"row has {len(r)} cells, expected {len(headers)}: {r}")
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(headers)]
    numeric = [bool(rows) and all(_is_number(r[i]) for r in rows) for i in range(len(headers))]

    def line(values: Sequence[str], align_numbers: bool = True) -> str:
        parts = [
            v.rjust(w) if (align_numbers and numeric[i]) else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    out = [title, line(list(headers)), "  ".join("-" * w for w in widths)]
    out.extend(line(c) for c in cells)
    return "\n".join(out)


def print_table(title: str, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print ``rows`` under ``headers`` as an aligned text table headed by ``title``."""
    print(format_table(title, headers, rows))
    print()


def machine_info() -> dict[str, Any]:
    """Where a result was measured: interpreter, CPUs, platform and UTC time."""
    try:
        usable_cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable_cpus = os.cpu_count()
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable_cpus,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "timestamp": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def write_json(name: str, data: Any, *, directory: Path | None = None) -> Path:
    """Write ``{"name", "machine", "results": data}`` to ``bench-results/<name>.json``.

    Returns the path written. ``directory`` overrides the default results folder.
    """
    target_dir = Path(directory) if directory is not None else RESULTS_DIR
    target_dir.mkdir(parents=True, exist_ok=True)
    path = target_dir / f"{name}.json"
    payload = {"name": name, "machine": machine_info(), "results": data}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
    tmp.replace(path)
    return path
