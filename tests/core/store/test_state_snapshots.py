"""Snapshots and state loading: newest valid snapshot + tail replay equals a full replay."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.core import AclBindingFilter
from secmeta.core.errors import SecmetaError
from secmeta.core.log import Log, LogConfig, verify_log
from secmeta.core.store.state import Snapshotter, load_state
from secmeta.events.codec import EventCodec
from secmeta.projections.snapshot import (
    CorruptSnapshotError,
    SnapshotError,
    SnapshotPolicy,
    list_snapshots,
    partial_snapshot_path,
    read_snapshot,
    write_snapshot,
)
from tests.latest_by_key import LatestByKey, LatestByKeySnapshot
from tests.logkit import acl_created, acl_deleted, make_keyring
from tests.storekit import ADMIN, acl, store_at

PROJECTION = LatestByKey()
SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256)


@pytest.fixture
def codec():
    return LatestByKeySnapshot(EventCodec())


def workload(log: Log, batches: int, start: int = 0) -> None:
    for b in range(start, start + batches):
        log.append([acl_created(b % 7, ts=b), acl_deleted((b + 3) % 7, ts=b), acl_created(100 + b, ts=b)])


def full_replay(log: Log):
    return PROJECTION.apply(PROJECTION.empty, list(log.read()))


def test_snapshot_round_trip(tmp_path, keyring, codec):
    """A written snapshot reads back the same state, offset and link."""
    with Log.open(tmp_path / "s", keyring=keyring) as log:
        workload(log, 5)
        state = full_replay(log)
        info = write_snapshot(tmp_path / "snaps", codec, state, next_offset=15, link=log.link_at(15), timestamp_ms=7)
        got_info, got = read_snapshot(info.path, codec)
    assert got == state
    assert (got_info.next_offset, got_info.link, got_info.rows) == (15, info.link, len(state))


def test_every_byte_flip_in_a_snapshot_is_detected(tmp_path, keyring, codec):
    """Flipping any single byte of a snapshot file makes it unreadable, never wrong."""
    with Log.open(tmp_path / "s", keyring=keyring) as log:
        workload(log, 2)
        info = write_snapshot(tmp_path, codec, full_replay(log), next_offset=6, link=log.link_at(6), timestamp_ms=1)
    original = info.path.read_bytes()
    for i in range(len(original)):
        damaged = bytearray(original)
        damaged[i] ^= 0x20
        info.path.write_bytes(bytes(damaged))
        with pytest.raises(CorruptSnapshotError):
            read_snapshot(info.path, codec)


def test_snapshot_of_another_kind_is_refused(tmp_path, keyring, codec):
    """Loading a snapshot with the wrong codec names both kinds."""

    class Other(LatestByKeySnapshot):
        kind = "other"

    with Log.open(tmp_path / "s", keyring=keyring) as log:
        workload(log, 1)
        info = write_snapshot(tmp_path, codec, full_replay(log), next_offset=3, link=log.link_at(3), timestamp_ms=1)
    with pytest.raises(SnapshotError, match="'latest-by-key' state, not 'other'"):
        read_snapshot(info.path, Other(EventCodec()))


def test_load_uses_newest_snapshot_and_replays_the_tail(tmp_path, keyring, codec):
    """Loading starts at the newest snapshot and replays only what follows it."""
    with Log.open(tmp_path / "s", keyring=keyring, config=SMALL) as log:
        workload(log, 10)
        snap = Snapshotter(log, codec, SnapshotPolicy())
        snap.snapshot(load_state(log, PROJECTION, codec).state, 30)
        workload(log, 4, start=10)
        loaded = load_state(log, PROJECTION, codec)
        assert loaded.snapshot.next_offset == 30 and loaded.replayed_events == 12
        assert loaded.state == full_replay(log) and loaded.next_offset == 42


def test_corrupt_newest_snapshot_falls_back(tmp_path, keyring, codec):
    """A damaged newest snapshot is skipped with a reason, and the older one is used."""
    with Log.open(tmp_path / "s", keyring=keyring) as log:
        snap = Snapshotter(log, codec, SnapshotPolicy(), keep=5)
        workload(log, 3)
        snap.snapshot(full_replay(log), 9)
        workload(log, 3, start=3)
        newest = snap.snapshot(full_replay(log), 18)
        newest.path.write_bytes(newest.path.read_bytes()[:-3])
        loaded = load_state(log, PROJECTION, codec)
        assert loaded.snapshot.next_offset == 9
        assert "fails its CRC" in loaded.rejected_snapshots[0] or "truncated" in loaded.rejected_snapshots[0]
        assert loaded.state == full_replay(log)


def test_snapshot_from_a_different_history_is_rejected(tmp_path, keyring, codec):
    """A snapshot whose chain link does not match this log's is not trusted."""
    with Log.open(tmp_path / "a", keyring=keyring) as a, Log.open(tmp_path / "b", keyring=keyring) as b:
        workload(a, 2)
        workload(b, 2, start=50)
        write_snapshot(b.store.snapshot_dir, codec, full_replay(a), next_offset=6, link=a.link_at(6), timestamp_ms=1,
                       keyring=keyring)
        loaded = load_state(b, PROJECTION, codec)
        assert loaded.snapshot is None and "chain link differs" in loaded.rejected_snapshots[0]
        assert loaded.state == full_replay(b)


def test_policy_triggers_by_events(tmp_path, keyring, codec):
    """maybe_snapshot writes only once enough events have passed."""
    with Log.open(tmp_path / "s", keyring=keyring) as log:
        snap = Snapshotter(log, codec, SnapshotPolicy(every_events=10, every_bytes=None))
        workload(log, 3)
        assert snap.maybe_snapshot(full_replay(log), 9) is None
        workload(log, 1, start=3)
        assert snap.maybe_snapshot(full_replay(log), 12).next_offset == 12


def test_a_background_snapshot_is_the_state_authenticated(tmp_path, keyring, codec):
    """A policy snapshot written in the background (by a forked child) passes its HMAC and loads the state
    it was given, as one written in the caller's thread does."""
    with Log.open(tmp_path / "s", keyring=keyring) as log:
        snap = Snapshotter(log, codec, SnapshotPolicy(every_events=10, every_bytes=None), keep=5)
        workload(log, 4)
        state = full_replay(log)
        assert snap.maybe_snapshot(state, 12, background=True) is None
        snap.wait()
        (background,) = list_snapshots(log.store.snapshot_dir)
        _, loaded = read_snapshot(background, codec, keyring)
        foreground = snap.snapshot(state, 12)
        assert loaded == state == read_snapshot(foreground.path, codec, keyring)[1]
        assert load_state(log, PROJECTION, codec).snapshot.next_offset == 12


def _hang_the_write_at(directory: Path, next_offset: int) -> None:
    """A real hang for the child writing the snapshot at ``next_offset``: its temporary file is a FIFO
    no one reads, so opening it for writing blocks for ever."""
    directory.mkdir(parents=True, exist_ok=True)
    os.mkfifo(partial_snapshot_path(directory, next_offset))


def test_a_hung_background_snapshot_is_killed_at_its_timeout_and_the_next_trigger_writes_one(
        tmp_path, keyring, codec, caplog):
    """A child stuck writing is killed at ``child_timeout``: one warning, no file left (not even its partial
    one), and the policy's next trigger writes the snapshot."""
    with Log.open(tmp_path / "s", keyring=keyring) as log:
        snap = Snapshotter(log, codec, SnapshotPolicy(every_events=10, every_bytes=None), child_timeout=0.5)
        _hang_the_write_at(log.store.snapshot_dir, 12)
        workload(log, 4)
        with caplog.at_level(logging.WARNING, logger="secmeta.snapshots"):
            assert snap.maybe_snapshot(full_replay(log), 12, background=True) is None
            snap.wait()
        assert [r.getMessage() for r in caplog.records] == [
            "snapshot at offset 12 failed (the policy's next trigger tries again): "
            "the forked child was killed: it timed out after 0.5 s without progress"]
        assert list(log.store.snapshot_dir.iterdir()) == []
        workload(log, 1, start=4)
        assert snap.maybe_snapshot(full_replay(log), 15, background=True) is None and not snap.due(15)
        workload(log, 3, start=5)
        state = full_replay(log)
        snap.maybe_snapshot(state, 24, background=True)
        snap.wait()
        assert [p.name for p in log.store.snapshot_dir.iterdir()] == [f"snapshot-{24:020d}.avro"]
        assert load_state(log, PROJECTION, codec).snapshot.next_offset == 24


def test_a_store_whose_snapshot_child_hangs_keeps_writing_and_closes_at_once_leaving_no_file(tmp_path, keyring):
    """The store goes on accepting writes while its snapshot child hangs, and close() kills the child rather
    than waiting for its timeout (a minute at least): nothing partial is left in the snapshot directory."""
    store = store_at(tmp_path / "s", keyring, snapshot_policy=SnapshotPolicy(every_events=3, every_bytes=None))
    snapshot_dir = tmp_path / "s" / "snapshots"
    _hang_the_write_at(snapshot_dir, 3)
    for i in range(8):  # the snapshot at offset 3 hangs from the third write on
        store.create_acls([acl(f"t{i}", "User:a")], context=ADMIN)
    assert len(store.describe_acls(AclBindingFilter.any(), context=ADMIN)) == 8
    closed = threading.Thread(target=store.close, daemon=True)
    closed.start()
    closed.join(timeout=30)
    assert not closed.is_alive()
    assert list(snapshot_dir.iterdir()) == []


def test_policy_triggers_by_age(tmp_path, keyring, codec):
    """A snapshot older than max_age_ms is renewed on the next change."""
    now = [1000.0]
    with Log.open(tmp_path / "s", keyring=keyring) as log:
        snap = Snapshotter(log, codec, SnapshotPolicy(None, None, max_age_ms=60_000), clock=lambda: now[0])
        workload(log, 1)
        assert snap.maybe_snapshot(full_replay(log), 3) is None
        now[0] += 61
        assert snap.maybe_snapshot(full_replay(log), 3) is not None


def test_bad_policy_is_refused():
    """A non-positive threshold is named in the error."""
    with pytest.raises(ValueError, match="every_events"):
        SnapshotPolicy(every_events=0)


def test_retention_is_off_by_default_and_keeps_history(tmp_path, keyring, codec):
    """Without retention every segment stays; with it, covered segments go and loading still works."""
    with Log.open(tmp_path / "s", keyring=keyring, config=SMALL, retention=True) as log:
        workload(log, 30)
        segments = len(log.segments())
        Snapshotter(log, codec, SnapshotPolicy()).snapshot(full_replay(log), 90)
        assert len(log.segments()) == segments
        expected = full_replay(log)
        Snapshotter(log, codec, SnapshotPolicy(), delete_covered_segments=True).snapshot(expected, 90)
        assert len(log.segments()) < segments and log.start_offset > 0
        workload(log, 2, start=30)
        assert load_state(log, PROJECTION, codec).state == PROJECTION.apply(expected, list(log.read(90)))
    assert verify_log(tmp_path / "s", keyring=keyring, retention=True).ok


def test_deleted_history_without_snapshot_is_an_error(tmp_path, keyring, codec):
    """If old segments are gone and no snapshot covers them, loading says so."""
    with Log.open(tmp_path / "s", keyring=keyring, config=SMALL, retention=True) as log:
        workload(log, 30)
        Snapshotter(log, codec, SnapshotPolicy(), delete_covered_segments=True).snapshot(full_replay(log), 90)
        for p in list_snapshots(log.store.snapshot_dir):
            p.unlink()
        with pytest.raises(SecmetaError, match="no valid snapshot"):
            load_state(log, PROJECTION, codec)


@settings(max_examples=20, deadline=None)
@given(
    batches=st.lists(st.lists(st.integers(0, 12), min_size=1, max_size=6), min_size=1, max_size=12),
    cut=st.data(),
)
def test_snapshot_plus_tail_equals_full_replay(batches, cut):
    """For any history and any batch boundary, snapshot there + tail = replay of everything."""
    tmp = Path(tempfile.mkdtemp())
    try:
        keyring = make_keyring(tmp)
        codec = LatestByKeySnapshot(EventCodec())
        with Log.open(tmp / "s", keyring=keyring) as log:
            boundaries = []
            for b, keys in enumerate(batches):
                log.append([acl_created(k, ts=b) if k % 3 else acl_deleted(k, ts=b) for k in keys])
                boundaries.append(log.end_offset)
            at = cut.draw(st.sampled_from(boundaries))
            Snapshotter(log, codec, SnapshotPolicy()).snapshot(load_state(log, PROJECTION, codec, end=at).state, at)
            loaded = load_state(log, PROJECTION, codec)
            assert loaded.snapshot.next_offset == at
            assert loaded.state == full_replay(log)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_forged_snapshot_without_the_key_is_rejected(tmp_path, keyring, codec):
    """A snapshot rewritten by someone without the key fails its HMAC and is not loaded."""
    with Log.open(tmp_path / "s", keyring=keyring) as log:
        workload(log, 3)
        real = full_replay(log)
        Snapshotter(log, codec, SnapshotPolicy()).snapshot(real, 9)
        forged = PROJECTION.apply(real, [acl_created(999)])
        write_snapshot(log.store.snapshot_dir, codec, forged, next_offset=9, link=log.link_at(9), timestamp_ms=1)
        loaded = load_state(log, PROJECTION, codec)
        assert loaded.snapshot is None and "not authenticated" in loaded.rejected_snapshots[0]
        assert loaded.state == real


def test_snapshot_signed_with_another_key_is_rejected(tmp_path, keyring, codec):
    """A valid-looking snapshot whose HMAC was made with a different key fails the check."""
    other = make_keyring(tmp_path, "other.json")
    with Log.open(tmp_path / "s", keyring=keyring) as log:
        workload(log, 2)
        write_snapshot(log.store.snapshot_dir, codec, full_replay(log), next_offset=6, link=log.link_at(6),
                       timestamp_ms=1, keyring=other)
        loaded = load_state(log, PROJECTION, codec)
        assert loaded.snapshot is None and "not in the keyring" in loaded.rejected_snapshots[0]


def test_snapshot_inside_a_batch_is_rejected(tmp_path, keyring, codec):
    """A snapshot whose offset is not a batch boundary cannot be checked against the chain."""
    with Log.open(tmp_path / "s", keyring=keyring) as log:
        workload(log, 2)
        state = PROJECTION.apply(PROJECTION.empty, list(log.read(0, 2)))
        write_snapshot(log.store.snapshot_dir, codec, state, next_offset=2, link=bytes(32), timestamp_ms=1, keyring=keyring)
        loaded = load_state(log, PROJECTION, codec)
        assert loaded.snapshot is None and "no batch of the log ends" in loaded.rejected_snapshots[0]


def test_snapshot_older_than_retained_log_is_rejected(tmp_path, keyring, codec):
    """After retention, a snapshot below the log's start is refused rather than replayed with a gap."""
    with Log.open(tmp_path / "s", keyring=keyring, config=SMALL, retention=True) as log:
        workload(log, 30)
        old = Snapshotter(log, codec, SnapshotPolicy(), keep=5).snapshot(load_state(log, PROJECTION, codec, end=30).state, 30)
        newest = Snapshotter(log, codec, SnapshotPolicy(), keep=5, delete_covered_segments=True).snapshot(full_replay(log), 90)
        assert log.start_offset > 30
        newest.path.write_bytes(b"garbage")
        with pytest.raises(SecmetaError, match="before the log's start"):
            load_state(log, PROJECTION, codec)
        assert old.path.exists()
