"""`secmeta log recover --truncate-to N`: the explicit repair of a log, which keeps offsets below N and is logged."""

from __future__ import annotations

import getpass
import hashlib
import io
import json
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core import RequestContext, SecurityStore
from secmeta.core.cli import main
from secmeta.core.errors import CorruptLogError
from secmeta.core.log import Log
from secmeta.core.log.recover import Recovery
from secmeta.events.records import LogRecovered
from secmeta.events.types import AclOperation, ResourceType
from tests.logkit import (
    acl_created,
    binding,
    build_tamper_store,
    cli_verify,
    frames_of,
    make_keyring,
    reframe,
    strip,
    tamper_config,
)

ALICE = ("User:alice", "1.2.3.4", AclOperation.READ, ResourceType.TOPIC, "public-x")
ADMIN = RequestContext("User:admin", "10.0.0.1")


@pytest.fixture
def damaged(tmp_path):
    """A store whose batch at offset 25 (alice's grant) was edited with its CRC fixed, so open refuses."""
    keyring = make_keyring(tmp_path)
    path = tmp_path / "store"
    build_tamper_store(path, keyring, retention=False)
    last = sorted((path / "log").glob("*.log"))[-1]
    frames = frames_of(last)
    frames[-2] = reframe(frames[-2], lambda body: body.replace(b"public-", b"payroll"))
    last.write_bytes(b"".join(frames))
    with pytest.raises(CorruptLogError) as info:
        SecurityStore.open(path, tamper_config(False), keyring=keyring)
    assert info.value.offset == 25
    return path, keyring, frames


@pytest.fixture
def healthy(tmp_path):
    """A store of 27 one-event batches that opens cleanly."""
    keyring = make_keyring(tmp_path)
    path = tmp_path / "store"
    build_tamper_store(path, keyring, retention=False)
    return path, keyring


def recover(path, *args: str) -> int:
    return main(["log", "recover", "--store", str(path), "--key-file", str(path.parent / "keys.json"), *args])


def files_under(path) -> dict:
    return {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}


def logged_recoveries(path, keyring) -> list:
    with Log.open(path, keyring=keyring, read_only=True, create=False) as log:
        return [e for e in log.read() if type(e.event) is LogRecovered]


def test_recover_keeps_the_offsets_below_n_and_logs_what_it_cut(damaged, capsys):
    """Offsets 25 and 26 go to the quarantine; the first batch after the cut is a LogRecovered event naming
    the operator, the reason, the offsets cut, how many events, the link at the cut and the bytes' SHA-256."""
    path, keyring, frames = damaged
    assert recover(path, "--truncate-to", "25", "--reason", "edited batch found by open", "--yes") == 0
    out = capsys.readouterr().out
    assert "kept the offsets below 25; cut offsets 25 to 26 (2 event(s)" in out
    (quarantine,) = (path / "quarantine").iterdir()
    cut = b"".join(frames[-2:])
    assert (quarantine / sorted((path / "log").glob("*.log"))[-1].name).read_bytes() == cut
    (logged,) = logged_recoveries(path, keyring)
    event = logged.event
    assert logged.offset == 25 and logged.actor_principal == f"{getpass.getuser()} (os user)"  # not User:...
    assert ":" not in logged.actor_principal  # never a Kafka principal (a query for User:root does not match it)
    assert (event.from_offset, event.to_offset, event.events) == (25, 27, 2)
    assert event.reason == "edited batch found by open" and event.operator.startswith(f"{getpass.getuser()}@")
    assert logged.actor_asserted and logged.operator.user == getpass.getuser() and logged.operator.pid == os.getpid()
    assert event.digest == hashlib.sha256(cut).hexdigest()
    with Log.open(path, keyring=keyring, read_only=True) as log:
        assert event.link == log.link_at(25).hex()
    assert json.loads((quarantine / "recovery.json").read_text())["digest"] == event.digest
    with SecurityStore.open(path, tamper_config(False), keyring=keyring) as store:
        assert store.image.next_offset == 26 and not store.authorize(*ALICE)
    code, out = cli_verify(path, path.parent / "keys.json")
    assert code == 0 and "recovery logged at offset 25" in out and "cut offsets 25 to 26" in out


def test_deleting_the_quarantine_leaves_the_logged_recovery(damaged, capsys):
    """Issue 21: after `rm -rf quarantine` and one more write, dump, history and verify still show the repair."""
    path, keyring, _ = damaged
    assert recover(path, "--truncate-to", "25", "--reason", "cut", "--yes") == 0
    shutil.rmtree(path / "quarantine")
    with SecurityStore.open(path, tamper_config(False), keyring=keyring) as store:
        store.create_acls([binding(99)], context=ADMIN)
        rows = [(h.offset, h.event_type) for h in store.history()]
    assert (25, "LogRecovered") in rows and rows[-1] == (26, "AclCreated")
    code, out = cli_verify(path, path.parent / "keys.json")
    assert code == 0 and "recovery logged at offset 25" in out
    key = ["--key-file", str(path.parent / "keys.json")]
    capsys.readouterr()
    assert main(["log", "dump", "--store", str(path), *key, "--from-offset", "25", "--to-offset", "26",
                 "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["event_type"] == "LogRecovered" and row["payload"]["from_offset"] == 25
    assert row["payload"]["to_offset"] == 27 and row["payload"]["reason"] == "cut"


def test_a_log_that_opens_cleanly_is_refused_unless_forced(healthy, capsys, monkeypatch):
    """Issue 21: `--truncate-to 9` on a healthy log exits 1 and changes nothing; forced, it asks, and only a
    yes cuts: offsets 0-8 stay, offset 9 on are cut, and the cut is logged at offset 9."""
    path, keyring = healthy
    before = files_under(path)
    assert recover(path, "--truncate-to", "9") == 1
    assert "opens cleanly" in capsys.readouterr().err and files_under(path) == before
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert recover(path, "--truncate-to", "9", "--force") == 1
    assert "not confirmed" in capsys.readouterr().err and files_under(path) == before
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert recover(path, "--truncate-to", "9", "--force", "--reason", "drill") == 0
    assert "proceed? [y/N]" in capsys.readouterr().out
    with Log.open(path, keyring=keyring, read_only=True) as log:
        events = list(log.read())
    assert [e.offset for e in events] == list(range(10)) and type(events[9].event) is LogRecovered
    assert (events[9].event.from_offset, events[9].event.to_offset, events[9].event.events) == (9, 27, 18)


def test_a_recovery_interrupted_before_its_event_is_logged_by_the_next_writer(damaged, monkeypatch, capsys):
    """A crash between the cut and the logging of LogRecovered: readers refuse (naming --resume) and the next
    writer open logs it first."""
    path, keyring, _ = damaged

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # the process dies after the cut, before its writer open

    monkeypatch.setattr("secmeta.core.log.recover.record_pending", crash)
    assert recover(path, "--truncate-to", "25", "--reason", "crash drill", "--yes") != 0
    with pytest.raises(CorruptLogError, match="not yet recorded.*--resume"):
        SecurityStore.open(path, tamper_config(False), keyring=keyring, read_only=True)
    code, out = cli_verify(path, path.parent / "keys.json")
    assert code == 1 and "not logged yet" in out
    with SecurityStore.open(path, tamper_config(False), keyring=keyring) as store:
        assert store.image.next_offset == 26
    (logged,) = logged_recoveries(path, keyring)
    assert logged.offset == 25 and logged.event.reason == "crash drill"
    assert cli_verify(path, path.parent / "keys.json")[0] == 0


def test_resume_logs_a_pending_recovery(damaged, monkeypatch, capsys):
    path, keyring, _ = damaged
    monkeypatch.setattr("secmeta.core.log.recover.record_pending", lambda *a, **k: None)
    assert recover(path, "--truncate-to", "25", "--yes") == 0
    monkeypatch.undo()
    capsys.readouterr()
    assert recover(path, "--resume") == 0 and "the pending recovery is logged" in capsys.readouterr().out
    (logged,) = logged_recoveries(path, keyring)
    assert logged.event.reason == "not given"
    assert recover(path, "--resume") == 0 and "no recovery was pending" in capsys.readouterr().out


def test_recover_moves_snapshots_past_the_offset(damaged, capsys):
    """Cutting before the newest snapshot moves it to the quarantine too (it describes removed history)."""
    path, keyring, _ = damaged
    assert recover(path, "--truncate-to", "20", "--yes") == 0
    (quarantine,) = (path / "quarantine").iterdir()
    assert "snapshots/snapshot-00000000000000000024.avro" in json.loads(
        (quarantine / "recovery.json").read_text())["derived"]
    assert (quarantine / "snapshots" / "snapshot-00000000000000000024.avro").exists()
    with SecurityStore.open(path, tamper_config(False), keyring=keyring) as store:
        assert store.image.next_offset == 21
    assert cli_verify(path, path.parent / "keys.json")[0] == 0


def test_recover_keeps_a_snapshot_and_a_checkpoint_of_one_offset_apart(damaged, capsys):
    """A policy snapshot and a time-travel checkpoint past the cut at the same offset share a file name: both are
    kept in the quarantine, each at its place in the store, byte for byte (neither written over the other)."""
    path, keyring, _ = damaged
    snapshot = path / "snapshots" / "snapshot-00000000000000000024.avro"  # past the cut at 20
    checkpoint = path / "checkpoints" / snapshot.name
    checkpoint.parent.mkdir(exist_ok=True)
    shutil.copyfile(snapshot, checkpoint)  # an authenticated image past the cut, as a checkpoint file
    saved = {p.relative_to(path): p.read_bytes() for p in (snapshot, checkpoint)}
    assert recover(path, "--truncate-to", "20", "--yes") == 0
    (quarantine,) = (path / "quarantine").iterdir()
    assert {where: (quarantine / where).read_bytes() for where in saved} == saved


def test_recover_refuses_an_offset_inside_a_batch_or_past_the_damage(damaged, capsys):
    """Only a boundary of intact batches can be kept; the error says so and nothing changes."""
    path, _, _ = damaged
    before = files_under(path)
    assert recover(path, "--truncate-to", "99", "--yes") == 2  # a bad argument
    assert "--truncate-to 99 is past the log's end (27)" in capsys.readouterr().err
    assert files_under(path) == before


def test_a_cut_below_a_logged_recovery_is_refused_even_forced(healthy, capsys):
    """Review of issue 21: a forced cut below an earlier recovery's LogRecovered would erase the record of that
    repair. It is refused (exit 1, nothing changed) naming the recovery's offset and id; a cut above it is made."""
    path, keyring = healthy
    assert recover(path, "--truncate-to", "9", "--force", "--yes", "--reason", "first") == 0
    (first,) = logged_recoveries(path, keyring)
    with SecurityStore.open(path, tamper_config(False), keyring=keyring) as store:
        store.create_acls([binding(99)], context=ADMIN)  # offset 10
    capsys.readouterr()
    before = files_under(path)
    for offset in ("9", "5", "0"):
        assert recover(path, "--truncate-to", offset, "--force", "--yes") == 1
        err = capsys.readouterr().err
        assert f"would erase the logged recovery {first.event.recovery_id} at offset 9" in err
        assert files_under(path) == before
    assert recover(path, "--truncate-to", "10", "--force", "--yes", "--reason", "second") == 0
    assert [e.offset for e in logged_recoveries(path, keyring)] == [9, 10]


def test_a_wiped_log_is_refused_until_an_operator_records_its_end(tmp_path, capsys):
    """Issue 14 review: every file in log/ and snapshots/ deleted, on a store that keeps its history. A store
    has a high-water file from its creation, so its absence is tampering even when the log is empty: verify
    fails and both opens refuse (writing nothing) until `log recover --truncate-to 0` records the empty end."""
    keyring = make_keyring(tmp_path)
    path = tmp_path / "store"
    build_tamper_store(path, keyring, retention=False)
    for sub in ("log", "snapshots"):
        for file in (path / sub).iterdir():
            file.unlink()
    code, out = cli_verify(path, path.parent / "keys.json")
    assert code == 1 and "high-water file is missing" in out and "OK" not in out
    before = files_under(path)
    for read_only in (True, False):
        with pytest.raises(CorruptLogError, match="high-water file is missing.*`secmeta log recover --truncate-to 0"):
            SecurityStore.open(path, tamper_config(False), keyring=keyring, read_only=read_only)
    assert files_under(path) == before
    assert recover(path, "--truncate-to", "0", "--reason", "log wiped; restarting empty", "--yes") == 0
    (logged,) = logged_recoveries(path, keyring)
    assert logged.event.reason == "log wiped; restarting empty" and logged.event.from_offset == 0
    with SecurityStore.open(path, tamper_config(False), keyring=keyring) as store:
        assert store.image.next_offset == 1 and not store.authorize(*ALICE)


def test_a_new_store_has_a_high_water_mark_from_its_creation(tmp_path):
    """Created and closed without a write, then its high-water file deleted: refused like any other store."""
    keyring = make_keyring(tmp_path)
    path = tmp_path / "store"
    SecurityStore.open(path, keyring=keyring).close()
    (path / "log" / "high-water").unlink()
    with pytest.raises(CorruptLogError, match="high-water file is missing"):
        SecurityStore.open(path, keyring=keyring)


def test_recover_of_an_empty_log_accepts_only_its_start(tmp_path, capsys):
    keyring = make_keyring(tmp_path)
    path = tmp_path / "store"
    SecurityStore.open(path, keyring=keyring).close()
    for file in (path / "log").iterdir():
        file.unlink()
    assert recover(path, "--truncate-to", "5", "--yes") != 0
    assert "the log has no segments: it can only be recorded as ending at offset 0" in capsys.readouterr().err
    assert not (path / "log" / "high-water").exists()


def test_a_forged_pending_recovery_marker_is_refused(healthy):
    """A marker not sealed with the store's key is tampering: both opens refuse it and change nothing."""
    path, keyring = healthy
    (path / "recovery-pending").write_bytes(b'{"event": {}}' + bytes(40))
    before = files_under(path)
    for read_only in (True, False):
        with pytest.raises(CorruptLogError, match="pending-recovery marker .* is not valid"):
            SecurityStore.open(path, tamper_config(False), keyring=keyring, read_only=read_only)
    assert files_under(path) == before


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=8), data=st.data())
def test_any_cut_keeps_what_is_below_it_and_logs_the_rest_exactly(tmp_path_factory, sizes, data):
    """For any log of batches and any batch boundary N (forced: the log opens cleanly): offsets below N are
    kept as they were, and the logged LogRecovered at N counts the events cut and digests exactly the bytes cut."""
    directory = tmp_path_factory.mktemp("cut")
    keyring, path = make_keyring(directory), directory / "store"
    with Log.open(path, keyring=keyring) as log:
        n = 0
        for size in sizes:
            log.append([acl_created(n + i) for i in range(size)])
            n += size
    bounds = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    cut = data.draw(st.sampled_from(bounds))
    with Log.open(path, keyring=keyring, read_only=True) as log:
        kept = strip(log.read(0, cut))
    data_before = b"".join(p.read_bytes() for p in sorted((path / "log").glob("*.log")))
    with Recovery(path, cut, keyring=keyring) as recovery:
        event = recovery.execute("property", force=True)
    with Log.open(path, keyring=keyring, read_only=True) as log:
        after = list(log.read())
    assert strip(after[:cut]) == kept and len(after) == cut + 1 and after[cut].event == event
    data_after = b"".join(p.read_bytes() for p in sorted((path / "log").glob("*.log")))
    assert (event.from_offset, event.to_offset, event.events) == (cut, n, n - cut)
    quarantined = b"".join(p.read_bytes() for p in sorted((path / event.quarantine).glob("*.log")))
    assert event.digest == hashlib.sha256(quarantined).hexdigest()
    kept_bytes = data_before[: len(data_before) - len(quarantined)]
    assert data_before.endswith(quarantined) and data_after.startswith(kept_bytes)


def test_the_logged_recovery_names_the_link_of_the_head_it_cut(healthy, capsys):
    """Review of issue 21: `cut_link` is the chain link of the last batch cut, the link a `log head` line (or
    a history topic's secmeta.link) saw at the old head, so either can be tied to the logged recovery."""
    path, keyring = healthy
    assert main(["log", "head", "--store", str(path), "--key-file", str(path.parent / "keys.json")]) == 0
    head = capsys.readouterr().out
    with Log.open(path, keyring=keyring, read_only=True) as log:
        old_head = log.link_at(27)
    assert f"link={old_head.hex()}" in head
    assert recover(path, "--truncate-to", "20", "--force", "--yes") == 0
    (logged,) = logged_recoveries(path, keyring)
    assert logged.event.cut_link == old_head.hex() and logged.event.link != logged.event.cut_link
