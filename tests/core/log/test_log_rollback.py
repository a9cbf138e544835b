"""Rollback evidence (a derived file past the log's end) and the witness of the log's head (`log head`)."""

from __future__ import annotations

import shutil

import pytest

from secmeta.core import RequestContext, SecurityStore
from secmeta.core.cli import main
from secmeta.core.errors import CorruptLogError
from secmeta.core.log import Log
from secmeta.events.records import LogRecovered
from secmeta.events.types import AclOperation, ResourceType
from tests.logkit import Clock, binding, cli_verify, make_keyring, tamper_config

ADMIN = RequestContext("User:admin", "10.0.0.1")


def write(path, keyring, clock, numbers) -> None:
    with SecurityStore.open(path, tamper_config(False, clock), keyring=keyring) as store:
        for i in numbers:
            clock.t += 1
            store.create_acls([binding(i)], context=ADMIN)
        store.wait_for_snapshots()
        list(store.history())  # the history index catches up to the end


@pytest.fixture
def grown(tmp_path):
    """A store of 20 ACLs (copied whole to ``older``, its segment sizes and high-water file kept), then 27."""
    keyring = make_keyring(tmp_path)
    path, older, clock = tmp_path / "store", tmp_path / "older", Clock()
    write(path, keyring, clock, range(20))
    shutil.copytree(path, older)
    sizes = {p.name: p.stat().st_size for p in (path / "log").glob("*.log")}
    write(path, keyring, clock, range(20, 27))
    return path, older, keyring, sizes


def roll_back(path, older, sizes) -> None:
    """Issue 21: cut the log back to its older length and copy in the older high-water file."""
    for segment in (path / "log").glob("*.log"):
        if segment.name in sizes:
            with open(segment, "r+b") as f:
                f.truncate(sizes[segment.name])
        else:
            segment.unlink()
    shutil.copy(older / "log" / "high-water", path / "log" / "high-water")


def files_under(path) -> dict:
    return {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}


def cli(path, *args: str) -> int:
    return main([*args, "--store", str(path), "--key-file", str(path.parent / "keys.json")])


def test_a_rolled_back_log_is_refused_by_both_opens_until_the_cut_is_logged(grown, capsys):
    """Issue 21: after the rollback, verify and both opens refuse, naming a derived file, both offsets and the
    command; nothing is rebuilt. `log recover --truncate-to 20` (no --force: the log does not open) logs the
    cut from 20 to 27, and the store opens again."""
    path, older, keyring, sizes = grown
    roll_back(path, older, sizes)
    before = files_under(path)
    code, out = cli_verify(path, path.parent / "keys.json")
    assert code == 1 and "records offset 27 (written when the log held the offsets below it) but the log holds offsets below 20" in out
    for read_only in (True, False):
        with pytest.raises(CorruptLogError, match=r"history.*index\.sqlite records offset 27 .* but the log holds offsets below 20 .*"
                                                  r"`secmeta log recover --truncate-to 20"):
            SecurityStore.open(path, tamper_config(False), keyring=keyring, read_only=read_only)
    assert files_under(path) == before  # nothing rebuilt, nothing written
    assert cli(path, "log", "recover", "--truncate-to", "20", "--reason", "rollback found", "--yes") == 0
    with Log.open(path, keyring=keyring, read_only=True) as log:
        (logged,) = [e for e in log.read() if type(e.event) is LogRecovered]
    assert logged.offset == 20 and (logged.event.from_offset, logged.event.to_offset) == (20, 27)
    with SecurityStore.open(path, tamper_config(False), keyring=keyring) as store:
        assert store.image.next_offset == 21
        assert not store.authorize("User:user-25", "1.2.3.4", AclOperation.READ, ResourceType.TOPIC, "topic-25")
    assert cli_verify(path, path.parent / "keys.json")[0] == 0


def test_a_snapshot_past_the_end_is_evidence_too(grown):
    """Without the history index, a snapshot past the cut log is named instead."""
    path, older, keyring, sizes = grown
    roll_back(path, older, sizes)
    shutil.rmtree(path / "history")
    with pytest.raises(CorruptLogError, match=r"snapshots/snapshot-0+2[1-7]\.avro records offset 2[1-7] .*but "
                                              r"the log holds offsets below 20"):
        Log.open(path, keyring=keyring, read_only=True)


def take_witness(path, tmp_path, capsys, edit=lambda line: line):
    """`secmeta log head` kept in a file outside the store (after ``edit``)."""
    assert cli(path, "log", "head") == 0
    line = capsys.readouterr().out
    assert line.startswith("secmeta-head v1 store=") and "offset=27 " in line
    witness = tmp_path / "witness.txt"
    witness.write_text(edit(line))
    return witness


def test_the_witness_detects_a_store_replaced_by_an_older_copy(grown, tmp_path, capsys):
    """Issue 21: the whole directory replaced by an older copy verifies OK on its own; checked against the
    head line taken before, verify fails naming both offsets."""
    path, older, keyring, _ = grown
    witness = take_witness(path, tmp_path, capsys)
    assert cli(path, "log", "verify", "--witness", str(witness)) == 0
    write(path, keyring, Clock(1_900_000_000), [30])
    assert cli(path, "log", "verify", "--witness", str(witness)) == 0  # grown since: still holds the head
    shutil.rmtree(path)
    shutil.copytree(older, path)
    assert cli_verify(path, path.parent / "keys.json")[0] == 0
    capsys.readouterr()
    assert cli(path, "log", "verify", "--witness", str(witness)) == 1
    assert ("the log holds offsets below 20 (its last is 19) but the witness saw it hold offsets below 27"
            in capsys.readouterr().out)


def test_the_witness_detects_a_log_that_diverges(grown, tmp_path, capsys):
    """The older copy written on past the witnessed offset holds other batches there: it diverges."""
    path, older, keyring, _ = grown
    witness = take_witness(path, tmp_path, capsys)
    shutil.rmtree(path)
    shutil.copytree(older, path)
    write(path, keyring, Clock(1_900_000_000), range(100, 110))
    assert cli(path, "log", "verify", "--witness", str(witness)) == 1
    assert "not the one the witness saw there" in capsys.readouterr().out


def test_a_forged_witness_line_is_refused(grown, tmp_path, capsys):
    """A head line edited (a lower offset, to pass a rolled-back store) fails its HMAC."""
    witness = take_witness(grown[0], tmp_path, capsys, lambda line: line.replace("offset=27 ", "offset=20 "))
    path = grown[0]
    capsys.readouterr()
    assert cli(path, "log", "verify", "--witness", str(witness)) == 1  # a failed check, not a usage error
    assert "FAILED" in (out := capsys.readouterr().out) and "fails its HMAC check" in out


def test_every_line_of_a_witness_file_is_checked(grown, tmp_path, capsys):
    """Review of issue 21: an operator appends each `log head` line to one file. An older line the store still
    holds must not hide a newer one it lost: every line is checked, and verify names the newest failing one."""
    path, older, keyring, _ = grown
    newest = take_witness(path, tmp_path, capsys).read_text()  # offset 27
    shutil.rmtree(path)
    shutil.copytree(older, path)  # ends before offset 20
    assert cli(path, "log", "head") == 0
    oldest = capsys.readouterr().out
    witness = tmp_path / "witnesses.txt"
    witness.write_text(f"# kept by ops\n{oldest}{newest}")
    assert cli(path, "log", "verify", "--witness", str(witness)) == 1
    assert "witness line 3:" in (out := capsys.readouterr().out) and "hold offsets below 27" in out
    witness.write_text(f"{newest}{oldest}")  # the newest failing line is named whatever the order
    assert cli(path, "log", "verify", "--witness", str(witness)) == 1
    assert "witness line 1:" in capsys.readouterr().out
    forged = oldest.replace("offset=20 ", "offset=19 ")
    witness.write_text(f"{oldest}{forged}")  # every line authentic, too
    assert cli(path, "log", "verify", "--witness", str(witness)) == 1
    assert "witness line 2:" in (out := capsys.readouterr().out) and "fails its HMAC check" in out
    witness.write_text(oldest * 2)
    assert cli(path, "log", "verify", "--witness", str(witness)) == 0


def test_a_checkpoint_past_the_end_is_evidence_too(grown):
    """A time-travel checkpoint (the same authenticated file format, in DIR/checkpoints) past the end is named."""
    path, older, keyring, sizes = grown
    roll_back(path, older, sizes)
    shutil.rmtree(path / "history")
    (path / "checkpoints").mkdir(exist_ok=True)
    for snapshot in (path / "snapshots").glob("*.avro"):
        snapshot.rename(path / "checkpoints" / snapshot.name)
    with pytest.raises(CorruptLogError, match=r"checkpoints/snapshot-0+2[1-7]\.avro records offset 2[1-7] .*but "
                                              r"the log holds offsets below 20"):
        SecurityStore.open(path, tamper_config(False), keyring=keyring, read_only=True)


def test_a_delta_checkpoint_past_the_end_is_evidence_and_recover_quarantines_it(grown):
    """A delta checkpoint (DIR/checkpoints/deltas-<base>/, the same authenticated format) past the cut is handled as
    a full checkpoint past it is: both opens refuse naming it, and `log recover` moves it to the quarantine (under
    its directory's name, beside the full files), after which the store opens and the full file before the cut
    stays."""
    from secmeta.core.forensics.checkpoints import CheckpointFiles
    from secmeta.projections.image import SecurityDelta
    from tests.storekit import replayed

    path, older, keyring, sizes = grown
    with SecurityStore.open(path, tamper_config(False), keyring=keyring) as store:
        files = CheckpointFiles(store.log, deltas=0)
        base = replayed(store, 10)
        files.write(base)
        delta = SecurityDelta(base)
        delta.replay_all(list(store.log.read(10, 24)))
        files.write_delta(10, delta, 24)
        full, delta_file = files.directory / f"snapshot-{10:020d}.avro", files.delta_directory(10) / f"snapshot-{24:020d}.avro"
    saved = delta_file.read_bytes()
    roll_back(path, older, sizes)
    shutil.rmtree(path / "history")
    for snapshot in (path / "snapshots").glob("*.avro"):  # only the delta file records a point past the cut
        if int(snapshot.stem.rsplit("-", 1)[-1]) > 20:
            snapshot.unlink()
    for read_only in (True, False):
        with pytest.raises(CorruptLogError, match=r"deltas-0+10/snapshot-0+24\.avro records offset 24 .*but "
                                                  r"the log holds offsets below 20"):
            SecurityStore.open(path, tamper_config(False), keyring=keyring, read_only=read_only)
    assert cli(path, "log", "recover", "--truncate-to", "20", "--reason", "rollback found", "--yes") == 0
    (quarantine,) = (path / "quarantine").iterdir()
    assert (quarantine / delta_file.relative_to(path)).read_bytes() == saved
    assert not delta_file.exists() and full.exists()
    with SecurityStore.open(path, tamper_config(False), keyring=keyring) as store:
        assert store.image.next_offset == 21
