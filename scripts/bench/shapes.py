"""Workload shapes for the scale benchmarks: one place that builds every shape's ACL log.

Issue 24: a figure holds only if it holds on more than one shape of ACLs.  Three shapes:

- ``current``: the shape the issue-15 benchmarks built (``authz_core.bindings``): about 1.25
  ACLs per resource, host ``*``, 10% groups, 20% prefixed, 20% DENY, 1,000 principals;
- ``kafka``: Kafka's jmh AuthorizerBenchmark (``prepareAclCache``): resources
  ``foo-bar35_resource-N`` (every 10th a GROUP, every 5th PREFIXED), each with one READ ALLOW
  ACL for each of ``ACLS_PER_RESOURCE`` principals ``User:userK`` (K < ACLS_PER_RESOURCE) and
  host ``*``, plus a READ DENY for ``DENY_SHARE`` of them; a PREFIXED topic
  ``foo-bar35_resource-`` with ``User:test-user`` on ``PREFIX_HOSTS`` addresses; the literal
  topic ``*`` with ``User:test-user`` on one address per 100 ACLs;
- ``diverse``: the shape issue 24 observed: about ten ACLs per resource, each from a different
  principal of ``DIVERSE_PRINCIPALS``, 80% restricted to one client address (a few to a CIDR
  range), topics, groups and transactional ids, 30% PREFIXED, six operations, 10% DENY, and
  deletions: after every request of 1,000 creations a request deletes 35 live ACLs, so n ACLs
  held take about 1.07 n events (200k ACLs: about 214k events).

Every shape is a list of requests, each a list of AclCreated / AclDeleted events, exactly what
``SecurityStore.create_acls`` / ``delete_acls`` (with exact filters) would log for them; ids
are UUIDs drawn from the seed.  ``write_log`` appends them through ``Log.append`` (the bulk
path: one batch per request, ``BATCH_MS`` apart from ``FIRST_TS``), and ``cached_store``
keeps one such store per (shape, n, seed, ``VERSION``) under ``bench-cache/shapes`` (made
once, copied by ``copy_store`` for benchmarks that write).

    python -m scripts.bench.shapes [--sizes 200000] [--shapes current kafka diverse]

prints each shape's counts (events, ACLs held, resources, principals, hosts) and builds its cache.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from scripts.bench import authz_core
from scripts.bench.report import REPO_ROOT, print_table
from secmeta.events.keyring import Keyring
from secmeta.events.records import AclCreated, AclDeleted, Envelope
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

VERSION = 1  # bump when a shape's events change: the cache is keyed by it
CACHE_DIR = REPO_ROOT / "bench-cache" / "shapes"
FIRST_TS = 1_700_000_000_000
BATCH_MS = 1000  # one request per simulated second
REQUEST_ACLS = 1000

ACLS_PER_RESOURCE = 10  # Kafka's aclCount parameter
DENY_SHARE = 0.2  # Kafka's denyPercentage parameter, 20
PREFIX_HOSTS = 1000  # Kafka's hostPreCount
KAFKA_PREFIX = "foo-bar35_resource-"
KAFKA_USER = "User:test-user"

DIVERSE_PRINCIPALS = 50_000
DIVERSE_HOSTS = 20_000
DIVERSE_DELETES = 35  # per request of 1,000 creations
DIVERSE_OPERATIONS = (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE,
                      AclOperation.ALTER, AclOperation.DELETE)
DIVERSE_TYPES = (ResourceType.TOPIC, ResourceType.TOPIC, ResourceType.TOPIC, ResourceType.GROUP,
                 ResourceType.TRANSACTIONAL_ID)
WORDS = ("orders", "payments", "clicks", "inventory", "audit", "billing", "fraud", "search", "ledger", "events")

Request = tuple[str, str, AclOperation, ResourceType, str]  # principal, host, operation, type, name
Events = list[list[AclCreated | AclDeleted]]  # per request


@dataclass(frozen=True)
class Shape:
    name: str
    summary: str
    events: Callable[[int, int], Events]  # (n ACLs held at the end, seed) -> requests
    requests: Callable[[int, int, int], list[Request]]  # (n, count, seed) -> authorize calls


def _uuids(rng: random.Random) -> Callable[[], str]:
    return lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _chunked(created: list[AclCreated]) -> Events:
    return [created[i:i + REQUEST_ACLS] for i in range(0, len(created), REQUEST_ACLS)]


# ---------------------------------------------------------------- current (issue 15's benches)


def _current_events(n: int, seed: int) -> Events:
    return _chunked([AclCreated(acl_id, binding) for acl_id, binding in authz_core.bindings(n, seed)])


def _current_requests(n: int, count: int, seed: int) -> list[Request]:
    return authz_core.random_requests(n, count, seed)


# ---------------------------------------------------------------- kafka (jmh AuthorizerBenchmark)


def _kafka_counts(n: int) -> tuple[int, int, int]:
    """(resources, prefix-topic hosts, wildcard-topic hosts) that make about n ACLs."""
    wildcard = max(1, n // 100)
    prefix = min(PREFIX_HOSTS, max(1, n // 50))
    per_resource = ACLS_PER_RESOURCE * (1 + DENY_SHARE)
    return max(1, int((n - wildcard - prefix) / per_resource)), prefix, wildcard


def _kafka_pattern(i: int) -> tuple[ResourceType, PatternType, str]:
    resource_type = ResourceType.GROUP if i % 10 == 0 else ResourceType.TOPIC
    pattern_type = PatternType.PREFIXED if i % 5 == 0 else PatternType.LITERAL
    return resource_type, pattern_type, f"{KAFKA_PREFIX}{i}"


def _address(i: int, base: int = 127) -> str:
    return f"{base}.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def _kafka_events(n: int, seed: int) -> Events:
    rng = random.Random(seed)
    new_id = _uuids(rng)
    _, prefix, wildcard = _kafka_counts(n)
    read, allow, deny = AclOperation.READ, AclPermissionType.ALLOW, AclPermissionType.DENY
    created = []
    i = 0
    while len(created) < n - prefix - wildcard:  # resources while they fit (the last one may be cut short)
        resource_type, pattern_type, name = _kafka_pattern(i)
        for k in range(ACLS_PER_RESOURCE):
            principal = f"User:user{k}"
            created.append(AclCreated(new_id(), AclBinding.of(resource_type, name, pattern_type, principal, "*",
                                                               read, allow)))
            if rng.random() < DENY_SHARE:
                created.append(AclCreated(new_id(), AclBinding.of(resource_type, name, pattern_type, principal,
                                                                   "*", read, deny)))
        i += 1
    del created[max(0, n - prefix - wildcard):]
    for h in range(prefix):
        created.append(AclCreated(new_id(), AclBinding.of(ResourceType.TOPIC, KAFKA_PREFIX, PatternType.PREFIXED,
                                                           KAFKA_USER, _address(h), read, allow)))
    for h in range(wildcard):
        created.append(AclCreated(new_id(), AclBinding.of(ResourceType.TOPIC, "*", PatternType.LITERAL, KAFKA_USER,
                                                           _address(h, 10), read, allow)))
    return _chunked(created)


def _kafka_requests(n: int, count: int, seed: int) -> list[Request]:
    """READ/WRITE/DESCRIBE by one of the resources' principals or test-user, from 127.x addresses.

    70% name a resource (under a prefixed one: a longer name), 10% a name under the prefix
    topic only, 20% an unknown group or topic.
    """
    rng = random.Random(seed + 1)
    resources = _kafka_counts(n)[0]
    out = []
    for _ in range(count):
        roll = rng.random()
        resource_type, pattern_type, name = _kafka_pattern(rng.randrange(resources))
        if pattern_type == PatternType.PREFIXED:
            name += f"-part-{rng.randrange(100)}"
        if roll > 0.8:
            resource_type, name = rng.choice((ResourceType.TOPIC, ResourceType.GROUP)), f"other-{rng.randrange(1 << 30)}"
        elif roll > 0.7:
            resource_type, name = ResourceType.TOPIC, f"{KAFKA_PREFIX}x{rng.randrange(1 << 20)}"
        principal = KAFKA_USER if rng.random() < 0.2 else f"User:user{rng.randrange(ACLS_PER_RESOURCE + 2)}"
        host = _address(rng.randrange(PREFIX_HOSTS * 2))
        out.append((principal, host, rng.choice(authz_core.REQUEST_OPS), resource_type, name))
    return out


# ---------------------------------------------------------------- diverse (issue 24's observation)


def _diverse_resource(i: int) -> tuple[ResourceType, PatternType, str]:
    """Resource i: its type, pattern type and name (a prefix ends with '-' or '.')."""
    h = (i * 2654435761) & 0xFFFFFFFF
    resource_type = DIVERSE_TYPES[h % len(DIVERSE_TYPES)]
    prefixed = (h >> 8) % 10 < 3
    name = f"{WORDS[(h >> 12) % len(WORDS)]}.{WORDS[(h >> 16) % len(WORDS)]}-{i}"
    return resource_type, PatternType.PREFIXED if prefixed else PatternType.LITERAL, name + ("." if prefixed else "")


def _diverse_host(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.2:
        return "*"
    if roll < 0.23:
        return f"10.{rng.randrange(256)}.{rng.randrange(256)}.0/24"
    return _address(rng.randrange(DIVERSE_HOSTS), 10)


def _diverse_acl(rng: random.Random, i: int, principal: str) -> AclBinding:
    resource_type, pattern_type, name = _diverse_resource(i)
    permission = AclPermissionType.DENY if rng.random() < 0.1 else AclPermissionType.ALLOW
    return AclBinding.of(resource_type, name, pattern_type, principal, _diverse_host(rng),
                         rng.choice(DIVERSE_OPERATIONS), permission)


def _diverse_events(n: int, seed: int) -> Events:
    """Requests of 1,000 creations (resources in order, 5-15 distinct principals each), each followed by a
    request deleting 35 random live ACLs, until n ACLs are held."""
    rng = random.Random(seed)
    new_id = _uuids(rng)
    live: list[AclCreated] = []
    out: Events = []
    pending: list[AclCreated] = []
    resource = 0
    while len(live) + len(pending) < n:
        for principal in rng.sample(range(DIVERSE_PRINCIPALS), rng.randint(5, 15)):
            pending.append(AclCreated(new_id(), _diverse_acl(rng, resource, f"User:svc-{principal}")))
        resource += 1
        if len(pending) >= REQUEST_ACLS:
            out.append(pending)
            live += pending
            pending = []
            deleted = []
            for _ in range(DIVERSE_DELETES):
                at = rng.randrange(len(live))
                gone = live[at]
                live[at] = live[-1]
                live.pop()
                deleted.append(AclDeleted(gone.acl_id, gone.binding))
            out.append(deleted)
    if pending:
        out.append(pending[: n - len(live)])
    return out if out[-1] else out[:-1]


def _diverse_requests(n: int, count: int, seed: int) -> list[Request]:
    """Half name an ACL's resource with its principal and host (a client of it), 40% a random principal
    and address, 10% an unknown resource; a prefixed resource is asked for by a longer name."""
    events = shape_events("diverse", n, seed)
    created = [e.binding for request in events for e in request if type(e) is AclCreated]
    rng = random.Random(seed + 1)
    out = []
    for _ in range(count):
        binding = created[rng.randrange(len(created))]
        pattern, entry = binding.pattern, binding.entry
        name = pattern.name + (f"part-{rng.randrange(100)}" if pattern.pattern_type == PatternType.PREFIXED else "")
        roll = rng.random()
        if roll < 0.5 and "/" not in entry.host:
            principal, host = entry.principal, (entry.host if entry.host != "*" else _address(rng.randrange(99), 10))
        else:
            principal, host = f"User:svc-{rng.randrange(DIVERSE_PRINCIPALS)}", _address(rng.randrange(DIVERSE_HOSTS), 10)
        if roll > 0.9:
            name = f"unknown-{rng.randrange(1 << 30)}"
        out.append((principal, host, rng.choice(authz_core.REQUEST_OPS), pattern.resource_type, name))
    return out


SHAPES: dict[str, Shape] = {
    "current": Shape("current", "issue 15's benches: ~1.25 ACLs/resource, host *", _current_events, _current_requests),
    "kafka": Shape("kafka", f"Kafka AuthorizerBenchmark: {ACLS_PER_RESOURCE} principals/resource, host *, "
                   f"{DENY_SHARE:.0%} DENY", _kafka_events, _kafka_requests),
    "diverse": Shape("diverse", "~10 principals/resource, 80% one address, 30% prefixed, deletions",
                     _diverse_events, _diverse_requests),
}
NAMES = tuple(SHAPES)

_EVENTS_MEMO: dict[tuple[str, int, int], Events] = {}


def shape_events(shape: str, n: int, seed: int = 0) -> Events:
    """The shape's requests (lists of AclCreated / AclDeleted) that leave n ACLs held (memoised: one shape at a time)."""
    key = (shape, n, seed)
    if key not in _EVENTS_MEMO:
        _EVENTS_MEMO.clear()
        _EVENTS_MEMO[key] = SHAPES[shape].events(n, seed)
    return _EVENTS_MEMO[key]


def requests(shape: str, n: int, count: int, seed: int = 0) -> list[Request]:
    """``count`` authorize calls against the shape's image of n ACLs, strings copied as if off the wire."""
    return [(p.encode().decode(), h.encode().decode(), o, t, name.encode().decode())
            for p, h, o, t, name in SHAPES[shape].requests(n, count, seed)]


def final_pairs(shape: str, n: int, seed: int = 0) -> list[tuple[str, AclBinding]]:
    """(acl_id, binding) of the ACLs held after all the shape's events."""
    held: dict[str, AclBinding] = {}
    for request in shape_events(shape, n, seed):
        for event in request:
            if type(event) is AclCreated:
                held[event.acl_id] = event.binding
            else:
                del held[event.acl_id]
    return list(held.items())


def envelopes(shape: str, n: int, seed: int = 0) -> Iterator[list[Envelope]]:
    """The shape's requests as envelopes of one batch each, ``BATCH_MS`` apart from ``FIRST_TS``."""
    for i, request in enumerate(shape_events(shape, n, seed)):
        ts = FIRST_TS + i * BATCH_MS
        yield [Envelope(-1, ts, "User:admin", "10.0.0.1", f"{shape}-{i}", event) for event in request]


def write_log(path: Path, keyring: Keyring, shape: str, n: int, seed: int = 0) -> dict:
    """Append the shape's events to the log at ``path`` (one batch per request); returns its facts."""
    from secmeta.core.log import Log

    batches = events = 0
    with Log.open(path, keyring=keyring) as log:
        for batch in envelopes(shape, n, seed):
            log.append(batch)
            batches += 1
            events += len(batch)
    return {"shape": shape, "acls": n, "seed": seed, "events": events, "batches": batches,
            "first_ts": FIRST_TS, "last_ts": FIRST_TS + (batches - 1) * BATCH_MS}


@dataclass(frozen=True)
class CachedStore:
    """A store of one shape's log: ``path`` (never write to it: ``copy_store``), its key file and facts."""

    path: Path
    key_file: Path
    facts: dict

    @property
    def keyring(self) -> Keyring:
        return Keyring.from_file(self.key_file)


def cached_store(shape: str, n: int, seed: int = 0, cache: Path = CACHE_DIR) -> CachedStore:
    """The prebuilt store of the shape (made on first use; nothing but its log and key file)."""
    home = Path(cache) / f"{shape}-{n}-seed{seed}-v{VERSION}"
    facts_file = home / "facts.json"
    if not facts_file.exists():
        if home.exists():
            shutil.rmtree(home)  # a build that did not finish
        home.mkdir(parents=True)
        Keyring.generate_file(home / "keys.json")
        started = time.perf_counter()
        facts = write_log(home / "store", Keyring.from_file(home / "keys.json"), shape, n, seed)
        facts["build_s"] = time.perf_counter() - started
        facts_file.write_text(json.dumps(facts, indent=2) + "\n")
    return CachedStore(home / "store", home / "keys.json", json.loads(facts_file.read_text()))


def copy_store(shape: str, n: int, dest: Path, seed: int = 0) -> CachedStore:
    """A fresh copy of the cached store at ``dest`` (a benchmark may open, snapshot and write it)."""
    cached = cached_store(shape, n, seed)
    shutil.copytree(cached.path, dest)
    return CachedStore(Path(dest), cached.key_file, cached.facts)


def describe(shape: str, n: int, seed: int = 0) -> dict:
    """Counts that say what the shape is: events, ACLs, resources, principals, hosts, ACLs per resource."""
    events = shape_events(shape, n, seed)
    pairs = final_pairs(shape, n, seed)
    resources = {(b.pattern.resource_type, b.pattern.pattern_type, b.pattern.name) for _, b in pairs}
    groups = {(b.pattern.resource_type, b.pattern.pattern_type, b.pattern.name, b.entry.principal) for _, b in pairs}
    hosts = [b.entry.host for _, b in pairs]
    return {
        "shape": shape, "acls": len(pairs), "events": sum(map(len, events)),
        "deletions": sum(1 for r in events for e in r if type(e) is AclDeleted),
        "resources": len(resources), "acls_per_resource": len(pairs) / max(1, len(resources)),
        "principals": len({b.entry.principal for _, b in pairs}),
        "principals_per_resource": len(groups) / max(1, len(resources)),
        "host_restricted": sum(h != "*" for h in hosts) / max(1, len(hosts)),
        "hosts": len(set(hosts)),
        "prefixed": sum(b.pattern.pattern_type == PatternType.PREFIXED for _, b in pairs) / max(1, len(pairs)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000])
    parser.add_argument("--shapes", nargs="+", choices=NAMES, default=list(NAMES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-cache", action="store_true", help="only count, do not build the cached stores")
    args = parser.parse_args(argv)
    rows = []
    for n in args.sizes:
        for shape in args.shapes:
            d = describe(shape, n, args.seed)
            built = "" if args.no_cache else f"{cached_store(shape, n, args.seed).facts.get('build_s', 0):.1f} s"
            rows.append([shape, d["acls"], d["events"], d["deletions"], d["resources"], d["acls_per_resource"],
                         d["principals"], d["principals_per_resource"], f"{d['host_restricted']:.0%}", d["hosts"],
                         f"{d['prefixed']:.0%}", built])
    print_table("workload shapes", ["shape", "ACLs", "events", "deleted", "resources", "ACLs/res", "principals",
                                    "princ/res", "host-restricted", "hosts", "prefixed", "cache build"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
