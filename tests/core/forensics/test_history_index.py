"""The history index: a bad index file is never served (that it answers as the log scan does is
test_history_backends.py's)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from secmeta.core.cli import main
from secmeta.core.forensics.history_index import HistoryIndex, index_problem
from tests.logkit import Clock, make_keyring
from tests.storekit import ADMIN, acl, store_at


@pytest.fixture(scope="module")
def keyring(tmp_path_factory):
    return make_keyring(tmp_path_factory.mktemp("keys"))


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


def _alter_by_principal_pages(path: Path) -> None:
    """Change 'User:p1' to 'User:p9' in the by_principal index's pages only (the events rows are untouched)."""
    file = path / "history" / "index.sqlite"
    db = sqlite3.connect(file)
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    pages = [n for name, n in db.execute("SELECT name, pageno FROM dbstat") if name == "by_principal"]
    db.close()
    data = bytearray(file.read_bytes())
    for page in pages:
        start = (page - 1) * page_size
        at = data.find(b"User:p1", start, start + page_size)
        while at >= 0:
            data[at + 6] = ord("9")
            at = data.find(b"User:p1", at + 1, start + page_size)
    file.write_bytes(bytes(data))


def _plant_trigger(path: Path) -> None:
    _edit(path, "CREATE TRIGGER hide AFTER INSERT ON events WHEN new.principal = 'User:p1' "
                "BEGIN UPDATE events SET principal = 'User:nobody' WHERE offset = new.offset; END")


SECONDARY_TAMPERS = [
    pytest.param(_alter_by_principal_pages, "integrity check", id="index-page"),
    pytest.param(_plant_trigger, "schema is not the index's", id="trigger"),
]


@pytest.mark.parametrize("tamper, problem", SECONDARY_TAMPERS)
def test_a_tampered_secondary_index_or_schema_is_refused_at_open(tmp_path, keyring, tamper, problem):
    """Rows intact but an index B-tree altered or a trigger planted: an open without the MAC (a crash) refuses it."""
    _store_with_history(tmp_path / "s", keyring, Clock()).close()
    tamper(tmp_path / "s")
    (tmp_path / "s" / "history" / "index.sqlite.mac").unlink()
    store = store_at(tmp_path / "s", keyring, clock=Clock())
    assert store.timetravel.index.wait(10)
    assert problem in store.timetravel.index.problem
    store.create_acls([acl("t6", "User:p1")], context=ADMIN)  # the trigger, had it been kept, hides this one
    assert [e.offset for e in store.history(principal="User:p1")] == [1, 3, 5, 6]
    store.close()
    store = store_at(tmp_path / "s", keyring, clock=Clock())  # rebuilt and sealed clean: opened on its MAC
    assert store.timetravel.index.wait(10)
    assert (store.timetravel.index.rows_checked, store.timetravel.index.problem) == (False, None)
    store.close()


@pytest.mark.parametrize("tamper, problem", SECONDARY_TAMPERS)
def test_log_verify_reports_a_tampered_secondary_index_and_the_next_open_rebuilds_it(
        tmp_path, keyring, monkeypatch, capsys, tamper, problem):
    """Tampered while a store runs: `secmeta log verify` reports it, the running store's close does not seal it,
    and the next open rebuilds it, as the report says."""
    keys = make_keyring(tmp_path, "verify-keys.json")
    monkeypatch.setenv("SECMETA_KEY_FILE", str(tmp_path / "verify-keys.json"))
    running = _store_with_history(tmp_path / "s", keys, Clock())
    tamper(tmp_path / "s")
    assert main(["log", "verify", "--store", str(tmp_path / "s")]) == 1
    out = capsys.readouterr().out
    assert "history index" in out and problem in out and "the store rebuilds it when it next opens" in out
    running.close()
    store = store_at(tmp_path / "s", keys, clock=Clock())
    assert store.timetravel.index.wait(10)
    assert "log verify found it wrong" in store.timetravel.index.problem
    store.create_acls([acl("t6", "User:p1")], context=ADMIN)
    assert [e.offset for e in store.history(principal="User:p1")] == [1, 3, 5, 6]
    store.close()
    assert main(["log", "verify", "--store", str(tmp_path / "s")]) == 0


def test_a_failed_index_write_is_rolled_back_and_queries_scan_until_it_succeeds(tmp_path, keyring):
    """A write that fails mid-transaction (here a trigger aborting it) leaves no transaction open: history
    answers from a scan meanwhile, and the index catches up once writes succeed again."""
    store = _store_with_history(tmp_path / "s", keyring, Clock())
    index = store.timetravel.index
    _edit(tmp_path / "s", "CREATE TRIGGER refuse BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'refused'); END")
    store.create_acls([acl("t6", "User:p1")], context=ADMIN)
    assert not index.covered(store.log.end_offset)
    assert [e.offset for e in store.history(principal="User:p1")] == [1, 3, 5, 6]
    _edit(tmp_path / "s", "DROP TRIGGER refuse")
    assert index.covered(store.log.end_offset)
    assert [e.offset for e in store.history(principal="User:p1")] == [1, 3, 5, 6]
    store.close()


KILLED_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from secmeta.events.keyring import Keyring
    from tests.logkit import Clock
    from tests.storekit import ADMIN, acl, store_at

    store = store_at(sys.argv[1], Keyring.from_file(sys.argv[2]), clock=Clock())
    index = store.timetravel.index
    assert index.wait(10) and not index.rows_checked  # opened on the MAC of a clean close
    store.create_acls([acl("after", "User:p1")], context=ADMIN)
    index.catch_up()  # the file changes: the MAC it was opened on no longer describes it
    os.kill(os.getpid(), signal.SIGKILL)  # no close: no new MAC
    """
)


def test_the_mac_is_consumed_at_open_so_a_process_killed_after_it_leaves_the_file_checked_row_by_row(tmp_path):
    """Open on the MAC, append, SIGKILL (no close): the next open checks every row instead of trusting any MAC."""
    keys = make_keyring(tmp_path)
    _store_with_history(tmp_path / "s", keys, Clock()).close()
    repo = Path(__file__).resolve().parents[3]
    child = subprocess.run([sys.executable, "-c", KILLED_CHILD, str(tmp_path / "s"), str(tmp_path / "keys.json")],
                           env={**os.environ, "PYTHONPATH": str(repo)}, cwd=repo, capture_output=True, text=True)
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert not (tmp_path / "s" / "history" / "index.sqlite.mac").exists()
    store = store_at(tmp_path / "s", keys, clock=Clock())
    index = store.timetravel.index
    assert index.wait(10)
    assert (index.rows_checked, index.problem) == (True, None)
    assert [e.offset for e in store.history(principal="User:p1")] == [1, 3, 5, 6]
    store.close()
