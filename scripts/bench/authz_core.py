"""Micro benchmark of the ACL image and authorizer (pure Python, no store).

Images in the shape of Kafka's AuthorizerBenchmark: 10% group resources,
20% prefixed patterns, 20% DENY ACLs, wildcard hosts, the rest literal
topics; principals ``User:user-N``; a few '*' and 'User:*' ACLs.

    .venv/bin/python scripts/bench/authz_core.py [--sizes 10000,100000,200000] [--json out.json]

Importable: ``build_image(n, seed)`` and ``random_requests(n, count, seed)``.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
import tracemalloc
import uuid

from scripts.bench.report import latencies_ns, percentiles
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.acls import AclsDelta, AclsImage
from secmeta.projections.authorizer import (
    authorize,
    authorize_by_resource_type,
    authorized_operations,
)

WORDS = ("orders", "payments", "clicks", "inventory", "audit-log", "user-events", "metrics")
PRINCIPALS = 1000
ALLOW_OPS = (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALL)
REQUEST_OPS = (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)


def _resource(i: int, seed: int) -> tuple[ResourceType, PatternType, str, str]:
    """Resource i of an image: (type, pattern type, name, principal of its ALLOW)."""
    resource_type = ResourceType.GROUP if i % 10 == 0 else ResourceType.TOPIC
    pattern_type = PatternType.PREFIXED if i % 5 == 1 else PatternType.LITERAL
    name = f"{WORDS[i % len(WORDS)]}.{i}"
    if pattern_type == PatternType.PREFIXED:
        name += "-"
    user = (i * 2654435761 + seed) % PRINCIPALS
    principal = "User:*" if i % 100 == 7 else f"User:user-{user}"
    return resource_type, pattern_type, name, principal


def _resources_for(n: int) -> int:
    """How many resources give n ACLs (one ALLOW each, a DENY on every 4th)."""
    return max(1, (n * 4) // 5)


def bindings(n: int, seed: int = 0) -> list[tuple[str, AclBinding]]:
    """n (acl_id, binding) pairs with random UUID ids."""
    rng = random.Random(seed)
    out: list[tuple[str, AclBinding]] = [
        (
            str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            AclBinding.of(
                resource_type,
                "*",
                PatternType.LITERAL,
                "User:monitor",
                "*",
                AclOperation.DESCRIBE,
                AclPermissionType.ALLOW,
            ),
        )
        for resource_type in (ResourceType.TOPIC, ResourceType.GROUP)
    ]
    i = 0
    while len(out) < n:
        resource_type, pattern_type, name, principal = _resource(i, seed)
        op = ALLOW_OPS[i % 7 % 4]
        out.append(
            (
                str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                AclBinding.of(
                    resource_type, name, pattern_type, principal, "*", op, AclPermissionType.ALLOW
                ),
            )
        )
        if i % 4 == 0 and len(out) < n:
            denied = f"User:user-{rng.randrange(PRINCIPALS)}"
            out.append(
                (
                    str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                    AclBinding.of(
                        resource_type,
                        name,
                        pattern_type,
                        denied,
                        "*",
                        REQUEST_OPS[i % 3],
                        AclPermissionType.DENY,
                    ),
                )
            )
        i += 1
    return out


def image_of(pairs: list[tuple[str, AclBinding]], base: AclsImage = AclsImage.EMPTY) -> AclsImage:
    """Apply all pairs to the base image in one delta."""
    delta = AclsDelta(base)
    for acl_id, binding in pairs:
        delta.add(acl_id, binding)
    return delta.apply()


def build_image(n: int, seed: int = 0) -> AclsImage:
    """An image of n ACLs in the benchmark's shape."""
    return image_of(bindings(n, seed))


def random_requests(
    n: int, count: int, seed: int = 0
) -> list[tuple[str, str, AclOperation, ResourceType, str]]:
    """Requests (principal, host, operation, type, name) against build_image(n, seed).

    60% name an existing literal resource, 20% fall under a prefix, 20% name
    no resource; half use the principal of the resource's ALLOW.
    """
    rng = random.Random(seed + 1)
    resources = _resources_for(n)
    out = []
    for _ in range(count):
        i = rng.randrange(resources)
        roll = rng.random()
        if roll < 0.2:
            i -= (i - 1) % 5  # a prefixed resource (i % 5 == 1)
            if i < 1:
                i = 1
        resource_type, pattern_type, name, principal = _resource(i, seed)
        if pattern_type == PatternType.PREFIXED:
            name += f"part-{rng.randrange(100)}"
        if roll > 0.8:
            name = f"unknown-{rng.randrange(1 << 30)}"
        if rng.random() < 0.5 or principal == "User:*":
            principal = f"User:user-{rng.randrange(PRINCIPALS)}"
        host = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        out.append((principal, host, rng.choice(REQUEST_OPS), resource_type, name))
    return out


def _time_each(fn, calls) -> tuple[float, float]:
    """(p50, p99) in microseconds of each ``fn(*args)`` (``report.latencies_ns``, ``report.percentiles``)."""
    found = percentiles(latencies_ns(fn, calls))
    return found["p50"] / 1000, found["p99"] / 1000


def bytes_per_acl(n: int, seed: int = 0) -> float:
    """Memory held by an image of n ACLs (ids, bindings and index), per ACL."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    pairs = bindings(n, seed)
    image = image_of(pairs)
    del pairs
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del image
    return held / n


def measure(n: int, seed: int = 0, requests: int = 20000) -> dict:
    """One row of the table for an image of n ACLs."""
    pairs = bindings(n, seed)
    gc.collect()
    start = time.perf_counter()
    image = image_of(pairs)
    build_s = time.perf_counter() - start
    del pairs
    reqs = random_requests(n, requests, seed)
    gc.collect()
    gc.disable()
    try:
        warm = reqs[:1000]
        _time_each(lambda *r: authorize(image, *r), warm)
        authz = _time_each(lambda *r: authorize(image, *r), reqs)
        ops = _time_each(
            lambda p, h, o, t, name: authorized_operations(image, p, h, t, name), reqs[:5000]
        )
        describe = _time_each(
            lambda p, h, o, t, name: image.describe(
                AclBindingFilter.of(t, name, PatternType.MATCH)
            ),
            reqs[:5000],
        )
        by_type = _time_each(
            lambda p, h, o, t, name: authorize_by_resource_type(image, p, h, o, t), reqs[:2000]
        )
        one = bindings(1, seed + 99)[-1]
        create = _time_each(lambda pair: image_of([pair], image), [(one,)] * 200)
    finally:
        gc.enable()
    return {
        "acls": n,
        "build_s": round(build_s, 3),
        "authorize_p50_us": authz[0],
        "authorize_p99_us": authz[1],
        "authorized_ops_p50_us": ops[0],
        "authorized_ops_p99_us": ops[1],
        "describe_by_resource_p50_us": describe[0],
        "describe_by_resource_p99_us": describe[1],
        "by_resource_type_p50_us": by_type[0],
        "by_resource_type_p99_us": by_type[1],
        "create_one_p50_us": create[0],
    }


COLUMNS = (
    ("acls", "ACLs", 0),
    ("build_s", "build s", 2),
    ("authorize_p50_us", "authz p50", 2),
    ("authorize_p99_us", "authz p99", 2),
    ("authorized_ops_p50_us", "ops p50", 2),
    ("authorized_ops_p99_us", "ops p99", 2),
    ("describe_by_resource_p50_us", "descr p50", 2),
    ("describe_by_resource_p99_us", "descr p99", 2),
    ("by_resource_type_p50_us", "byType p50", 2),
    ("by_resource_type_p99_us", "byType p99", 2),
    ("create_one_p50_us", "create1 p50", 2),
)


def table(rows: list[dict]) -> str:
    """The rows as a fixed-width text table."""
    lines = [" ".join(f"{title:>11}" for _, title, _ in COLUMNS)]
    for row in rows:
        lines.append(" ".join(f"{row[key]:>11.{digits}f}" for key, _, digits in COLUMNS))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,200000")
    parser.add_argument("--memory-size", type=int, default=100000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    rows = [measure(int(size), args.seed) for size in args.sizes.split(",")]
    print("latencies in microseconds")
    print(table(rows))
    memory = bytes_per_acl(args.memory_size, args.seed)
    print(f"memory: {memory:.0f} bytes per ACL at {args.memory_size} ACLs (tracemalloc)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(
                {"rows": rows, "bytes_per_acl": memory, "memory_acls": args.memory_size},
                out,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
