"""BackgroundSnapshot: the caller goes on while a forked child writes the snapshot; failures and aborts leave no file."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from secmeta.core.snapshots import forked_snapshot
from secmeta.core.snapshots.background_snapshot import BackgroundSnapshot
from secmeta.core.snapshots.forked import ForkedCallError
from secmeta.projections.image import SecurityImage, SecurityProjection
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import partial_snapshot_path, read_snapshot, write_snapshot
from tests.logkit import acl_created, make_keyring

GENEROUS = 60.0  # seconds: a deadline no healthy child reaches on a loaded machine


def image_of(n: int) -> SecurityImage:
    return SecurityProjection().apply_events(SecurityImage.EMPTY, [acl_created(i).event for i in range(n)])


def start(directory: Path, image: SecurityImage, keyring=None) -> BackgroundSnapshot:
    return BackgroundSnapshot(directory, SecurityImageSnapshot(), image, next_offset=image.next_offset, link=b"",
                              timestamp_ms=1_000, keyring=keyring, timeout=GENEROUS)


def wait_for(condition, what: str, seconds: float = GENEROUS) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_the_caller_goes_on_while_the_child_writes_and_gets_the_images_snapshot(tmp_path, monkeypatch):
    """Starting returns at once (the child is held until the test lets it go); the file then loads as the image."""
    go = tmp_path / "go"

    def held(*args, **kwargs):  # in the child: wait for the test, then write as usual
        while not go.exists():
            time.sleep(0.01)
        return write_snapshot(*args, **kwargs)

    monkeypatch.setattr(forked_snapshot, "write_snapshot", held)
    keyring = make_keyring(tmp_path)
    image = image_of(40)
    snapshot = start(tmp_path / "snaps", image, keyring)
    time.sleep(0.2)
    assert not snapshot.done()
    go.touch()
    info = snapshot.result()
    assert snapshot.done() and info.next_offset == 40
    loaded_info, loaded = read_snapshot(info.path, SecurityImageSnapshot(), keyring)
    assert loaded_info.next_offset == 40 and dict(iter(loaded.acls)) == dict(iter(image.acls))


def test_a_child_that_fails_is_raised_naming_the_failure_and_leaves_no_file(tmp_path, monkeypatch):
    def disk_full(directory, codec, state, *, next_offset, **kwargs):
        partial_snapshot_path(Path(directory), next_offset).write_bytes(b"half a snap")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(forked_snapshot, "write_snapshot", disk_full)
    (tmp_path / "snaps").mkdir()
    snapshot = start(tmp_path / "snaps", image_of(3))
    with pytest.raises(ForkedCallError, match="No space left on device"):
        snapshot.result()
    assert list((tmp_path / "snaps").iterdir()) == []


def test_abort_kills_a_child_under_way_and_leaves_no_file(tmp_path, monkeypatch):
    started = tmp_path / "started"

    def stuck(directory, codec, state, *, next_offset, **kwargs):
        partial_snapshot_path(Path(directory), next_offset).write_bytes(b"half a snap")
        started.touch()
        time.sleep(3600)

    monkeypatch.setattr(forked_snapshot, "write_snapshot", stuck)
    (tmp_path / "snaps").mkdir()
    snapshot = start(tmp_path / "snaps", image_of(3))
    wait_for(started.exists, "the child to start writing")
    snapshot.abort()
    assert snapshot.done()
    with pytest.raises(ForkedCallError, match="aborted"):
        snapshot.result()
    assert list((tmp_path / "snaps").iterdir()) == []
