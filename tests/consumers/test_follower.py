"""The follower against librdkafka's mock cluster: same image as the store, duplicates, dead letters, restarts."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message
from hypothesis import given, settings
from hypothesis import strategies as st

from scripts.bench import shapes
from secmeta.consumers.kafka.follower import Follower, FollowerError, HistoryGapError
from secmeta.consumers.kafka.publisher import Publisher
from secmeta.consumers.kafka.wire import HEADER_FINGERPRINT, encode_message, message_encoder
from secmeta.core import AclOperation, ClientQuotaAlteration, ClientQuotaOp, ResourceType
from secmeta.core.snapshots import forked_snapshot
from secmeta.core.store.view import StoreView
from secmeta.events.codec import EventCodec
from secmeta.events.records import Envelope
from secmeta.projections.snapshot import partial_snapshot_path
from tests.consumers.conftest import (
    ADMIN,
    described,
    format1_message,
    format2_message,
    image_state,
    make_topics,
    produce_raw,
    random_workload,
    read_topic,
)
from tests.gckit import collections_seen
from tests.logkit import acl_created
from tests.projections.test_shape_properties import replayed as shape_replayed

CODEC = EventCodec()
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def published(store_dir, keyring, kafka_bootstrap, topics):
    """publish(): mirror everything logged so far to this test's two topics; returns (history, state)."""
    names = (topics("history"), topics("state"))
    publishers = []

    def publish() -> tuple[str, str]:
        if not publishers:
            publishers.append(Publisher(store_dir, keyring, kafka_bootstrap, history_topic=names[0],
                                        state_topic=names[1]))
        publishers[0].publish_available(timeout=60)
        return names

    yield publish
    for publisher in publishers:
        publisher.close()


@pytest.fixture
def follow(kafka_bootstrap, tmp_path):
    """follow(history, state, name="f", **kw): a Follower with its own checkpoint directory, closed at the end."""
    opened = []

    def make(history: str, state: str, name: str = "f", **kwargs) -> Follower:
        follower = Follower(kafka_bootstrap, history_topic=history, state_topic=state,
                            checkpoint_dir=tmp_path / name, **kwargs)
        opened.append(follower)
        return follower

    yield make
    for follower in opened:
        follower.close()


def store_view(store):
    return StoreView(store.image, store.config)


@pytest.mark.parametrize("seed", [11, 12, 13, 14, 15])
def test_follower_image_equals_the_store_image(seed, store, clock, published, follow):
    """After a random workload, the follower holds the same credentials, ACLs and tokens at the same offset."""
    random_workload(store, seed=seed, steps=60, clock=clock)
    follower = follow(*published())
    assert follower.catch_up(60)
    assert image_state(follower.image) == image_state(store.image)


def test_follower_describes_like_the_store(store, clock, published, follow):
    """describe_acls, describe_user_scram_credentials and describe_delegation_tokens agree with the store.

    The follower's view gets the store's config (with its token secret): without one, describing
    tokens answers DELEGATION_TOKEN_AUTH_DISABLED, as Kafka does.
    """
    random_workload(store, seed=22, steps=60, clock=clock)  # seed 22 ends with live tokens
    follower = follow(*published())
    follower.catch_up(60)
    acls, scram, tokens = described(follower.view(store.config))
    assert tokens, "the workload issued tokens, so describe must list some"
    assert (acls, scram, tokens) == described(store_view(store))


def test_follower_authorizes_like_the_store(store, clock, published, follow):
    """authorize and authorized_operations give the store's answers for every user and topic."""
    random_workload(store, seed=22, steps=60, clock=clock)
    follower = follow(*published())
    follower.catch_up(60)
    view, expected = follower.view(), store_view(store)
    for user in (f"User:user{i}" for i in range(6)):
        for topic in (f"topic-{i}" for i in range(8)):
            assert view.authorized_operations(user, "10.0.0.2", ResourceType.TOPIC, topic) == \
                expected.authorized_operations(user, "10.0.0.2", ResourceType.TOPIC, topic)
            assert view.authorize(user, "10.0.0.2", AclOperation.WRITE, ResourceType.TOPIC, topic) == \
                expected.authorize(user, "10.0.0.2", AclOperation.WRITE, ResourceType.TOPIC, topic)


def test_follower_keeps_up_with_new_events(store, published, follow):
    """Events published after the follower caught up reach it on the next catch_up."""
    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    follower = follow(*published())
    follower.catch_up(60)
    store.create_acls([acl_created(2).event.binding], context=ADMIN)
    published()
    assert follower.catch_up(60) and image_state(follower.image) == image_state(store.image)


def test_no_cyclic_collection_runs_while_a_batch_is_taken(store, published, follow):
    """The collector stays paused from the fetch to the image: a batch's messages would otherwise set off
    collections that rescan the whole image (the follower's rate at 1M events was bound by them)."""
    store.create_acls([acl_created(i).event.binding for i in range(1, 3001)], context=ADMIN)
    follower = follow(*published())
    assert follower._check_topic(10)
    with collections_seen() as collections:
        assert follower.catch_up(60)
    assert image_state(follower.image) == image_state(store.image)
    assert collections == []


def test_a_history_of_message_format_1_is_followed_and_a_publisher_goes_on_in_format_2(
        store, store_dir, keyring, clock, kafka_bootstrap, topics, follow, tmp_path):
    """A history topic published before message format 2 (one header per field, the batch links included)
    still reads: the follower rebuilds the store's image from it, and goes on through the format-2 messages
    a publisher of this version sends to the same topic after it (re-sent events are duplicates)."""
    random_workload(store, seed=11, steps=40, clock=clock)
    links = {offset: batch.link.hex().encode() for batch in store.log.batches()
             for offset in range(batch.base_offset, batch.next_offset)}
    old_history, old_state = topics("history"), topics("state")
    make_topics(kafka_bootstrap, old_history, old_state)
    produce_raw(kafka_bootstrap, old_history,
                [format1_message(CODEC, env, link=links[env.offset]) for env in store.log.read()])
    follower = follow(old_history, old_state)
    assert follower.catch_up(60)
    assert image_state(follower.image) == image_state(store.image)
    random_workload(store, seed=12, steps=20, clock=clock)
    with Publisher(store_dir, keyring, kafka_bootstrap, history_topic=old_history, state_topic=old_state,
                   checkpoint_path=tmp_path / "publisher.json") as publisher:
        publisher.publish_available(timeout=60)
    assert follower.catch_up(60) and follower.duplicates > 0
    assert image_state(follower.image) == image_state(store.image)


def test_duplicates_are_ignored_by_offset(store, kafka_bootstrap, published, follow):
    """Re-sent events (same secmeta.offset) are counted as duplicates and change nothing."""
    store.create_acls([acl_created(i).event.binding for i in range(3)], context=ADMIN)
    history, state = published()
    produce_raw(kafka_bootstrap, history, [encode_message(CODEC, env) for env in store.log.read(1, 3)])
    follower = follow(history, state)
    assert follower.catch_up(60)
    assert (follower.duplicates, follower.applied_offset) == (2, 2)
    assert image_state(follower.image) == image_state(store.image)


# -- messages that are not ours --------------------------------------------------------------


def _bad_messages(store):
    """Four broken copies of a real message (an ACL's creation): wrong marker, unknown fingerprint, truncated body,
    the key of another ACL."""
    key, value, headers = format2_message(CODEC, next(iter(store.log.read(0, 1))))
    bogus = [(n, (b"00" * 8) if n == HEADER_FINGERPRINT else v) for n, v in headers]
    return [
        (key, b"\x00\x01" + value[2:], headers),
        (key, value[:2] + bytes(8) + value[10:], bogus),
        (key, value[:12], headers),
        (b"acl:someone-else", value, headers),
    ]


@pytest.fixture
def poisoned(store, kafka_bootstrap, published):
    """A history topic: the format marker, event 0, four messages that are not ours, then events 1 and 2."""
    store.create_acls([acl_created(0).event.binding], context=ADMIN)
    history, state = published()
    produce_raw(kafka_bootstrap, history, _bad_messages(store))
    store.create_acls([acl_created(1).event.binding, acl_created(2).event.binding], context=ADMIN)
    published()
    return history, state


# A follower without a local log reads each event as a replay takes it (an ACL's creation as its row), one with a
# local log reads envelopes: both routes refuse the same messages alike.
_LOCAL_LOG = pytest.mark.parametrize("local_log", [False, True], ids=["rows", "local-log"])


@_LOCAL_LOG
def test_not_ours_messages_are_counted_and_skipped(store, poisoned, follow, keyring, local_log):
    """The follower skips the four bad messages, counts them, and still applies what follows."""
    follower = follow(*poisoned, keyring=keyring if local_log else None)
    assert follower.catch_up(60)
    assert (follower.skipped, follower.applied_offset) == (4, 2)
    assert image_state(follower.image) == image_state(store.image)


@_LOCAL_LOG
def test_not_ours_messages_land_in_the_dead_letter_file(poisoned, follow, tmp_path, keyring, local_log):
    """Each bad message is one JSON line with its reason, topic, partition and Kafka offset."""
    follower = follow(*poisoned, keyring=keyring if local_log else None)
    follower.catch_up(60)
    records = [json.loads(line) for line in (tmp_path / "f" / "dead-letter.jsonl").read_text().splitlines()]
    assert [(r["topic"], r["partition"], r["kafka_offset"]) for r in records] == [(poisoned[0], 0, k) for k in (2, 3, 4, 5)]
    reasons = [r["reason"] for r in records]
    assert [reason.partition(": ")[0] for reason in reasons] == [f"{poisoned[0]}[0]@{k}" for k in (2, 3, 4, 5)]
    reasons = [reason.partition(": ")[2] for reason in reasons]
    assert "marker" in reasons[0] and "unknown schema fingerprint" in reasons[1] and "truncated" in reasons[2]
    assert reasons[3].startswith("key b'acl:someone-else' is not the event's entity key")


def test_a_follower_with_a_local_log_keeps_each_events_batch_link_and_refuses_a_broken_one(
        kafka_bootstrap, topics, follow, keyring, tmp_path):
    """The link of an event's store batch, read with the event: two store batches of one request (the same request,
    two links) stay two batches in the local log; a history frame whose link is of another length than 0 or 32 bytes
    is refused (dead-lettered), and the next event applied; the checkpoint records the last event's link, and a
    checkpoint holding the earlier batch's link there is refused at restart."""
    from secmeta.core.log import Log

    first, second = b"\x01" * 32, b"\x02" * 32
    encode = message_encoder(CODEC)
    request = [Envelope(i, 1_700_000_000_000, "User:admin", "10.0.0.1", "r0", acl_created(i).event) for i in range(4)]
    history = topics("history")
    produce_raw(kafka_bootstrap, history, [
        encode(request[0], link=first), encode(request[1], link=first), encode(request[2], link=b"\x03" * 5),
        encode(request[2], link=second), encode(request[3], link=second)])
    follower = follow(history, topics("state"), keyring=keyring)
    assert follower.catch_up(60)
    follower.close()
    assert (follower.skipped, follower.applied_offset) == (1, 3)
    (dead,) = (tmp_path / "f" / "dead-letter.jsonl").read_text().splitlines()
    assert (json.loads(dead)["kafka_offset"], json.loads(dead)["reason"]) == (
        2, f"{history}[0]@2: history frame whose link is 5 bytes, not 0 or 32")
    with Log.open(tmp_path / "f" / "store", keyring=keyring, read_only=True) as log:
        assert [[env.offset for env in log.decode(batch)] for batch in log.batches()] == [[0, 1], [2, 3]]
    path = tmp_path / "f" / "follower.json"
    checkpoint = json.loads(path.read_text())
    assert (checkpoint["applied_at"], checkpoint["applied_link"]) == (4, second.hex())
    path.write_text(json.dumps({**checkpoint, "applied_link": first.hex()}))
    with pytest.raises(FollowerError, match="diverges from its topic: it applied log offset 3 from Kafka offset 4, "
                                            "but the topic holds log offset 3 there with another chain link"):
        follow(history, topics("state"), name="f", keyring=keyring).catch_up(60)


@_LOCAL_LOG
def test_a_corrupt_body_gives_the_same_dead_letter_reason_every_time(kafka_bootstrap, topics, follow, keyring,
                                                                    local_log):
    """A ClientQuotaAltered whose body ends early (its double cut short): fastavro's error names the stream by its
    repr, with a memory address. The reason names the message (topic, partition, Kafka offset), the event type and
    the error's class and text, no object repr: two followers reading it write the same reason."""
    from secmeta.events.records import ClientQuotaAltered

    key, value, headers = message_encoder(CODEC)(
        Envelope(0, 1_700_000_000_000, "User:admin", "10.0.0.1", "r0",
                 ClientQuotaAltered("user=alice", "producer_byte_rate", 1024.0)))
    history = topics("history")
    produce_raw(kafka_bootstrap, history, [(key, value[:-3], headers or [])])
    reasons = []
    for name in ("one", "two"):
        follower = follow(history, topics("state"), name=name, keyring=keyring if local_log else None)
        follower.catch_up(60)
        assert follower.skipped == 1
        (dead,) = follower.dead_letter_path.read_text().splitlines()
        reasons.append(json.loads(dead)["reason"])
    assert reasons[0] == reasons[1]
    assert reasons[0].startswith(f"{history}[0]@0: ")
    assert "ClientQuotaAltered body does not decode: EOFError: " in reasons[0]
    assert "0x" not in reasons[0] and "object at" not in reasons[0]


def test_dead_letters_keep_the_raw_message(store, poisoned, follow, tmp_path):
    """The dead-letter record holds the message's bytes, so nothing is silently lost."""
    import base64

    follower = follow(*poisoned)
    follower.catch_up(60)
    first = json.loads((tmp_path / "f" / "dead-letter.jsonl").read_text().splitlines()[0])
    assert base64.b64decode(first["value_b64"]) == _bad_messages(store)[0][1]


# -- checkpoints and restarts ----------------------------------------------------------------


def test_restart_resumes_from_the_checkpoint(store, clock, published, follow):
    """A restarted follower loads its checkpoint and replays only the events published since."""
    random_workload(store, seed=31, steps=40, clock=clock)
    history, state = published()
    first = follow(history, state)
    first.catch_up(60)
    at = first.applied_offset
    first.close()
    store.create_acls([acl_created(99).event.binding], context=ADMIN)
    published()
    second = follow(history, state)
    assert second.resumed_from == at + 1
    assert second.catch_up(60) and second.applied == 1
    assert image_state(second.image) == image_state(store.image)


def test_checkpoint_every_n_events(store, published, follow, tmp_path):
    """With checkpoint_every=N the checkpoint file advances while following, before close (once its snapshot,
    written in the background, is whole)."""
    store.create_acls([acl_created(i).event.binding for i in range(10)], context=ADMIN)
    follower = follow(*published(), checkpoint_every=8, max_batch=5)
    follower.catch_up(60)
    follower.wait_for_checkpoint()
    saved = json.loads((tmp_path / "f" / "follower.json").read_text())
    # after the second batch of five messages (the first holds the format marker and four events)
    assert saved["next_offset"] == 9 and saved["position"] == 10


def test_a_checkpoint_waits_for_four_events_per_entity_its_image_held(store, published, follow, tmp_path):
    """A checkpoint writes the whole image: once that holds more than a quarter of checkpoint_every entities, the
    next one waits for four events per entity it held (20 ACLs: no checkpoint 75 events on, one 80 events on)."""
    def saved() -> int:
        follower.wait_for_checkpoint()
        return json.loads((tmp_path / "f" / "follower.json").read_text())["next_offset"]

    store.create_acls([acl_created(i).event.binding for i in range(20)], context=ADMIN)
    follower = follow(*published(), checkpoint_every=20, max_batch=5)
    assert follower.catch_up(60) and saved() == 20
    store.create_acls([acl_created(i).event.binding for i in range(20, 95)], context=ADMIN)
    published()
    assert follower.catch_up(60) and follower.next_offset == 95 and saved() == 20
    store.create_acls([acl_created(i).event.binding for i in range(95, 100)], context=ADMIN)
    published()
    assert follower.catch_up(60) and saved() == 100


def _disk_full(directory, codec, state, *, next_offset, **kwargs):
    """A snapshot writer (in the forked child) that leaves half a file and fails as a full disk does."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    partial_snapshot_path(Path(directory), next_offset).write_bytes(b"half a snapshot")
    raise OSError(28, "No space left on device")


def test_a_checkpoint_whose_snapshot_fails_is_not_recorded_and_is_retried(store, published, follow, tmp_path,
                                                                           monkeypatch, caplog):
    """A checkpoint's snapshot is written by a forked child; one that fails leaves the checkpoint where it was (here:
    none), is logged naming the failure, and the next batch tries again, which is recorded once a child succeeds."""
    store.create_acls([acl_created(i).event.binding for i in range(10)], context=ADMIN)
    follower = follow(*published(), checkpoint_every=4, max_batch=5)
    monkeypatch.setattr(forked_snapshot, "write_snapshot", _disk_full)
    assert follower.catch_up(60)
    follower.wait_for_checkpoint()
    assert not (tmp_path / "f" / "follower.json").exists()
    assert [p.name for p in (tmp_path / "f" / "snapshots").iterdir()] == []
    assert "was not written" in caplog.text and "No space left on device" in caplog.text
    monkeypatch.undo()
    store.create_acls([acl_created(10).event.binding], context=ADMIN)
    published()
    assert follower.catch_up(60)
    follower.wait_for_checkpoint()
    saved = json.loads((tmp_path / "f" / "follower.json").read_text())
    assert (saved["next_offset"], saved["position"]) == (11, 12)


_KILLED = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    from secmeta.consumers.kafka import follower as follower_module
    from secmeta.consumers.kafka.follower import Follower
    from secmeta.core.snapshots import forked_snapshot
    from secmeta.projections.snapshot import partial_snapshot_path

    bootstrap, history, state, directory, step = sys.argv[1:6]

    def die(*args, **kwargs):  # no cleanup of any kind: as a crash
        os.kill(os.getpid(), signal.SIGKILL)

    def stuck(directory, codec, image, *, next_offset, **kwargs):  # in the forked child
        partial_snapshot_path(Path(directory), next_offset).write_bytes(b"half a snapshot")
        time.sleep(3600)

    if step == "while its snapshot is written":
        forked_snapshot.write_snapshot = stuck
    elif step == "once its snapshot is written":
        follower_module.write_atomically = die  # before follower.json names it
    elif step == "once it is recorded":
        follower_module.list_snapshots = die  # before the older snapshot is deleted
    follower = Follower(bootstrap, history_topic=history, state_topic=state, checkpoint_dir=directory,
                        checkpoint_every=5)
    follower.catch_up(60)
    if step == "while its snapshot is written":
        while not list((Path(directory) / "snapshots").glob(".*.tmp")):
            time.sleep(0.01)  # the child has begun writing
        die()
    follower.wait_for_checkpoint()  # the child writes the snapshot whole; recording it dies at the step
    sys.exit(3)  # not reached: the follower must be killed at its step
""")


@pytest.mark.parametrize("step", ["while its snapshot is written", "once its snapshot is written",
                                  "once it is recorded"])
def test_a_follower_killed_at_any_step_of_a_checkpoint_restarts_from_the_last_recorded_one(
        step, store, published, follow, kafka_bootstrap, tmp_path):
    """SIGKILL while a checkpoint's snapshot is being written, after it is written but before follower.json names
    it, or after that but before the older snapshot is deleted: the restarted follower loads the checkpoint
    follower.json names (the older one in the first two cases), whole, and catches up to the store's image."""
    store.create_acls([acl_created(i).event.binding for i in range(2)], context=ADMIN)
    history, state = published()
    first = follow(history, state)
    assert first.catch_up(60)
    first.close()  # the checkpoint at log offset 2
    store.create_acls([acl_created(i).event.binding for i in range(2, 30)], context=ADMIN)
    published()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.run([sys.executable, "-c", _KILLED, kafka_bootstrap, history, state, str(tmp_path / "f"),
                            step], cwd=REPO, env=env, capture_output=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
    recorded = json.loads((tmp_path / "f" / "follower.json").read_text())["next_offset"]
    if step == "once it is recorded":
        assert 2 < recorded <= 30 and len(list((tmp_path / "f" / "snapshots").glob("*.avro"))) == 2
    else:
        assert recorded == 2
    restarted = follow(history, state)
    assert restarted.resumed_from == recorded
    assert restarted.catch_up(60) and image_state(restarted.image) == image_state(store.image)


def test_checkpoint_of_another_topic_is_refused(store, published, follow):
    """A checkpoint directory that follows another topic is a clear error, not a silent mix."""
    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    history, state = published()
    follow(history, state).close()
    with pytest.raises(FollowerError, match="follows topic"):
        follow("another-history", state)


def test_unloadable_checkpoint_starts_over(store, published, follow, tmp_path):
    """A corrupt snapshot is not trusted: the follower replays from the beginning to the same image."""
    store.create_acls([acl_created(i).event.binding for i in range(3)], context=ADMIN)
    history, state = published()
    first = follow(history, state)
    first.catch_up(60)
    first.close()
    for snap in (tmp_path / "f" / "snapshots").iterdir():
        snap.write_bytes(b"garbage")
    restarted = follow(history, state)
    assert restarted.resumed_from is None
    assert restarted.catch_up(60) and image_state(restarted.image) == image_state(store.image)


# -- bootstrap from the state topic ------------------------------------------------------------


def test_bootstrap_from_state_topic_gives_the_same_image(store, clock, published, follow):
    """Rebuilding from the compacted state topic reaches the store's image without the history."""
    random_workload(store, seed=41, steps=80, clock=clock)
    follower = follow(*published())
    follower.bootstrap_from_state_topic()
    assert image_state(follower.image) == image_state(store.image)
    assert follower.applied == 0 and follower.skipped == 0  # the format marker skipped, not dead-lettered


@pytest.mark.parametrize("older", [format1_message, format2_message])
def test_bootstrap_from_a_state_topic_of_an_older_message_format(store, clock, kafka_bootstrap, topics, published,
                                                                 follow, older):
    """A state topic published before message format 3 (format 1: one header per field; format 2: the offset and
    request headers; link and history position included) still bootstraps the store's image."""
    from secmeta.consumers.kafka.wire import decode_message, history_position, message_offset

    random_workload(store, seed=44, steps=60, clock=clock)
    history, state = published()
    old_state = topics("state")
    make_topics(kafka_bootstrap, old_state)
    old = []
    for _, key, value, headers in read_topic(kafka_bootstrap, state):
        at = ("secmeta.history_offset", b"%d" % history_position(value, headers))
        if value is None:
            old.append((key, None, [("secmeta.offset", b"%d" % message_offset(value, headers)), at]))
        else:
            key, value, form = older(CODEC, decode_message(CODEC, key, value, headers), link=b"ab" * 32)
            old.append((key, value, [*form, at]))
    produce_raw(kafka_bootstrap, old_state, old)
    follower = follow(history, old_state)
    follower.bootstrap_from_state_topic()
    assert image_state(follower.image) == image_state(store.image)


def test_bootstrap_then_follows_the_history(store, clock, published, follow):
    """After bootstrapping, events published later arrive through the history topic."""
    random_workload(store, seed=42, steps=40, clock=clock)
    follower = follow(*published())
    follower.bootstrap_from_state_topic()
    bootstrapped_at = follower.image.next_offset
    random_workload(store, seed=43, steps=20, clock=clock)
    published()
    assert follower.catch_up(60)
    assert image_state(follower.image) == image_state(store.image)
    assert follower.applied == store.log.end_offset - bootstrapped_at and follower.skipped == 0


def test_bootstrap_of_an_empty_state_topic_is_empty(store, kafka_bootstrap, published, follow):
    """With nothing published yet, bootstrap leaves the empty image and follows from the start."""
    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    history, state = published()
    make_topics(kafka_bootstrap, state + "-unused")
    follower = follow(history, state + "-unused")
    assert follower.bootstrap_from_state_topic() == 0
    assert follower.catch_up(60) and follower.applied_offset == 0


def test_view_uses_the_given_config(store, published, follow):
    """view(config) answers with that config's super users."""
    from secmeta.core import StoreConfig

    store.create_acls([acl_created(1).event.binding], context=ADMIN)
    follower = follow(*published())
    follower.catch_up(60)
    view = follower.view(StoreConfig(super_users={"User:root"}))
    assert view.authorize("User:root", "h", AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")


def test_image_offset_matches_the_store(store, published, follow):
    """applied_offset is the last event's log offset; the image's next_offset the store's."""
    store.create_acls([acl_created(i).event.binding for i in range(4)], context=ADMIN)
    follower = follow(*published())
    follower.catch_up(60)
    assert (follower.applied_offset, follower.image.next_offset) == (3, store.image.next_offset)



# -- gaps ------------------------------------------------------------------------------------


@pytest.fixture
def gapped(store, kafka_bootstrap, topics):
    """A history topic holding log offsets 0, 1, 2 and then 5 (3 and 4 missing)."""
    store.create_acls([acl_created(i).event.binding for i in range(6)], context=ADMIN)
    history = topics("gapped")
    envelopes = list(store.log.read())
    produce_raw(kafka_bootstrap, history, [encode_message(CODEC, envelopes[i]) for i in (0, 1, 2, 5)])
    return history


def test_gap_in_the_history_is_an_error_naming_it(gapped, follow):
    """Missing log offsets raise HistoryGapError naming them, instead of a silently wrong image."""
    follower = follow(gapped, gapped + "-state")
    with pytest.raises(HistoryGapError, match="events 3..4 are missing") as info:
        follower.catch_up(60)
    assert (info.value.last, info.value.found, info.value.kafka_offset) == (2, 5, 3)


def test_image_stays_before_the_gap(gapped, follow):
    """Events before the gap are applied; the position stays on the gap, so polling again raises again."""
    follower = follow(gapped, gapped + "-state")
    with pytest.raises(HistoryGapError):
        follower.catch_up(60)
    assert (follower.applied_offset, follower.position) == (2, 3)
    with pytest.raises(HistoryGapError):
        follower.catch_up(60)


def test_group_id_gets_the_position_committed(store, kafka_bootstrap, published, follow):
    """With a group id, a checkpoint also commits the Kafka position to the group (for lag tools)."""
    from confluent_kafka import Consumer, TopicPartition

    store.create_acls([acl_created(i).event.binding for i in range(3)], context=ADMIN)
    history, state = published()
    follower = follow(history, state, group_id="standby-1")
    follower.catch_up(60)
    follower.close()
    probe = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "standby-1"})
    try:
        [committed] = probe.committed([TopicPartition(history, 0)], timeout=10)
    finally:
        probe.close()
    assert committed.offset == 4  # the format marker and three events


def test_catch_up_through_partition_eof_error_messages(store, clock, published, follow):
    """With ``enable.partition.eof`` librdkafka hands the consumer a _PARTITION_EOF error message (no offset)
    at the end of what it fetched; catch_up stops gathering at it, skips it, and still reaches the store.

    Small batches make catch_up gather across several fetches, so error messages land mid-gathering.
    """
    random_workload(store, seed=21, steps=40, clock=clock)
    follower = follow(*published(), client_config={"enable.partition.eof": True}, max_batch=7)
    assert follower.catch_up(60)
    assert image_state(follower.image) == image_state(store.image)
    store.create_acls([acl_created(999).event.binding], context=ADMIN)
    published()
    assert follower.catch_up(60)
    assert image_state(follower.image) == image_state(store.image)


class _DisconnectOnce:
    """The follower's real consumer, whose first short batch ends with the error message librdkafka hands a
    consumer without an error_cb when its broker connection drops (code _TRANSPORT, no topic, no offset).

    Built with ``confluent_kafka.Message(error=...)``: confluent-kafka 2.16 binds none of the mock
    cluster's error injection (rd_kafka_mock_push_request_errors), and the one error message the shared
    mock cluster gives on demand, _PARTITION_EOF, carries an offset (the test above).
    """

    def __init__(self, consumer):
        self._consumer = consumer
        self.injected = False

    def consume(self, num_messages=1, timeout=-1):
        messages = self._consumer.consume(num_messages=num_messages, timeout=timeout)
        if messages and len(messages) < num_messages and not self.injected:
            self.injected = True
            messages.append(Message(error=KafkaError(KafkaError._TRANSPORT, "broker connection dropped")))
        return messages

    def __getattr__(self, name):
        return getattr(self._consumer, name)


def test_catch_up_skips_an_error_message_without_offset(store, clock, published, follow, caplog):
    """An error message (offset None) in the middle of a catch_up batch is logged, not a TypeError."""
    random_workload(store, seed=22, steps=40, clock=clock)
    follower = follow(*published())
    follower._consumer = wrapped = _DisconnectOnce(follower._consumer)
    with caplog.at_level(logging.WARNING, logger="secmeta.kafka.follower"):
        assert follower.catch_up(60)
    assert wrapped.injected and image_state(follower.image) == image_state(store.image)
    assert "broker connection dropped" in caplog.text


def test_client_quotas_reach_the_follower_by_history_and_by_state_topic(store, published, follow):
    """A quota set, changed and removed: the follower holds the store's quotas both ways; the removal is a
    tombstone on the state topic (it closes its entity), so bootstrapping does not replay it."""
    def alter(entity, **ops):
        store.alter_client_quotas([ClientQuotaAlteration(entity, tuple(ClientQuotaOp(k, v) for k, v in ops.items()))],
                                  context=ADMIN)

    alter({"user": "alice"}, producer_byte_rate=1024, consumer_byte_rate=2048)
    alter({"user": "alice"}, producer_byte_rate=None)
    alter({"client-id": None}, request_percentage=25.5)
    history, state = published()
    by_history, by_state = follow(history, state, "h"), follow(history, state, "s")
    assert by_history.catch_up(60)
    by_state.bootstrap_from_state_topic()
    assert len(store.image.quotas) == 2
    assert dict(by_history.image.quotas) == dict(by_state.image.quotas) == dict(store.image.quotas)


def test_bootstrap_stops_at_a_state_value_of_a_newer_message_format_naming_it(store, clock, kafka_bootstrap, topics,
                                                                               published, follow):
    """A key's newest value in a format this secmeta cannot read (a newer secmeta published it) is not skipped, which
    would let the key's older value stand (a token's newer, shorter expiry lost): the bootstrap stops, naming the
    format and the Kafka offset."""
    random_workload(store, seed=45, steps=20, clock=clock)
    history, state = published()
    newer_state = topics("state")
    make_topics(kafka_bootstrap, newer_state)
    records = [(key, value, headers) for _, key, value, headers in read_topic(kafka_bootstrap, state)]
    key, value, headers = next(r for r in records if r[1] is not None)
    newer = value[:3] + b"\x04" + value[4:]  # the frame's version byte
    produce_raw(kafka_bootstrap, newer_state, [*records, (key, newer, headers)])
    follower = follow(history, newer_state)
    with pytest.raises(FollowerError, match=rf"Kafka offset {len(records)} .*message format 4: newer than"):
        follower.bootstrap_from_state_topic()


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(shapes.NAMES), st.integers(1, 150), st.integers(0, 2**16),
       st.lists(st.integers(1, 400), max_size=4), st.sampled_from([3, 2]))
def test_the_follower_builds_the_replayed_image_from_the_publishers_messages(kafka_bootstrap, shape, n, seed, cuts,
                                                                             form):
    """A log of any shape, its messages made as the publisher makes them (values from the logged batches' bytes;
    or in message format 2, as it made them before format 3), read and applied by the follower in batches cut
    anywhere, gives the image a replay of the log gives."""
    requests = shapes.shape_events(shape, n, seed)
    fresh = message_encoder(CODEC)

    def encode(envelope, body):
        return fresh(envelope, body, link=b"\x01" * 32) if form == 3 else format2_message(CODEC, envelope, b"01" * 32)

    messages, offset = [], 0
    for request in requests:
        payload = CODEC.encode_batch(offset, [Envelope(offset + i, 1_700_000_000_000, "User:admin", "10.0.0.1",
                                                       f"r{offset}", event) for i, event in enumerate(request)])
        envelopes, bodies = CODEC.decode_batch_bodies(payload, CODEC.fingerprint, offset)
        for envelope, body in zip(envelopes, bodies, strict=True):
            key, value, headers = encode(envelope, body)
            messages.append(Message(topic="history", partition=0, offset=len(messages), key=key, value=value,
                                    headers=headers, error=None))
        offset += len(request)
    bounds = sorted({0, len(messages), *(c for c in cuts if c < len(messages))})
    with tempfile.TemporaryDirectory() as tmp:
        follower = Follower(kafka_bootstrap, history_topic="history", checkpoint_dir=tmp)
        try:
            for start, end in zip(bounds, bounds[1:], strict=False):
                follower._apply_consumed(lambda batch=messages[start:end]: batch)
            assert follower.image == shape_replayed(requests)
            assert follower.next_offset == offset and follower.position == len(messages)
        finally:
            follower.close()


def _compacted(bootstrap: str, topic: str, into: str) -> None:
    """What Kafka's log cleaner may leave of ``topic`` (cleanup.policy=compact), written to ``into``: the newest
    message of each key, in their order (the mock cluster does not compact; its log start stays at 0 here too)."""
    messages = read_topic(bootstrap, topic, markers=True)
    newest = {key: at for at, key, _, _ in messages}
    produce_raw(bootstrap, into, [(key, value, headers) for at, key, value, headers in messages if newest[key] == at])


def test_a_state_resend_interrupted_after_a_crash_does_not_bring_back_a_deleted_acl_once_compacted(
        store, store_dir, keyring, kafka_bootstrap, topics, follow, tmp_path):
    """The publisher delivers a chunk to both topics and is killed before its checkpoint: at restart it sends the
    chunk again from the checkpoint, state messages included, so for a while the state topic's newest message of a
    key can be an older value than one it already holds (here ACL A's creation, re-sent after A's deletion and its
    tombstone). The bootstrap's guard (a re-sent older value must not win) sees the offsets only while the newer
    messages are there; once the log cleaner has kept just the newest message per key, which it may do whenever the
    publisher is stopped in that window, a follower bootstrapped from the state topic holds A, deleted at offset 1,
    and never applies the deletion (its history copy is at or below the position the bootstrap starts after)."""
    import shutil

    from secmeta.core import AclBindingFilter

    a, b = acl_created(1).event.binding, acl_created(2).event.binding
    store.create_acls([a], context=ADMIN)                                                    # offset 0
    store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "topic-1")], context=ADMIN)  # offset 1 (+ tombstone)
    store.create_acls([b], context=ADMIN)                                                    # offset 2
    history, state = topics("history"), topics("state")
    checkpoint, crashed = store_dir / "kafka-publisher.json", tmp_path / "checkpoint-at-bind.json"
    with Publisher(store_dir, keyring, kafka_bootstrap, history_topic=history, state_topic=state) as first:
        first.publish_available(timeout=60, max_events=0)        # binds: the checkpoint says 0 and names the topics
        shutil.copy(checkpoint, crashed)
        assert first.publish_available(timeout=60) == 3          # delivered to both topics ...
    shutil.copy(crashed, checkpoint)                             # ... and killed before the checkpoint said so
    with Publisher(store_dir, keyring, kafka_bootstrap, history_topic=history, state_topic=state) as restarted:
        assert restarted.checkpoint == 0
        assert restarted.publish_available(timeout=60, max_events=1) == 1   # stopped after re-sending offset 0
    before = follow(history, state, name="before")
    before.bootstrap_from_state_topic()
    assert image_state(before.image) == image_state(store.image)           # the guard holds before compaction
    compacted = topics("state-compacted")
    _compacted(kafka_bootstrap, state, compacted)
    after = follow(history, compacted, name="after")
    after.bootstrap_from_state_topic()
    with Publisher(store_dir, keyring, kafka_bootstrap, history_topic=history, state_topic=state) as resumed:
        assert resumed.publish_available(timeout=60) == 2   # the rest of the chunk again, A's deletion included
    assert after.catch_up(60)
    held = sorted(acl_id for acl_id, _ in after.image.acls)
    assert image_state(after.image) == image_state(store.image), \
        f"bootstrapped from the compacted state topic, the follower holds ACLs {held}; the store holds " \
        f"{sorted(acl_id for acl_id, _ in store.image.acls)}"


@pytest.mark.parametrize("route", ["a state delivery reported failed", "from the beginning",
                                   "from the beginning, a chunk at a time"])
def test_no_route_that_sends_a_chunk_again_puts_an_older_state_value_after_a_newer_one(
        store, store_dir, keyring, kafka_bootstrap, topics, follow, monkeypatch, route):
    """The other routes by which a publisher sends a chunk again (the restart from the checkpoint is the test
    above): a state delivery reported failed in a running publisher, which re-sends the chunk (librdkafka reports a
    request that timed out as failed though the broker may have written it: here every message of the chunk is on
    the topic), and ``from_beginning`` onto topics that hold the events, in one chunk or one event a chunk (what the
    topic holds past the first chunk still counts for the second). Either way, stopped after re-sending ACL A's
    creation, the state topic's newest message of A must still be its tombstone: once compacted, a follower
    bootstrapped from it does not hold A, deleted at offset 2."""
    import threading

    from secmeta.consumers.kafka import publisher as publisher_module
    from secmeta.core import AclBindingFilter

    store.create_acls([acl_created(2).event.binding], context=ADMIN)                         # offset 0: B
    store.create_acls([acl_created(1).event.binding], context=ADMIN)                         # offset 1: A
    store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "topic-1")], context=ADMIN)  # offset 2 (+ tombstone)
    history, state = topics("history"), topics("state")
    if route.startswith("from the beginning"):
        with Publisher(store_dir, keyring, kafka_bootstrap, history_topic=history, state_topic=state) as first:
            assert first.publish_available(timeout=60) == 3
        with Publisher(store_dir, keyring, kafka_bootstrap, history_topic=history, state_topic=state,
                       from_beginning=True, chunk_size=1 if route.endswith("at a time") else 10_000) as again:
            assert again.publish_available(timeout=60, max_events=2) == 2
    else:
        reported, calls = publisher_module._Chunk.state_errors, []

        def state_errors(chunk) -> list[str]:   # asked once the history is delivered, then once the state is:
            calls.append(chunk)                 # the first chunk's state delivery is reported failed
            return reported(chunk) + (["Local: Message timed out"] if len(calls) == 2 else [])

        monkeypatch.setattr(publisher_module._Chunk, "state_errors", state_errors)
        stop = threading.Event()
        with Publisher(store_dir, keyring, kafka_bootstrap, history_topic=history, state_topic=state,
                       progress=lambda status: status.stage == "delivery failed" and stop.set()) as publisher:
            assert publisher.publish_available(timeout=60, stop_event=stop) == 0   # delivered, reported failed
            assert len([key for _, key, _, _ in read_topic(kafka_bootstrap, state)]) == 4   # B, A, A, tombstone
            assert publisher.publish_available(timeout=60, max_events=2) == 2      # offsets 0-1 again, then stopped
    compacted = topics("state-compacted")
    _compacted(kafka_bootstrap, state, compacted)
    follower = follow(history, compacted)
    follower.bootstrap_from_state_topic()
    assert image_state(follower.image) == image_state(store.image), \
        f"after {route}, the compacted state topic gives ACLs {sorted(acl_id for acl_id, _ in follower.image.acls)}; " \
        f"the store holds {sorted(acl_id for acl_id, _ in store.image.acls)}"


def test_a_chunk_sent_again_fills_a_gap_the_state_topic_holds_before_a_newer_event(
        store, store_dir, keyring, kafka_bootstrap, topics, follow, tmp_path):
    """librdkafka's idempotent producer may leave a gap (messages timed out, later ones delivered: its "Message
    timeout considerations"), so a state topic holding a newer event does not hold all older ones. Here it lacks ACL
    A's deletion and tombstone (offset 1) but holds B's creation (offset 2): the chunk sent again from the checkpoint
    must still send A's deletion, which "only what is after the topic's newest log offset" would skip, leaving A
    granted once compacted. It skips what the topic holds of each key instead."""
    from secmeta.consumers.kafka.wire import message_offset
    from secmeta.core import AclBindingFilter

    store.create_acls([acl_created(1).event.binding], context=ADMIN)                         # offset 0
    store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "topic-1")], context=ADMIN)  # offset 1 (+ tombstone)
    store.create_acls([acl_created(2).event.binding], context=ADMIN)                         # offset 2
    history, state, gapped = topics("history"), topics("state"), topics("state-gapped")
    with Publisher(store_dir, keyring, kafka_bootstrap, history_topic=history, state_topic=state) as first:
        assert first.publish_available(timeout=60) == 3
    produce_raw(kafka_bootstrap, gapped, [(key, value, headers) for _, key, value, headers
                                          in read_topic(kafka_bootstrap, state, markers=True)
                                          if message_offset(value, headers) != 1])
    with Publisher(store_dir, keyring, kafka_bootstrap, history_topic=history, state_topic=gapped,
                   checkpoint_path=tmp_path / "from-zero.json") as again:
        assert again.publish_available(timeout=60) == 3
    sent = [message_offset(value, headers) for _, _, value, headers in read_topic(kafka_bootstrap, gapped)]
    assert sent == [0, 2, 1, 1]     # A's deletion and its tombstone only: nothing held was sent again
    compacted = topics("state-compacted")
    _compacted(kafka_bootstrap, gapped, compacted)
    follower = follow(history, compacted)
    follower.bootstrap_from_state_topic()
    assert image_state(follower.image) == image_state(store.image)
