"""The follower's local log records where its last event lies on the history topic, whichever end a crash leaves.

``LocalReplica`` records the local log's new end (``replica_end``: two slots, the new end written durably into the
one that does not hold the current end) before each append, so a follower restarting from the local log can check
its topic from there (``Follower._take_replica``). No broker is needed: the replica is given the Kafka offsets as the
follower would.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.consumers.kafka.replica import LocalReplica
from secmeta.consumers.kafka.replica_end import END_FILE, SLOT, ReplicaEnd
from secmeta.consumers.kafka.topic_identity import TopicIdentity
from secmeta.events.codec import EventCodec
from secmeta.events.records import Envelope
from tests.conftest import make_keyring
from tests.logkit import acl_created

IDENTITY = TopicIdentity("cluster-a", {"secmeta.history": "topic-id-1"})


class Killed(Exception):
    """The process died here."""


def _event(offset: int) -> Envelope:
    return Envelope(offset, 1_700_000_000_000, "User:admin", "10.0.0.1", f"r{offset}", acl_created(offset).event)


def _link(batch: int) -> bytes:
    return bytes([batch % 256]) * 32


def _killed(envelopes) -> None:
    raise Killed


@settings(max_examples=25, deadline=None)
@given(batches=st.lists(st.integers(1, 4), min_size=1, max_size=6), killed_at=st.integers(0, 6),
       gap=st.integers(0, 3), torn=st.booleans())
def test_the_recorded_end_is_the_local_logs_end_whichever_append_a_kill_interrupts(batches, killed_at, gap, torn):
    """Store batches of 1-4 events, each at Kafka offsets ``gap`` apart (duplicates or other writers' messages in
    between), appended one by one; the process killed once the record of the ``killed_at``-th append is written,
    before the append itself, that record torn or whole. Reopened, the local log ends where it ends, and the record
    says where that end's last event lies on the topic: its Kafka offset, its batch's link and the identity given
    (nothing for an empty log)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        keyring, codec = make_keyring(root), EventCodec()
        replica = LocalReplica(root / "f", keyring, codec)
        replica.identity = IDENTITY
        offset, kafka_offset, appended = 0, 0, []
        try:
            for number, size in enumerate(batches):
                for _ in range(size):
                    replica.add(_event(offset), _link(number), kafka_offset)
                    offset, kafka_offset = offset + 1, kafka_offset + 1 + gap
                if number == killed_at:
                    replica.log.append = _killed  # type: ignore[method-assign]
                replica.flush()
                appended.append(ReplicaEnd(offset, kafka_offset - 1 - gap, _link(number), IDENTITY))
        except Killed:
            if torn:  # the slot just written holds its first bytes only
                _tear_newest(root / "f" / END_FILE)
        finally:
            replica.log.close()
        reopened = LocalReplica(root / "f", keyring, codec)
        try:
            assert reopened.next_offset == (appended[-1].next_offset if appended else 0)
            assert reopened.end == (appended[-1] if appended else None)
        finally:
            reopened.close()


def _tear_newest(path: Path) -> None:
    """Zero all but the first 12 bytes of the slot written last (the highest sequence number): a torn write."""
    data = bytearray(path.read_bytes())
    sequences = []
    for at in range(len(data) // SLOT):
        length = int.from_bytes(data[at * SLOT + 4:at * SLOT + 8], "big")
        sequences.append(json.loads(data[at * SLOT + 8:at * SLOT + 8 + length])["sequence"])
    newest = sequences.index(max(sequences))
    data[newest * SLOT + 12:(newest + 1) * SLOT] = bytes(SLOT - 12)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["garbage", "cut short", "a byte flipped in each slot written"])
def test_a_damaged_record_gives_no_end(tmp_path, damage):
    """A record that fails its checks gives no end (a follower then resumes from its checkpoint, checking what it
    reads again against the local log: ``LocalReplica.rejoin``)."""
    keyring, codec = make_keyring(tmp_path), EventCodec()
    with_events = LocalReplica(tmp_path / "f", keyring, codec)
    with_events.add(_event(0), _link(0), 0)
    with_events.close()
    path = tmp_path / "f" / END_FILE
    data = bytearray(path.read_bytes())
    if damage == "garbage":
        path.write_bytes(b"{not a record" * 10)
    elif damage == "cut short":
        os.truncate(path, 6)
    else:
        for at in range(len(data) // SLOT):
            data[at * SLOT + 20] ^= 0xFF
        path.write_bytes(bytes(data))
    reopened = LocalReplica(tmp_path / "f", keyring, codec)
    try:
        assert reopened.next_offset == 1 and reopened.end is None
    finally:
        reopened.close()


def _logged(tmp_path, count: int) -> tuple:
    """A local log holding ``count`` events, one store batch each at Kafka offset = log offset, then closed."""
    keyring, codec = make_keyring(tmp_path), EventCodec()
    replica = LocalReplica(tmp_path / "f", keyring, codec)
    replica.identity = IDENTITY
    for offset in range(count):
        replica.add(_event(offset), _link(offset), offset)
    replica.close()
    return keyring, codec


def test_rejoining_checks_the_events_read_again_appends_none_and_records_the_end_once_reached(tmp_path):
    """After a power loss left no record of the log's end (the record file gone), a replica taking events again
    from offset 2 (its follower's checkpoint) appends none of those it holds, records the log's end again when it
    reaches it (from the Kafka offset and link the last one came with), then appends the next as before."""
    keyring, codec = _logged(tmp_path, 5)
    (tmp_path / "f" / END_FILE).unlink()
    replica = LocalReplica(tmp_path / "f", keyring, codec)
    try:
        assert replica.end is None
        replica.identity = IDENTITY
        replica.rejoin(2)
        assert replica.next_offset == 2
        for offset in range(2, 5):
            replica.add(_event(offset), _link(offset), 100 + offset)
            replica.flush()
            assert replica.log.end_offset == 5
        assert replica.next_offset == 5 and replica.end == ReplicaEnd(5, 104, _link(4), IDENTITY)
        replica.add(_event(5), _link(5), 105)
    finally:
        replica.close()
    reopened = LocalReplica(tmp_path / "f", keyring, codec)
    try:
        assert [e.offset for e in reopened.log.read(0)] == list(range(6))
        assert reopened.end == ReplicaEnd(6, 105, _link(5), IDENTITY)
    finally:
        reopened.close()


def test_rejoining_refuses_another_event_where_the_local_log_holds_one(tmp_path):
    """Fail closed: the topic giving another event at an offset the local log holds (the topic rewritten, another
    store's) is refused naming the local log and the offset, and nothing is appended."""
    from dataclasses import replace

    from secmeta.consumers.kafka.replica import ReplicaError

    keyring, codec = _logged(tmp_path, 4)
    (tmp_path / "f" / END_FILE).unlink()
    replica = LocalReplica(tmp_path / "f", keyring, codec)
    try:
        replica.rejoin(1)
        replica.add(_event(1), _link(1), 1)
        with pytest.raises(ReplicaError, match=r"holds another event at log offset 2 than the topic gives there "
                                               r"\(Kafka offset 2\)"):
            replica.add(replace(_event(2), request_id="other"), _link(2), 2)
        with pytest.raises(ReplicaError):  # nor does anything after it go in
            replica.add(_event(3), _link(3), 3)
        replica.flush()
        assert replica.log.end_offset == 4 and replica.end is None
    finally:
        replica.close()


@pytest.mark.parametrize("start", [-1, 4, 7])
def test_rejoining_outside_the_log_is_refused(tmp_path, start):
    from secmeta.consumers.kafka.replica import ReplicaError

    keyring, codec = _logged(tmp_path, 4)
    replica = LocalReplica(tmp_path / "f", keyring, codec)
    try:
        with pytest.raises(ReplicaError, match=f"cannot be checked again from log offset {start}"):
            replica.rejoin(start)
    finally:
        replica.close()
