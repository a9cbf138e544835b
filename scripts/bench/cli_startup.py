"""Benchmark of the CLI's start: whole processes, as a user runs them.

    python -m scripts.bench.cli_startup [--runs 15]

Measures, in one run on this machine (each command started ``--runs`` times after one warm-up run,
median, min and max; CPU is the finished child's user + system time, wall a monotonic clock around it):
  python -c pass            the interpreter's own start, the floor under every figure
  secmeta --version         target <= 0.1 s CPU
  secmeta acls --list       on a small store (5 ACLs), target <= 0.3 s wall

The commands run with Python's bytecode cache on (in a temporary PYTHONPYCACHEPREFIX), as an installed
package runs: a checkout run with PYTHONDONTWRITEBYTECODE=1 recompiles every module it imports each time.
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

TARGET_VERSION_CPU = 0.1
TARGET_LIST_WALL = 0.3


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of ``argv`` to its exit; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode(errors='replace')}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def measure(argv: list[str], env: dict[str, str], runs: int) -> dict[str, float]:
    run_once(argv, env)  # the warm-up fills the bytecode cache
    cpu, wall = zip(*(run_once(argv, env) for _ in range(runs)))
    return {"cpu_median": statistics.median(cpu), "cpu_min": min(cpu), "cpu_max": max(cpu),
            "wall_median": statistics.median(wall), "wall_min": min(wall), "wall_max": max(wall)}


def small_store(root: Path, secmeta: str, env: dict[str, str]) -> None:
    """A store of 5 ACLs at ``root/store``, its keys in ``root/keys.json`` (made with the CLI)."""
    subprocess.run([secmeta, "keys", "generate", "--key-file", str(root / "keys.json")], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([secmeta, "init"], env=env, check=True, stdout=subprocess.DEVNULL)
    for topic in "abcde":
        subprocess.run([secmeta, "acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
                        "--topic", topic], env=env, check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs of each command (default 15)")
    args = parser.parse_args()
    secmeta = str(Path(sys.executable).with_name("secmeta"))
    with tempfile.TemporaryDirectory(prefix="secmeta-startup-") as tmp:
        root = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPYCACHEPREFIX=str(root / "pycache"), SECMETA_KEY_FILE=str(root / "keys.json"),
                   SECMETA_STORE=str(root / "store"))
        small_store(root, secmeta, env)
        results = {
            "python -c pass": measure([sys.executable, "-c", "pass"], env, args.runs),
            "secmeta --version": measure([secmeta, "--version"], env, args.runs),
            "secmeta acls --list": measure([secmeta, "acls", "--list"], env, args.runs),
        }
    targets = {"secmeta --version": f"CPU <= {TARGET_VERSION_CPU} s",
               "secmeta acls --list": f"wall <= {TARGET_LIST_WALL} s"}
    print_table(f"CLI start, whole process, {args.runs} runs (seconds: median [min-max])",
                ["command", "CPU", "wall", "target"],
                [[name, f"{r['cpu_median']:.3f} [{r['cpu_min']:.3f}-{r['cpu_max']:.3f}]",
                  f"{r['wall_median']:.3f} [{r['wall_min']:.3f}-{r['wall_max']:.3f}]", targets.get(name, "-")]
                 for name, r in results.items()])
    print(f"results: {write_json('cli_startup', {'runs': args.runs, 'commands': results, 'targets': targets})}")


if __name__ == "__main__":
    main()
