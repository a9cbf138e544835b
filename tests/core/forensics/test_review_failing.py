"""Review of the delta checkpoints, the fill's forked child and the follower's snapshots: defects found, each a
test that fails on the code reviewed (on purpose: the fix follows)."""

from __future__ import annotations

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
