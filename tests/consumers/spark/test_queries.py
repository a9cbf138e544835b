"""Point-in-time queries over the compacted tables give the embedded store's answers."""

from __future__ import annotations

import dataclasses
import random
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.extras import require_extra

require_extra("pyspark", "spark")

from pyspark.sql import functions as F  # noqa: E402

from secmeta.consumers.spark.compaction import compact  # noqa: E402
from secmeta.consumers.spark.queries import (  # noqa: E402
    acls_at,
    change_history,
    resolve,
    tokens_alive,
    who_could_at,
)
from secmeta.consumers.spark.queries.acls import on_resource  # noqa: E402
from secmeta.consumers.spark.queries.tokens import alive_in  # noqa: E402
from secmeta.consumers.spark.table_reader import TableReader  # noqa: E402
from secmeta.core import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    RequestContext,
    ResourceType,
)
from secmeta.core.errors import PointInTimeError, QueryError  # noqa: E402
from secmeta.core.forensics.queries import resource_question  # noqa: E402
from secmeta.core.times import Point, parse_time  # noqa: E402
from secmeta.projections.acl_decision import NO_ACL_FOUND, SUPER_USER  # noqa: E402
from secmeta.projections.acl_match import covers  # noqa: E402
from secmeta.projections.tokens import TokenInfo  # noqa: E402
from tests.consumers.spark.sparkkit import Workspace, acl_state, make_workspace  # noqa: E402
from tests.storekit import ADMIN, upsert  # noqa: E402

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


@dataclass
class Case:
    space: Workspace
    tables: Path
    marks: dict[str, int]  # offsets after the targeted steps


def _acl(rt, name, pattern, principal, host, op, permission) -> AclBinding:
    return AclBinding.of(rt, name, pattern, principal, host, op, permission)


def _targeted(space: Workspace) -> dict[str, int]:
    """Prefixed, wildcard, DENY, host-range, implied-operation, super-user and token cases at known points."""
    marks = {}
    with space.open() as store:
        def mark(name):
            marks[name] = store.log.end_offset

        errors = store.create_acls([
            _acl(T, "payments", LIT, "User:alice", "*", Op.READ, ALLOW),
            _acl(T, "pay", PRE, "User:bob", "*", Op.WRITE, ALLOW),
            _acl(T, "*", LIT, "User:*", "*", Op.DESCRIBE, ALLOW),
            _acl(T, "payments", LIT, "User:bob", "10.0.0.9", Op.ALL, DENY),
            _acl(T, "pay", PRE, "User:carol", "*", Op.READ, DENY),
            _acl(T, "payments", LIT, "User:carol", "10.1.0.0/16", Op.READ, ALLOW),
            _acl(T, "payments", LIT, "User:dave", "*", Op.ALTER_CONFIGS, ALLOW),
            _acl(T, "payments", LIT, "User:root", "*", Op.READ, DENY),
            _acl(T, "payroll", LIT, "User:*", "10.2.0.0/16", Op.READ, ALLOW),
            _acl(T, "payroll", LIT, "User:erin", "10.2.3.4", Op.READ, DENY),
            _acl(T, "payroll", LIT, "User:erin", "*", Op.WRITE, ALLOW),
            _acl(G, "g-", PRE, "User:*", "*", Op.READ, ALLOW),
            _acl(C, "kafka-cluster", LIT, "User:ops", "*", Op.ALTER, ALLOW),
            _acl(X, "tx", LIT, "User:alice", "*", Op.WRITE, ALLOW),
            _acl(T, "p", PRE, "User:frank", "*", Op.ALL, ALLOW),
        ], context=ADMIN)
        assert all(e.code == 0 for e in errors), errors
        mark("created")
        store.delete_acls([AclBindingFilter.of(T, "payments", LIT, "User:bob", None, Op.ANY, DENY)], context=ADMIN)
        mark("bob undenied")
        store.delete_acls([AclBindingFilter.of(T, "*", LIT)], context=ADMIN)
        store.create_acls([_acl(T, "payments", LIT, "User:*", "*", Op.READ, ALLOW)], context=ADMIN)
        mark("wildcard moved")
        store.create_acls([_acl(ResourceType.USER, "User:alice", LIT, "User:mallory", "*", Op.CREATE_TOKENS, ALLOW)],
                          context=ADMIN)
        store.create_delegation_token(context=RequestContext("User:mallory", "10.0.0.66"), owner="User:alice")
        mark("mallory's token")
        for password in (b"one", b"two"):  # created (or rotated, if the random steps made one), then rotated
            store.alter_user_scram_credentials([upsert("alice", password)], context=ADMIN)
        clock = space.config.clock
        short = store.create_delegation_token(context=ADMIN, owner="User:alice", renewers=["User:admin"])
        other = store.create_delegation_token(context=ADMIN, owner="User:bob", renewers=["User:carol"])
        gone = store.create_delegation_token(context=ADMIN, owner="User:carol", renewers=["User:admin"])
        store.renew_delegation_token(short.hmac, 60_000, context=ADMIN)
        store.expire_delegation_token(gone.hmac, -1, context=ADMIN)
        clock.t += 120  # `short` expires; it stays in the state until the sweep
        store.create_acls([_acl(G, "g", LIT, "User:gina", "*", Op.READ, ALLOW)], context=ADMIN)
        clock.t += 120
        store.sweep_expired_tokens()
        store.delete_acls([AclBindingFilter.of(T, "payments", LIT)], context=ADMIN)
        mark("payments deleted")
        assert other.owner == "User:bob"
    return marks


@pytest.fixture(scope="module")
def case_a(spark, tmp_path_factory) -> Case:
    """A random workload plus targeted requests; settings: two super users, allow if no ACL found."""
    root = tmp_path_factory.mktemp("queries-a")
    space = make_workspace(root, seed=5, steps=35)
    config = space.config.with_(super_users=frozenset({"User:admin", "User:root"}),
                                allow_everyone_if_no_acl_found=True)
    config.save(space.store_dir)  # the compaction job records these settings in each version
    space = dataclasses.replace(space, config=config)
    marks = _targeted(space)
    tables = root / "tables"
    compact(spark, space.store_dir, tables, key_file=str(space.key_file), max_events_per_trigger=40)
    return Case(space, tables, marks)


@pytest.fixture(scope="module")
def case_b(spark, tmp_path_factory) -> Case:
    """Another random workload with the default settings (User:admin, deny if no ACL found), one batch."""
    root = tmp_path_factory.mktemp("queries-b")
    space = make_workspace(root, seed=9, steps=50)
    tables = root / "tables"
    compact(spark, space.store_dir, tables, key_file=str(space.key_file), max_events_per_trigger=80)
    return Case(space, tables, {})


@pytest.fixture(params=["a", "b"])
def case(request, case_a, case_b) -> Case:
    return case_a if request.param == "a" else case_b


def _batch_times(store) -> list[int]:
    return sorted({e.timestamp_ms for e in store.history()})


# -- acls_at ---------------------------------------------------------------------------------


def test_acls_at_offsets_equal_the_store(spark, case):
    """ACLs in force at N (kept versions, 0, the end, and others) are the store's as_of(N), by id."""
    reader = TableReader(spark, case.tables)
    rng = random.Random(1)
    with case.space.open() as store:
        end = store.log.end_offset
        assert reader.offset == end
        assert len(reader.version.kept) >= (2 if case.marks else 1)  # A: several versions kept
        offsets = {0, end, *[k.offset for k in reader.version.kept], *case.marks.values(),
                   *rng.sample(range(1, end), 4)}
        answers = {}
        for n in sorted(offsets):
            found = answers[n] = acls_at(reader, n)
            view = store.as_of(offset=n)
            assert {a.acl_id: a.binding for a in found} == dict(iter(view.image.acls)), n
            assert {(b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
                     b.permission_type.name) for b in (a.binding for a in found)} == acl_state(view), n
        creations = {e.payload["acl_id"]: e for e in store.history(event_types=["AclCreated"])}
        for a in answers[end]:
            e = creations[a.acl_id]
            assert (a.created_offset, a.created_ms, a.created_by, a.created_by_host, a.created_request_id) == (
                e.offset, e.timestamp_ms, e.actor_principal, e.actor_host, e.request_id)


def test_acls_at_times_equal_the_store(spark, case):
    """A time T means after every batch stamped <= T, as in store.as_of(timestamp_ms=T)."""
    reader = TableReader(spark, case.tables)
    with case.space.open() as store:
        times = _batch_times(store)
        rng = random.Random(2)
        picks = [times[0] - 1000, times[-1] + 500, rng.choice(times[1:-1]),
                 *[t + rng.choice([-1, 1, 400]) for t in rng.sample(times[1:-1], 2)]]
        for i, t in enumerate(picks):
            at = [Point.at_time(t), {"timestamp_ms": t}, str(t)][i % 3]
            n = store.timetravel.resolve(timestamp_ms=t)
            if i % 2:
                assert resolve(reader, at) == n, t
            view = store.as_of(timestamp_ms=t)
            assert {a.acl_id: a.binding for a in acls_at(reader, at)} == dict(iter(view.image.acls)), t
    iso = "2027-01-15T08:00:00+00:00"
    assert resolve(reader, iso) == resolve(reader, Point.at_time(parse_time(iso)))


# -- who_could_at ------------------------------------------------------------------------------

_OPS = [Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER, Op.ALL, Op.CREATE, Op.DELETE]
_TARGETS = [(T, "payments"), (T, "payroll"), (T, "pay"), (T, "paz"), (T, "other"), (T, "*"), (G, "g-1"),
            (G, "g"), (G, "h"), (C, "kafka-cluster"), (X, "tx"), (X, "ty")]


def test_who_could_at_targeted_cases_equal_the_store(spark, case_a):
    """Prefixed, '*' literal, DENY (by host range too), implied operations, super users, no ACL found."""
    reader = TableReader(spark, case_a.tables)
    seen = {"super": False, "no_acl": False, "except_hosts": False, "except_principals": False,
            "prefixed": False, "wildcard": False, "implied": False}
    with case_a.space.open() as store:
        for k, label in enumerate(["created", "wildcard moved", "payments deleted"]):
            n = case_a.marks[label]
            for i, (rt, name) in enumerate(_TARGETS):
                ops = [_OPS[(i + k) % len(_OPS)]]
                if rt == T and name in ("payments", "payroll"):
                    ops += [Op.READ, Op.DESCRIBE_CONFIGS][k % 2:]
                for op in dict.fromkeys(ops):
                    at = n if (i + k) % 2 else Point.at_offset(n)
                    grants = who_could_at(reader, op, rt, name, at)
                    assert grants == store.who_could(op, rt, name, at=n), (label, op, rt, name)
                    for g in grants:
                        seen["super"] |= g.reason == SUPER_USER and g.principal == "User:root"
                        seen["no_acl"] |= g.reason == NO_ACL_FOUND
                        seen["except_hosts"] |= bool(g.except_hosts)
                        seen["except_principals"] |= bool(g.except_principals)
                        for _, b in g.acls:
                            seen["prefixed"] |= b.resource_pattern_type == PRE
                            seen["wildcard"] |= b.name == "*" or b.principal == "User:*"
                            seen["implied"] |= b.operation != op and b.operation != Op.ALL
        # a time and the current version too, by name and by code
        t = next(store.history(start_offset=case_a.marks["bob undenied"] - 1, limit=1)).timestamp_ms
        assert who_could_at(reader, "read", "topic", "payments", Point.at_time(t)) == store.who_could(
            Op.READ, T, "payments", at=Point.at_time(t))
        assert who_could_at(reader, 3, 2, "payroll") == store.who_could(Op.READ, T, "payroll")
    assert all(seen.values()), seen


def test_who_could_at_lists_token_holders_under_the_owners_grants_as_the_store(spark, case_a):
    """A token mallory requested for alice: from its issue she is listed under alice's grants (through the token),
    in Spark as in the store; before it, not; once it is swept (payments deleted), neither."""
    reader = TableReader(spark, case_a.tables)
    issued = case_a.marks["mallory's token"]
    with case_a.space.open() as store:
        for n in (issued - 1, issued, case_a.marks["payments deleted"]):
            assert who_could_at(reader, Op.READ, T, "payments", n) == store.who_could(Op.READ, T, "payments", at=n)
        holders = [(g.principal, g.via.owner) for g in who_could_at(reader, Op.READ, T, "payments", issued)
                   if g.via is not None and g.via.how == "requester"]
        assert ("User:mallory", "User:alice") in holders
        assert not [g for g in who_could_at(reader, Op.READ, T, "payments", issued - 1)
                    if g.principal == "User:mallory"]


def test_who_could_at_runs_one_spark_job_per_table_it_reads(spark, case_b):
    """At an offset, who_could_at runs one Spark job for the ACLs in force and one for the token events; the
    empty setting intervals and a reader's second question start no more (a reader reads each table once)."""
    reader = TableReader(spark, case_b.tables)
    sc = spark.sparkContext
    with case_b.space.open() as store:
        for n in (reader.offset, reader.offset // 2):
            group = f"who-could-{uuid.uuid4().hex}"
            sc.setJobGroup(group, "who could")
            try:
                assert who_could_at(reader, Op.READ, T, "topic-1", n) == store.who_could(Op.READ, T, "topic-1", at=n)
                assert len(sc.statusTracker().getJobIdsForGroup(group)) <= 2, n
            finally:
                sc.setLocalProperty("spark.jobGroup.id", None)


def test_who_could_at_random_requests_equal_the_store(spark, case):
    """Random (operation, resource, point) requests over a random workload."""
    reader = TableReader(spark, case.tables)
    rng = random.Random(3)
    with case.space.open() as store:
        end = store.log.end_offset
        times = _batch_times(store)
        for _ in range(8):
            rt = rng.choice([T, T, G, C])
            name = "kafka-cluster" if rt == C else rng.choice([f"topic-{i}" for i in range(8)] + ["topic-10", "t"])
            op = rng.choice(_OPS)
            if rng.random() < 0.3:
                t = rng.choice(times)
                assert who_could_at(reader, op, rt, name, str(t)) == store.who_could(op, rt, name,
                                                                                   at=Point.at_time(t))
            else:
                n = rng.randrange(end + 1)
                assert who_could_at(reader, op, rt, name, n) == store.who_could(op, rt, name, at=n), (op, rt, name, n)


# -- change_history ----------------------------------------------------------------------------


def _entries(df) -> list[dict]:
    """History rows as the store's HistoryEntry fields (times in ms); payload fields the table holds."""
    stamps = ["issue_timestamp", "expiry_timestamp", "max_timestamp"]
    rows = df.select("*", *[F.unix_millis(c).alias(f"{c}_ms") for c in stamps]).collect()
    return [r.asDict() for r in rows]


def _same(entries, rows) -> None:
    assert [e.offset for e in entries] == [r["offset"] for r in rows]
    for e, r in zip(entries, rows):
        assert (e.timestamp_ms, e.actor_principal, e.actor_host, e.request_id, e.event_type, e.entity_key) == (
            r["timestamp_ms"], r["actor_principal"], r["actor_host"], r["request_id"], r["event_type"],
            r["entity_key"]), e.offset
        assert r["action"] == e.action, e.offset
        for key, value in e.payload.items():
            if key == "secret":
                continue
            assert r[key] == value, (e.offset, key)


def test_change_history_of_principals_and_users_equals_the_store(spark, case, case_a):
    """Actor or subject (ACL principal, SCRAM user, token parties via the issue events); user = SCRAM events."""
    reader = TableReader(spark, case.tables)
    with case.space.open() as store:
        owners = {e.payload["token_id"]: e.payload["owner"]
                  for e in store.history(event_types=["DelegationTokenIssued"])}
        later = [owners[e.payload["token_id"]] for e in store.history(
            event_types=["DelegationTokenRenewed", "DelegationTokenExpired", "DelegationTokenRemoved"])]
        assert later
        principals = ["User:admin", "System:token-sweeper", "User:nobody", "User:alice", "User:mallory",
                      *list(dict.fromkeys(later))[:3]]
        token_events = 0
        for p in principals:
            expected = list(store.history(principal=p))
            _same(expected, _entries(change_history(reader, principal=p)))
            token_events += sum(e.event_type in ("DelegationTokenRenewed", "DelegationTokenExpired",
                                                  "DelegationTokenRemoved") and e.actor_principal != p
                                for e in expected)
        assert token_events > 0  # token parties found through the issue events
        if case is case_a:  # 'User:*' grants and the ACL on USER User:alice are alice's; rotations say so
            alices = list(store.history(principal="User:alice"))
            assert any(e.payload.get("principal") == "User:*" for e in alices)
            assert any(e.payload.get("resource_type") == "USER" for e in alices)
            assert "rotated" in {e.action for e in alices}
        for user in ["user0", "user3"]:
            _same(list(store.history(user=user)), _entries(change_history(reader, user=user)))


def test_change_history_ranges_equal_the_store(spark, case):
    """Offset ranges [start, end) and inclusive time ranges, combined with the filters."""
    reader = TableReader(spark, case.tables)
    with case.space.open() as store:
        end = store.log.end_offset
        times = _batch_times(store)
        a, b = end // 4, 3 * end // 4
        _same(list(store.history(principal="User:admin", start_offset=a, end_offset=b)),
              _entries(change_history(reader, principal="User:admin", start=a, end=Point.at_offset(b))))
        t1, t2 = times[len(times) // 3], times[2 * len(times) // 3]
        _same(list(store.history(start_ms=t1, end_ms=t2)),
              _entries(change_history(reader, start=Point.at_time(t1), end=str(t2))))
        _same(list(store.history(user="user1", start_ms=t1 + 1)),
              _entries(change_history(reader, user="user1", start={"timestamp_ms": t1 + 1})))


# -- tokens_alive ------------------------------------------------------------------------------


def _alive_in_store(store, t: int) -> list[TokenInfo]:
    """The store's answer at t: the tokens of its state at t that it would still authenticate at t."""
    return [info for info in store.as_of(timestamp_ms=t).image.tokens if not info.is_expired(t)]


def _alive_reference(store, t1: int, t2: int, times: list[int]) -> dict[str, tuple[int, int]]:
    """token id -> (first moment alive, expiry at the last moment alive), sampling T1 and batch times in (T1, T2]."""
    out: dict[str, tuple[int, int]] = {}
    for t in [t1, *[b for b in times if t1 < b <= t2]]:
        for token in _alive_in_store(store, t):
            first = out.get(token.token_id, (t, 0))[0]
            out[token.token_id] = (first, token.expiry_timestamp_ms)
    return out


def test_tokens_alive_equal_the_store_sampled_at_batch_times(spark, case):
    """Alive = in the state and before expiry at some moment of [T1, T2]."""
    reader = TableReader(spark, case.tables)
    rng = random.Random(4)
    with case.space.open() as store:
        times = _batch_times(store)
        windows = [(times[0], times[-1]), (times[-1], times[-1]), (times[0] - 1, times[0] - 1)]
        for _ in range(3):
            i, j = sorted(rng.sample(range(len(times)), 2))
            windows.append((times[i] + rng.choice([-1, 0, 1]), times[j] + rng.choice([-1, 0, 700])))
        i = rng.randrange(len(times))
        windows.append((times[i], times[i]))
        nonempty = 0
        for t1, t2 in windows:
            found = tokens_alive(reader, t1, t2)
            assert {t.token_id: (t.alive_from_ms, t.expiry_timestamp_ms) for t in found} == _alive_reference(
                store, t1, t2, times), (t1, t2)
            nonempty += bool(found)
        assert nonempty >= 2


def test_a_token_is_alive_at_its_expiry_instant_and_not_after(spark, case_a):
    """Kafka's rule (expired iff now > expiry): the renewed-for-60s token is alive at its expiry instant, as the
    store still authenticates it then, and not a millisecond later, though it stays in the state until the sweep."""
    reader = TableReader(spark, case_a.tables)
    with case_a.space.open() as store:
        renewed = next(e for e in store.history(event_types=["DelegationTokenRenewed"], principal="User:alice"))
        expiry = renewed.payload["expiry_timestamp_ms"]
        token_id = renewed.payload["token_id"]
        alive_at_expiry = {t.token_id for t in _alive_in_store(store, expiry)}
        alive_after = {t.token_id for t in _alive_in_store(store, expiry + 1)}
        in_state_after = {t.token_id for t in store.as_of(timestamp_ms=expiry + 1).image.tokens}
    assert token_id in alive_at_expiry and token_id not in alive_after and token_id in in_state_after
    assert token_id in {t.token_id for t in tokens_alive(reader, expiry)}
    assert token_id not in {t.token_id for t in tokens_alive(reader, expiry + 1)}
    assert token_id not in {t.token_id for t in tokens_alive(reader, expiry + 1, expiry + 60_000)}
    [found] = [t for t in tokens_alive(reader, "2000-01-01T00:00:00Z", expiry) if t.token_id == token_id]
    assert found.expiry_timestamp_ms == expiry


def _token_rows(spark, tokens: list[TokenInfo], valid_from_ms: int):
    """``token_intervals``-shaped rows: one open interval per token from ``valid_from_ms``."""
    rows = [(t.token_id, t.owner, t.requester, list(t.renewers), 1, valid_from_ms, None, t.issue_timestamp_ms,
             t.expiry_timestamp_ms, t.max_timestamp_ms) for t in tokens]
    schema = ("token_id string, owner string, requester string, renewers array<string>, valid_from_offset long, "
              "from_ms long, to_ms long, issue_ms long, expiry_ms long, max_ms long")
    stamp = F.timestamp_millis
    return spark.createDataFrame(rows, schema).select(
        "token_id", "owner", "requester", "renewers", "valid_from_offset", stamp("from_ms").alias("valid_from"),
        stamp("to_ms").alias("valid_to"), stamp("issue_ms").alias("issue_timestamp"),
        stamp("expiry_ms").alias("expiry_timestamp"), stamp("max_ms").alias("max_timestamp"))


def test_token_expiry_in_sql_is_the_stores_rule_at_every_boundary(spark):
    """alive_in's SQL keeps a token at t exactly when TokenInfo.is_expired(t) is false: expiry and max timestamp
    before, at and after t, and equal to each other."""
    t = 1_800_000_000_000
    tokens = [TokenInfo(f"tok{i}", "User:alice", "User:alice", ("User:bob",), t - 10_000, t + de, t + dm)
              for i, (de, dm) in enumerate((de, dm) for de in (-1, 0, 1) for dm in (-1, 0, 1, 5000) if dm >= de)]
    rows = _token_rows(spark, tokens, valid_from_ms=t - 5000)
    expected = {info.token_id for info in tokens if not info.is_expired(t)}
    assert expected and expected != {info.token_id for info in tokens}
    assert {r.token_id for r in alive_in(rows, t, t).collect()} == expected
    assert {r.token_id for r in alive_in(rows, t - 1, t + 1).collect()} == {
        info.token_id for info in tokens if not info.is_expired(t - 1)}


# -- the pattern rule in SQL -----------------------------------------------------------------


def test_on_resource_in_sql_is_the_projections_pattern_rule(spark):
    """on_resource's SQL selects exactly the ACLs acl_match.covers says apply: prefixes equal to the name, longer
    than it or of other types, LITERAL '*', a PREFIXED '*', names that differ in case."""
    names = ["pay", "payments", "paym", "p", "*", "Pay", "payments-eu", "x"]
    bindings = [_acl(rt, name, pattern, "User:*", "*", Op.READ, ALLOW)
                for rt in (T, G) for name in names for pattern in (LIT, PRE)]
    rows = [(str(i), b.restype.name, b.name, b.resource_pattern_type.name) for i, b in enumerate(bindings)]
    acls = spark.createDataFrame(rows, "acl_id string, resource_type string, resource_name string, "
                                       "pattern_type string")
    for rt, name in [(T, "payments"), (T, "pay"), (T, "*"), (G, "paym"), (T, "Payments"), (T, "p")]:
        found = {r.acl_id for r in on_resource(acls, rt, name).select("acl_id").collect()}
        assert found == {str(i) for i, b in enumerate(bindings) if covers(b.pattern, rt, name)}, (rt, name)
# -- bad input -------------------------------------------------------------------------------


def _message(call) -> str:
    with pytest.raises(QueryError) as info:
        call()
    return str(info.value)


def test_bad_arguments_fail_before_any_spark_job(spark, case_b):
    """Unknown types and operations, malformed times, bad offsets: a clear error, and no job started."""
    reader = TableReader(spark, case_b.tables)
    sc = spark.sparkContext
    group = f"bad-input-{uuid.uuid4().hex}"
    end = reader.offset
    sc.setJobGroup(group, "bad input")
    try:
        bad = {
            "resource type": lambda: who_could_at(reader, "READ", "TOPICS", "t"),
            "operation": lambda: who_could_at(reader, "READS", "TOPIC", "t"),
            "any operation": lambda: who_could_at(reader, "ANY", "TOPIC", "t"),
            "any resource": lambda: who_could_at(reader, "READ", ResourceType.ANY, "t"),
            "empty name": lambda: who_could_at(reader, "READ", "TOPIC", ""),
            "malformed time": lambda: acls_at(reader, "yesterday"),
            "no zone": lambda: who_could_at(reader, "READ", "TOPIC", "t", "2027-01-15T08:00:00"),
            "negative offset": lambda: acls_at(reader, -1),
            "past the version": lambda: who_could_at(reader, "READ", "TOPIC", "t", end + 1),
            "not a point": lambda: acls_at(reader, 1.5),
            "history range": lambda: change_history(reader, principal="User:a", start=5, end=3),
            "history time": lambda: change_history(reader, user="u", start="nope"),
            "history times": lambda: change_history(reader, start="2027-01-02T00:00:00Z", end="2027-01-01T00:00:00Z"),
            "history offset": lambda: change_history(reader, end=end + 1),
            "window": lambda: tokens_alive(reader, 2000, 1000),
            "window time": lambda: tokens_alive(reader, "2027-13-01T00:00:00Z"),
            "window offset": lambda: tokens_alive(reader, Point.at_offset(3)),
            "resolve": lambda: resolve(reader, {"offset": 1, "timestamp_ms": 2}),
        }
        messages = {name: _message(call) for name, call in bad.items()}
        assert sc.statusTracker().getJobIdsForGroup(group) == []
        acls_at(reader, Point.at_time(0))  # a valid query in the same group does start jobs
        assert sc.statusTracker().getJobIdsForGroup(group) != []
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert messages["resource type"] == _message(lambda: resource_question("READ", "TOPICS", "t"))
    assert messages["operation"] == _message(lambda: resource_question("READS", "TOPIC", "t"))
    assert "concrete" in messages["any operation"] and "concrete" in messages["any resource"]
    assert "resource name" in messages["empty name"]
    assert "malformed time 'yesterday'" in messages["malformed time"]
    assert "no zone" in messages["no zone"]
    assert "offset -1 is negative" in messages["negative offset"]
    assert f"offset {end + 1} is past the tables' version" in messages["past the version"]
    assert all("after" in messages[k] for k in ("history range", "history times", "window"))
    assert "malformed time 'nope'" in messages["history time"]
    assert "must be a time" in messages["window offset"]
    with pytest.raises(PointInTimeError):
        acls_at(reader, True)
