"""What a writer sees while the time-travel fill writes a delta file: small-write throughput and latency.

    python -m scripts.bench.fill_writes STORE KEY_FILE [ROUNDS]

STORE: a copy of a large log with checkpoint files near its end (issue 24: the mixed 10M log, prepared with
``as_of_tail --child-prepare STORE KEY_FILE --offsets 9924388``, about 1.5 min).  It is written to.  One process
opens it as a writer (time travel on, policy snapshots off) and, ROUNDS times, runs three windows back to back:
  idle   : small writes, no fill running
  thread : the old route (CheckpointFiles._fill in a thread of this process), the stretch's last delta deleted first
  fork   : the new route (_fill_quietly -> _fill_forked: a forked child per stretch)
The open replays the log (the cached log has no policy snapshot: ~140 s at 10M events).  The history index is
kept from starting (its first catch-up holds the GIL for minutes in every window alike) unless ``--with-history``
is given last.  Each window runs small writes (create_acls of one ACL) until the fill is done (at least MIN_S seconds).  Target: a
fill should leave writers as they are without one (the idle window).  Prints each window as JSON on stderr, all of
them on stdout, then a table (median, min-max) on stderr.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from secmeta.core import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    RequestContext,
    ResourceType,
    SecurityStore,
)
from secmeta.core.config import StoreConfig
from secmeta.events.keyring import Keyring
from secmeta.projections.snapshot import SnapshotPolicy, list_snapshots

ADMIN = RequestContext("User:admin", "10.0.0.1")
MIN_S = 2.0


def binding(i: int) -> AclBinding:
    return AclBinding.of(ResourceType.TOPIC, f"bench-fill-{i}", PatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)


def window(store, start_fill, tag, counter):
    files = store.timetravel.files
    lat = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    tcpu0 = time.thread_time()
    fill_began = time.perf_counter()
    start_fill()
    fill_done = None
    while True:
        t = time.perf_counter()
        store.create_acls([binding(counter[0])], context=ADMIN)
        counter[0] += 1
        lat.append(time.perf_counter() - t)
        now = time.perf_counter()
        alive = files._thread is not None and files._thread.is_alive()
        if not alive and fill_done is None:
            fill_done = now - fill_began
        if not alive and now - wall0 >= MIN_S:
            break
    wall = time.perf_counter() - wall0
    lat.sort()
    return {"mode": tag, "writes": len(lat), "wall_s": wall, "writes_per_s": len(lat) / wall,
            "p50_ms": 1e3 * lat[len(lat) // 2], "p99_ms": 1e3 * lat[int(len(lat) * 0.99)],
            "max_ms": 1e3 * lat[-1], "proc_cpu_s": time.process_time() - cpu0,
            "writer_thread_cpu_s": time.thread_time() - tcpu0, "fill_wall_s": fill_done}


def drop_last_delta(files):
    base = files.offsets()[-1]
    deltas = files.delta_offsets(base)
    path = list_snapshots(files.delta_directory(base))[-1]
    path.unlink()
    return deltas[-1]


def main():
    path, key = Path(sys.argv[1]), Path(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    t = time.perf_counter()
    config = StoreConfig(snapshot_policy=SnapshotPolicy(None, None, None))  # the log as deployed: fsync always
    results = []
    if "--with-history" not in sys.argv:
        # The history index's first catch-up over 10M events runs in a thread for minutes: it would hold the GIL in
        # every window alike.  Time travel (images, checkpoint files, the fill) stays on.
        from secmeta.core.forensics.history_index import HistoryIndex
        HistoryIndex.start = lambda self: None
    with SecurityStore.open(path, config, keyring=Keyring.from_file(key)) as store:
        files = store.timetravel.files
        files.wait()
        print(f"open {time.perf_counter() - t:.1f}s end={store.log.end_offset} fulls={files.offsets()[-3:]} "
              f"deltas={files.delta_offsets(files.offsets()[-1])}", file=sys.stderr, flush=True)
        # The bench's own writes grow the log: keep the regime fixed.  No full file becomes due (the stretch stays a
        # stretch of deltas 26k events apart, as at 10M events), and nothing starts a fill but the window itself
        # (TimeTravel.note would otherwise start one whenever the writes pass a delta spacing).
        files.fill_spacing = lambda: 10**8
        files.delta_spacing = lambda spacing: 26_000
        files.due = lambda image: False
        files.delta_due = lambda: False
        counter = [0]
        for r in range(rounds):
            for mode in ("idle", "thread", "fork"):
                if mode == "idle":
                    start = lambda: None  # noqa: E731
                elif mode == "thread":
                    drop_last_delta(files)
                    start = lambda: files._run(files._fill, None)  # noqa: E731  the old route: in this process
                else:
                    drop_last_delta(files)
                    start = lambda: files._run(files._fill_quietly, None)  # noqa: E731  the new route: forked
                row = window(store, start, mode, counter)
                row["round"] = r
                row["deltas_after"] = files.delta_offsets(files.offsets()[-1])
                results.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps(results))
    print(table(results), file=sys.stderr)


def table(rows: list[dict]) -> str:
    def cell(values: list[float], fmt: str) -> str:
        return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"

    out = ["| window | writes/s | p99 ms | max ms | writer thread CPU us/write | fill wall s | target |",
           "|---|---|---|---|---|---|---|"]
    for mode in ("idle", "thread", "fork"):
        r = [x for x in rows if x["mode"] == mode]
        out.append(f"| {mode} | {cell([x['writes_per_s'] for x in r], '.0f')} | {cell([x['p99_ms'] for x in r], '.1f')} | "
                   f"{cell([x['max_ms'] for x in r], '.0f')} | "
                   f"{cell([1e6 * x['writer_thread_cpu_s'] / x['writes'] for x in r], '.0f')} | "
                   f"{'' if mode == 'idle' else cell([x['fill_wall_s'] for x in r], '.1f')} | "
                   f"{'-' if mode == 'idle' else 'as idle'} |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
