"""What the log does for itself: the writer lock, crash leftovers, readers beside retention and pruning,
and the line between a torn tail (cut) and a damaged acknowledged batch (refused)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import secmeta.core.store.state
from secmeta.core import RequestContext, SecurityStore
from secmeta.core.errors import CorruptLogError, StoreLockedError
from secmeta.core.log import Log, LogConfig, LogFailedError, OffsetOutOfRangeError, verify_log
from secmeta.core.store.state import load_state
from secmeta.projections.image import SecurityProjection
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import list_snapshots
from tests.logkit import (
    BOB_ALLOW,
    BOB_DENY,
    acl_created,
    build_tamper_store,
    frames_of,
    make_keyring,
)

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128)
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def keyring(tmp_path):
    return make_keyring(tmp_path)


def fill(log: Log, batches: int) -> None:
    for b in range(batches):
        start = log.end_offset
        log.append([acl_created(start + i, ts=1_000 + b) for i in range(3)])


# -- the writer lock --------------------------------------------------------------------


def test_the_writer_lock_survives_deleting_files(tmp_path, keyring):
    """The lock is the store directory itself: no file to delete lets a second writer in, in any process."""
    store = tmp_path / "store"
    with Log.open(store, keyring=keyring):
        for name in ("LOCK", "secmeta.lock"):
            (store / name).unlink(missing_ok=True)
        with pytest.raises(StoreLockedError, match="already open for writing"):
            Log.open(store, keyring=keyring)
        child = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(f"""
                from secmeta.core.errors import StoreLockedError
                from secmeta.core.log import Log
                from secmeta.events.keyring import Keyring
                try:
                    Log.open({str(store)!r}, keyring=Keyring.from_file({str(tmp_path / 'keys.json')!r}))
                except StoreLockedError as exc:
                    print("refused:", exc)
            """)],
            capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, check=True,
        )
        assert child.stdout.startswith("refused: store"), child.stderr
    with Log.open(store, keyring=keyring):  # released on close
        pass


# -- crash leftovers --------------------------------------------------------------------


def leftovers(store: Path) -> list[Path]:
    return [store / "snapshots" / ".snapshot-00000000000000000009.avro.tmp", store / "log" / ".high-water.tmp",
            store / ".secmeta.json.tmp", store / "log" / "00000000000000009999.index",
            store / "log" / "00000000000000009999.timeindex"]


def test_crash_leftovers_are_removed_by_the_next_writer_open(tmp_path, keyring):
    """Temporary files and index files without their segment go at a writer open; readers leave them."""
    store = tmp_path / "store"
    with Log.open(store, keyring=keyring) as log:
        fill(log, 2)
    for path in leftovers(store):
        path.write_bytes(b"half-written")
    Log.open(store, keyring=keyring, read_only=True).close()
    assert all(p.exists() for p in leftovers(store))
    with Log.open(store, keyring=keyring) as log:
        assert log.end_offset == 6
    assert not any(p.exists() for p in leftovers(store))
    assert verify_log(store, keyring=keyring).ok


# -- readers beside the writer ----------------------------------------------------------


@pytest.mark.parametrize("follower", ["same-process", "read-only"])
def test_a_tail_reader_behind_retention_fails_clearly(tmp_path, keyring, follower):
    """Offsets deleted before a reader got to them: OffsetOutOfRangeError naming both offsets, not a stall."""
    store = tmp_path / "store"
    with Log.open(store, keyring=keyring, config=SMALL, retention=True) as writer:
        fill(writer, 30)
        reader = writer if follower == "same-process" else Log.open(store, keyring=keyring, read_only=True, retention=True)
        try:
            tail = reader.tail(0)
            assert [e.offset for e in tail.poll(timeout=1, max_events=3)] == [0, 1, 2]
            writer.delete_segments_before(60)
            with pytest.raises(OffsetOutOfRangeError, match=rf"at offset 3 but the log now starts at offset {writer.start_offset}"):
                tail.poll(timeout=1)
        finally:
            if reader is not writer:
                reader.close()


def test_a_read_only_open_survives_a_snapshot_pruned_while_it_reads(tmp_path, keyring, monkeypatch):
    """The writer deletes the snapshot a reader listed before it reads it: the reader lists again."""
    store = tmp_path / "store"
    build_tamper_store(store, keyring, retention=False)
    newest = list_snapshots(store / "snapshots")[-1]
    real = secmeta.core.store.state.read_snapshot

    def pruned_first(path, *args):
        if path == newest and newest.exists():
            newest.unlink()  # what the writer's pruning does between our listing and our read
        return real(path, *args)

    monkeypatch.setattr(secmeta.core.store.state, "read_snapshot", pruned_first)
    with Log.open(store, keyring=keyring, read_only=True) as log:
        loaded = load_state(log, SecurityProjection(), SecurityImageSnapshot())
    assert loaded.next_offset == 27 and loaded.snapshot is not None and loaded.snapshot.path != newest


# -- torn tails and damaged acknowledged batches ------------------------------------------


def test_an_incomplete_batch_beyond_the_acknowledged_end_is_cut(tmp_path, keyring):
    """A prefix of a batch that was never acknowledged (a crash mid-write) is cut, reported and verify passes."""
    store = tmp_path / "store"
    with Log.open(store, keyring=keyring) as log:
        fill(log, 3)
        frame = frames_of(sorted((store / "log").glob("*.log"))[-1])[-1]
    seg = sorted((store / "log").glob("*.log"))[-1]
    with open(seg, "ab") as f:
        f.write(frame[: len(frame) // 2])
    assert verify_log(store, keyring=keyring).ok
    with Log.open(store, keyring=keyring) as log:
        assert log.end_offset == 9 and log.recovery.truncated_bytes == len(frame) // 2
    assert verify_log(store, keyring=keyring).ok


def test_an_acknowledged_batch_made_to_look_torn_is_refused(tmp_path, keyring):
    """The last batch's length raised so that it runs past the end: it was acknowledged, so not a torn tail."""
    store = tmp_path / "store"
    with Log.open(store, keyring=keyring) as log:
        fill(log, 3)
    seg = sorted((store / "log").glob("*.log"))[-1]
    data = bytearray(seg.read_bytes())
    last = len(data) - len(frames_of(seg)[-1])
    data[last + 3] += 1
    seg.write_bytes(bytes(data))
    report = verify_log(store, keyring=keyring)
    assert not report.ok and report.first_bad_offset == 6 and "acknowledged end 9" in report.problem
    with pytest.raises(CorruptLogError, match="corrupt at offset 6.*--truncate-to 6") as info:
        Log.open(store, keyring=keyring)
    assert info.value.offset == 6 and seg.read_bytes() == bytes(data)


def files_under(path: Path) -> dict[Path, bytes]:
    return {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_a_store_renamed_under_its_writer_gets_no_new_segment_and_the_writer_fails(tmp_path, keyring):
    """Issue 14 review: `mv store moved; cp -a moved store` while writer A runs. A's next segment roll is
    refused naming the directory, nothing is written into the new `store`, and A accepts no further write."""
    path = tmp_path / "store"
    log = Log.open(path, keyring=keyring, config=LogConfig(segment_bytes=1024))
    try:
        fill(log, 2)
        os.rename(path, tmp_path / "moved")
        subprocess.run(["cp", "-a", str(tmp_path / "moved"), str(path)], check=True)
        copy = files_under(path)
        with pytest.raises(StoreLockedError, match=f"store directory {path} is no longer the directory this writer locked"):
            fill(log, 40)  # enough to roll the 1 KiB segment
        with pytest.raises(LogFailedError, match="is no longer the directory this writer locked"):
            fill(log, 1)
        assert files_under(path) == copy
    finally:
        log.close()


def test_a_store_renamed_under_its_writer_gets_no_snapshot(tmp_path, keyring):
    path = tmp_path / "store"
    with SecurityStore.open(path, keyring=keyring) as store:
        store.create_acls([BOB_ALLOW], context=RequestContext("User:admin", "10.0.0.1"))
        os.rename(path, tmp_path / "moved")
        subprocess.run(["cp", "-a", str(tmp_path / "moved"), str(path)], check=True)
        copy = files_under(path)
        with pytest.raises(StoreLockedError, match=str(path)):
            store.snapshot()
        with pytest.raises(LogFailedError):
            store.create_acls([BOB_DENY], context=RequestContext("User:admin", "10.0.0.1"))
        assert files_under(path) == copy
        assert list_snapshots(tmp_path / "moved" / "snapshots") == []
