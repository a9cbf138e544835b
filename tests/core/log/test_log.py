"""The durable log: appends, reads, segments, indexes, locking, recovery, verification."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from secmeta.core.errors import CorruptLogError, NewerFormatError, NotAStoreError, StoreLockedError
from secmeta.core.log import Log, LogConfig, OffsetOutOfRangeError, verify_log
from secmeta.core.log.chain import Chain
from secmeta.core.log.segment import Segment
from secmeta.events.errors import EventSchemaError, KeyringError
from secmeta.events.keyring import Keyring
from secmeta.events.records import AclCreated, Envelope
from tests.logkit import acl_created, make_keyring

SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256)


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store"


def fill(log: Log, batches: int, size: int = 3, ts0: int = 1_000) -> list[Envelope]:
    written = []
    for b in range(batches):
        envs = [acl_created(b * size + i, ts=ts0 + b) for i in range(size)]
        log.append(envs)
        written.extend(envs)
    return written


def segment_files(store: Path) -> list[Path]:
    return sorted((store / "log").glob("*.log"))


def test_append_assigns_consecutive_offsets(store, keyring):
    """Each batch gets the next offsets and reads back with them."""
    with Log.open(store, keyring=keyring) as log:
        first = log.append([acl_created(0), acl_created(1)])
        second = log.append([acl_created(2)])
        assert (first.base_offset, first.next_offset, second.base_offset) == (0, 2, 2)
        assert [e.offset for e in log.read()] == [0, 1, 2]


def test_events_survive_reopen(store, keyring):
    """What was appended is read back identically after close and reopen."""
    with Log.open(store, keyring=keyring, config=SMALL) as log:
        written = fill(log, 40)
    with Log.open(store, keyring=keyring, config=SMALL) as log:
        got = list(log.read())
        assert [e.event for e in got] == [e.event for e in written]
        assert log.end_offset == len(written)
        assert not log.recovery


def test_segments_roll_by_size_and_get_indexes(store, keyring):
    """Small segments roll over; sealed ones get offset and time index files."""
    with Log.open(store, keyring=keyring, config=SMALL) as log:
        fill(log, 40)
    segs = segment_files(store)
    assert len(segs) > 3
    assert all(s.with_suffix(".index").stat().st_size > 0 for s in segs[:-1])
    assert all(s.with_suffix(".timeindex").exists() for s in segs[:-1])


def test_read_from_an_offset_in_a_later_segment(store, keyring):
    """Reading from offset N yields exactly the events from N on."""
    with Log.open(store, keyring=keyring, config=SMALL) as log:
        fill(log, 40)
        assert [e.offset for e in log.read(77, 83)] == list(range(77, 83))


def test_offset_for_timestamp_uses_batch_times(store, keyring):
    """Seeking by time finds the first batch at or after the time."""
    with Log.open(store, keyring=keyring, config=SMALL) as log:
        fill(log, 40, ts0=5_000)
        assert log.offset_for_timestamp(5_020) == 60
        assert log.offset_for_timestamp(0) == 0
        assert log.offset_for_timestamp(99_999) == log.end_offset


def test_missing_index_files_are_rebuilt(store, keyring):
    """A sealed segment without its index files is still readable and seekable."""
    with Log.open(store, keyring=keyring, config=SMALL) as log:
        fill(log, 40)
    for idx in (store / "log").glob("*.index"):
        idx.unlink()
    with Log.open(store, keyring=keyring, config=SMALL) as log:
        assert [e.offset for e in log.read(50, 52)] == [50, 51]
    assert any((store / "log").glob("*.index"))


def test_second_writer_is_refused(store, keyring):
    """Only one writer per directory: the second gets a clear error."""
    with Log.open(store, keyring=keyring):
        with pytest.raises(StoreLockedError, match="already open for writing"):
            Log.open(store, keyring=keyring)


def test_directory_that_is_not_a_store_is_refused(tmp_path, keyring):
    """A non-empty directory without the store marker is not written into."""
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("hello")
    with pytest.raises(NotAStoreError, match="not a secmeta store"):
        Log.open(tmp_path / "other", keyring=keyring)
    assert os.listdir(tmp_path / "other") == ["notes.txt"]


def test_reading_a_missing_store_does_not_create_it(tmp_path, keyring):
    """Read-only opening of a path with no store fails and creates nothing."""
    with pytest.raises(NotAStoreError):
        Log.open(tmp_path / "absent", keyring=keyring, read_only=True)
    assert not (tmp_path / "absent").exists()


def test_newer_format_version_is_refused(store, keyring):
    """A store written by a newer format version is not opened."""
    Log.open(store, keyring=keyring).close()
    meta = json.loads((store / "secmeta.json").read_text())
    meta["format_version"] = 99
    (store / "secmeta.json").write_text(json.dumps(meta))
    with pytest.raises(NewerFormatError, match="format version 99"):
        Log.open(store, keyring=keyring)


def test_wrong_key_with_the_same_id_is_detected(store, keyring, tmp_path):
    """A keyring whose key has the store's id but other material is refused."""
    Log.open(store, keyring=keyring).close()
    impostor = json.loads(Path(tmp_path / "keys.json").read_text())
    other = make_keyring(tmp_path, "other.json")
    impostor["keys"][0]["material"] = json.loads((tmp_path / "other.json").read_text())["keys"][0]["material"]
    (tmp_path / "bad.json").write_text(json.dumps(impostor))
    (tmp_path / "bad.json").chmod(0o600)
    with pytest.raises(KeyringError, match="does not match"):
        Log.open(store, keyring=Keyring.from_file(tmp_path / "bad.json"))
    with pytest.raises(KeyringError, match="none of the keys"):
        Log.open(store, keyring=other)


def test_event_not_matching_its_schema_writes_nothing(store, keyring):
    """An invalid event is rejected with a clear error and the log is unchanged."""
    with Log.open(store, keyring=keyring) as log:
        log.append([acl_created(0)])
        size = segment_files(store)[0].stat().st_size
        bad = Envelope(-1, 1, "User:admin", "h", "r", AclCreated(12345, acl_created(1).event.binding))  # type: ignore[arg-type]
        with pytest.raises(EventSchemaError, match="acl_id"):
            log.append([acl_created(1), bad])
        assert log.end_offset == 1
    assert segment_files(store)[0].stat().st_size == size


def test_empty_batch_is_rejected(store, keyring):
    """Appending nothing is a caller error."""
    with Log.open(store, keyring=keyring) as log, pytest.raises(ValueError, match="empty"):
        log.append([])


def test_torn_tail_is_truncated_and_reported(store, keyring):
    """A half-written last batch is cut off on open, and the report says how much."""
    with Log.open(store, keyring=keyring) as log:
        fill(log, 5)
    seg = segment_files(store)[-1]
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x01\x00partial-batch")
    with Log.open(store, keyring=keyring) as log:
        assert log.recovery.truncated_bytes == 17
        assert log.recovery.from_offset == 15
        assert "truncated 17 bytes" in str(log.recovery)
        assert log.end_offset == 15
        log.append([acl_created(99)])
    assert verify_log(store, keyring=keyring).ok


def test_corruption_before_the_tail_is_an_error(store, keyring):
    """A damaged batch followed by good ones is reported with segment and offset, not skipped."""
    with Log.open(store, keyring=keyring) as log:
        fill(log, 5)
    seg = segment_files(store)[-1]
    data = bytearray(seg.read_bytes())
    data[60] ^= 0xFF  # inside the first batch
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptLogError, match=r"00000000000000000000\.log is corrupt at offset 0") as info:
        Log.open(store, keyring=keyring)
    assert info.value.offset == 0
    assert seg.read_bytes() == bytes(data)


def test_corrupt_sealed_segment_fails_reads(store, keyring):
    """Reading through a damaged sealed segment raises instead of serving bad data."""
    with Log.open(store, keyring=keyring, config=SMALL) as log:
        fill(log, 40)
    first = segment_files(store)[0]
    data = bytearray(first.read_bytes())
    data[len(data) // 2] ^= 0x01
    first.write_bytes(bytes(data))
    with Log.open(store, keyring=keyring, config=SMALL) as log:
        with pytest.raises(CorruptLogError, match=first.name):
            list(log.read())


def test_verify_passes_on_an_intact_log(store, keyring):
    """verify reports OK with the batch and event counts."""
    with Log.open(store, keyring=keyring, config=SMALL) as log:
        fill(log, 12)
    report = verify_log(store, keyring=keyring)
    assert report.ok and report.batches == 12 and report.events == 36


def test_every_single_byte_flip_is_detected(store, keyring):
    """Flipping any one byte anywhere in a segment makes verify fail."""
    with Log.open(store, keyring=keyring) as log:
        fill(log, 3, size=1)
    seg = segment_files(store)[0]
    original = seg.read_bytes()
    for i in range(len(original)):
        damaged = bytearray(original)
        damaged[i] ^= 0x5A
        seg.write_bytes(bytes(damaged))
        assert not verify_log(store, keyring=keyring).ok, f"flip at byte {i} went unnoticed"
    seg.write_bytes(original)
    assert verify_log(store, keyring=keyring).ok


def _frames(seg: Path) -> list[bytes]:
    s = Segment(seg.parent, int(seg.stem), writable=False)
    try:
        data = seg.read_bytes()
        return [data[b.position : b.position + b.size] for b in s.frames()]
    finally:
        s.close()


@pytest.mark.parametrize(
    "edit, bad_offset",
    [
        (lambda f: f[:1] + f[2:], 3),
        (lambda f: f[:2] + [f[1]] + f[2:], 6),
        (lambda f: [f[0], f[2], f[1], f[3]], 3),
    ],
    ids=["delete", "duplicate", "reorder"],
)
def test_batch_edits_are_detected(store, keyring, edit, bad_offset):
    """Deleting, duplicating or reordering whole batches fails verification."""
    with Log.open(store, keyring=keyring) as log:
        fill(log, 4)
    seg = segment_files(store)[0]
    seg.write_bytes(b"".join(edit(_frames(seg))))
    report = verify_log(store, keyring=keyring)
    assert not report.ok and "deleted, duplicated or reordered" in report.problem
    assert report.first_bad_offset == bad_offset


def test_rewritten_batch_with_fixed_crc_breaks_the_chain(store, keyring):
    """Re-framing an edited batch with a correct CRC still fails the keyed chain."""
    import zlib

    from secmeta.core.log.format import PREFIX

    with Log.open(store, keyring=keyring) as log:
        fill(log, 3)
    seg = segment_files(store)[0]
    frames = _frames(seg)
    body = bytearray(frames[1][8:])
    body[-5] ^= 0x01  # payload byte
    frames[1] = PREFIX.pack(len(body) + 4, zlib.crc32(bytes(body))) + bytes(body)
    seg.write_bytes(b"".join(frames))
    report = verify_log(store, keyring=keyring)
    assert not report.ok and "hash chain broken" in report.problem and report.first_bad_offset == 3


def test_checkpoint_past_the_end_exposes_a_cut_tail(store, keyring):
    """A snapshot offset beyond the log's end shows batches were removed from the end."""
    with Log.open(store, keyring=keyring) as log:
        fill(log, 3)
        link = log.link_at(9)
    report = verify_log(store, keyring=keyring, checkpoints=[(12, link)])
    assert not report.ok and "removed from the end" in report.problem


def test_concurrent_appends_share_fsyncs(store, keyring, monkeypatch):
    """Concurrent writers under fsync=always all land, with fewer fsyncs than appends."""
    calls = []
    real = Segment.sync

    def counting(self):
        calls.append(1)
        real(self)

    monkeypatch.setattr(Segment, "sync", counting)
    with Log.open(store, keyring=keyring) as log:
        def writer(t):
            for i in range(50):
                log.append([acl_created(t * 1000 + i)])

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert log.end_offset == 400
        assert sorted(e.event.acl_id for e in log.read()) == sorted(
            acl_created(t * 1000 + i).event.acl_id for t in range(8) for i in range(50)
        )
    assert len(calls) < 400


@pytest.mark.parametrize("policy", ["interval", "never"])
def test_relaxed_fsync_policies_keep_events_after_close(store, keyring, policy):
    """interval and never still hand back every event after a clean close."""
    with Log.open(store, keyring=keyring, config=LogConfig(fsync=policy, fsync_interval_ms=5)) as log:
        fill(log, 10)
    with Log.open(store, keyring=keyring) as log:
        assert log.end_offset == 30


def test_bad_config_is_refused():
    """An unknown fsync policy is named in the error."""
    with pytest.raises(ValueError, match="'sometimes'"):
        LogConfig(fsync="sometimes")


def test_tail_reader_follows_new_appends(store, keyring):
    """A tail reader receives events appended after it started."""
    with Log.open(store, keyring=keyring) as log:
        fill(log, 1)
        tail = log.tail(start=3)
        assert tail.poll(timeout=0.01) == []
        threading.Timer(0.05, lambda: log.append([acl_created(50)])).start()
        got = tail.poll(timeout=5)
        assert [e.offset for e in got] == [3]


def test_read_only_reader_sees_another_writers_appends(store, keyring):
    """A read-only log in another process role picks up new batches and segments."""
    with Log.open(store, keyring=keyring, config=SMALL) as writer:
        fill(writer, 2)
        reader = Log.open(store, keyring=keyring, read_only=True)
        try:
            tail = reader.tail(0)
            assert len(tail.poll(timeout=1)) == 6
            fill(writer, 30)
            seen = []
            while len(seen) < 90:
                got = tail.poll(timeout=2)
                assert got, "reader stopped seeing appends"
                seen.extend(got)
            assert [e.offset for e in seen] == list(range(6, 96))
        finally:
            reader.close()


def test_retention_deletes_only_covered_segments(store, keyring):
    """Deleting segments below an offset keeps the rest readable and verifiable."""
    with Log.open(store, keyring=keyring, config=SMALL, retention=True) as log:
        fill(log, 40)
        deleted = log.delete_segments_before(60)
        assert deleted
        assert log.start_offset <= 60
        assert [e.offset for e in log.read(60, 62)] == [60, 61]
    with Log.open(store, keyring=keyring, config=SMALL, retention=True) as log:
        assert log.start_offset <= 60 and log.end_offset == 120
    assert verify_log(store, keyring=keyring, retention=True).ok


def test_a_strict_read_before_the_start_is_out_of_range(store, keyring):
    """After retention a plain read from 0 starts at the log's start; a strict one (a replay that needs
    every event from its start) raises OffsetOutOfRangeError naming both offsets instead of skipping."""
    with Log.open(store, keyring=keyring, config=SMALL, retention=True) as log:
        fill(log, 40)
        log.delete_segments_before(60)
        start = log.start_offset
        assert [e.offset for e in log.read(0, start + 1)] == [start]
        with pytest.raises(OffsetOutOfRangeError, match=rf"offset {start - 1} .* now starts at offset {start}"):
            list(log.read(start - 1, start + 1, strict=True))
        with pytest.raises(OffsetOutOfRangeError):
            list(log.batches(0, strict=True))
        assert [e.offset for e in log.read(start, start + 2, strict=True)] == [start, start + 1]


def test_repr_names_offsets_and_policy(store, keyring):
    """The log's repr says where it is and how it syncs."""
    with Log.open(store, keyring=keyring) as log:
        fill(log, 1)
        assert "offsets [0, 3)" in repr(log) and "fsync=always" in repr(log)


def test_missing_middle_segment_is_detected_on_open(store, keyring):
    """Deleting a sealed segment makes open fail, naming where the gap is."""
    with Log.open(store, keyring=keyring, config=SMALL) as log:
        fill(log, 40)
    segs = segment_files(store)
    segs[2].unlink()
    with pytest.raises(CorruptLogError, match="a segment is missing"):
        Log.open(store, keyring=keyring, config=SMALL)


def test_interrupted_retention_leftovers_are_ignored(store, keyring):
    """Segments already covered by the retention anchor (a crash mid-deletion) are dropped on open."""
    with Log.open(store, keyring=keyring, config=SMALL, retention=True) as log:
        fill(log, 40)
        first = segment_files(store)[0].read_bytes()
        log.delete_segments_before(60)
    segment_files(store)[0].with_name("00000000000000000000.log").write_bytes(first)
    with Log.open(store, keyring=keyring, config=SMALL, retention=True) as log:
        assert log.start_offset > 0 and log.end_offset == 120
    assert not (store / "log" / "00000000000000000000.log").exists()
    assert verify_log(store, keyring=keyring, retention=True).ok


def test_batch_over_the_frame_limit_is_refused_before_writing(store, keyring, monkeypatch):
    """A batch too large to frame is rejected and nothing is written (it would not survive recovery)."""
    import secmeta.core.log.append as log_module

    monkeypatch.setattr(log_module, "MAX_FRAME", 500)
    with Log.open(store, keyring=keyring) as log:
        with pytest.raises(ValueError, match="frame limit"):
            log.append([acl_created(i) for i in range(10)])
        assert log.end_offset == 0


def test_a_writers_open_and_replay_check_each_batch_of_the_active_segment_once(store, keyring, monkeypatch):
    """The open's scan of the active segment checks every batch's chain link; the replay that follows takes
    those batches as checked rather than reading and checking them a second time."""
    with Log.open(store, keyring=keyring) as log:
        fill(log, 30)
    checked = []
    original = Chain.check_link
    monkeypatch.setattr(Chain, "check_link", lambda self, seg, batch, prev: (checked.append(batch.base_offset),
                                                                            original(self, seg, batch, prev)))
    with Log.open(store, keyring=keyring) as log:
        at_open = len(checked)
        assert sorted(set(checked)) == [3 * b for b in range(30)]  # the scan (and a few of the open's own reads)
        replayed = [(first, len(events)) for first, events in log.replay_batches()]
        assert replayed == [(3 * b, 3) for b in range(30)]
        assert len(checked) == at_open  # none read again
        assert [(first, len(events)) for first, events in log.replay_batches(45)] == [(45, 3)] + [
            (3 * b, 3) for b in range(16, 30)]
        assert len(checked) > at_open  # a later read reads and checks again


@pytest.mark.parametrize("start", [0, 1, 44, 89, 90])
@pytest.mark.parametrize("appended", [0, 2])
def test_the_first_replay_after_a_writers_open_reads_what_a_reader_reads(store, keyring, start, appended):
    """From any offset, with batches appended after the open or not, the first replay gives what a read-only
    log's replay gives."""
    with Log.open(store, keyring=keyring) as log:
        fill(log, 30)
    with Log.open(store, keyring=keyring) as log:
        fill(log, appended, ts0=5_000)
        with Log.open(store, keyring=keyring, read_only=True) as reader:
            expected = list(reader.replay_batches(start))
        assert list(log.replay_batches(start)) == expected
        assert sum(len(events) for _, events in expected) == 90 + 3 * appended - start
