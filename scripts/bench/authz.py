"""Authorizer benchmark in the shape of Kafka's AuthorizerBenchmark, with pycasbin side by side.

    python -m scripts.bench.authz [--sizes 10000 100000 1000000] [--casbin-sizes 10000]
                                  [--growth-shapes issue15 kafka]

Per image size: authorize() p50/p99, authorized_operations, authorize_by_resource_type,
describe_acls by resource (MATCH filter), image build, snapshot write and load,
bytes per ACL; pycasbin deciding the same requests over the same ACLs; SCRAM
alter throughput for 1,000 users through the store (PBKDF2 + sealing + fsync); and
authorize() growth over the sizes in issue 15's shape (foo-N-bar topics, 10 ACLs each,
20% DENY, hosts 10.0.a.b) beside the AuthorizerBenchmark shape (``authz_growth``: every
size timed in turns, p50 over batches of calls, p99 over single calls); and the CPU ms of a one-ACL
write on a topic held by 10k and 100k principals (flat: the node's principal map is edited, not rebuilt).
Targets (DESIGN.md, issue 15): authorize p50 <= 10 us, p99 <= 20 us, p50 growth < x2
from 10k to 1M; authorized_operations and describe <= 1 ms at 200k; snapshot of 1M ACLs
loads in <= 5 s; <= 600 bytes per ACL.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

from scripts.bench import authz_core, authz_growth
from scripts.bench.peers import casbin_decide, casbin_enforcer
from scripts.bench.report import latencies_ns, percentiles, print_table, write_json
from secmeta.core import (
    RequestContext,
    ScramCredentialInfo,
    ScramMechanism,
    StoreConfig,
    UserScramCredentialUpsertion,
)
from secmeta.core.store.facade import SecurityStore
from secmeta.events.keyring import Keyring
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.acls import AclsDelta, AclsImage
from secmeta.projections.image import SecurityImage
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import read_snapshot, write_snapshot


def casbin_row(n: int, decisions: int) -> dict:
    """pycasbin over the same ACLs and requests as secmeta's row of size n."""
    acls = [
        (b.principal, b.host, b.restype, b.name, b.resource_pattern_type, b.operation, b.permission_type)
        for _, b in authz_core.bindings(n)
    ]
    start = time.perf_counter()
    enforcer = casbin_enforcer(acls)
    build = time.perf_counter() - start
    reqs = authz_core.random_requests(n, decisions + 1)
    casbin_decide(enforcer, *_casbin_args(reqs[0]))
    samples = latencies_ns(lambda *r: casbin_decide(enforcer, *_casbin_args(r)), reqs[1:])
    pct = percentiles(samples)
    return {"acls": n, "build_s": build, "authorize_p50_us": pct["p50"] / 1000, "authorize_p99_us": pct["p99"] / 1000}


def _casbin_args(request):
    principal, host, op, rtype, name = request
    return principal, host, rtype, name, op


def snapshot_row(n: int, directory: Path) -> dict:
    """Write a SecurityImage of n ACLs as a snapshot and time loading it back."""
    image = SecurityImage(SecurityImage.EMPTY.scram, authz_core.build_image(n), SecurityImage.EMPTY.tokens, n)
    codec = SecurityImageSnapshot()
    start = time.perf_counter()
    info = write_snapshot(directory, codec, image, next_offset=n, link=b"\0" * 32, timestamp_ms=0)
    written = time.perf_counter() - start
    del image
    gc.collect()
    start = time.perf_counter()
    _, loaded = read_snapshot(info.path, codec)
    load = time.perf_counter() - start
    assert len(loaded.acls) == n
    info.path.unlink()
    return {"snapshot_write_s": written, "snapshot_load_s": load, "snapshot_bytes_per_acl": info.size / n}


def scram_alter_rate(directory: Path, users: int = 1000) -> float:
    Keyring.generate_file(directory / "keys.json")
    with SecurityStore.open(directory / "scram", StoreConfig(), keyring=Keyring.from_file(directory / "keys.json")) as store:
        alterations = [
            UserScramCredentialUpsertion(f"user-{i}", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), f"pw-{i}".encode())
            for i in range(users)
        ]
        start = time.perf_counter()
        for i in range(0, users, 100):
            store.alter_user_scram_credentials(alterations[i:i + 100], context=RequestContext())
        return users / (time.perf_counter() - start)


def wide_write_ms(principals: int, writes: int = 50) -> float:
    """CPU ms of one delta adding one ACL on a topic held by ``principals`` principals (a Multi node)."""
    base = AclsImage.of(
        (f"id{i}", AclBinding.of(ResourceType.TOPIC, "wide", PatternType.LITERAL, f"User:u{i}", "*",
                                 AclOperation.READ, AclPermissionType.ALLOW))
        for i in range(principals)
    )
    deltas = []
    for i in range(writes):
        delta = AclsDelta(base)
        delta.add(f"new{i}", AclBinding.of(ResourceType.TOPIC, "wide", PatternType.LITERAL, f"User:new{i}", "*",
                                           AclOperation.WRITE, AclPermissionType.ALLOW))
        deltas.append(delta)
    start = time.process_time()
    for delta in deltas:
        delta.apply()
    return (time.process_time() - start) / writes * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--casbin-sizes", type=int, nargs="*", default=[10_000])
    parser.add_argument("--casbin-decisions", type=int, default=200)
    parser.add_argument("--growth-shapes", nargs="*", choices=authz_growth.SHAPES, default=list(authz_growth.SHAPES))
    args = parser.parse_args(argv)

    rows, peers = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            print(f"measuring secmeta at {n:,} ACLs ...", flush=True)
            row = authz_core.measure(n)
            row["bytes_per_acl"] = authz_core.bytes_per_acl(min(n, 100_000))
            row.update(snapshot_row(n, Path(tmp)))
            rows.append(row)
            gc.collect()
        for n in args.casbin_sizes:
            print(f"measuring pycasbin at {n:,} policies ...", flush=True)
            peers.append(casbin_row(n, args.casbin_decisions))
        print("measuring SCRAM alter throughput ...", flush=True)
        scram_rate = scram_alter_rate(Path(tmp))
    growth = []
    for shape in args.growth_shapes:
        print(f"measuring authorize growth, {shape} shape ...", flush=True)
        growth += authz_growth.measure_shape(shape, args.sizes)
        gc.collect()

    print_table(
        "secmeta authorizer (latencies in microseconds)",
        ["ACLs", "authz p50", "authz p99", "ops p50", "descr p50", "byType p50", "build s", "snap load s", "B/ACL"],
        [[r["acls"], r["authorize_p50_us"], r["authorize_p99_us"], r["authorized_ops_p50_us"],
          r["describe_by_resource_p50_us"], r["by_resource_type_p50_us"], r["build_s"], r["snapshot_load_s"],
          r["bytes_per_acl"]] for r in rows],
    )
    by_size = {r["acls"]: r for r in rows}
    print_table(
        "side by side: same ACLs, same requests",
        ["ACLs", "secmeta p50 us", "pycasbin p50 us", "secmeta p99 us", "pycasbin p99 us", "speed-up"],
        [[p["acls"], by_size[p["acls"]]["authorize_p50_us"], p["authorize_p50_us"], by_size[p["acls"]]["authorize_p99_us"],
          p["authorize_p99_us"], f"{p['authorize_p50_us'] / by_size[p['acls']]['authorize_p50_us']:,.0f}x"]
         for p in peers if p["acls"] in by_size],
    )
    if growth:
        authz_growth.print_rows(growth)
    wide = {n: wide_write_ms(n) for n in (10_000, 100_000)}
    for n, ms in wide.items():
        print(f"1-ACL write on a topic held by {n:,} principals: {ms:.3f} ms CPU (target: flat, <= 0.3 ms)")
    print(f"SCRAM alter: {scram_rate:,.0f} users/s (1,000 users, requests of 100, PBKDF2 4096 + AES-GCM + fsync)")
    path = write_json("authz", {"secmeta": rows, "pycasbin": peers, "scram_alter_users_per_s": scram_rate, "growth": growth,
                                "wide_write_ms": wide})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
