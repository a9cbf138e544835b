"""Point-in-time queries over the Delta tables: the embedded engine (Polars, no JVM) beside Spark.

    python -m scripts.bench.table_queries [--dir DIR] [--large-acls 20000] [--repeat 3] [--engines polars]

Builds the demo's store (``secmeta demo``'s steps 1-8: 300 users, 3000 ACLs) and a larger one
(``--large-acls`` ACLs), compacts each with Spark once, then runs each question as a user does:
``secmeta spark query QUESTION --tables DIR --engine polars|spark`` in a fresh process, so every
figure includes the interpreter's and the engine's start (the JVM's, for Spark). Wall seconds,
best and median of ``--repeat`` runs, with the issue's target (2 s) beside the embedded figures.
CPU seconds of the child beside wall (a shared machine's load shows in wall only). Nothing is
asserted; see bench-results/table_queries.json.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts.bench.report import print_table, write_json

TARGET_S = 2.0


def _questions(point: str) -> dict[str, list[str]]:
    return {
        "acls --as-of": ["acls", "--as-of", point],
        "who-could --as-of": ["who-could", "--operation", "READ", "--topic", "ledger-eu", "--as-of", point],
        "history --principal": ["history", "--principal", "User:alice"],
        "tokens --from --to": ["tokens", "--from", "2000-01-01T00:00:00Z", "--to", point],
        "sql count": ["sql", "SELECT count(*) AS n FROM secmeta_acl_intervals WHERE valid_to IS NULL"],
    }


def _run(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one CLI process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "secmeta.core.cli", *argv], capture_output=True, text=True,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _tables(root: Path, name: str, acls: int, users: int) -> tuple[Path, str]:
    """A demo-shaped store compacted into Delta tables (reused when present); the tables and a point."""
    from secmeta.consumers.demo_scenario import build_store
    from secmeta.core.times import format_ms

    store, tables = root / name, root / f"{name}.tables"
    marker = root / f"{name}.point"
    if not (tables.exists() and marker.exists()):
        _config, _keyring, point = build_store(store, root / f"{name}.keys.json", users=users, acls=acls)
        argv = ["spark", "compact", "--store", str(store), "--key-file", str(root / f"{name}.keys.json"),
                "--tables", str(tables), "--once", "--max-events-per-trigger", "5000"]
        subprocess.run([sys.executable, "-m", "secmeta.core.cli", *argv], check=True, capture_output=True,
                       env={**os.environ, "PYSPARK_PYTHON": sys.executable})
        marker.write_text(format_ms(point.timestamp_ms))
    return tables, marker.read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="where the stores and tables are kept (default: a temporary directory)")
    parser.add_argument("--large-acls", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engines", default="polars,spark",
                        help="the engines to run, comma-separated (default polars,spark; Spark's take minutes)")
    args = parser.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="secmeta-table-queries-"))
    root.mkdir(parents=True, exist_ok=True)
    sets = {"demo (3000 ACLs)": _tables(root, "demo", 3000, 300),
            f"large ({args.large_acls} ACLs)": _tables(root, "large", args.large_acls, 1000)}
    rows, results = [], []
    for label, (tables, point) in sets.items():
        for question, argv in _questions(point).items():
            figures = {e: {"best_s": float("nan"), "median_s": float("nan"), "cpu_s": float("nan")}
                       for e in ("polars", "spark")}   # an engine not run shows nan
            for engine in args.engines.split(","):
                runs = [_run(["spark", "query", *argv[:1], "--tables", str(tables), "--engine", engine, *argv[1:]])
                        for _ in range(args.repeat if engine == "polars" else 1)]
                walls = [w for w, _ in runs]
                figures[engine] = {"best_s": min(walls), "median_s": statistics.median(walls),
                                   "cpu_s": min(c for _, c in runs)}
            rows.append([label, question, round(figures["polars"]["best_s"], 2),
                         round(figures["polars"]["median_s"], 2), round(figures["polars"]["cpu_s"], 2), TARGET_S,
                         round(figures["spark"]["best_s"], 1), round(figures["spark"]["cpu_s"], 1)])
            results.append({"tables": label, "question": question, **figures})
    print_table("secmeta spark query, one fresh process per question (wall seconds)",
                ["tables", "question", "polars best", "polars median", "polars CPU", "target", "spark",
                 "spark CPU (driver)"], rows)
    print(f"written to {write_json('table_queries', {'target_s': TARGET_S, 'results': results})}")


if __name__ == "__main__":
    main()
