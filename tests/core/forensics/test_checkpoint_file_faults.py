"""Faults around checkpoint and delta files: a bad file the fill's forked child finds is always reported, a killed
fill's partial files are removed, `log verify` refuses a delta filed under another base, and a file that cannot be
read for now (an OS error) fails that read and is kept, never deleted as bad."""

from __future__ import annotations

import pytest

from secmeta.core.forensics.checkpoints import CheckpointFiles
from secmeta.projections.snapshot import snapshot_path
from tests.core.forensics.test_delta_checkpoints import _flip, keyring, store
from tests.storekit import replayed as replayed_store

__all__ = ["keyring", "store"]  # fixtures


def test_a_bad_file_the_fill_child_deletes_is_reported_even_when_the_child_then_fails(store, monkeypatch, caplog):
    """A tampered full file the fill's child finds (and deletes) is reported, even when the child fails later in
    its stretch (here writing the next file): the file is evidence, and deleting it unreported leaves no trace."""
    from secmeta.core.forensics import checkpoints

    files = CheckpointFiles(store.log, every=40, deltas=3)
    files.write(replayed_store(store, 22))
    files.write(replayed_store(store, 44))
    _flip(snapshot_path(files.directory, 44))

    def failing(directory, codec, state, *, next_offset, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoints, "write_snapshot", failing)
    with caplog.at_level("WARNING", logger="secmeta.checkpoints"):
        files.fill(None)
        files.wait()
    assert not snapshot_path(files.directory, 44).exists()  # the child found it bad and deleted it
    reported = [r.getMessage() for r in caplog.records if snapshot_path(files.directory, 44).name in r.getMessage()]
    assert reported or any(p.startswith(snapshot_path(files.directory, 44).name) for p in files.problems), (
        [r.getMessage() for r in caplog.records], files.problems)


def test_a_bad_file_the_fill_child_deletes_is_reported_even_when_the_close_kills_the_child(store, monkeypatch,
                                                                                           caplog):
    """As above, the child hanging in its stretch's write instead: the close kills it (no result comes back), and
    the tampered file it found and deleted is still reported."""
    import threading
    import time

    from secmeta.core.forensics import checkpoints

    files = CheckpointFiles(store.log, every=40, deltas=3)
    files.write(replayed_store(store, 22))
    files.write(replayed_store(store, 44))
    bad = snapshot_path(files.directory, 44)
    _flip(bad)
    monkeypatch.setattr(checkpoints, "write_snapshot", lambda *args, **kwargs: threading.Event().wait())
    with caplog.at_level("WARNING", logger="secmeta.checkpoints"):
        files.fill(None)
        deadline = time.monotonic() + 60
        while bad.exists() and time.monotonic() < deadline:  # the child found it bad and deleted it
            time.sleep(0.01)
        files.close()
    assert not bad.exists()
    reported = [r.getMessage() for r in caplog.records if bad.name in r.getMessage()]
    assert len(reported) == 1 and "ignored and deleted" in reported[0], [r.getMessage() for r in caplog.records]
    assert len(files.problems) == 1 and files.problems[0].startswith(bad.name), files.problems


def test_a_reopened_writer_removes_the_partial_files_a_killed_fill_left(tmp_path, keyring):
    """A writer killed while a fill child wrote a file (the child dies with it: no ``_remove_partial_files``) leaves
    ``.snapshot-N.avro.tmp`` in checkpoints/ or a delta directory; the next writer's open removes them, as it does the
    log's and the snapshots' leftovers (``remove_crash_leftovers``), else each kill leaks up to a full image's file;
    it removes nothing else there (a file the store did not name, the checkpoint file itself)."""
    from secmeta.projections.snapshot import partial_snapshot_path
    from tests.storekit import ADMIN, acl, store_at

    with store_at(tmp_path / "s", keyring) as store:
        store.create_acls([acl(f"t{i}") for i in range(5)], context=ADMIN)
        end = store.log.end_offset
        files = CheckpointFiles(store.log, deltas=0)
        files.write(replayed_store(store, end))
        leftovers = [partial_snapshot_path(files.directory, end + 7),
                     partial_snapshot_path(files.delta_directory(end), end + 3)]
        kept = [files.directory / ".notes.tmp", files.delta_directory(end) / f".{leftovers[1].name[1:-4]}x.tmp",
                snapshot_path(files.directory, end)]
        for path in leftovers + kept[:2]:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"half a file")
    with store_at(tmp_path / "s", keyring) as store:
        store._timetravel.files.wait()  # the open's fill, if one ran, has ended (a close would kill it: its
        assert [p for p in leftovers if p.exists()] == []  # _remove_partial_files would hide the leak)
        assert [p for p in kept if not p.exists()] == []


def test_log_verify_reports_a_delta_file_filed_under_another_base(store, keyring):
    """A delta file holding the change from the full file at 22, filed under the full file at 11 (deltas-11/), is
    refused by time travel ("it holds the change from offset 22 ..."); ``secmeta log verify`` reports it too (it
    checked only its CRC, HMAC and link, and passed it), counts it among no snapshot that agrees, and deletes
    nothing."""
    from secmeta.core.cli.log_cmd import verify_store
    from tests.core.forensics.test_delta_checkpoints import write_files

    files = CheckpointFiles(store.log, deltas=0)
    write_files(store, files, 11, [])
    write_files(store, files, 22, [66])
    files.delta_directory(11).mkdir()
    moved = snapshot_path(files.delta_directory(22), 66).rename(snapshot_path(files.delta_directory(11), 66))
    report, checked, problems = verify_store(str(files.directory.parent), keyring)
    assert any(moved.name in p for p in problems), (report.ok, checked, problems)
    assert checked == 2 and moved.exists()  # the full files at 11 and 22 agree; verify deletes nothing


def test_log_verify_reports_a_full_checkpoint_file_filed_under_another_offset(store, keyring):
    """A full checkpoint file holding the image at 22, renamed to the file at 33: time travel refuses it at its read
    ("it holds offset 22, not 33"), and ``secmeta log verify`` reports it too, naming the file, counts it among no
    snapshot that agrees, and deletes nothing."""
    from secmeta.core.cli.log_cmd import verify_store
    from tests.core.forensics.test_delta_checkpoints import write_files

    files = CheckpointFiles(store.log, deltas=0)
    write_files(store, files, 11, [])
    write_files(store, files, 22, [])
    moved = snapshot_path(files.directory, 22).rename(snapshot_path(files.directory, 33))
    report, checked, problems = verify_store(str(files.directory.parent), keyring)
    assert [p for p in problems if moved.name in p and "it holds offset 22, not 33" in p], (report.ok, problems)
    assert checked == 1 and moved.exists()
    assert files.load(33) is None and files.problems == [f"{moved.name}: it holds offset 22, not 33"]


def _unreadable(monkeypatch, path):
    """Reading the checkpoint file at ``path`` fails as a process out of descriptors fails (EMFILE)."""
    import errno
    from pathlib import Path

    from secmeta.core.forensics import checkpoints

    real = checkpoints.read_snapshot

    def read(at, *args, **kwargs):
        if Path(at) == path:
            raise OSError(errno.EMFILE, "Too many open files", str(at))
        return real(at, *args, **kwargs)

    monkeypatch.setattr(checkpoints, "read_snapshot", read)


@pytest.mark.parametrize("kind", ["full", "delta"])
def test_a_checkpoint_file_that_cannot_be_read_for_now_fails_that_read_and_is_kept(store, monkeypatch, caplog,
                                                                                   kind):
    """A good full or delta file that the process cannot read at the moment (too many open files, no memory) is no
    bad file: the point asked for fails with that error, the files stay, nothing is reported as bad, and the next
    read, the error gone, answers from them as a replay does."""
    from tests.core.forensics.test_delta_checkpoints import cold, write_files

    files = CheckpointFiles(store.log, deltas=0)
    write_files(store, files, 22, [66])
    full, delta = snapshot_path(files.directory, 22), snapshot_path(files.delta_directory(22), 66)
    _unreadable(monkeypatch, full if kind == "full" else delta)
    with caplog.at_level("WARNING", logger="secmeta.checkpoints"), pytest.raises(OSError, match="Too many open"):
        cold(store, files).image_at(88)
    assert full.exists() and delta.exists() and files.problems == [], files.problems
    assert [r.getMessage() for r in caplog.records] == []
    monkeypatch.undo()
    travel = cold(store, files)
    assert travel.image_at(88) == replayed_store(store, 88) and files.problems == []
    assert 66 in travel.checkpoints  # answered through the delta file


def test_a_full_file_the_fill_child_cannot_read_for_now_is_kept(store, monkeypatch, caplog):
    """The fill's child failing to read the newest full file (EMFILE) fails that stretch, reported as such; the file
    is neither deleted nor reported as bad."""
    files = CheckpointFiles(store.log, every=40, deltas=3)
    files.write(replayed_store(store, 22))
    files.write(replayed_store(store, 44))
    newest = snapshot_path(files.directory, 44)
    _unreadable(monkeypatch, newest)
    with caplog.at_level("WARNING", logger="secmeta.checkpoints"):
        files.fill(None)
        files.wait()
    assert newest.exists() and files.problems == [], files.problems
    [logged] = [r.getMessage() for r in caplog.records]
    assert "not written" in logged and "Too many open files" in logged, logged


def test_a_fill_run_in_this_process_where_there_is_no_fork_leaves_nothing_of_a_child_behind(store, monkeypatch,
                                                                                            caplog):
    """Where ``os.fork`` does not exist the fill's stretch runs in the calling process (``call_forked``). It must
    not leave that process acting as the fill's child: a bad file found afterwards is reported here and deleted (a
    child would only send a note, which outside a forked call raises), and the store's log still takes writes
    (a child reopens its segments read only)."""
    import os

    from tests.storekit import ADMIN, acl

    monkeypatch.delattr(os, "fork")
    files = CheckpointFiles(store.log, every=40, deltas=3)
    files.write(replayed_store(store, 22))
    files.fill(None)
    files.wait()
    written = files.offsets()
    assert written[-1] > 22, written  # the fill wrote more full files, in this process
    bad = snapshot_path(files.directory, written[-1])
    _flip(bad)
    with caplog.at_level("WARNING", logger="secmeta.checkpoints"):
        assert files.load(written[-1]) is None
    assert not bad.exists()
    assert [r.getMessage() for r in caplog.records if bad.name in r.getMessage() and "ignored and deleted" in
            r.getMessage()], [r.getMessage() for r in caplog.records]
    end = store.log.end_offset
    store.create_acls([acl("after-the-fill")], context=ADMIN)
    assert store.log.end_offset == end + 1
    files.close()
