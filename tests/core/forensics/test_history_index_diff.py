"""How the history index answers a diff: one scan of its range, every ACL's text back exactly, and an index
file of an older format rebuilt with the reason (that its answers equal the log scan's on random logs is
test_history_backends.py's)."""

from __future__ import annotations

import sqlite3

import pytest

from secmeta.core import AclBindingFilter, AclOperation, PatternType, ResourceType
from secmeta.core.forensics import history_index
from secmeta.core.forensics.index_seal import index_key, meta_mac
from secmeta.core.forensics.scan import LogScan
from tests.logkit import Clock, make_keyring
from tests.storekit import ADMIN, acl, store_at, upsert

# names JSON escapes or writes as they are: quotes, a backslash, non-ASCII letters, an emoji, a prefix
ODD_NAMES = ('or"ders', "back\\slash", "zürich-ü", "😀-stream", "{'a': 1}", "[1,", "ord")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store whose log holds every kind a diff reads: ACLs created and deleted (on odd names too), credentials,
    tokens renewed and expired, a client quota."""
    from secmeta.core.control.quotas import ClientQuotaAlteration, ClientQuotaOp

    keyring = make_keyring(tmp_path_factory.mktemp("keys"))
    clock = Clock()
    store = store_at(tmp_path_factory.mktemp("store"), keyring, clock=clock)
    store.create_acls([acl(name, f"User:{name}", host="*" if i % 2 else "10.0.0.7",
                           pattern=PatternType.PREFIXED if i % 3 == 0 else PatternType.LITERAL,
                           op=list(AclOperation)[2 + i % 10]) for i, name in enumerate(ODD_NAMES)], context=ADMIN)
    store.create_acls([acl("kept", "User:alice"), acl("gone", "User:bob")], context=ADMIN)
    store.alter_user_scram_credentials([upsert("alice"), upsert("bob")], context=ADMIN)
    token = store.create_delegation_token(context=ADMIN, owner="User:etl", renewers=["User:admin"])
    clock.t += 1
    store.alter_client_quotas([ClientQuotaAlteration({"user": "alice"}, (ClientQuotaOp("consumer_byte_rate", 10.0),))],
                              context=ADMIN)
    store.renew_delegation_token(token.hmac, context=ADMIN)
    store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "gone")], context=ADMIN)
    store.create_acls([acl('or"ders', "User:late", rtype=ResourceType.GROUP)], context=ADMIN)
    store.alter_user_scram_credentials([upsert("alice", b"other")], context=ADMIN)
    store.expire_delegation_token(token.hmac, -1, context=ADMIN)
    assert store.timetravel.index.wait(10)
    store.timetravel.index.catch_up()
    yield store
    store.close()


def _range_scans(db: sqlite3.Connection, statements: list[str]) -> int:
    """How many of ``statements`` read a range of the events table's own B-tree (by their query plans)."""
    scans = 0
    for sql in statements:
        if sql.lstrip().upper().startswith("SELECT"):
            args = (0,) * sql.count("?")
            plan = db.execute(f"EXPLAIN QUERY PLAN {sql}", args).fetchall()
            scans += sum("SEARCH events USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)" in row[-1] for row in plan)
    return scans


def test_a_diff_reads_its_range_of_the_index_once(store):
    """Issue 24: the index's diff read the same range twice, once for the ACL rows and once for the others
    (0.2-0.26 of 0.40 s CPU on the 1M-event log). Every row of the range now comes from one scan, on a range
    holding every kind of row; the other statements only probe the rows of the entities it touched."""
    index = store.timetravel.index
    statements: list[str] = []
    index._db.set_trace_callback(statements.append)
    try:
        found = store.diff(0, store.log.end_offset)
    finally:
        index._db.set_trace_callback(None)
    assert found.acls_added and found.acls_removed == () and found.credentials_upserted and found.tokens_renewed \
        and found.entities  # every kind of row was in the range
    assert _range_scans(index._db, statements) == 1


def test_every_acl_comes_back_exactly_whatever_its_name_holds(store):
    """ACL names, principals and hosts JSON escapes (quotes, a backslash) or keeps (non-ASCII, an emoji) come back
    exactly from the index, in diffs, across every split point, and in acls_at, as the log scan reads them."""
    index, scan = store.timetravel.index, LogScan(store.timetravel)
    end = store.log.end_offset
    for a in range(end + 1):
        assert index.diff(a, end) == scan.diff(a, end)
        assert index.diff(0, a) == scan.diff(0, a)
    names = {b.pattern.name for _, b in index.diff(0, end).acls_added}
    assert set(ODD_NAMES) <= names
    for rt in (ResourceType.TOPIC, ResourceType.GROUP):
        for name in (*ODD_NAMES, "ord-more", "kept"):
            for n in (3, end):
                assert index.acls_at(n, rt, name) == scan.acls_at(n, rt, name)


def test_an_index_of_an_older_format_is_rebuilt_naming_both_formats(tmp_path):
    """A file an older version wrote (its meta row authentic, its format older) is not served: the store says
    which format it is in and which it reads, and rebuilds it; the rebuilt index answers."""
    keyring = make_keyring(tmp_path)
    store = store_at(tmp_path / "s", keyring, clock=Clock())
    store.create_acls([acl("orders")], context=ADMIN)
    assert store.timetravel.index.wait(10)
    store.timetravel.index.catch_up()
    store.close()
    path = tmp_path / "s" / "history" / "index.sqlite"
    db = sqlite3.connect(path)
    meta = dict(db.execute("SELECT k, v FROM meta"))
    meta["format"] = str(history_index.INDEX_FORMAT - 1)
    meta["mac"] = meta_mac(index_key(keyring, meta["key_id"]), meta)
    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())
    db.commit()
    db.close()
    store = store_at(tmp_path / "s", keyring, clock=Clock())
    try:
        index = store.timetravel.index
        assert index.wait(10)
        assert index.problem == (f"it is in format {history_index.INDEX_FORMAT - 1}, and this version reads format "
                                 f"{history_index.INDEX_FORMAT} only")
        assert [b.pattern.name for _, b in index.diff(0, 1).acls_added] == ["orders"]
    finally:
        store.close()
