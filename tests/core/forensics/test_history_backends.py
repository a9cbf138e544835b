"""Both HistoryBackends keep the contract (history_contract.py), and on random logs the index answers every
forensic query exactly as the log scan, the reference."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core import (
    AclBindingFilter,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
    ScramMechanism,
)
from secmeta.core.control.quotas import ClientQuotaAlteration, ClientQuotaOp
from secmeta.core.forensics.history import diff, history
from secmeta.core.forensics.history_index import HistoryIndex
from secmeta.core.forensics.queries import access_timeline, live_tokens, who_could_at
from secmeta.core.forensics.scan import LogScan
from tests.core.forensics.history_contract import HistoryBackendContract, scanned, store_after
from tests.core.forensics.test_timetravel_properties import (
    NAMES,
    OPS,
    PRINCIPALS,
    TYPES,
    requests,
    steps,
)
from tests.logkit import make_keyring
from tests.storekit import ADMIN, replayed


class TestLogScan(HistoryBackendContract):
    @staticmethod
    def backend(store) -> LogScan:
        return LogScan(store.timetravel)


class TestHistoryIndex(HistoryBackendContract):
    @staticmethod
    def backend(store) -> HistoryIndex:
        index = store.timetravel.index
        assert index.wait(10)
        index.catch_up()
        return index


@pytest.fixture(scope="module")
def keyring(tmp_path_factory):
    return make_keyring(tmp_path_factory.mktemp("keys"))


resources = st.one_of(
    st.none(),
    st.builds(ResourcePatternFilter, st.sampled_from([ResourceType.ANY, ResourceType.DELEGATION_TOKEN, *TYPES]),
              st.sampled_from([None, *NAMES]),
              st.sampled_from([PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED])),
    st.builds(AclBindingFilter.of, st.sampled_from([ResourceType.ANY, *TYPES]), st.sampled_from([None, *NAMES]),
              st.sampled_from([PatternType.ANY, PatternType.MATCH]), st.sampled_from([None, *PRINCIPALS])),
)
filters = st.fixed_dictionaries({}, optional={
    "principal": st.sampled_from([*PRINCIPALS, "User:admin", "User:etl", "User:zed"]),
    "user": st.sampled_from(["alice", "bob", "zed"]),
    "resource": resources,
    "event_types": st.lists(st.sampled_from(["AclCreated", "AclDeleted", "ScramCredentialUpserted",
                                             "DelegationTokenIssued", "DelegationTokenRenewed",
                                             "DelegationTokenRemoved"]), min_size=1, max_size=3),
    "start_offset": st.integers(0, 30),
    "end_offset": st.integers(0, 40),
    "start_ms": st.integers(1_000, 20_000),
    "end_ms": st.integers(1_000, 20_000),
    "limit": st.integers(0, 5),
}).filter(lambda q: q.get("start_ms", 0) <= q.get("end_ms", 1 << 62))
timelines = st.lists(st.tuples(st.sampled_from(PRINCIPALS), st.sampled_from(OPS), st.sampled_from(TYPES),
                               st.sampled_from(["orders", "payments", "o"])), max_size=3)


def _both(store):
    return TestHistoryIndex.backend(store), LogScan(store.timetravel)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=60)
@given(plan=steps, queries=st.lists(filters, min_size=1, max_size=6), timelines=timelines, retained=st.booleans())
def test_history_and_timelines_from_the_index_equal_the_scan(keyring, plan, queries, timelines, retained):
    """For random workloads and filters, history and access_timeline through the index equal the log scan
    (also for an index built after retention deleted the log's first segments)."""
    with store_after(keyring, plan, retained) as store:
        travel = store.timetravel
        index, scan = _both(store)
        for query in queries:
            assert list(history(travel, **query, backend=index)) == list(history(travel, **query, backend=scan))
        for principal, op, rt, name in timelines:
            assert access_timeline(travel, store.config, principal, op, rt, name, backend=index) == access_timeline(
                travel, store.config, principal, op, rt, name, backend=scan)


# credentials and tokens changing again and again: a diff from the index must find their state before a point
churn = st.lists(st.tuples(st.one_of(
    requests,
    st.tuples(st.just("upsert"), st.just("alice"), st.just(ScramMechanism.SCRAM_SHA_256)),
    st.tuples(st.just("unset"), st.just("alice"), st.just(ScramMechanism.SCRAM_SHA_256)),
    st.tuples(st.just("renew"), st.integers(0, 1)),
    st.tuples(st.just("expire"), st.integers(0, 1), st.sampled_from([-1, 1500])),
), st.sampled_from([0, 1])), min_size=1, max_size=16)


def _diffs_agree(store) -> None:
    """diff(a, b) from the index equals the scan's for every a <= b of the store's log."""
    index, scan = _both(store)
    end = store.log.end_offset
    for a in range(end + 1):
        for b in range(a, end + 1):
            assert diff(store.timetravel, a, b, backend=index) == diff(store.timetravel, a, b, backend=scan)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=60)
@given(plan=churn)
def test_diff_from_the_index_equals_the_scan_between_every_two_points(keyring, plan):
    """diff(a, b) from the index rows equals the scan's (the images at a and b compared), for every a <= b."""
    with store_after(keyring, plan) as store:
        _diffs_agree(store)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=40)
@given(plan=steps, asks=st.lists(st.tuples(st.sampled_from(OPS), st.sampled_from(TYPES),
                                           st.sampled_from(["orders", "ord", "payments", "o", "*"])),
                                 min_size=1, max_size=3))
def test_who_could_at_every_point_from_the_index_equals_the_scan(keyring, plan, asks):
    """who_could at a point from the index's ACL rows on the resource's patterns equals the scan's image there."""
    with store_after(keyring, plan) as store:
        index, scan = _both(store)
        for n in range(store.log.end_offset + 1):
            for op, rt, name in asks:
                assert who_could_at(store.timetravel, store.config, op, rt, name, n, backend=index) == who_could_at(
                    store.timetravel, store.config, op, rt, name, n, backend=scan)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=15)
@given(plan=churn, asks=st.lists(st.tuples(st.sampled_from(OPS), st.sampled_from(TYPES), st.just("orders")),
                                 min_size=1, max_size=2))
def test_after_retention_the_store_answers_diff_and_who_could_as_the_scan(keyring, plan, asks):
    """An index built after retention holds no state before its first row: the store's diff and who_could at a
    point then answer from the scan (the index refuses), and equal it."""
    with store_after(keyring, plan, retained=True) as store:
        start, end = store.log.start_offset, store.log.end_offset
        if start > 0:
            with pytest.raises(ValueError, match="holds no state before it"):
                store.timetravel.index.diff(start, end)
        for a in range(start, end + 1):
            assert store.diff(a, end) == scanned(store, store.diff, a, end)
            for op, rt, name in asks:
                assert store.who_could(op, rt, name, at=a) == scanned(store, store.who_could, op, rt, name, at=a)


quota_plans = st.lists(st.tuples(st.sampled_from([{"user": "alice"}, {"user": None}, {"client-id": "app"}]),
                                 st.sampled_from(["consumer_byte_rate", "producer_byte_rate"]),
                                 st.sampled_from([None, 10.0, 20.0])), min_size=1, max_size=12)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=30,
          deadline=None)
@given(plan=quota_plans)
def test_quota_diffs_from_the_index_equal_the_scan_between_every_two_points(keyring, plan):
    """Client quotas set, changed and removed at random: diff(a, b) from the index rows equals the scan's images,
    for every a <= b (a kind listed by its declaration alone, entities.QUOTAS)."""
    with store_after(keyring, []) as store:
        for entity, key, value in plan:
            store.alter_client_quotas([ClientQuotaAlteration(entity, (ClientQuotaOp(key, value),))], context=ADMIN)
        _diffs_agree(store)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=40)
@given(plan=churn)
def test_live_token_access_at_every_point_is_the_replayed_tokens_held_by_another(keyring, plan):
    """At every point, through either backend, the live accesses are exactly the tokens of a fresh replay's image
    there that are not expired at its time and were requested by someone else than the owner (the requester)
    or renewed or expired by them (in these plans, User:admin: the requester, and the only renewer)."""
    with store_after(keyring, plan) as store:
        travel = store.timetravel
        for n in range(store.log.end_offset + 1):
            at = travel.timestamp_before(n)
            expected = set() if at is None else {
                (t.token_id, t.requester, t.owner) for t in replayed(store, n).tokens
                if t.requester != t.owner and not t.is_expired(at)}
            for backend in _both(store):
                found = live_tokens(travel, n, None, backend=backend)
                assert {(a.token_id, a.holder, a.owner) for a in found} == expected, n


def test_every_code_of_every_acl_field_comes_back_from_the_index_as_the_scan_reads_it(keyring):
    """The index hands an ACL row's created flag and four codes to Python packed in one int: every resource
    type, pattern type, operation and permission an ACL can hold comes back unchanged, in diffs and acls_at."""
    from secmeta.core import AclBinding, AclOperation, AclPermissionType

    concrete = [t for t in ResourceType if t not in (ResourceType.ANY, ResourceType.UNKNOWN)]
    ops = [o for o in AclOperation if o not in (AclOperation.ANY, AclOperation.UNKNOWN)]
    name = {rt: "kafka-cluster" if rt == ResourceType.CLUSTER else "orders" for rt in concrete}
    bindings = [AclBinding.of(rt, name[rt], pt, "User:alice", host, op, perm)
                for rt in concrete for pt in (PatternType.LITERAL, PatternType.PREFIXED) for op in ops
                for perm, host in ((AclPermissionType.ALLOW, "*"), (AclPermissionType.DENY, "10.0.0.1"))]
    with store_after(keyring, []) as store:
        store.create_acls(bindings, context=ADMIN)  # Kafka's validation refuses some (e.g. a USER ACL for Read)
        created = store.log.end_offset
        store.delete_acls([AclBindingFilter.of(ResourceType.ANY, None, PatternType.PREFIXED)], context=ADMIN)
        store.timetravel.index.catch_up()
        end = store.log.end_offset
        for a, b in ((0, end), (0, created), (created, end)):
            found = store.diff(a, b)
            assert found == scanned(store, store.diff, a, b)
            assert {x for _, x in found.acls_added + found.acls_removed} <= set(bindings)
        held = {x for _, x in store.diff(0, created).acls_added}
        assert {x.restype for x in held} == set(concrete) and {x.permission_type for x in held} == {
            AclPermissionType.ALLOW, AclPermissionType.DENY} and {x.operation for x in held} == set(ops)
        assert {x for _, x in store.diff(created, end).acls_removed} == {
            x for x in held if x.resource_pattern_type == PatternType.PREFIXED}
        index = store.timetravel.index
        for rt in concrete:
            assert index.acls_at(end, rt, name[rt]) == LogScan(store.timetravel).acls_at(end, rt, name[rt]) != []
