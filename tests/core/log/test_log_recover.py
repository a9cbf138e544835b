"""`secmeta log recover --truncate-after N`: the explicit repair of a log that open refuses."""

from __future__ import annotations

import json

import pytest

from secmeta.core import SecurityStore
from secmeta.core.cli import main
from secmeta.core.errors import CorruptLogError
from secmeta.events.types import AclOperation, ResourceType
from tests.logkit import (
    build_tamper_store,
    cli_verify,
    frames_of,
    make_keyring,
    reframe,
    tamper_config,
)

ALICE = ("User:alice", "1.2.3.4", AclOperation.READ, ResourceType.TOPIC, "public-x")


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


def recover(path, *args: str) -> int:
    return main(["log", "recover", "--store", str(path), "--key-file", str(path.parent / "keys.json"), *args])


def test_recover_cuts_after_the_offset_and_quarantines_the_rest(damaged, capsys):
    """The batches from 25 on go to a quarantine file with a record; the store opens and verifies."""
    path, keyring, frames = damaged
    assert recover(path, "--truncate-after", "25", "--reason", "edited batch found by open") == 0
    out = capsys.readouterr().out
    assert "cut the log after offset 25" in out
    (quarantine,) = (path / "quarantine").iterdir()
    record = json.loads((quarantine / "recovery.json").read_text())
    assert record["truncated_after"] == 25 and record["reason"] == "edited batch found by open"
    (piece,) = record["pieces"]
    assert (quarantine / piece["segment"]).read_bytes() == b"".join(frames[-2:])
    assert record["snapshots"] == []  # the newest snapshot is at 24
    with SecurityStore.open(path, tamper_config(False), keyring=keyring) as store:
        assert store.image.next_offset == 25 and not store.authorize(*ALICE)
    assert cli_verify(path, path.parent / "keys.json")[0] == 0


def test_recover_moves_snapshots_past_the_offset(damaged, capsys):
    """Cutting before the newest snapshot moves it to the quarantine too (it describes removed history)."""
    path, keyring, _ = damaged
    assert recover(path, "--truncate-after", "20") == 0
    (quarantine,) = (path / "quarantine").iterdir()
    assert json.loads((quarantine / "recovery.json").read_text())["snapshots"] == ["snapshot-00000000000000000024.avro"]
    with SecurityStore.open(path, tamper_config(False), keyring=keyring) as store:
        assert store.image.next_offset == 20
    assert cli_verify(path, path.parent / "keys.json")[0] == 0


def test_recover_refuses_an_offset_inside_a_batch_or_past_the_damage(damaged, capsys):
    """Only a boundary of intact batches can be kept; the error says so and nothing changes."""
    path, _, _ = damaged
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    assert recover(path, "--truncate-after", "99") == 2  # a bad argument
    assert "no intact batch of the log ends at offset 99" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before


def test_a_wiped_log_is_refused_until_an_operator_records_its_end(tmp_path, capsys):
    """Issue 14 review: every file in log/ and snapshots/ deleted, on a store that keeps its history. A store
    has a high-water file from its creation, so its absence is tampering even when the log is empty: verify
    fails and both opens refuse (writing nothing) until `log recover --truncate-after 0` records the empty end."""
    keyring = make_keyring(tmp_path)
    path = tmp_path / "store"
    build_tamper_store(path, keyring, retention=False)
    for sub in ("log", "snapshots"):
        for file in (path / sub).iterdir():
            file.unlink()
    code, out = cli_verify(path, path.parent / "keys.json")
    assert code == 1 and "high-water file is missing" in out and "OK" not in out
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    for read_only in (True, False):
        with pytest.raises(CorruptLogError, match="high-water file is missing.*`secmeta log recover --truncate-after 0`"):
            SecurityStore.open(path, tamper_config(False), keyring=keyring, read_only=read_only)
    assert {p: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before
    assert recover(path, "--truncate-after", "0", "--reason", "log wiped; restarting empty") == 0
    assert "cut the log after offset 0: 0 bytes" in capsys.readouterr().out
    (quarantine,) = (path / "quarantine").iterdir()
    assert json.loads((quarantine / "recovery.json").read_text())["reason"] == "log wiped; restarting empty"
    with SecurityStore.open(path, tamper_config(False), keyring=keyring) as store:
        assert store.image.next_offset == 0 and not store.authorize(*ALICE)


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
    assert recover(path, "--truncate-after", "5") != 0
    assert "the log has no segments: it can only be recorded as ending at offset 0" in capsys.readouterr().err
    assert not (path / "log" / "high-water").exists()
