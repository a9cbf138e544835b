"""Side-by-side peers for the secmeta benchmarks.

* ``eventsourcing`` (the Python event-sourcing library): append stored events through its
  aggregate recorder, then replay them all, in memory ("popo") or in SQLite.
* ``casbin`` (pycasbin): Kafka-style ACL decisions (allow/deny, wildcard principal and
  host, literal/wildcard/prefixed resources) expressed as a casbin model and policies.

Other benchmarks import these functions to print the peer next to secmeta's own numbers.
Run alone: ``python -m scripts.bench.peers [--quick]`` prints a table and writes
``bench-results/peers.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from scripts.bench.report import latencies_ns, percentiles, print_table, rate, timed, write_json

# ------------------------------------------------------------------ eventsourcing

_EVENT_TOPIC = "secmeta.bench:AclCreated"
_DISTINCT_STATES = 1024


def _sample_states(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """Event states shaped like an ACL change; about 150 bytes each as compact JSON."""
    rnd = random.Random(seed)
    ops = ("READ", "WRITE", "DESCRIBE", "ALL", "CREATE", "ALTER")
    return [
        {
            "principal": f"User:svc-{rnd.randrange(10_000):04d}",
            "host": "*"
            if rnd.random() < 0.8
            else f"10.0.{rnd.randrange(256)}.{rnd.randrange(256)}",
            "resource_type": "GROUP" if rnd.random() < 0.1 else "TOPIC",
            "name": f"orders-{rnd.randrange(100_000):05d}",
            "pattern_type": "PREFIXED" if rnd.random() < 0.2 else "LITERAL",
            "operation": rnd.choice(ops),
            "permission": "DENY" if rnd.random() < 0.05 else "ALLOW",
        }
        for _ in range(count)
    ]


def _make_recorder(recorder: str, path: str | Path | None, stack: list[Any]) -> Any:
    """An eventsourcing AggregateRecorder; resources to close are pushed onto ``stack``."""
    if recorder == "popo":
        from eventsourcing.popo import POPOAggregateRecorder

        return POPOAggregateRecorder()
    if recorder == "sqlite":
        from eventsourcing.sqlite import SQLiteAggregateRecorder, SQLiteDatastore

        if path is None:
            tmp = tempfile.TemporaryDirectory(prefix="secmeta-bench-es-")
            stack.append(tmp)
            path = Path(tmp.name) / "events.sqlite"
        datastore = SQLiteDatastore(db_name=str(path))
        stack.append(datastore)
        rec = SQLiteAggregateRecorder(datastore)
        rec.create_table()
        return rec
    raise ValueError(f"recorder must be 'popo' or 'sqlite', not {recorder!r}")


def _sqlite_synchronous(rec: Any) -> int | None:
    """SQLite's PRAGMA synchronous for the recorder's datastore (2 = FULL: fsync per commit)."""
    datastore = getattr(rec, "datastore", None)
    if datastore is None:
        return None
    with datastore.transaction(commit=False) as cursor:
        cursor.execute("PRAGMA synchronous")
        return int(cursor.fetchone()[0])


def eventsourcing_append_replay(
    n_events: int,
    batch_size: int = 1000,
    recorder: str = "popo",
    path: str | Path | None = None,
    *,
    n_aggregates: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Append ``n_events`` through eventsourcing's aggregate recorder, then replay them all.

    Appending encodes each event's state dict to compact JSON (about 150 bytes), wraps it in a ``StoredEvent``
    (originator ids spread round-robin over ``n_aggregates`` UUIDs, versions from 1) and
    calls ``insert_events`` once per ``batch_size`` events (one transaction each; for
    SQLite, WAL mode with the library's default synchronous setting). Replay selects each
    aggregate's events with ``select_events`` and decodes every state with ``json.loads``.
    ``recorder`` is ``"popo"`` (in memory) or ``"sqlite"`` (a file at ``path``, by default
    in a fresh temporary directory that is removed afterwards). Wall time via perf_counter;
    preparing the state dicts is not timed.
    """
    if n_events <= 0 or batch_size <= 0 or n_aggregates <= 0:
        raise ValueError("n_events, batch_size and n_aggregates must be positive")
    from eventsourcing.persistence import StoredEvent

    states = _sample_states(min(n_events, _DISTINCT_STATES), seed)
    n_aggregates = min(n_aggregates, n_events)
    id_rnd = random.Random(seed + 1)
    originators = [uuid.UUID(int=id_rnd.getrandbits(128), version=4) for _ in range(n_aggregates)]
    if len(set(originators)) != n_aggregates:  # astronomically unlikely
        raise AssertionError("originator id clash; try another seed")
    # Compact JSON, as eventsourcing's own JSONTranscoder writes it.
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

    stack: list[Any] = []
    try:
        rec = _make_recorder(recorder, path, stack)

        start = time.perf_counter()
        for first in range(0, n_events, batch_size):
            batch = [
                StoredEvent(
                    originator_id=originators[i % n_aggregates],
                    originator_version=i // n_aggregates + 1,
                    topic=_EVENT_TOPIC,
                    state=dumps(states[i % len(states)]).encode("utf8"),
                )
                for i in range(first, min(first + batch_size, n_events))
            ]
            rec.insert_events(batch)
        append_s = time.perf_counter() - start

        loads = json.loads
        start = time.perf_counter()
        replayed = 0
        state_bytes = 0
        for originator in originators:
            for stored in rec.select_events(originator):
                loads(stored.state)
                replayed += 1
                state_bytes += len(stored.state)
        replay_s = time.perf_counter() - start

        if replayed != n_events:
            raise AssertionError(f"replayed {replayed} events, appended {n_events}")
        synchronous = _sqlite_synchronous(rec)
    finally:
        for resource in reversed(stack):
            if hasattr(resource, "close"):
                resource.close()
            else:
                resource.cleanup()

    return {
        "peer": "eventsourcing",
        "recorder": recorder,
        "n_events": n_events,
        "batch_size": batch_size,
        "n_aggregates": n_aggregates,
        "mean_state_bytes": state_bytes / n_events,
        "sqlite_synchronous": synchronous,
        "append_s": append_s,
        "replay_s": replay_s,
        "append_events_per_s": rate(n_events, append_s),
        "replay_events_per_s": rate(n_events, replay_s),
    }


# ------------------------------------------------------------------ casbin

# An ACL model with deny: a request is allowed when some policy allows it and none denies it.
# Objects are "<RESOURCE_TYPE>/<name>" in requests and "<RESOURCE_TYPE>/<PATTERN_TYPE>/<name>"
# in policies; the two custom functions implement Kafka's resource and operation matching.
CASBIN_ACL_MODEL = """
[request_definition]
r = sub, host, obj, act

[policy_definition]
p = sub, host, obj, act, eft

[policy_effect]
e = some(where (p.eft == allow)) && !some(where (p.eft == deny))

[matchers]
m = (p.sub == r.sub || p.sub == "User:*") && (p.host == r.host || p.host == "*") \
&& aclResourceMatch(r.obj, p.obj) && aclOperationMatch(r.act, p.act, p.eft)
"""

# Kafka: an ALLOW on any of these operations also allows the key operation.
_IMPLIED_BY_ALLOW = {
    "DESCRIBE": frozenset({"READ", "WRITE", "DELETE", "ALTER"}),
    "DESCRIBE_CONFIGS": frozenset({"ALTER_CONFIGS"}),
}

AclTuple = tuple[str, str, Any, str, Any, Any, Any]
"""(principal, host, resource_type, name, pattern_type, operation, permission)."""


def _enum_name(value: Any) -> str:
    """An enum member's name (secmeta's IntEnums) or an upper-cased string."""
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else str(value).upper()


def _acl_resource_match(request_obj: str, policy_obj: str) -> bool:
    request_type, _, name = request_obj.partition("/")
    policy_type, pattern_type, pattern = policy_obj.split("/", 2)
    if request_type != policy_type:
        return False
    if pattern_type == "LITERAL":
        return pattern == "*" or pattern == name
    if pattern_type == "PREFIXED":
        return name.startswith(pattern)
    return False


def _acl_operation_match(request_act: str, policy_act: str, policy_eft: str) -> bool:
    if policy_act == request_act or policy_act == "ALL":
        return True
    return policy_eft == "allow" and policy_act in _IMPLIED_BY_ALLOW.get(request_act, ())


def casbin_policy(acl: AclTuple) -> list[str]:
    """One casbin policy row (sub, host, obj, act, eft) for a Kafka ACL tuple."""
    principal, host, resource_type, name, pattern_type, operation, permission = acl
    pattern = _enum_name(pattern_type)
    if pattern not in ("LITERAL", "PREFIXED"):
        raise ValueError(f"stored ACLs are LITERAL or PREFIXED, not {pattern}")
    permission_name = _enum_name(permission)
    if permission_name not in ("ALLOW", "DENY"):
        raise ValueError(f"permission must be ALLOW or DENY, not {permission_name}")
    return [
        principal,
        host,
        f"{_enum_name(resource_type)}/{pattern}/{name}",
        _enum_name(operation),
        permission_name.lower(),
    ]


def casbin_enforcer(acls: Iterable[AclTuple]) -> Any:
    """A pycasbin Enforcer holding ``acls`` under :data:`CASBIN_ACL_MODEL` (in memory)."""
    import casbin

    enforcer = casbin.Enforcer(casbin.Enforcer.new_model(text=CASBIN_ACL_MODEL))
    enforcer.add_function("aclResourceMatch", _acl_resource_match)
    enforcer.add_function("aclOperationMatch", _acl_operation_match)
    rules = list(dict.fromkeys(tuple(casbin_policy(a)) for a in acls))  # ACLs are a set
    if rules:
        enforcer.add_policies([list(r) for r in rules])
    return enforcer


def casbin_decide(
    enforcer: Any, principal: str, host: str, resource_type: Any, name: str, operation: Any
) -> bool:
    """casbin's decision for one request, same argument order as secmeta's authorize()."""
    return bool(
        enforcer.enforce(
            principal, host, f"{_enum_name(resource_type)}/{name}", _enum_name(operation)
        )
    )


# ------------------------------------------------------------------ workload


def sample_acls(n: int, seed: int = 0) -> list[AclTuple]:
    """``n`` distinct ACL tuples roughly in Kafka AuthorizerBenchmark's shape.

    About 10% group resources, 20% prefixed patterns, most hosts wildcard, a few DENYs,
    four ACLs per resource on average, fifty principals.
    """
    rnd = random.Random(seed)
    ops = ("READ", "WRITE", "DESCRIBE", "ALL", "CREATE", "ALTER")
    n_resources = max(1, n // 4)
    acls: dict[AclTuple, None] = {}
    while len(acls) < n:
        r = rnd.randrange(n_resources)
        resource_type = "GROUP" if r % 10 == 0 else "TOPIC"
        prefixed = r % 5 == 1
        acl = (
            f"User:user-{rnd.randrange(50)}",
            "*" if rnd.random() < 0.9 else f"10.0.0.{rnd.randrange(1, 255)}",
            resource_type,
            f"res-{r}-" if prefixed else f"res-{r}",
            "PREFIXED" if prefixed else "LITERAL",
            rnd.choice(ops),
            "DENY" if rnd.random() < 0.05 else "ALLOW",
        )
        acls[acl] = None
    return list(acls)


def sample_requests(
    acls: Sequence[AclTuple], count: int, seed: int = 1
) -> list[tuple[str, str, str, str, str]]:
    """(principal, host, resource_type, name, operation) requests: half aimed at a stored ACL."""
    rnd = random.Random(seed)
    requests = []
    for i in range(count):
        principal, host, resource_type, name, pattern_type, _op, _perm = rnd.choice(acls)
        if _enum_name(pattern_type) == "PREFIXED":
            name = f"{name}{rnd.randrange(1000)}"
        if i % 2:  # a miss: someone else, somewhere else
            principal = f"User:other-{rnd.randrange(50)}"
        request_host = "10.0.0.1" if host == "*" else host
        requests.append(
            (
                principal,
                request_host,
                _enum_name(resource_type),
                name,
                rnd.choice(("READ", "WRITE", "DESCRIBE")),
            )
        )
    return requests


def casbin_latency(n_policies: int, n_decisions: int = 200, seed: int = 0) -> dict[str, Any]:
    """Build a casbin enforcer over ``n_policies`` sample ACLs and time ``n_decisions`` calls."""
    acls = sample_acls(n_policies, seed)
    enforcer, build_s = timed(casbin_enforcer, acls)
    requests = sample_requests(acls, n_decisions, seed + 1)
    casbin_decide(enforcer, *requests[0])  # warm-up: compiles the matcher once
    samples = latencies_ns(lambda *r: casbin_decide(enforcer, *r), requests)
    allowed = sum(casbin_decide(enforcer, *r) for r in requests[:50])
    pct = percentiles(samples, (50, 99))
    return {
        "peer": "casbin",
        "n_policies": n_policies,
        "n_decisions": n_decisions,
        "build_s": build_s,
        "p50_us": pct["p50"] / 1e3,
        "p99_us": pct["p99"] / 1e3,
        "mean_us": sum(samples) / len(samples) / 1e3,
        "allowed_of_first_50": allowed,
    }


# ------------------------------------------------------------------ command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.bench.peers", description="Time the peer libraries alone."
    )
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--policies", type=int, default=10_000)
    parser.add_argument("--decisions", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.policies, args.decisions = 5_000, 500, 50

    es = [
        eventsourcing_append_replay(args.events, args.batch, recorder)
        for recorder in ("popo", "sqlite")
    ]
    print_table(
        f"eventsourcing {args.events:,} events, batches of {args.batch:,}",
        ["recorder", "append ev/s", "replay ev/s", "state bytes"],
        [
            [
                r["recorder"],
                r["append_events_per_s"],
                r["replay_events_per_s"],
                r["mean_state_bytes"],
            ]
            for r in es
        ],
    )
    cb = casbin_latency(args.policies, args.decisions)
    print_table(
        f"pycasbin decisions, {args.policies:,} policies",
        ["policies", "build s", "p50 us", "p99 us", "mean us"],
        [[cb["n_policies"], cb["build_s"], cb["p50_us"], cb["p99_us"], cb["mean_us"]]],
    )
    path = write_json("peers", {"eventsourcing": es, "casbin": cb, "quick": args.quick})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
