"""The publisher against librdkafka's mock cluster: both topics, checkpoints, crashes, outages, settings."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from confluent_kafka import Producer

from secmeta.consumers.kafka import publisher as publisher_module
from secmeta.consumers.kafka.client_config import ClientConfigError
from secmeta.consumers.kafka.follower import Follower
from secmeta.consumers.kafka.publisher import Publisher, PublisherError, TopicError
from secmeta.consumers.kafka.topic_end import read_topic_end
from secmeta.consumers.kafka.wire import (
    decode_message,
    format_marker,
    history_position,
    is_format_marker,
    message_decoder,
    message_encoder,
    message_link,
    message_offset,
)
from secmeta.events.codec import EventCodec
from secmeta.events.records import DelegationTokenIssued
from tests.consumers.conftest import (
    ADMIN,
    format2_message,
    image_state,
    live_keys,
    make_topics,
    produce_raw,
    random_workload,
    read_topic,
    unused_port,
)
from tests.logkit import acl_created

REPO = Path(__file__).resolve().parents[2]
CODEC = EventCodec()


def publish(store_dir, keyring, bootstrap, history, state, **kwargs) -> int:
    with Publisher(store_dir, keyring, bootstrap, history_topic=history, state_topic=state, **kwargs) as pub:
        return pub.publish_available(timeout=60)


def latest_per_key(messages) -> dict[bytes, bytes]:
    """What compaction keeps: the last value per key, a tombstone removing the key."""
    out: dict[bytes, bytes] = {}
    for _, key, value, _ in messages:
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


# -- the topics ------------------------------------------------------------------------


def test_history_holds_every_event_in_log_order(store, store_dir, keyring, clock, kafka_bootstrap, topics):
    """Each logged event appears once on the history topic, offsets 0..n-1 in order."""
    random_workload(store, seed=1, clock=clock)
    history, state = topics("history"), topics("state")
    assert publish(store_dir, keyring, kafka_bootstrap, history, state) == store.log.end_offset
    messages = read_topic(kafka_bootstrap, history)
    assert [message_offset(v, h) for _, _, v, h in messages] == list(range(store.log.end_offset))


def test_history_events_equal_the_logged_ones(store, store_dir, keyring, clock, kafka_bootstrap, topics):
    """Decoding the history topic gives back exactly the log's envelopes, and each value is the bytes a fresh
    encode writes with its batch's link (the publisher takes them from the log's batch:
    EventCodec.decode_batch_bodies)."""
    random_workload(store, seed=2, clock=clock)
    history, state = topics("history"), topics("state")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    messages = read_topic(kafka_bootstrap, history)
    decoded = [decode_message(CODEC, k, v, h) for _, k, v, h in messages]
    assert decoded == list(store.log.read())
    links = {env.offset: batch.link for batch in store.log.batches() for env in store.log.decode(batch)}
    encode = message_encoder(CODEC)
    assert [v for _, _, v, _ in messages] == [encode(env, link=links[env.offset])[1] for env in decoded]


def test_state_topic_ends_with_live_entities_only(store, store_dir, keyring, clock, kafka_bootstrap, topics):
    """Keeping the last value per key (tombstones removing) leaves exactly the store's live entities."""
    random_workload(store, seed=3, steps=80, clock=clock)
    history, state = topics("history"), topics("state")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    kept = latest_per_key(read_topic(kafka_bootstrap, state))
    assert set(kept) == live_keys(store.image)


def test_removals_are_followed_by_a_tombstone(store, store_dir, keyring, kafka_bootstrap, topics):
    """A deleted ACL's key gets its AclDeleted value and then a tombstone with the same offset."""
    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    from secmeta.core import AclBindingFilter

    store.delete_acls([AclBindingFilter.any()], context=ADMIN)
    history, state = topics("history"), topics("state")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    messages = read_topic(kafka_bootstrap, state)
    assert [(v is None, message_offset(v, h)) for _, _, v, h in messages] == [(False, 0), (False, 1), (True, 1)]


def test_state_value_of_a_renewed_token_is_the_whole_token(store, store_dir, keyring, kafka_bootstrap, topics):
    """After a renewal the token's latest state value is the full token with the new expiry."""
    token = store.create_delegation_token(context=ADMIN, owner="User:etl", renewers=["User:admin"])
    expiry = store.renew_delegation_token(token.hmac, 60_000, context=ADMIN)
    history, state = topics("history"), topics("state")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    _, key, value, headers = read_topic(kafka_bootstrap, state)[-1]
    event = decode_message(CODEC, key, value, headers).event
    assert isinstance(event, DelegationTokenIssued)
    assert (event.owner, event.expiry_timestamp_ms, message_offset(value, headers)) == ("User:etl", expiry, 1)


def test_renewal_after_a_restart_still_publishes_the_whole_token(store, store_dir, keyring, kafka_bootstrap, topics):
    """A publisher resuming past the token's issue rebuilds it from the log for the state value."""
    token = store.create_delegation_token(context=ADMIN, owner="User:etl", renewers=["User:admin"])
    history, state = topics("history"), topics("state")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    expiry = store.renew_delegation_token(token.hmac, 60_000, context=ADMIN)
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    _, key, value, headers = read_topic(kafka_bootstrap, state)[-1]
    event = decode_message(CODEC, key, value, headers).event
    assert (type(event), event.owner, event.expiry_timestamp_ms) == (DelegationTokenIssued, "User:etl", expiry)


def test_state_messages_record_their_history_position(store, store_dir, keyring, kafka_bootstrap, topics):
    """Each state message names the Kafka offset of the same event on the history topic."""
    store.create_acls([acl_created(i).event.binding for i in range(3)], context=ADMIN)
    history, state = topics("history"), topics("state")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    history_at = {message_offset(v, h): k for k, _, v, h in read_topic(kafka_bootstrap, history)}
    for _, _, value, headers in read_topic(kafka_bootstrap, state):
        assert history_position(value, headers) == history_at[message_offset(value, headers)]


def test_only_tombstones_carry_headers(store, store_dir, keyring, kafka_bootstrap, topics):
    """Message format 3: a history message carries its offset, request and batch link in its value's frame, a state
    message its offset, request and history position, and neither has a header; a tombstone (no value) its offset
    and history position as headers (format 2 gave each message three headers, which librdkafka copies one by
    one)."""
    from secmeta.core import AclBindingFilter

    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    store.delete_acls([AclBindingFilter.any()], context=ADMIN)
    history, state = topics("history"), topics("state")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    links = [batch.link for batch in store.log.batches()]
    assert [(h, message_link(v, h)) for *_, v, h in read_topic(kafka_bootstrap, history)] == [([], link) for link in links]
    assert [[n for n, _ in h] for *_, h in read_topic(kafka_bootstrap, state)] == \
        [[], [], ["secmeta.offset", "secmeta.history_offset"]]


class _AnotherWriterBetween:
    """The publisher's real producer; after each history message of ours is delivered (flushed), a second
    real producer writes one message to the same partition and flushes it: ours land at every other offset."""

    def __init__(self, producer: Producer, other: Producer, topic: str):
        self._producer, self._other, self._topic = producer, other, topic

    def produce(self, topic, *args, **kwargs):
        self._producer.produce(topic, *args, **kwargs)
        if topic == self._topic:
            self._producer.flush(30)
            self._other.produce(topic, value=b"not ours", partition=0)
            self._other.flush(30)

    def __getattr__(self, name):
        return getattr(self._producer, name)

    def __len__(self):
        return len(self._producer)


def test_history_positions_hold_when_another_producer_writes_between(store, store_dir, keyring, kafka_bootstrap,
                                                                      topics, monkeypatch):
    """Another writer's messages land among a chunk's history messages: each state message still names its own.

    The publisher reads the positions from delivery reports, which carry none of the
    event's identity; the idempotent producer appends in produce order, so the
    chunk's offsets in ascending order are its events' (librdkafka's
    enable.idempotence: "in the original produce order").  Positions assumed
    contiguous from a chunk's first offset would name the other writer's messages.
    """
    store.create_acls([acl_created(i).event.binding for i in range(30)], context=ADMIN)
    history, state = topics("history"), topics("state")
    other = Producer({"bootstrap.servers": kafka_bootstrap, "logger": logging.getLogger("tests.kafka")})
    monkeypatch.setattr(publisher_module, "Producer",
                        lambda config: _AnotherWriterBetween(Producer(config), other, history))
    publish(store_dir, keyring, kafka_bootstrap, history, state, chunk_size=10)
    messages = read_topic(kafka_bootstrap, history)
    assert [value == b"not ours" for _, _, value, _ in messages] == [True] + [False, True] * 30  # after the marker
    history_at = {message_offset(value, h): k for k, _, value, h in messages if value != b"not ours"}
    positions = [(message_offset(v, h), history_position(v, h)) for _, _, v, h in read_topic(kafka_bootstrap, state)]
    assert len(positions) == 30
    assert [at for _, at in positions] == [history_at[offset] for offset, _ in positions]


# -- checkpoints and restarts ----------------------------------------------------------------


def test_checkpoint_is_the_next_offset_after_delivery(store, store_dir, keyring, kafka_bootstrap, topics):
    """After publishing, the checkpoint file holds the log end."""
    store.create_acls([acl_created(i).event.binding for i in range(4)], context=ADMIN)
    publish(store_dir, keyring, kafka_bootstrap, topics("history"), topics("state"))
    assert json.loads((store_dir / "kafka-publisher.json").read_text())["next_offset"] == 4


def test_restart_publishes_only_what_is_new(store, store_dir, keyring, kafka_bootstrap, topics):
    """A second publisher resumes at the checkpoint: no event is sent twice."""
    history, state = topics("history"), topics("state")
    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    store.create_acls([acl_created(2).event.binding, acl_created(3).event.binding], context=ADMIN)
    assert publish(store_dir, keyring, kafka_bootstrap, history, state) == 2
    assert [message_offset(v, h) for *_, v, h in read_topic(kafka_bootstrap, history)] == [0, 1, 2]


def test_lag_is_log_end_minus_checkpoint(store, store_dir, keyring, kafka_bootstrap, topics):
    """Before publishing the lag is every logged event; after, none."""
    store.create_acls([acl_created(i).event.binding for i in range(5)], context=ADMIN)
    with Publisher(store_dir, keyring, kafka_bootstrap, history_topic=topics("h"), state_topic=topics("s")) as pub:
        before = pub.lag
        pub.publish_available(timeout=60)
        assert (before, pub.lag, pub.status().lag) == (5, 0, 0)


def test_chunks_are_checkpointed_one_by_one(store, store_dir, keyring, kafka_bootstrap, topics):
    """With small chunks every chunk ends in its own checkpoint, in order."""
    store.create_acls([acl_created(i).event.binding for i in range(10)], context=ADMIN)
    seen = []
    with Publisher(store_dir, keyring, kafka_bootstrap, history_topic=topics("h"), state_topic=topics("s"),
                   chunk_size=4, progress=lambda s: seen.append(s.checkpoint) if s.stage == "checkpointed" else None) as pub:
        pub.publish_available(timeout=60)
    assert seen == [4, 8, 10]


def test_checkpoint_of_other_topics_is_refused(store, store_dir, keyring, kafka_bootstrap, topics):
    """Resuming a checkpoint written for other topics would leave a gap: a clear error instead."""
    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    publish(store_dir, keyring, kafka_bootstrap, topics("h"), topics("s"))
    with pytest.raises(PublisherError, match="belongs to topics"):
        Publisher(store_dir, keyring, kafka_bootstrap, history_topic="other-h", state_topic="other-s")


def test_unreadable_checkpoint_is_a_clear_error(store, store_dir, keyring, kafka_bootstrap):
    """A corrupt checkpoint file is named in the error, not silently reset to zero."""
    (store_dir / "kafka-publisher.json").write_text("{not json")
    with pytest.raises(PublisherError, match="kafka-publisher.json is unreadable"):
        Publisher(store_dir, keyring, kafka_bootstrap)


_CHILD = textwrap.dedent("""
    import os, signal, sys
    from secmeta.consumers.kafka.publisher import Publisher
    from secmeta.events.keyring import Keyring

    store_dir, key_file, bootstrap, history, state, stage, chunk = sys.argv[1:8]
    seen = []

    def progress(status):
        if status.stage == stage:
            seen.append(status)
            if len(seen) == 2:  # the second chunk got this far: die without any cleanup
                os.kill(os.getpid(), signal.SIGKILL)

    pub = Publisher(store_dir, Keyring.from_file(key_file), bootstrap, history_topic=history,
                    state_topic=state, chunk_size=int(chunk), progress=progress)
    pub.publish_available(timeout=60)
    sys.exit(3)  # not reached: the publisher must be killed mid-stream
""")


@pytest.mark.parametrize("stage", ["history delivered", "state delivered"])
def test_killed_publisher_resumes_without_gap_or_visible_duplicate(
    stage, store, store_dir, keyring, clock, tmp_path, kafka_bootstrap, topics
):
    """SIGKILL mid-stream, restart: the follower sees every offset once and equals the store."""
    random_workload(store, seed=4, steps=50, clock=clock)
    history, state = topics("history"), topics("state")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(store_dir), str(tmp_path / "keys.json"), kafka_bootstrap,
         history, state, stage, "20"], cwd=REPO, env=env, capture_output=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
    assert json.loads((store_dir / "kafka-publisher.json").read_text())["next_offset"] == 20

    publish(store_dir, keyring, kafka_bootstrap, history, state)
    offsets = [message_offset(v, h) for *_, v, h in read_topic(kafka_bootstrap, history)]
    assert len(offsets) > store.log.end_offset  # the killed chunk was re-sent
    assert sorted(set(offsets)) == list(range(store.log.end_offset))
    with Follower(kafka_bootstrap, history_topic=history, checkpoint_dir=tmp_path / "f") as follower:
        assert follower.catch_up(60)
        assert image_state(follower.image) == image_state(store.image)
        assert (follower.duplicates, follower.gaps) == (len(offsets) - store.log.end_offset, 0)


# -- outages and topics --------------------------------------------------------------------


def test_unreachable_broker_is_reported_and_retried_without_raising(store, store_dir, keyring, topics):
    """With nobody listening, run() reports 'broker unreachable', keeps trying, and stops cleanly."""
    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    reported, stop, failures = threading.Event(), threading.Event(), []
    statuses = []

    def progress(status):
        statuses.append(status)
        if status.stage == "broker unreachable" and len([s for s in statuses if s.stage == status.stage]) >= 2:
            reported.set()

    pub = Publisher(store_dir, keyring, f"127.0.0.1:{unused_port()}", metadata_timeout=0.5, max_backoff=0.2)

    def run():
        try:
            pub.run(stop, progress)
        except BaseException as exc:  # noqa: BLE001 - the test asserts there is none
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert reported.wait(60), [str(s) for s in statuses]
    finally:
        stop.set()
        thread.join(60)
        pub.close()
    assert not thread.is_alive() and failures == []
    assert (statuses[-1].stage, statuses[-1].checkpoint, statuses[-1].lag) == ("stopped", 0, 1)


def test_publishes_once_pointed_at_a_live_cluster(store, store_dir, keyring, kafka_bootstrap, topics):
    """After failing to reach a dead address, the same store publishes everything to a live cluster."""
    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    with Publisher(store_dir, keyring, f"127.0.0.1:{unused_port()}", metadata_timeout=0.3) as dead:
        assert dead.publish_available(timeout=1.0) == 0
    history = topics("history")
    assert publish(store_dir, keyring, kafka_bootstrap, history, topics("state")) == 1
    assert len(read_topic(kafka_bootstrap, history)) == 1


def test_missing_topic_is_created(store, store_dir, keyring, kafka_bootstrap, topics):
    """Topics that do not exist yet are created before the first event is sent."""
    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    history, state = topics("fresh-h"), topics("fresh-s")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    assert len(read_topic(kafka_bootstrap, state)) == 1


def test_missing_topic_without_creation_is_a_clear_error(store, store_dir, keyring, kafka_bootstrap, topics):
    """With topic creation disabled, a missing topic raises TopicError naming it."""
    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    history = topics("absent")
    with pytest.raises(TopicError, match=f"{history}.*creation is disabled"):
        publish(store_dir, keyring, kafka_bootstrap, history, topics("absent-s"), create_topics=False)


def test_same_topic_for_history_and_state_is_refused(store, store_dir, keyring, kafka_bootstrap):
    """History and state must be two topics."""
    with pytest.raises(PublisherError, match="must differ"):
        Publisher(store_dir, keyring, kafka_bootstrap, history_topic="x", state_topic="x")


# -- client settings --------------------------------------------------------------------------


def test_idempotence_cannot_be_turned_off(store, store_dir, keyring, kafka_bootstrap):
    """A client config with enable.idempotence=false is refused."""
    with pytest.raises(ClientConfigError, match="enable.idempotence"):
        Publisher(store_dir, keyring, kafka_bootstrap, client_config={"enable.idempotence": "false"})


def test_acks_minus_one_is_accepted_as_all(store, store_dir, keyring, kafka_bootstrap, topics):
    """acks=-1 is acks=all (Kafka's ProducerConfig, ACKS_DOC: "all ... equivalent to acks=-1"): the publisher
    takes it and publishes every event, while acks=1 (weaker than the publisher needs) is refused."""
    store.create_acls([acl_created(i).event.binding for i in range(3)], context=ADMIN)
    history, state = topics("history"), topics("state")
    assert publish(store_dir, keyring, kafka_bootstrap, history, state, client_config={"acks": "-1"}) == 3
    assert [message_offset(v, h) for _, _, v, h in read_topic(kafka_bootstrap, history)] == [0, 1, 2]
    with pytest.raises(ClientConfigError, match="client setting acks=1 is not allowed here: it must be all"):
        Publisher(store_dir, keyring, kafka_bootstrap, client_config={"acks": "1"})


def test_unreachable_broker_is_logged(store, store_dir, keyring, caplog):
    """The outage also reaches the log: a warning naming the address."""
    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    address = f"127.0.0.1:{unused_port()}"
    with caplog.at_level("WARNING", logger="secmeta.kafka.publisher"):
        with Publisher(store_dir, keyring, address, metadata_timeout=0.3) as pub:
            pub.publish_available(timeout=1.0)
    assert any("broker unreachable" in r.getMessage() and address in r.getMessage() for r in caplog.records)


def test_run_publishes_events_as_they_are_logged(store, store_dir, keyring, kafka_bootstrap, topics):
    """run() tails the log: an event logged while it runs is published and checkpointed."""
    stop, reached = threading.Event(), threading.Event()
    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    first_idle = threading.Event()

    def progress(status):
        if status.stage == "idle":
            first_idle.set()
        if status.stage == "checkpointed" and status.checkpoint == 2:
            reached.set()

    pub = Publisher(store_dir, keyring, kafka_bootstrap, history_topic=topics("h"), state_topic=topics("s"))
    thread = threading.Thread(target=pub.run, args=(stop, progress))
    thread.start()
    try:
        assert first_idle.wait(60)
        store.create_acls([acl_created(2).event.binding], context=ADMIN)
        assert reached.wait(60)
    finally:
        stop.set()
        thread.join(60)
        pub.close()
    assert pub.checkpoint == 2


def test_a_failed_state_message_fails_the_chunk(store, store_dir, keyring, kafka_bootstrap):
    """A state message's delivery report is taken by a C-level callback (no Python call a message): a failure among
    them still fails the chunk, naming the error, so it is sent again rather than checkpointed."""
    from confluent_kafka import KafkaError

    from secmeta.consumers.kafka.publisher import _Chunk

    chunk = _Chunk()
    chunk.state_callback(None, object())
    chunk.state_callback(KafkaError(KafkaError._MSG_TIMED_OUT), object())
    with Publisher(store_dir, keyring, kafka_bootstrap) as publisher:
        producer = Producer({"bootstrap.servers": kafka_bootstrap})
        assert publisher._await(chunk, producer, None, None) is False
    assert chunk.errors == ["Local: Message timed out"]


# -- the format marker ------------------------------------------------------------------------------------------


def test_the_format_marker_comes_before_the_first_format_3_message_on_each_topic_and_after_each_start(
        store, store_dir, keyring, kafka_bootstrap, topics):
    """Review 27, 1.1: a secmeta from before format 3 skips format 3's values as another writer's; the marker a
    publisher writes first on each topic stops it (``test_wire``). A publisher starting on topics whose newest
    message is a format 3 one writes it again (retention may have deleted the one before it: the next test); one
    whose newest message is the marker writes no other."""
    store.create_acls([acl_created(i).event.binding for i in range(3)], context=ADMIN)
    history, state = topics("history"), topics("state")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    store.create_acls([acl_created(i).event.binding for i in range(3, 5)], context=ADMIN)
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    publish(store_dir, keyring, kafka_bootstrap, history, state)  # nothing to publish; its newest is an event: a marker
    publish(store_dir, keyring, kafka_bootstrap, history, state)  # its newest is the marker: nothing written
    for topic in (history, state):
        messages = read_topic(kafka_bootstrap, topic, markers=True)
        assert [is_format_marker(key, value, headers) for _, key, value, headers in messages] == \
            [True] + [False] * 3 + [True] + [False] * 2 + [True]
        assert messages[0][0] == 0


def test_a_topic_end_names_the_marker_only_when_it_is_the_newest_marker_or_event_with_a_value(
        store, kafka_bootstrap, topics):
    """What a topic's end says about the marker: where it is when it is the newest marker or event with a value,
    behind a tombstone or not; none (the publisher writes one) on an empty topic, after a format 2 value, or after a
    format 3 one (retention may have deleted any marker before it)."""
    from confluent_kafka import Consumer

    envelopes = [dataclasses.replace(acl_created(i), offset=i) for i in range(3)]
    older = [format2_message(CODEC, env) for env in envelopes]
    newer = [message_encoder(CODEC)(env) for env in envelopes]
    tombstone = (newer[0][0], None, [("secmeta.offset", b"3")])
    # name: messages, the marker's Kafka offset, the newest log offset the end names
    cases = {"empty": ([], None, -1), "format 2": (older, None, 2),
             "marker": ([*older, format_marker()], 3, 2),
             "marker then format 2": ([format_marker(), *older], None, 2),
             "format 3 and a tombstone": ([*older, *newer, tombstone], None, 3),
             "marker, format 3, tombstone": ([*older, format_marker(), *newer, tombstone], None, 3),
             "format 3, marker, tombstone": ([*older, *newer, format_marker(), tombstone], 6, 3)}
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "marked", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 10,
                         "logger": logging.getLogger("tests.kafka")})
    try:
        for name, (messages, marker, last) in cases.items():
            topic = topics("marked")
            make_topics(kafka_bootstrap, topic)
            if messages:
                produce_raw(kafka_bootstrap, topic, messages)
            end = read_topic_end(consumer, topic, message_decoder(CODEC), timeout=30)
            assert (name, end.marker, end.last_offset) == (name, marker, last)
    finally:
        consumer.close()


# -- the bytes on the wire ----------------------------------------------------------------------------------------

# 176 (B0) bytes
_REQUEST = (b'{"format":3,"timestamp_ms":1800000000000,"actor_principal":"User:admin","actor_host":"10.0.0.1",'
            b'"request_id":"req-1","actor_asserted":true,"operator":["op","box",42,"secmeta"]}')
# ClientQuotaAltered(user alice, producer_byte_rate 1024.0) in Avro single-object encoding: C3 01, its schema's
# fingerprint, the body: the entity and the key (zigzag lengths 10 and 18), the value's union branch 1 (double)
# and 1024.0 as a little-endian double
_EVENT = (b"\xc3\x01" + bytes.fromhex("18e47b7c76f4ec6b") + b"\x14user=alice" + b"\x24producer_byte_rate" + b"\x02"
          + bytes.fromhex("0000000000009040"))


def test_the_published_values_are_the_documented_frames_byte_for_byte(store, store_dir, keyring, kafka_bootstrap,
                                                                    topics, monkeypatch):
    """Review 27, section 3: the values, spelled out from the layout the README documents (magic 00 53 4D, version,
    kind, the request's length (4 bytes) and the extra's (1), the request, the extra, the log offset (8), the event),
    rather than taken from the encoder under test. The operator is fixed (it holds the process's pid)."""
    from secmeta.core import ClientQuotaAlteration, ClientQuotaOp
    from secmeta.core.store import facade
    from secmeta.core.types import RequestContext
    from secmeta.events.records import Operator

    monkeypatch.setattr(facade, "local_operator", lambda: Operator("op", "box", 42, "secmeta"))
    store.alter_client_quotas([ClientQuotaAlteration({"user": "alice"}, (ClientQuotaOp("producer_byte_rate", 1024),))],
                              context=RequestContext("User:admin", "10.0.0.1", request_id="req-1"))
    history, state = topics("history"), topics("state")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    [(history_at, _, history_value, no_headers)] = read_topic(kafka_bootstrap, history)
    [(_, _, state_value, _)] = read_topic(kafka_bootstrap, state)
    (link,) = [batch.link for batch in store.log.batches()]  # the log's (keyed: it differs each run)
    assert history_value == (b"\x00SM" b"\x03" b"H" b"\x00\x00\x00\xb0" b"\x20" + _REQUEST + link
                             + b"\x00" * 8 + _EVENT)
    assert history_at == 1  # after the format marker
    assert state_value == (b"\x00SM" b"\x03" b"S" b"\x00\x00\x00\xb0" b"\x08" + _REQUEST
                           + b"\x00\x00\x00\x00\x00\x00\x00\x01" + b"\x00" * 8 + _EVENT)
    assert no_headers == []


def _age_out(bootstrap: str, topic: str) -> None:
    """Another writer's 6 MB on the topic: the mock cluster keeps 5 MB a partition and drops its oldest batches past
    that (as size retention does: the low watermark moves past them), so the messages before these go."""
    produce_raw(bootstrap, topic, [(None, b"x" * 100_000, []) for _ in range(60)])


@pytest.mark.parametrize("route", ["running", "restart"])
def test_a_marker_aged_out_is_written_again_so_a_reader_from_before_format_3_still_stops(
        route, store, store_dir, keyring, kafka_bootstrap, topics):
    """Retention can delete the history topic's format marker (the state topic keeps its key), and a secmeta from
    before format 3 reading from the earliest offset then skips every format 3 value and stops on nothing. A
    running publisher whose topic's earliest offset passed its newest marker writes one before its next message;
    a publisher starting on a topic whose newest message is not the marker writes one first. Read here as that
    reader reads (``format2_reader_verdict``), it stops before the events published after the marker aged out."""
    from tests.consumers.conftest import format2_reader_verdict

    history, state = topics("history"), topics("state")
    bindings = [acl_created(i).event.binding for i in range(9)]
    store.create_acls(bindings[:3], context=ADMIN)
    # "running": one publisher throughout, checking at every chunk; "restart": the first never checks again (as
    # one whose interval has not passed), and a second one starts after the marker aged out
    first = Publisher(store_dir, keyring, kafka_bootstrap, history_topic=history, state_topic=state,
                      marker_check_interval=0 if route == "running" else 1e9)
    try:
        assert first.publish_available(timeout=60) == 3
        _age_out(kafka_bootstrap, history)
        assert not any(is_format_marker(k, v, h) for _, k, v, h in read_topic(kafka_bootstrap, history, markers=True))
        store.create_acls(bindings[3:6], context=ADMIN)
        assert first.publish_available(timeout=60) == 3
    finally:
        first.close()
    store.create_acls(bindings[6:], context=ADMIN)
    assert publish(store_dir, keyring, kafka_bootstrap, history, state) == 3
    messages = read_topic(kafka_bootstrap, history, markers=True)
    verdicts = [format2_reader_verdict(CODEC, key, value, headers) for _, key, value, headers in messages]
    assert all(verdict.startswith(("NotOurMessage", "UnknownFormat")) for verdict in verdicts)  # no format 2 here
    events_at = [i for i, (_, key, value, headers) in enumerate(messages)
                 if value != b"x" * 100_000 and not is_format_marker(key, value, headers)]
    assert len(events_at) == 6  # the first three went with the marker
    stops = [i for i, verdict in enumerate(verdicts) if verdict.startswith("UnknownFormat")]
    # it stops before the first events published after the marker aged out (running) or the second publisher's
    assert stops and stops[0] < events_at[0 if route == "running" else 3], verdicts


def test_an_idle_publisher_writes_an_aged_out_marker_again(store, store_dir, keyring, kafka_bootstrap, topics):
    """A running publisher with nothing to publish still looks (every ``marker_check_interval``): once retention
    deleted the history topic's marker, it writes one, so a reader from before format 3 starting at the earliest
    offset stops even though no event follows."""
    from tests.consumers.conftest import format2_reader_verdict
    from tests.waiting import wait_for

    history, state = topics("history"), topics("state")
    store.create_acls([acl_created(i).event.binding for i in range(3)], context=ADMIN)
    stop = threading.Event()
    with Publisher(store_dir, keyring, kafka_bootstrap, history_topic=history, state_topic=state,
                   marker_check_interval=0.2) as pub:
        assert pub.publish_available(timeout=60) == 3
        _age_out(kafka_bootstrap, history)
        runner = threading.Thread(target=pub.run, args=(stop,), kwargs={"poll_interval": 0.05})
        runner.start()
        try:
            def stops() -> bool:
                messages = read_topic(kafka_bootstrap, history, markers=True)
                return any(format2_reader_verdict(CODEC, k, v, h).startswith("UnknownFormat")
                           for _, k, v, h in messages)
            wait_for(stops, timeout=30, what="a marker after the aged-out one")
        finally:
            stop.set()
            runner.join(30)
    assert pub.checkpoint == 3  # nothing else was published


def _event_offsets(bootstrap: str, topic: str) -> list[int]:
    """The log offsets of the secmeta events on the topic (other writers' messages passed over)."""
    return [message_offset(value, headers) for _, key, value, headers in read_topic(bootstrap, topic)
            if value is not None and value != b"x" * 100_000]


def test_a_publisher_restarting_on_a_history_topic_retention_emptied_resumes_from_its_checkpoint(
        store, store_dir, keyring, kafka_bootstrap, topics, caplog):
    """Stopped longer than the retention period: every event it published to the history topic is deleted, the
    earliest offset past them. The topic is the recorded cluster's and its earliest offset is past the last message
    the checkpoint says was published, so it is the same topic, emptied: the publisher resumes where it stopped
    (no TopicChangedError naming another topic, no republishing of the whole log), and says so."""
    history, state = topics("history"), topics("state")
    store.create_acls([acl_created(i).event.binding for i in range(3)], context=ADMIN)
    assert publish(store_dir, keyring, kafka_bootstrap, history, state) == 3
    _age_out(kafka_bootstrap, history)
    assert _event_offsets(kafka_bootstrap, history) == []
    store.create_acls([acl_created(i).event.binding for i in range(3, 5)], context=ADMIN)
    with caplog.at_level(logging.WARNING, logger="secmeta.kafka.publisher"):
        assert publish(store_dir, keyring, kafka_bootstrap, history, state) == 2
    assert _event_offsets(kafka_bootstrap, history) == [3, 4]
    assert _event_offsets(kafka_bootstrap, state) == [0, 1, 2, 3, 4]
    assert any("retention deleted them" in r.getMessage() and history in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("recorded", ["unrecorded", "not passed"])
def test_an_emptied_history_topic_not_shown_to_be_the_same_is_refused_naming_its_offsets(
        recorded, store, store_dir, keyring, kafka_bootstrap, topics):
    """The earliest offset having moved proves nothing unless it moved past the last message the checkpoint
    recorded (a checkpoint written before it recorded one, or one whose message is past the earliest offset, e.g.
    a topic emptied and refilled by other means): refused, naming the earliest and latest Kafka offsets seen and
    the one expected, and nothing is published."""
    from secmeta.consumers.kafka.publisher import TopicChangedError

    history, state = topics("history"), topics("state")
    store.create_acls([acl_created(i).event.binding for i in range(3)], context=ADMIN)
    assert publish(store_dir, keyring, kafka_bootstrap, history, state) == 3
    _age_out(kafka_bootstrap, history)
    held = read_topic(kafka_bootstrap, history, markers=True)
    low, high = held[0][0], held[-1][0] + 1
    path = store_dir / "kafka-publisher.json"
    data = json.loads(path.read_text())
    if recorded == "unrecorded":
        del data["history_kafka_end"]
    else:
        data["history_kafka_end"] = high + 1
    path.write_text(json.dumps(data))
    store.create_acls([acl_created(3).event.binding], context=ADMIN)
    with pytest.raises(TopicChangedError) as refused:
        publish(store_dir, keyring, kafka_bootstrap, history, state)
    text = str(refused.value)
    assert f"topic {history} holds no secmeta event (Kafka offsets {low}..{high})" in text
    expected = "(not recorded)" if recorded == "unrecorded" else str(high + 1)
    assert f"the last message published to it was before Kafka offset {expected}" in text
    assert "Nothing was published" in text
    assert _event_offsets(kafka_bootstrap, history) == []
    assert json.loads(path.read_text()).get("next_offset") == 3
