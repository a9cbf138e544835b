"""How fast a store comes back: full log replay vs snapshot + tail.

    python -m scripts.bench.rebuild [--events 200000]

Writes a store of N ACL creations in requests of 1000 (as the controller would),
then times SecurityStore.open three ways: replaying the whole log, loading a
snapshot taken at the end, and a snapshot at 90% plus a 10% tail.
Targets (DESIGN.md): rebuild from the log >= 200k events/s.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from core.config import StoreConfig
from core.log import Log
from core.store import SecurityStore
from events.keyring import Keyring
from events.records import AclCreated, Envelope
from scripts.bench import authz_core
from scripts.bench.report import print_table, rate, write_json

TARGET = 200_000


def write_log(path: Path, keyring: Keyring, n: int) -> None:
    pairs = authz_core.bindings(n)
    with Log.open(path, keyring=keyring) as log:
        for start in range(0, n, 1000):
            ts = 1_700_000_000_000 + start
            log.append([Envelope(-1, ts, "User:admin", "10.0.0.1", f"r{start}", AclCreated(str(uuid.UUID(int=i)), b))
                        for i, (_, b) in enumerate(pairs[start:start + 1000], start)])


def timed_open(path: Path, keyring: Keyring) -> tuple[float, SecurityStore]:
    start = time.perf_counter()
    store = SecurityStore.open(path, StoreConfig(), keyring=keyring)
    return time.perf_counter() - start, store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args(argv)
    n = args.events
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        Keyring.generate_file(tmp / "keys.json")
        keyring = Keyring.from_file(tmp / "keys.json")
        print(f"writing {n:,} ACL events ...", flush=True)
        write_log(tmp / "s", keyring, n)

        took, store = timed_open(tmp / "s", keyring)
        rows.append(["full log replay", n, took, rate(n, took), f">= {TARGET:,}/s", "PASS" if n / took >= TARGET else "MISS"])
        store.snapshot()
        store.close()
        took, store = timed_open(tmp / "s", keyring)
        rows.append(["snapshot at the end", 0, took, rate(n, took), "", ""])
        store.close()

        tail = n // 10
        (tmp / "t").mkdir()
        write_log(tmp / "t" / "s", keyring, n - tail)
        _, store = timed_open(tmp / "t" / "s", keyring)
        store.snapshot()
        store.close()
        with Log.open(tmp / "t" / "s", keyring=keyring) as log:
            pairs = authz_core.bindings(n)[n - tail:]
            for start in range(0, tail, 1000):
                log.append([Envelope(-1, 1, "User:admin", "h", "tail", AclCreated(str(uuid.uuid4()), b)) for _, b in pairs[start:start + 1000]])
        took, store = timed_open(tmp / "t" / "s", keyring)
        rows.append(["snapshot at 90% + 10% tail", tail, took, rate(n, took), "", ""])
        store.close()

    print_table(f"rebuild of a store with {n:,} ACLs", ["how", "events replayed", "open s", "events/s equivalent", "target", "result"], rows)
    path = write_json("rebuild", [dict(zip(["how", "replayed", "open_s", "events_per_s", "target", "result"], r)) for r in rows])
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
