"""The history index: it answers exactly as a full scan of the log, and a bad index file is never served."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import AclBindingFilter, PatternType, ResourcePatternFilter, ResourceType, ScramMechanism
from core.history_index import HistoryIndex, index_problem
from tests.core.test_timetravel_properties import (
    NAMES,
    OPS,
    PRINCIPALS,
    TYPES,
    requests,
    run,
    steps,
)
from tests.logkit import Clock, make_keyring
from tests.storekit import ADMIN, acl, store_at


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
    "limit": st.integers(0, 5),
})


def scanned(store, fn, *args, **kwargs):
    """What ``fn`` answers when the history index is out of the way (a scan of the log)."""
    index = store.timetravel.index
    store.timetravel.index = None
    try:
        return fn(*args, **kwargs)
    finally:
        store.timetravel.index = index


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=60)
@given(plan=steps, queries=st.lists(filters, min_size=1, max_size=6),
       timelines=st.lists(st.tuples(st.sampled_from(PRINCIPALS), st.sampled_from(OPS), st.sampled_from(TYPES),
                                    st.sampled_from(["orders", "payments", "o"])), max_size=3))
def test_the_index_answers_exactly_as_a_full_scan(keyring, plan, queries, timelines):
    """For random workloads and filters, history and access_timeline from the index equal a full scan."""
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp, store_at(Path(tmp) / "store", keyring, clock=clock) as store:
        run(store, clock, plan)
        assert store.timetravel.index.wait(10)
        for query in queries:
            assert list(store.history(**query)) == scanned(store, lambda q=query: list(store.history(**q)))
        for principal, op, rt, name in timelines:
            assert store.access_timeline(principal, op, rt, name) == scanned(
                store, store.access_timeline, principal, op, rt, name)


# credentials and tokens changing again and again: a diff from the index must find their state before a point
churn = st.lists(st.tuples(st.one_of(
    requests,
    st.tuples(st.just("upsert"), st.just("alice"), st.just(ScramMechanism.SCRAM_SHA_256)),
    st.tuples(st.just("unset"), st.just("alice"), st.just(ScramMechanism.SCRAM_SHA_256)),
    st.tuples(st.just("renew"), st.integers(0, 1)),
    st.tuples(st.just("expire"), st.integers(0, 1), st.sampled_from([-1, 1500])),
), st.sampled_from([0, 1])), min_size=1, max_size=16)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=60)
@given(plan=churn)
def test_diff_from_the_index_equals_the_images_between_every_two_points(keyring, plan):
    """diff(a, b) from the index rows equals the images at a and b compared, for every a <= b of random logs."""
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp, store_at(Path(tmp) / "store", keyring, clock=clock) as store:
        run(store, clock, plan)
        assert store.timetravel.index.wait(10)
        end = store.log.end_offset
        for a in range(end + 1):
            for b in range(a, end + 1):
                assert store.diff(a, b) == scanned(store, store.diff, a, b)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=40)
@given(plan=steps, asks=st.lists(st.tuples(st.sampled_from(OPS), st.sampled_from(TYPES),
                                           st.sampled_from(["orders", "ord", "payments", "o", "*"])),
                                 min_size=1, max_size=3))
def test_who_could_at_every_point_from_the_index_equals_the_image_there(keyring, plan, asks):
    """who_could at a point reads only the ACL rows on the resource's patterns, and answers as the image there."""
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp, store_at(Path(tmp) / "store", keyring, clock=clock) as store:
        run(store, clock, plan)
        assert store.timetravel.index.wait(10)
        for n in range(store.log.end_offset + 1):
            for op, rt, name in asks:
                assert store.who_could(op, rt, name, at=n) == scanned(store, store.who_could, op, rt, name, at=n)


def _store_with_history(path: Path, keyring, clock: Clock):
    store = store_at(path, keyring, clock=clock)
    for i in range(6):
        store.create_acls([acl(f"t{i}", f"User:p{i % 2}")], context=ADMIN)
        clock.t += 1
    assert store.timetravel.index.wait(10)
    store.timetravel.index.catch_up()
    return store


def _reopened_index(path: Path, keyring) -> HistoryIndex:
    store = store_at(path, keyring, clock=Clock())
    index = store.timetravel.index
    assert index.wait(10)
    entries = [e.offset for e in store.history(principal="User:p1")]
    store.close()
    assert entries == [1, 3, 5]  # served from the rebuilt index, as the log says
    return index


def _edit(path: Path, sql: str) -> None:
    db = sqlite3.connect(path / "history" / "index.sqlite")
    db.execute(sql)
    db.commit()
    db.close()


@pytest.mark.parametrize("damage, problem", [
    ("UPDATE events SET principal = 'User:nobody' WHERE offset = 3", "do not match their authenticated digest"),
    ("DELETE FROM events WHERE offset = 5", "do not match their authenticated digest"),
    ("UPDATE meta SET v = '4' WHERE k = 'end'", "fails its HMAC check"),
    ("DELETE FROM meta", "no meta row"),
])
def test_a_tampered_index_is_reported_once_and_rebuilt(tmp_path, keyring, damage, problem):
    """An edited row, a removed row or an edited meta row: detected, reported, ignored and rebuilt."""
    _store_with_history(tmp_path / "s", keyring, Clock()).close()
    _edit(tmp_path / "s", damage)
    index = _reopened_index(tmp_path / "s", keyring)
    assert problem in index.problem
    assert _reopened_index(tmp_path / "s", keyring).problem is None  # the rebuilt file is good: reported once


@pytest.mark.parametrize("damage", [
    "DELETE FROM parties WHERE party = 'User:etl'",
    "INSERT INTO parties VALUES ('User:mallory', 0)",
    "UPDATE parties SET party = 'User:mallory' WHERE party = 'User:etl'",
])
def test_a_tampered_parties_table_is_reported_and_rebuilt(tmp_path, keyring, damage):
    """The (party, offset) rows behind history(principal=) for tokens must be what the event rows derive."""
    store = store_at(tmp_path / "s", keyring, clock=Clock())
    token = store.create_delegation_token(context=ADMIN, owner="User:etl", renewers=["User:admin"])
    store.renew_delegation_token(token.hmac, context=ADMIN)
    assert store.timetravel.index.wait(10)
    store.timetravel.index.catch_up()
    store.close()
    _edit(tmp_path / "s", damage)
    store = store_at(tmp_path / "s", keyring, clock=Clock())
    assert store.timetravel.index.wait(10)
    assert "parties table does not match its rows" in store.timetravel.index.problem
    assert [e.event_type for e in store.history(principal="User:etl")] == ["DelegationTokenIssued",
                                                                          "DelegationTokenRenewed"]
    assert list(store.history(principal="User:mallory")) == []
    store.close()


def test_a_file_unchanged_since_a_clean_close_is_opened_on_its_mac_and_any_other_is_checked_row_by_row(
        tmp_path, keyring):
    """A clean close leaves the file's keyed MAC beside it; an open trusts only a file that still matches it."""
    _store_with_history(tmp_path / "s", keyring, Clock()).close()
    mac = tmp_path / "s" / "history" / "index.sqlite.mac"
    assert mac.exists()
    index = _reopened_index(tmp_path / "s", keyring)
    assert (index.rows_checked, index.problem) == (False, None)
    mac.write_text("0" * 64)  # a forged or stale MAC: every row is checked, and the good file is kept
    index = _reopened_index(tmp_path / "s", keyring)
    assert (index.rows_checked, index.problem) == (True, None)
    mac.unlink()  # no clean close (a crash): every row is checked
    index = _reopened_index(tmp_path / "s", keyring)
    assert (index.rows_checked, index.problem) == (True, None)


def test_a_truncated_or_missing_index_is_rebuilt(tmp_path, keyring):
    """A file cut short is reported and rebuilt; a missing one is simply built."""
    _store_with_history(tmp_path / "s", keyring, Clock()).close()
    file = tmp_path / "s" / "history" / "index.sqlite"
    file.write_bytes(file.read_bytes()[:3000])
    assert "not a readable index" in _reopened_index(tmp_path / "s", keyring).problem
    file.unlink()
    assert _reopened_index(tmp_path / "s", keyring).problem is None
    assert file.exists()


def test_an_index_of_another_store_is_stale_and_rebuilt(tmp_path, keyring):
    """An index copied from another store does not fit this log's chain: never served."""
    clock = Clock()
    _store_with_history(tmp_path / "a", keyring, clock).close()
    store = store_at(tmp_path / "b", keyring, clock=clock)
    store.create_acls([acl("other", "User:p1")], context=ADMIN)
    store.close()
    (tmp_path / "b" / "history" / "index.sqlite").write_bytes(
        (tmp_path / "a" / "history" / "index.sqlite").read_bytes())
    store = store_at(tmp_path / "b", keyring, clock=clock)
    assert store.timetravel.index.wait(10)
    assert "another store" in store.timetravel.index.problem
    assert [e.offset for e in store.history(principal="User:p1")] == [0]
    store.close()


def test_index_problem_is_none_for_a_good_index(tmp_path, keyring):
    store = _store_with_history(tmp_path / "s", keyring, Clock())
    assert index_problem(store.timetravel.index.path, store.log) is None
    store.close()
