"""Benchmark of the durable log, with the eventsourcing library side by side.

    python -m scripts.bench.log [--events 200000] [--singles 2000] [--dir /tmp]

Measures, in one run on this machine:
  raw fsync rate         write 150 bytes + fdatasync, the ceiling for durable single appends
  single durable appends one event per batch, fsync each (target >= 70% of raw fsync)
  batched append         batches of 1000 events, fsync per batch (target >= 150k events/s)
  read + decode          every event read back and decoded (target >= 200k events/s)
  eventsourcing          the same number of events through its POPO (memory) and SQLite recorders
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from scripts.bench.peers import eventsourcing_append_replay
from scripts.bench.report import print_table, rate, write_json
from secmeta.core.log import Log, LogConfig
from secmeta.events.keyring import Keyring
from secmeta.events.records import AclCreated, Envelope
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

TARGET_BATCHED = 150_000
TARGET_READ = 200_000
TARGET_SINGLE_RATIO = 0.70
ROUNDS = 5


def envelopes(n: int, start: int = 0) -> list[Envelope]:
    """n AclCreated envelopes as one request makes them: one actor, request id and time."""
    out = []
    ts = 1_700_000_000_000 + start
    for i in range(start, start + n):
        binding = AclBinding.of(
            ResourceType.TOPIC, f"orders-{i % 5000}", PatternType.LITERAL, f"User:svc-{i % 700}", "*",
            AclOperation.READ, AclPermissionType.ALLOW,
        )
        out.append(Envelope(-1, ts, "User:admin", "10.0.0.1", f"req-{start}", AclCreated(str(uuid.UUID(int=i)), binding)))
    return out


def raw_fsync_rate(directory: Path, n: int) -> float:
    path = directory / "raw-fsync.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    record = b"x" * 150
    try:
        start = time.perf_counter()
        for _ in range(n):
            os.write(fd, record)
            os.fdatasync(fd)
        return rate(n, time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000, help="events for batched append and read")
    parser.add_argument("--singles", type=int, default=2_000, help="single durable appends")
    parser.add_argument("--dir", default=None, help="where to put the store (default: a temp dir)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        tmp = Path(tmp)
        Keyring.generate_file(tmp / "keys.json")
        keyring = Keyring.from_file(tmp / "keys.json")
        print(f"preparing {args.events:,} events ...", flush=True)
        batches = [envelopes(1000, s) for s in range(0, args.events, 1000)]
        singles = envelopes(args.singles, args.events)

        # Interleave rounds so raw fsync and secmeta see the same machine load; report medians.
        raw_rates, single_rates = [], []
        with Log.open(tmp / "single", keyring=keyring, config=LogConfig(fsync="always")) as log:
            per_round = max(1, len(singles) // ROUNDS)
            for r in range(ROUNDS):
                raw_rates.append(raw_fsync_rate(tmp, per_round))
                start = time.perf_counter()
                for env in singles[r * per_round : (r + 1) * per_round]:
                    log.append([env])
                single_rates.append(rate(per_round, time.perf_counter() - start))
        fsync_rate, single_rate = statistics.median(raw_rates), statistics.median(single_rates)

        with Log.open(tmp / "batched", keyring=keyring, config=LogConfig(fsync="always")) as log:
            start = time.perf_counter()
            for batch in batches:
                log.append(batch)
            batched_rate = rate(args.events, time.perf_counter() - start)
            del batches, singles  # the read is timed without 200k prepared inputs held alive
            gc.collect()
            start = time.perf_counter()
            count = sum(1 for _ in log.read())
            read_rate = rate(count, time.perf_counter() - start)
            assert count == args.events

        print("running eventsourcing peers ...", flush=True)
        popo = eventsourcing_append_replay(args.events, 1000, recorder="popo")
        sqlite = eventsourcing_append_replay(args.events, 1000, recorder="sqlite", path=tmp / "es.sqlite")

    ratio = single_rate / fsync_rate
    rows = [
        ["raw fsync (write+fsync)", fsync_rate, "ceiling", ""],
        ["secmeta single durable appends", single_rate, f">= {TARGET_SINGLE_RATIO:.0%} of raw", f"{ratio:.0%} {'PASS' if ratio >= TARGET_SINGLE_RATIO else 'MISS'}"],
        ["secmeta batched append (1000/fsync)", batched_rate, f">= {TARGET_BATCHED:,}", "PASS" if batched_rate >= TARGET_BATCHED else "MISS"],
        ["secmeta read + decode", read_rate, f">= {TARGET_READ:,}", "PASS" if read_rate >= TARGET_READ else "MISS"],
        ["eventsourcing POPO append (no fsync)", popo["append_events_per_s"], "peer", ""],
        ["eventsourcing POPO replay", popo["replay_events_per_s"], "peer", ""],
        ["eventsourcing SQLite append", sqlite["append_events_per_s"], "peer", ""],
        ["eventsourcing SQLite replay", sqlite["replay_events_per_s"], "peer", ""],
    ]
    print_table(f"log benchmark: {args.events:,} events, {args.singles:,} single appends", ["measure", "events/s", "target", "result"], rows)
    path = write_json("log", {r[0]: {"events_per_s": r[1], "target": r[2], "result": r[3]} for r in rows})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
