"""as_of over the last checkpoint files of a large log: the costliest stretch, within the default budget.

    python -m scripts.bench.as_of_tail [--shapes mixed diverse] [--events 10000000] [--acls 1000000] [--files 2]
        [--points 30] [--repeat 3] [--before-python /work/main/.venv/bin/python] [--dir DIR] [--keep]

Issue 24, item 4: as_of p99 <= 1 s at 10M events within the default memory budget.  Writing every
checkpoint file of a 10M-event log (96 files, each a whole image) takes tens of minutes of CPU, more than
this shared machine gives a run; a point's cost grows with the image it loads, so the last files are the
costliest.  This benchmark writes only the last ``--files`` files the store's fill would write (at the
offsets its spacing gives, ``CheckpointFiles.fill_spacing``; written in-process, from one replay of the
log from its start) and asks as_of at ``--points`` random offsets at or past the first of them, as a cold
process would: time travel (``TimeTravel`` over those files, the default budget) loads the nearest file
at or before the point and replays the events after it, then authorize, authorized_operations and
describe about a few resources (``as_of.asked``).  Its p99 bounds the p99 of random points over the whole
log, whose earlier points load smaller images.

Two workload shapes (``--shapes``): the history benchmark's mixed log of ``--events`` events (ACLs, SCRAM
users, tokens; ``scripts.bench.history.mixed_log``), asked about its topics and groups; and the diverse
ACL log of ``--acls`` ACLs (``scripts.bench.shapes``), asked the shape's own requests.  Each side (this
checkout, and ``--before-python``'s, e.g. main's) prepares its own copy of the cached log with its own
snapshot format, at the same offsets, then ``--repeat`` fresh interpreters measure: CPU of the querying
thread and wall per point (p50 / p99 / max), the first point's, the load of the nearest file alone, the
peak RSS beyond the opened log's beside the budget, the files' sizes and the CPU to write one.  The
machine may be shared: CPU is the figure to trust.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts.bench import as_of, logcache, shapes
from scripts.bench.history import mixed_log
from scripts.bench.report import REPO_ROOT, percentiles, print_table, spread, write_json

AS_OF_P99_S, AS_OF_TARGET = as_of.AS_OF_P99_10M_S, f"<= {as_of.AS_OF_P99_10M_S:g} ({as_of.AS_OF_P99_10M_ISSUE})"
HEADERS = ["measure", "after", "before", "target", "result"]
MIXED = "mixed"  # the history benchmark's mixed log (scripts.bench.history); other shapes are scripts.bench.shapes'



def file_offsets(files, count: int) -> list[int]:
    """The last ``count`` offsets the checkpoint fill of ``files`` (a ``CheckpointFiles``) would write files at (batch
    ends, its ``fill_spacing`` apart): both sides write their files there, so they answer the same points."""
    log, spacing = files.log, files.fill_spacing()
    found, since = [], log.start_offset
    for batch in log.batches(log.start_offset, log.end_offset):
        if batch.next_offset - since >= spacing:
            found.append(batch.next_offset)
            since = batch.next_offset
    return found[-count:]


def _open(path: Path, key_file: Path, read_only: bool):
    from secmeta.core.log import Log, LogConfig
    from secmeta.events.keyring import Keyring

    return Log.open(path, keyring=Keyring.from_file(key_file), config=LogConfig(fsync="never"), read_only=read_only)


def prepare(path: Path, key_file: Path, offsets: list[int]) -> dict:
    """Replay the log once from its start, writing the checkpoint files at ``offsets`` and, from the first on to the
    log's end, the delta files the fill writes between them (``CheckpointFiles.delta_spacing`` apart, each against
    the newest full file, read back in place as the fill reads it; none with a checkout that has no delta files)."""
    from secmeta.core.forensics.checkpoints import CheckpointFiles
    from secmeta.projections.gc_pause import paused_gc
    from secmeta.projections.image import SecurityDelta, SecurityImage
    from secmeta.projections.image_snapshot import SecurityImageSnapshot
    from secmeta.projections.snapshot import SNAPSHOT_FORMAT, write_snapshot

    out: dict = {"format": SNAPSHOT_FORMAT, "files": [], "write_cpu_s": [], "deltas": []}
    cpu = time.process_time()
    with _open(path, key_file, read_only=False) as log:
        files = CheckpointFiles(log)
        directory = files.directory
        step = files.delta_spacing(files.fill_spacing()) if hasattr(files, "write_delta") else None
        delta, at = SecurityDelta(SecurityImage.EMPTY), log.start_offset
        base = last = None  # the newest full file's offset, the newest file's
        with paused_gc():
            for target in [*offsets, *[log.end_offset][:log.end_offset > offsets[-1]]]:
                for batch in log.batches(at, target, strict=True):
                    delta.replay_all(log.decode(batch))
                    end = batch.next_offset
                    if step is not None and base is not None and end != target and end - last >= step:
                        began = time.process_time()
                        files.write_delta(base, delta, end)
                        out["deltas"].append({"offset": end, "base": base, "changes": len(delta.net()),
                                              "cpu_s": time.process_time() - began})
                        last = end
                if target not in offsets:
                    break  # the log's end: no full file there
                image = delta.apply(target)
                began = time.process_time()
                info = write_snapshot(directory, SecurityImageSnapshot(), image, next_offset=target,
                                      link=log.link_at(target), timestamp_ms=0, keyring=log.keyring)
                out["write_cpu_s"].append(time.process_time() - began)
                out["files"].append({"offset": target, "mb": info.size / 2**20, "acls": len(image.acls),
                                     "tokens": len(image.tokens), "users": len(image.scram)})
                # Go on from the file just written, read back in place, as the fill does: its delta files are
                # written against the image a point loads (they record where its table holds the ACLs they change).
                image = files.load(target) or image
                delta, at, base, last = SecurityDelta(image), target, target, target
        out["events"] = log.end_offset
    out["prepare_cpu_s"] = time.process_time() - cpu
    return out


def _write_questions(shape: str, size: int, count: int, path: Path) -> None:
    """``count`` points' requests, written for the measuring processes (made here: a shape's requests are drawn from
    its events, which the measured process should not hold): the mixed log's (``as_of.random_questions``), or the
    shape's own (``shapes.requests``)."""
    if shape == MIXED:
        rng = random.Random(7)
        points = [as_of.random_questions(rng) for _ in range(count)]
    else:
        requests = shapes.requests(shape, size, count * as_of.QUESTIONS, seed=7)
        points = [requests[i:i + as_of.QUESTIONS] for i in range(0, len(requests), as_of.QUESTIONS)]
    path.write_text(json.dumps([[[p, h, int(o), int(t), name] for p, h, o, t, name in asked] for asked in points]))


def _read_questions(path: Path) -> list[list]:
    from secmeta.core import AclOperation, ResourceType

    return [[(p, h, AclOperation(o), ResourceType(t), name) for p, h, o, t, name in asked]
            for asked in json.loads(path.read_text())]


def measure(path: Path, key_file: Path, points: int, seed: int, questions: Path) -> dict:
    """A cold process: as_of plus questions at random points past the first file (the first point timed apart),
    and the load of the nearest file alone."""
    from secmeta.core.config import StoreConfig
    from secmeta.core.forensics.checkpoints import CheckpointFiles
    from secmeta.core.forensics.timetravel import DEFAULT_MEMORY_BYTES, TimeTravel
    from secmeta.core.store.view import StoreView

    rng = random.Random(seed)
    asking = _read_questions(questions)
    config = StoreConfig()
    with _open(path, key_file, read_only=True) as log:
        files = CheckpointFiles(log)
        first, end = files.offsets()[0], log.end_offset
        out: dict = {"budget_mb": DEFAULT_MEMORY_BYTES / 2**20, "rss_open_mb": (rss := as_of._rss_mb())}
        as_of._reset_peak_rss()
        travel = TimeTravel(log, files=files)

        def point(n: int, questions: list) -> None:
            image = travel.image_at(n)
            as_of.asked(StoreView(image, config, gate=lambda: image), questions)

        samples = [as_of.timed(point, rng.randrange(first, end + 1), asking[rng.randrange(len(asking))])
                   for _ in range(points)]
        out["peak_rss_mb"] = as_of._peak_rss_mb() - rss
        out["held_mb"] = travel.held_bytes() / 2**20
        out["first_s"], out["first_cpu_s"] = samples[0]
        out |= {f"{name}_{p}": value for name, values in (("wall", [w for w, _ in samples]),
                                                          ("cpu", [c for _, c in samples]))
                for p, value in percentiles(values, (50, 99)).items()}
        out["cpu_max"] = max(c for _, c in samples)
        loads = []
        for offset in files.offsets():
            cpu = time.thread_time()
            files.load(offset)
            loads.append(time.thread_time() - cpu)
        out["load_cpu_s"] = loads
    return out


def _child(python: str, *args: str) -> dict:
    done = subprocess.run([python, "-m", "scripts.bench.as_of_tail", *args], check=True, stdout=subprocess.PIPE,
                          text=True, cwd=REPO_ROOT)
    return json.loads(done.stdout.splitlines()[-1])


def _log(shape: str, size: int) -> tuple[Path, Path]:
    """(the cached store, its key file) of the mixed log of ``size`` events, or of a shape of ``size`` ACLs."""
    if shape == MIXED:
        generated = mixed_log(size)
        return generated.store, generated.key_file
    cached = shapes.cached_store(shape, size)
    return cached.path, cached.key_file


def side(python: str, shape: str, size: int, offsets: list[int], points: int, repeat: int, copy: Path) -> dict:
    store, key_file = _log(shape, size)
    logcache.fresh_copy(logcache.CachedLog(store, key_file, {}), copy)
    common = [str(copy), str(key_file)]
    out = _child(python, "--child-prepare", *common, "--offsets", *map(str, offsets))
    out["disk_mb"] = sum(f.stat().st_size for f in (copy / "checkpoints").rglob("*") if f.is_file()) / 2**20
    _write_questions(shape, size, points * repeat, copy / "questions.json")
    out["runs"] = [_child(python, "--child-measure", *common, "--points", str(points), "--seed", str(7 + i),
                          "--questions", str(copy / "questions.json")) for i in range(repeat)]
    return out


def _median(row: dict | None, key: str) -> float | None:
    return None if row is None else statistics.median(run[key] for run in row["runs"])


def _spread(row: dict | None, key: str, fmt: str = ".2f") -> str:
    return "" if row is None else spread((run[key] for run in row["runs"]), fmt)


def table_rows(after: dict, before: dict | None, budget_mb: float) -> list[list]:
    def verdict(value: float | None, target: float) -> str:
        return "" if value is None else ("PASS" if value <= target else "MISS")

    def per_file(row: dict | None, fmt) -> str:
        return "" if row is None else fmt(row)

    return [
        ["as_of + answers, p99 CPU s", _spread(after, "cpu_p99"), _spread(before, "cpu_p99"), AS_OF_TARGET,
         verdict(_median(after, "cpu_p99"), AS_OF_P99_S)],
        ["as_of + answers, p99 wall s", _spread(after, "wall_p99"), _spread(before, "wall_p99"),
         AS_OF_TARGET, verdict(_median(after, "wall_p99"), AS_OF_P99_S)],
        ["as_of + answers, p50 CPU / wall s", f"{_median(after, 'cpu_p50'):.2f} / {_median(after, 'wall_p50'):.2f}",
         "" if before is None else f"{_median(before, 'cpu_p50'):.2f} / {_median(before, 'wall_p50'):.2f}", "", ""],
        ["first as_of (cold), CPU s", _spread(after, "first_cpu_s"), _spread(before, "first_cpu_s"),
         f"<= {as_of.FIRST_AS_OF_S:g}", verdict(_median(after, "first_cpu_s"), as_of.FIRST_AS_OF_S)],
        ["peak RSS beyond the open log, MB", _spread(after, "peak_rss_mb", ".0f"),
         _spread(before, "peak_rss_mb", ".0f"), f"<= {budget_mb:.0f} (budget)",
         verdict(_median(after, "peak_rss_mb"), budget_mb)],
        ["time travel's estimate of what it holds at the end, MB", _spread(after, "held_mb", ".0f"),
         _spread(before, "held_mb", ".0f"), "", ""],
        ["load of the last file alone, CPU s",
         f"{statistics.median(r['load_cpu_s'][-1] for r in after['runs']):.2f}",
         per_file(before, lambda b: f"{statistics.median(r['load_cpu_s'][-1] for r in b['runs']):.2f}"), "", ""],
        ["last file: size MB / ACLs / tokens",
         f"{after['files'][-1]['mb']:.0f} / {after['files'][-1]['acls']:,} / {after['files'][-1]['tokens']:,}",
         per_file(before, lambda b: f"{b['files'][-1]['mb']:.0f}"), "", ""],
        ["bytes per ACL of the last file", f"{after['files'][-1]['mb'] * 2**20 / after['files'][-1]['acls']:.0f}",
         per_file(before, lambda b: f"{b['files'][-1]['mb'] * 2**20 / b['files'][-1]['acls']:.0f}"), "", ""],
        ["CPU to write the last file, s", f"{after['write_cpu_s'][-1]:.1f}",
         per_file(before, lambda b: f"{b['write_cpu_s'][-1]:.1f}"), "", ""],
        ["disk of the files written (full / delta files), MB", _disk(after), per_file(before, _disk), "", ""],
    ]


def _disk(row: dict) -> str:
    """The files' bytes on disk, and how many full and delta files (the deltas' largest change count)."""
    deltas = row.get("deltas", [])
    most = max((d["changes"] for d in deltas), default=0)
    return f"{row['disk_mb']:.0f} ({len(row['files'])} full, {len(deltas)} delta, largest {most:,} changes)"


def main(argv: list[str] | None = None) -> int:
    from secmeta.core.forensics.checkpoints import CheckpointFiles

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000, help="the mixed log's events")
    parser.add_argument("--shapes", nargs="+", default=[MIXED, "diverse"], choices=[MIXED, *shapes.SHAPES])
    parser.add_argument("--acls", type=int, default=1_000_000, help="ACLs held at the end of the other shapes' logs")
    parser.add_argument("--files", type=int, default=2)
    parser.add_argument("--points", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before-python", help="another checkout's interpreter, measured side by side")
    parser.add_argument("--dir", type=Path, help="where to copy the log (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the copies")
    parser.add_argument("--child-prepare", nargs=2, metavar=("STORE", "KEY_FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--child-measure", nargs=2, metavar=("STORE", "KEY_FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=7, help=argparse.SUPPRESS)
    parser.add_argument("--questions", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--offsets", type=int, nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_prepare:
        print(json.dumps(prepare(Path(args.child_prepare[0]), Path(args.child_prepare[1]), args.offsets)))
        return 0
    if args.child_measure:
        print(json.dumps(measure(Path(args.child_measure[0]), Path(args.child_measure[1]), args.points, args.seed,
                                 args.questions)))
        return 0
    home = Path(tempfile.mkdtemp(dir=args.dir))
    results: dict = {}
    try:
        for shape in args.shapes:
            size = args.events if shape == MIXED else args.acls
            before = None
            store, key_file = _log(shape, size)
            probe = logcache.fresh_copy(logcache.CachedLog(store, key_file, {}), home / f"{shape}-offsets")
            with _open(probe, key_file, read_only=True) as log:  # a copy: an open never touches the cache
                offsets = file_offsets(CheckpointFiles(log), args.files)
            shutil.rmtree(probe, ignore_errors=True)
            if args.before_python:
                before = side(args.before_python, shape, size, offsets, args.points, args.repeat,
                              home / f"{shape}-before")
                if not args.keep:
                    shutil.rmtree(home / f"{shape}-before", ignore_errors=True)
            after = side(sys.executable, shape, size, offsets, args.points, args.repeat, home / f"{shape}-after")
            if not args.keep:
                shutil.rmtree(home / f"{shape}-after", ignore_errors=True)
            results[shape] = {"after": after, "before": before, "size": size}
            budget = after["runs"][0]["budget_mb"]
            what = f"{size:,}-event mixed log" if shape == MIXED else f"{shape} log of {size:,} ACLs"
            print_table(f"as_of at random points past the last {args.files} checkpoint files of the {what} (offsets "
                        f"{after['files'][0]['offset']:,}-{after['events']:,}), budget {budget:.0f} MB; median "
                        f"(min-max) of {args.repeat} cold processes; machine shared (load {os.getloadavg()[0]:.0f}): "
                        "CPU of the querying thread", HEADERS, table_rows(after, before, budget))
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    print(f"wrote {write_json('as_of_tail', results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
