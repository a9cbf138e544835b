"""The log and keys commands of the CLI, as a user runs them."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid

import pytest

from secmeta.core import AclBindingFilter, RequestContext, ResourceType, SecurityStore, StoreConfig
from secmeta.core.auth.scram import credential_from_password
from secmeta.core.cli import main
from secmeta.core.log import Log, LogConfig, verify_log
from secmeta.events.keyring import Keyring, seal_scram
from secmeta.events.records import Envelope, ScramCredentialUpserted
from secmeta.events.types import ScramMechanism
from secmeta.projections.errors import InconsistentEventError
from tests.logkit import acl_created, acl_deleted, binding


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A store with ACL events and one sealed SCRAM credential; keys via $SECMETA_KEY_FILE."""
    keys = tmp_path / "keys.json"
    Keyring.generate_file(keys)
    monkeypatch.setenv("SECMETA_KEY_FILE", str(keys))
    ring = Keyring.from_file(keys)
    cred = credential_from_password(ScramMechanism.SCRAM_SHA_256, b"hunter2", 4096)
    sealed = seal_scram(ring, "alice", cred.mechanism, cred.salt, cred.stored_key, cred.server_key)
    path = tmp_path / "store"
    with Log.open(path, keyring=ring) as log:
        log.append([acl_created(i) for i in range(3)])
        log.append([Envelope(-1, 2_000, "User:admin", "10.0.0.9", "r", ScramCredentialUpserted("alice", cred.mechanism, 4096, sealed))])
    return path, cred


def run(*argv: str) -> int:
    return main(list(argv))


def secret_texts(cred) -> list[str]:
    return [enc(v) for v in (cred.salt, cred.stored_key, cred.server_key) for enc in (lambda b: base64.b64encode(b).decode(), bytes.hex)]


def test_dump_prints_a_table_without_secrets(store, capsys):
    """dump lists every event with actor and entity, and no secret bytes."""
    path, cred = store
    assert run("log", "dump", "--store", str(path)) == 0
    out = capsys.readouterr().out
    assert "OFFSET" in out and "scram:alice:SCRAM-SHA-256" in out and "User:admin" in out
    assert "<sealed:" in out
    assert not any(s in out for s in secret_texts(cred))


def test_dump_json_is_valid_and_ranged(store, capsys):
    """--json prints a JSON array with ISO-8601 times; --from-offset/--to-offset select offsets."""
    path, cred = store
    assert run("log", "dump", "--store", str(path), "--json", "--from-offset", "1", "--to-offset", "4") == 0
    out = capsys.readouterr().out
    rows = json.loads(out)
    assert [r["offset"] for r in rows] == [1, 2, 3]
    assert rows[-1]["event_type"] == "ScramCredentialUpserted"
    assert rows[-1]["time"] == "1970-01-01T00:00:02.000Z" and rows[-1]["timestamp_ms"] == 2_000
    assert not any(s in out for s in secret_texts(cred))
    assert run("log", "dump", "--store", str(path), "--json", "--from", "1", "--to", "4") == 0  # the old spelling
    assert json.loads(capsys.readouterr().out) == rows


def test_a_large_dump_shows_its_progress_on_stderr(store, capsys, monkeypatch):
    """Past LARGE_DUMP events, log dump reports on stderr (here, off a terminal: its last line); a small
    dump prints nothing there, and stdout holds only the dump."""
    from secmeta.core.cli import log_cmd

    path, _ = store
    assert run("log", "dump", "--store", str(path), "--json") == 0
    out, err = capsys.readouterr()
    assert err == "" and len(json.loads(out)) == 4
    monkeypatch.setattr(log_cmd, "LARGE_DUMP", 4)
    assert run("log", "dump", "--store", str(path), "--json") == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)) == 4
    assert err.startswith("log dump: 4/4 events (100%)") and err.count("\n") == 1


def test_verify_json_reports_the_check(store, capsys):
    """log verify --json: the report's fields, exit 0 when intact."""
    assert run("log", "verify", "--store", str(store[0]), "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["ok"], report["events"], report["end_offset"], report["first_bad_offset"]) == (True, 4, 4, None)
    assert report["snapshot_problems"] == []


def test_verify_ok_exits_zero(store, capsys):
    """verify prints OK and exits 0 on an intact log whose every event replays."""
    assert run("log", "verify", "--store", str(store[0])) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK: 2 batches, 4 events") and "every event replays" in out


@pytest.fixture
def inconsistent_store(store):
    """The store's log plus a batch (offsets 4-5) whose second event deletes an ACL that never existed."""
    path, _ = store
    with Log.open(path, keyring=Keyring.load(None)) as log:
        log.append([acl_created(7), acl_deleted(99)])
    return path


def test_verify_reports_an_inconsistent_event_with_its_offset(inconsistent_store, capsys):
    """verify exits 1 naming the offset of an event that removes an unknown ACL (Kafka: AclsDelta.replay throws)."""
    assert run("log", "verify", "--store", str(inconsistent_store)) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAILED at offset 5 ")
    assert f"inconsistent event: removal of ACL {str(uuid.UUID(int=99))!r}, which does not exist" in out


def test_opening_a_store_whose_log_is_inconsistent_fails_naming_the_offset(inconsistent_store):
    """Loading a log with an inconsistent event raises InconsistentEventError at that event's offset."""
    with pytest.raises(InconsistentEventError, match="^the log is inconsistent at offset 5: removal of ACL") as info:
        SecurityStore.open(inconsistent_store, StoreConfig(), keyring=Keyring.load(None), read_only=True)
    assert info.value.offset == 5


def test_verify_failure_exits_one_with_the_offset(store, capsys):
    """verify exits 1 and names the first bad offset when a byte is flipped."""
    path, _ = store
    seg = next((path / "log").glob("*.log"))
    data = bytearray(seg.read_bytes())
    data[-10] ^= 1
    seg.write_bytes(bytes(data))
    assert run("log", "verify", "--store", str(path)) == 1
    assert "FAILED at offset 3" in capsys.readouterr().out
    assert run("log", "verify", "--store", str(path), "--json") == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["ok"], report["first_bad_offset"]) == (False, 3)


def test_snapshot_writes_a_file_verify_then_checks(store, capsys):
    """snapshot writes a snapshot at the log's end; verify cross-checks it."""
    path, _ = store
    assert run("log", "snapshot", "--store", str(path)) == 0
    assert "at offset 4" in capsys.readouterr().out
    assert len(list((path / "snapshots").glob("snapshot-*.avro"))) == 1
    assert run("log", "verify", "--store", str(path)) == 0
    assert "1 snapshot(s) agree" in capsys.readouterr().out


def test_keys_generate_prints_the_id_not_the_key(tmp_path, capsys):
    """keys generate creates then rotates a keyring and never prints key material."""
    keys = tmp_path / "k.json"
    assert run("keys", "generate", "--key-file", str(keys)) == 0
    assert run("keys", "generate", "--key-file", str(keys)) == 0
    out = capsys.readouterr().out
    materials = [k["material"] for k in json.loads(keys.read_text())["keys"]]
    assert len(materials) == 2 and "2 key(s)" in out
    assert not any(m in out for m in materials)
    assert oct(keys.stat().st_mode & 0o777) == "0o600"


def test_missing_store_is_a_clear_error(tmp_path, capsys, monkeypatch):
    """A path that is not a store exits 1 (a store that cannot be used) with a one-line error, no traceback."""
    keys = tmp_path / "k.json"
    Keyring.generate_file(keys)
    assert run("log", "dump", "--store", str(tmp_path / "nope"), "--key-file", str(keys)) == 1
    err = capsys.readouterr().err
    assert "is not a secmeta store" in err and "Traceback" not in err


def test_missing_keys_is_a_clear_error(store, capsys, monkeypatch):
    """Without any keyring the error says how to provide one."""
    monkeypatch.delenv("SECMETA_KEY_FILE")
    monkeypatch.delenv("SECMETA_KEYS", raising=False)
    assert run("log", "dump", "--store", str(store[0])) == 1
    assert "--key-file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [[], ["log"], ["log", "dump"], ["log", "verify"], ["log", "snapshot"], ["keys"], ["keys", "generate"], ["demo"]],
)
def test_every_command_has_help(argv):
    """`--help` works for every command and subcommand."""
    proc = subprocess.run([sys.executable, "-m", "secmeta.core.cli", *argv, "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "usage: secmeta" in proc.stdout


@pytest.mark.slow  # the whole demo, end to end
@pytest.mark.spark  # the demo ends with Spark compaction and queries (it starts its own local session)
@pytest.mark.xdist_group("spark")  # in-process: on the session's worker it reuses that JVM instead of a second
def test_demo_runs_and_detects_tampering(tmp_path, capsys):
    """The demo builds a store, authenticates, verifies it, and shows a flipped bit being caught."""
    assert run("demo", "--dir", str(tmp_path / "demo"), "--users", "20", "--acls", "300") == 0
    out = capsys.readouterr().out
    assert "authenticated as User:etl (token_authenticated=True)" in out
    assert "User:carol among them" in out and "= True; today = False" in out
    assert "identical to the store: True" in out and "alerts; for example" in out
    assert "secmeta log verify: OK" in out and "FAILED at offset" in out
    assert "equal to the embedded store's who_could: True" in out and "same set: True" in out


def test_a_refused_snapshot_is_reported_once(store, capsys, caplog):
    """log snapshot over a damaged newest snapshot says once that it skipped it, and why: it was both logged and
    listed under the load line."""
    path, _ = store
    assert run("log", "snapshot", "--store", str(path)) == 0
    (damaged,) = (path / "snapshots").glob("snapshot-*.avro")
    damaged.write_bytes(damaged.read_bytes()[:-3])
    capsys.readouterr()
    assert run("log", "snapshot", "--store", str(path)) == 0
    captured = capsys.readouterr()
    shown = captured.out + captured.err + caplog.text
    assert shown.count("skipped") == 1 and f"skipped {damaged.name}: " in shown and "truncated" in shown
    assert "loaded an empty state + 4 replayed events" in captured.out


def test_snapshot_refuses_while_a_writer_holds_the_store(store, capsys):
    """log snapshot takes the writer lock rather than racing a running writer."""
    path, _ = store
    with Log.open(path, keyring=Keyring.load()):
        assert run("log", "snapshot", "--store", str(path)) == 1  # refused: not a usage error
    assert "already open for writing" in capsys.readouterr().err


def test_verify_replays_from_the_snapshot_when_older_segments_are_gone(tmp_path):
    """With covered segments deleted, verify replays the rest from the snapshot: a delete of an ACL created
    before the log's start is consistent, an unknown one is reported at its offset."""
    ring = Keyring.generate()
    config = StoreConfig(log=LogConfig(segment_bytes=4096, index_interval_bytes=256), delete_covered_segments=True)
    with SecurityStore.open(tmp_path / "s", config, keyring=ring) as store:
        for i in range(60):
            store.create_acls([binding(i)], context=RequestContext())
        store.snapshot()
        assert store.log.start_offset > 0
        store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "topic-0")], context=RequestContext())
    report = verify_log(tmp_path / "s", keyring=ring, retention=True)
    assert report.ok and 0 < report.replayed_from <= 60
    with Log.open(tmp_path / "s", keyring=ring, retention=True) as log:
        log.append([acl_deleted(0)])
    report = verify_log(tmp_path / "s", keyring=ring, retention=True)
    assert (report.ok, report.first_bad_offset) == (False, 61) and "inconsistent event" in report.problem
