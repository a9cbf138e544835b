"""diff over 100k events, per workload shape, before beside after: CPU and wall against issue 15's 0.3 s.

    python -m scripts.bench.diff [--mixed 1000000] [--shapes diverse] [--sizes 200000] [--spans 100000 10000]
        [--repeat 5] [--before-python /work/main/.venv/bin/python | --before-rev trial]

Per log (the history benchmark's mixed log; scripts.bench.shapes' shapes), each side (``--before-python``:
another checkout's interpreter, its ``secmeta``; then this one) builds the history index of a fresh copy of
its own (the sides may write different index formats), then opens it in a fresh process and asks
``store.diff(a, a + span)`` at ``--repeat`` random starts: the querying thread's CPU and the wall time,
median and spread (min-max), then the CPU once every entry of the answer is read too (a diff makes its ACLs'
bindings, its credentials and its tokens when they are first read); and ``secmeta diff`` (text and
``--json``) at ``--cli-repeat`` of those starts as a user runs it, a read-only open included, its output to
/dev/null (the whole process's CPU and wall).
``--before-rev REV`` measures in one process instead: ``HistoryIndex`` as REV had it (its module from git,
with the sibling modules only REV has) beside this checkout's on the same open store at the same starts
(which asks first alternating, since the first reads the rows' pages cold), their answers compared (the
history index's diff code only; no CLI figures for that side); REV must write this checkout's index format.
``--spans`` measures windows of several sizes on the same prepared logs (issue 15's target is for 100k
events: a window of another size shows its figures without PASS or MISS; a window as long as the log is
the whole log); ``secmeta diff`` runs at the first span only.
The machine may be shared: CPU is the figure to trust.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts.bench import as_of, logcache, shapes
from scripts.bench.as_of_shapes import logs
from scripts.bench.report import REPO_ROOT, print_table, spread, write_json

DIFF_S = 0.3  # issue 15: diff over 100k events
SPAN = 100_000
MEMORY_MB = as_of.StoreConfig.time_travel_memory_bytes // 2**20


_FORENSICS = "core/forensics"


def _write_before(rev: str, dest: Path) -> Path:
    """Into ``dest``: ``rev``'s history_index.py and those of its sibling modules this checkout has not (a module
    since renamed or removed, which it may import)."""
    dest.mkdir()
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{rev}:{_FORENSICS}"], check=True,
                           stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT).stdout.split()
    for name in names:
        if name.endswith(".py") and (name == "history_index.py" or not (REPO_ROOT / _FORENSICS / name).exists()):
            (dest / name).write_text(subprocess.run(["git", "show", f"{rev}:{_FORENSICS}/{name}"], check=True,
                                                    stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT).stdout)
    from secmeta.core.forensics.history_index import INDEX_FORMAT

    theirs = re.search(r"^INDEX_FORMAT = (\d+)", (dest / "history_index.py").read_text(), re.M)
    if theirs is None or int(theirs[1]) != INDEX_FORMAT:
        raise SystemExit(f"--before-rev {rev}: its history index format ({theirs[1] if theirs else '?'}) is not this "
                         f"checkout's ({INDEX_FORMAT}), so both cannot read one index: use --before-python")
    return dest


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _diffs(store_dir: Path, key_file: Path, last_ts: int, span: int, repeat: int,
           before_dir: Path | None = None) -> dict:
    """In this process: ``repeat`` diffs over ``span`` events at random starts (the index already built); with
    ``before_dir`` (another revision's history_index.py and the modules only it has, ``_write_before``), each
    start is asked of its ``HistoryIndex`` too, on the same open index, and both answers must be equal:
    {"before": ..., "after": ...}."""
    from secmeta.core.forensics import history_index
    from secmeta.core.store.facade import SecurityStore
    from secmeta.events.keyring import Keyring

    sides = {"after": history_index.HistoryIndex}
    if before_dir is not None:
        for path in sorted(before_dir.glob("*.py")):
            if path.name != "history_index.py":
                _load(f"secmeta.core.forensics.{path.stem}", path)
        module = _load("secmeta.core.forensics.history_index_before", before_dir / "history_index.py")
        sides = {"before": module.HistoryIndex, **sides}
    config = as_of._config(last_ts, MEMORY_MB)
    with SecurityStore.open(store_dir, config, keyring=Keyring.from_file(key_file)) as store:
        index = store.timetravel.index
        index.wait()
        store.timetravel.files.wait()
        events = store.log.end_offset
        rng = random.Random(11)
        starts = [rng.randrange(max(1, events - span)) for _ in range(repeat)]
        samples: dict[str, list] = {side: [] for side in sides}
        for i, a in enumerate(starts):
            answers = {}
            # the side asked first at a start reads its rows' pages cold: the order alternates start by start
            for side, cls in (list(sides.items())[::-1] if i % 2 else sides.items()):
                index.__class__ = cls  # the same open index, asked by that revision's code
                try:
                    wall, cpu = time.perf_counter(), time.thread_time()
                    found = store.diff(a, min(events, a + span))
                    answered = time.thread_time() - cpu, time.perf_counter() - wall
                    for listed in dataclasses.fields(found):  # every entry made, as a caller reading all
                        if listed.default == ():
                            list(getattr(found, listed.name))
                    samples[side].append((*answered, time.thread_time() - cpu,
                                          len(found.acls_added) + len(found.acls_removed)))
                finally:
                    index.__class__ = history_index.HistoryIndex
                answers[side] = found
            if len(answers) > 1 and answers["before"].to_dict() != answers["after"].to_dict():  # classes may differ
                raise SystemExit(f"the diffs from offset {a} differ between the revisions")
    out = {side: {"cpu": [s[0] for s in got], "wall": [s[1] for s in got], "cpu_read": [s[2] for s in got],
                  "acls": statistics.median(s[3] for s in got), "starts": starts} for side, got in samples.items()}
    return out if before_dir is not None else out["after"]


def _cli(python: str, store_dir: Path, key_file: Path, starts: list[int], span: int, fmt: list[str]) -> dict:
    """``secmeta diff`` as a user runs it (a read-only open, the answer printed to /dev/null): the whole
    process's CPU (user + system, from the kernel) and wall, per start."""
    import resource

    cpu, wall = [], []
    for a in starts:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([python, "-m", "secmeta.core.cli", "diff", "--store", str(store_dir), "--key-file",
                        str(key_file), "--from-offset", str(a), "--to-offset", str(a + span), *fmt],
                       check=True, stdout=subprocess.DEVNULL, cwd=REPO_ROOT)
        wall.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {"cpu": cpu, "wall": wall}


def _run_as_of(python: str, store_dir: Path, key_file: Path, facts: dict, *args: str) -> None:
    """``scripts.bench.as_of`` with ``python`` (its ``secmeta``) on the store: ``--prepare`` builds the derived files."""
    subprocess.run([python, "-m", "scripts.bench.as_of", str(store_dir), str(key_file), "--first-ts",
                    str(facts["first_ts"]), "--last-ts", str(facts["last_ts"]), "--memory-mb", str(MEMORY_MB), *args],
                   check=True, stdout=subprocess.DEVNULL, cwd=REPO_ROOT)


def _side(python: str, store_dir: Path, key_file: Path, last_ts: int, span: int, repeat: int,
          before_dir: Path | None = None) -> dict:
    done = subprocess.run([python, "-m", "scripts.bench.diff", "--measure", str(store_dir), str(key_file),
                           "--last-ts", str(last_ts), "--span", str(span), "--repeat", str(repeat),
                           *(["--before-dir", str(before_dir)] if before_dir else [])],
                          check=True, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    return json.loads(done.stdout.splitlines()[-1])


def _cell(values: list[float], target: float | None) -> str:
    m = statistics.median(values)
    verdict = "" if target is None else " PASS" if m <= target else " MISS"
    return f"{m:.3f} ({min(values):.3f}-{max(values):.3f}){verdict}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mixed", type=int, nargs="*", default=[1_000_000], help="sizes of the mixed log (events)")
    parser.add_argument("--shapes", nargs="*", choices=shapes.NAMES, default=["diverse"])
    parser.add_argument("--sizes", type=int, nargs="*", default=[200_000], help="ACLs held at each shape's end")
    parser.add_argument("--spans", type=int, nargs="+", default=[SPAN], help="window sizes (events)")
    parser.add_argument("--span", type=int, default=SPAN, help=argparse.SUPPRESS)  # of one --measure
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cli-repeat", type=int, default=2, help="starts `secmeta diff` is run at, per format")
    before = parser.add_mutually_exclusive_group()
    before.add_argument("--before-python", help="another checkout's interpreter, measured side by side (before)")
    before.add_argument("--before-rev", help="a git revision whose HistoryIndex is measured in the same process")
    parser.add_argument("--dir", default=None)
    parser.add_argument("--measure", nargs=2, type=Path, metavar=("STORE", "KEY_FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--last-ts", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--before-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(_diffs(*args.measure, args.last_ts, args.span, args.repeat, args.before_dir)))
        return 0
    sides = ([("before", args.before_python)] if args.before_python else []) + [("after", sys.executable)]
    rows, results = [], []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        before_dir = _write_before(args.before_rev, Path(tmp) / "before") if args.before_rev else None
        for label, store, key_file, facts in logs(args.shapes, args.sizes, args.mixed):
            copies = {}
            for side, python in sides:  # each side's own copy: the sides may write different index formats
                copy = logcache.fresh_copy(logcache.CachedLog(store, key_file, facts), Path(tmp) / side / "store")
                print(f"{label}: building its history index ({side}) ...", flush=True)
                _run_as_of(python, copy, key_file, facts, "--prepare")
                copies[side] = copy
            for i, span in enumerate(args.spans):
                target = DIFF_S if span == SPAN else None
                for side, python in sides:
                    copy = copies[side]
                    measured = _side(python, copy, key_file, facts["last_ts"], span, args.repeat, before_dir)
                    pairs = measured.items() if before_dir else [(side, measured)]
                    for name, r in pairs:
                        with_cli = i == 0 and (name == "after" or not before_dir)
                        cli = {fmt or "text": _cli(python, copy, key_file, r["starts"][:args.cli_repeat], span,
                                                   [fmt] if fmt else []) for fmt in ("", "--json")} if with_cli else {}
                        label_side = f"{name} ({args.before_rev}, same process)" \
                            if name == "before" and before_dir else name
                        results.append({"log": label, "span": span, "side": label_side, **r, "cli": cli})
                        rows.append([label, f"{span:,}", label_side, f"{r['acls']:,.0f}", _cell(r["cpu"], target),
                                     _cell(r["wall"], target), _cell(r.get("cpu_read", r["cpu"]), target),
                                     *((spread(cli[fmt]["cpu"]) + " / " + spread(cli[fmt]["wall"]) for fmt in cli)
                                       if cli else ("-", "-"))])
    print_table(f"diff over a window of events at {args.repeat} random starts, median (min-max); target <= {DIFF_S} s "
                f"over {SPAN:,} events", ["log", "window (events)", "side", "ACLs in the answer",
                                          f"store.diff CPU s (<= {DIFF_S})", f"wall s (<= {DIFF_S})",
                                          "CPU s, every entry read", "secmeta diff CPU / wall s",
                                          "secmeta diff --json CPU / wall s"], rows)
    print(f"wrote {write_json('diff', {'runs': results})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
