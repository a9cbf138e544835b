"""The mirror bound to its cluster and topics, and the history topic as a witness of the store's log.

Against librdkafka's mock cluster (two of them, each with its own cluster id) and, for topic ids and
topics deleted and created again, a Tansu broker.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from secmeta.consumers.kafka.follower import Follower, FollowerAheadError, FollowerError
from secmeta.consumers.kafka.publisher import Publisher, TopicChangedError
from secmeta.consumers.kafka.topic_witness import LogBehindTopicError, LogDivergesError
from secmeta.consumers.kafka.wire import message_link, message_offset
from secmeta.core.cli import main
from secmeta.core.log import Log
from secmeta.events.records import LogRecovered
from tests.consumers.conftest import ADMIN, produce_raw, read_topic
from tests.logkit import acl_created


def acls(store, first: int, count: int) -> None:
    store.create_acls([acl_created(i).event.binding for i in range(first, first + count)], context=ADMIN)


def publish(store_dir, keyring, bootstrap, history, state, **kwargs) -> int:
    with Publisher(store_dir, keyring, bootstrap, history_topic=history, state_topic=state, **kwargs) as pub:
        return pub.publish_available(timeout=60)


def logged_offsets(bootstrap, topic) -> list[int]:
    return [message_offset(value, headers) for *_, value, headers in read_topic(bootstrap, topic)]


@pytest.fixture
def cli_keys(keyring, tmp_path, monkeypatch):
    """The test's keyring as the CLI reads it (SECMETA_KEY_FILE, mode 0600)."""
    keys = tmp_path / "cli-keys.json"
    keys.write_bytes((tmp_path / "keys.json").read_bytes())
    keys.chmod(0o600)
    monkeypatch.setenv("SECMETA_KEY_FILE", str(keys))


def cli(*argv: str) -> int:
    return main(list(argv))


# -- another cluster ----------------------------------------------------------------------------


def test_publish_once_to_a_new_cluster_is_refused_until_from_beginning(
        store, store_dir, cli_keys, kafka_bootstrap, other_kafka_cluster, topics, capsys):
    """The issue's observation: the checkpoint of one cluster made `publish --once` to a new, empty one print
    "published 0 events" and exit 0.  Now it exits 1 naming both and --from-beginning, which publishes all."""
    acls(store, 0, 5)
    history, state = topics("h"), topics("s")
    names = ["--history-topic", history, "--state-topic", state]
    assert cli("kafka", "publish", "--once", "--store", str(store_dir), "--bootstrap-server", kafka_bootstrap,
               *names) == 0
    capsys.readouterr()

    code = cli("kafka", "publish", "--once", "--store", str(store_dir), "--bootstrap-server", other_kafka_cluster,
               *names)
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert "says log offsets through 4 were published" in err
    assert f"topic {history} holds no secmeta event" in err and "the cluster is mockCluster" in err
    assert "Run with --from-beginning" in err
    assert logged_offsets(other_kafka_cluster, history) == []

    assert cli("kafka", "publish", "--once", "--from-beginning", "--store", str(store_dir), "--bootstrap-server",
               other_kafka_cluster, *names) == 0
    assert capsys.readouterr().out == f"published 5 events to {history} and {state}\n"
    assert logged_offsets(other_kafka_cluster, history) == [0, 1, 2, 3, 4]
    # bound to the new cluster now: the next run resumes there, and the old cluster is the stranger
    acls(store, 5, 1)
    assert cli("kafka", "publish", "--once", "--store", str(store_dir), "--bootstrap-server", other_kafka_cluster,
               *names) == 0
    assert logged_offsets(other_kafka_cluster, history) == [0, 1, 2, 3, 4, 5]
    assert cli("kafka", "publish", "--once", "--store", str(store_dir), "--bootstrap-server", kafka_bootstrap,
               *names) == 1


def test_the_checkpoint_records_the_cluster_and_a_checkpoint_without_one_is_adopted(
        store, store_dir, keyring, kafka_bootstrap, topics):
    """A checkpoint written before identities were recorded resumes on topics that hold what it says, and
    records the cluster id from then on."""
    acls(store, 0, 3)
    history, state = topics("h"), topics("s")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    path = store_dir / "kafka-publisher.json"
    recorded = json.loads(path.read_text())
    assert recorded["identity"]["cluster_id"].startswith("mockCluster")
    path.write_text(json.dumps({k: v for k, v in recorded.items() if k != "identity"}))
    acls(store, 3, 1)
    assert publish(store_dir, keyring, kafka_bootstrap, history, state) == 1
    assert json.loads(path.read_text())["identity"] == recorded["identity"]
    assert logged_offsets(kafka_bootstrap, history) == [0, 1, 2, 3]


def test_other_writers_after_the_last_event_do_not_hide_it(store, store_dir, keyring, kafka_bootstrap, topics):
    """The topic's newest event is found behind other writers' messages: publishing resumes normally."""
    acls(store, 0, 2)
    history, state = topics("h"), topics("s")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    produce_raw(kafka_bootstrap, history, [(None, b"not ours %d" % i, []) for i in range(40)])
    acls(store, 2, 1)
    assert publish(store_dir, keyring, kafka_bootstrap, history, state) == 1


def test_history_messages_carry_the_chain_link_of_their_batch(store, store_dir, keyring, kafka_bootstrap, topics):
    """Each event's link is its log batch's chain link: events of one request share it."""
    acls(store, 0, 2)
    acls(store, 2, 1)
    history = topics("h")
    publish(store_dir, keyring, kafka_bootstrap, history, topics("s"))
    links = [message_link(value, headers) for *_, value, headers in read_topic(kafka_bootstrap, history)]
    batches = list(store.log.batches())
    assert links == [batches[0].link] * 2 + [batches[1].link]


# -- the topic as a witness of the log -------------------------------------------------------------


@pytest.fixture
def older_copy(store, store_dir, open_store, tmp_path):
    """The store after 3 events, copied aside; the store then logs 3 more (6 in all)."""
    acls(store, 0, 3)
    store.close()
    shutil.copytree(store_dir, tmp_path / "older")
    store = open_store()
    acls(store, 3, 3)
    store.close()
    return tmp_path / "older"


def _restore(older, store_dir):
    shutil.rmtree(store_dir)
    shutil.copytree(older, store_dir)


def test_a_store_rolled_back_behind_its_topic_is_refused_naming_both_offsets(
        older_copy, store_dir, keyring, kafka_bootstrap, topics):
    """Replaced by an older copy of itself, the store would publish nothing (or resume); the topic says
    offset 5 was logged, and the log ends at 2: refused, nothing published."""
    history, state = topics("h"), topics("s")
    assert publish(store_dir, keyring, kafka_bootstrap, history, state) == 6
    _restore(older_copy, store_dir)
    with pytest.raises(LogBehindTopicError, match=f"topic {history} holds log offsets through 5 .*"
                                                  "but the log holds offsets below 3 \\(its last is 2\\)"):
        publish(store_dir, keyring, kafka_bootstrap, history, state)
    assert logged_offsets(kafka_bootstrap, history) == list(range(6))


def test_a_store_that_diverges_from_its_topic_is_refused_naming_the_offset(
        older_copy, store_dir, keyring, open_store, kafka_bootstrap, topics, cli_keys, capsys):
    """An older copy that logged other events past the topic's end: the topic's event at offset 5 is not
    the log's (another chain link), so `kafka publish` exits 1 naming offset 5 and the log's end."""
    history, state = topics("h"), topics("s")
    assert publish(store_dir, keyring, kafka_bootstrap, history, state) == 6
    _restore(older_copy, store_dir)
    store = open_store()
    acls(store, 100, 5)
    store.close()
    with pytest.raises(LogDivergesError, match="diverges from its history topic at log offset 5: .* the log's "
                                               "event at offset 5 differs .*the log holds offsets below 8 \\(its last is 7\\)"):
        publish(store_dir, keyring, kafka_bootstrap, history, state)
    code = cli("kafka", "publish", "--once", "--from-beginning", "--store", str(store_dir), "--bootstrap-server",
               kafka_bootstrap, "--history-topic", history, "--state-topic", state)
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert "diverges from its history topic at log offset 5" in err and "Nothing was published" in err
    assert logged_offsets(kafka_bootstrap, history) == list(range(6))


# -- the follower -------------------------------------------------------------------------------------


def test_a_follower_whose_checkpoint_is_ahead_of_its_topic_exits_1(
        store, store_dir, keyring, kafka_bootstrap, other_kafka_cluster, topics, tmp_path, capsys):
    """The issue's follower at offset -1 forever, from the other side: a follower checkpointed at offset 4
    on one cluster, pointed at another whose topic holds nothing, said "follower at log offset 4" and exit
    0.  Now it says its checkpoint is ahead of the topic, naming both, and exits 1."""
    acls(store, 0, 5)
    history, state = topics("h"), topics("s")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    follow = ["kafka", "follow", "--once", "--checkpoint-dir", str(tmp_path / "f"), "--history-topic", history,
              "--state-topic", state, "--timeout", "30", "--bootstrap-server"]
    assert cli(*follow, kafka_bootstrap) == 0
    capsys.readouterr()
    code = cli(*follow, other_kafka_cluster)
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert "is ahead of its topic: it applied log offsets through 4 (Kafka position 6)" in err
    assert f"topic {history} holds no secmeta event" in err and "the cluster is mockCluster" in err
    assert "another --checkpoint-dir" in err


def test_a_follower_on_another_cluster_holding_more_is_refused(
        store, store_dir, keyring, kafka_bootstrap, other_kafka_cluster, topics, tmp_path):
    """Another cluster's topic of the same name that holds more is not the checkpoint's: refused, not mixed."""
    acls(store, 0, 2)
    history, state = topics("h"), topics("s")
    publish(store_dir, keyring, kafka_bootstrap, history, state)
    with Follower(kafka_bootstrap, history_topic=history, checkpoint_dir=tmp_path / "f") as follower:
        assert follower.catch_up(30)
    acls(store, 2, 3)
    publish(store_dir, keyring, other_kafka_cluster, history, state, from_beginning=True)
    with Follower(other_kafka_cluster, history_topic=history, checkpoint_dir=tmp_path / "f") as follower:
        with pytest.raises(FollowerError, match="was made on another topic: the cluster is mockCluster"):
            follower.catch_up(30)
        assert follower.applied_offset == 1


# -- topics deleted and created again (Tansu: topic ids, DeleteTopics) --------------------------------


# Tansu (v0.6) reports a partition's high watermark as one past the first record of the newest batch, not
# of its last record: with one record per batch the two agree, as on Kafka.
TANSU = {"batch.num.messages": 1}


def _admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "logger": logging.getLogger("tests.kafka")})


def _topic_id(bootstrap, name) -> str:
    admin = _admin(bootstrap)  # alive until the answer is in
    return str(admin.describe_topics(TopicCollection([name]), request_timeout=10)[name].result(15).topic_id)


def _recreate(bootstrap, name) -> None:
    admin = _admin(bootstrap)
    admin.delete_topics([name], operation_timeout=10)[name].result(15)
    admin.create_topics([NewTopic(name, 1, -1)], operation_timeout=10)[name].result(15)


def test_a_recreated_topic_is_refused_by_its_id_until_from_beginning(
        store, store_dir, keyring, tansu_bootstrap, topics):
    """The checkpoint records both topic ids; the history topic deleted and created again has another id:
    refused naming it, nothing published; --from-beginning publishes the whole log to it."""
    acls(store, 0, 4)
    history, state = topics("h"), topics("s")
    assert publish(store_dir, keyring, tansu_bootstrap, history, state, client_config=TANSU) == 4
    identity = json.loads((store_dir / "kafka-publisher.json").read_text())["identity"]
    old = _topic_id(tansu_bootstrap, history)
    assert identity == {"cluster_id": "tansu_cluster",
                        "topic_ids": {history: old, state: _topic_id(tansu_bootstrap, state)}}
    _recreate(tansu_bootstrap, history)
    acls(store, 4, 1)
    named = re.escape(f"topic {history} has id {_topic_id(tansu_bootstrap, history)}, not {old} ")  # base64: + /
    with pytest.raises(TopicChangedError, match=f"{named}.*--from-beginning"):
        publish(store_dir, keyring, tansu_bootstrap, history, state, client_config=TANSU)
    assert logged_offsets(tansu_bootstrap, history) == []
    assert publish(store_dir, keyring, tansu_bootstrap, history, state, client_config=TANSU, from_beginning=True) == 5
    assert logged_offsets(tansu_bootstrap, history) == [0, 1, 2, 3, 4]


def test_a_follower_of_a_recreated_topic_is_refused(store, store_dir, keyring, tansu_bootstrap, topics, tmp_path):
    """A follower checkpointed on a topic later deleted and re-published from the beginning holds positions
    of the old topic: refused naming the topic id, and the image stays."""
    acls(store, 0, 3)
    history, state = topics("h"), topics("s")
    publish(store_dir, keyring, tansu_bootstrap, history, state, client_config=TANSU)
    with Follower(tansu_bootstrap, history_topic=history, checkpoint_dir=tmp_path / "f") as follower:
        assert follower.catch_up(30)
    old = _topic_id(tansu_bootstrap, history)
    _recreate(tansu_bootstrap, history)
    acls(store, 3, 2)
    publish(store_dir, keyring, tansu_bootstrap, history, state, client_config=TANSU, from_beginning=True)
    with Follower(tansu_bootstrap, history_topic=history, checkpoint_dir=tmp_path / "f") as follower:
        with pytest.raises(FollowerError, match=f"topic {history} has id .*, not {re.escape(old)}"):
            follower.catch_up(30)
        assert follower.applied_offset == 2


def test_a_follower_ahead_is_the_ahead_error(store, store_dir, keyring, kafka_bootstrap, other_kafka_cluster,
                                             topics, tmp_path):
    """The API raises FollowerAheadError (a FollowerError) for a checkpoint ahead of its topic."""
    acls(store, 0, 2)
    history = topics("h")
    publish(store_dir, keyring, kafka_bootstrap, history, topics("s"))
    with Follower(kafka_bootstrap, history_topic=history, checkpoint_dir=tmp_path / "f") as follower:
        assert follower.catch_up(30)
    with Follower(other_kafka_cluster, history_topic=history, checkpoint_dir=tmp_path / "f") as follower:
        with pytest.raises(FollowerAheadError):
            follower.catch_up(30)


def test_a_follower_whose_last_event_is_not_where_the_topic_has_it_is_refused(
        store, store_dir, keyring, kafka_bootstrap, topics, tmp_path):
    """The checkpoint names the Kafka offset and chain link of its last event; a topic holding another event
    there (a topic of the same name rewritten where the broker keeps no topic ids) is refused, not mixed in."""
    acls(store, 0, 3)
    history = topics("h")
    publish(store_dir, keyring, kafka_bootstrap, history, topics("s"))
    with Follower(kafka_bootstrap, history_topic=history, checkpoint_dir=tmp_path / "f") as follower:
        assert follower.catch_up(30)
    path = tmp_path / "f" / "follower.json"
    checkpoint = json.loads(path.read_text())
    # Kafka offset 0 holds the format marker
    assert (checkpoint["applied_at"], checkpoint["applied_link"]) == (3, store.log.last_link.hex())
    path.write_text(json.dumps({**checkpoint, "applied_link": "00" * 32}))
    with Follower(kafka_bootstrap, history_topic=history, checkpoint_dir=tmp_path / "f") as follower:
        with pytest.raises(FollowerError, match="diverges from its topic: it applied log offset 2 from Kafka offset "
                                                "3, but the topic holds log offset 2 there with another chain link"):
            follower.catch_up(30)


def test_checking_the_topics_adds_no_client_warning_about_the_jobs_own_settings(
        store, store_dir, keyring, kafka_bootstrap, topics):
    """The publisher reads its topics' ends with a consumer built from its producer settings; librdkafka's
    warning that a producer setting is ignored there is not shown as a problem of the run."""
    import io

    from secmeta.consumers.kafka.client_log import ClientProblems

    acls(store, 0, 1)
    shown = io.StringIO()
    with ClientProblems(shown):
        publish(store_dir, keyring, kafka_bootstrap, topics("h"), topics("s"), client_config={"batch.num.messages": 1})
    assert "producer property" not in shown.getvalue()


# -- after a logged recovery -----------------------------------------------------------------------


def _recover(store_dir, keyring, offset: int) -> str:
    """`secmeta log recover --truncate-to OFFSET --force --yes` on the (closed) store; the recovery's id."""
    assert cli("log", "recover", "--store", str(store_dir), "--truncate-to", str(offset), "--force", "--yes",
               "--reason", "drill") == 0
    with Log.open(store_dir, keyring=keyring, read_only=True) as log:
        (recovered,) = [e for e in log.read() if type(e.event) is LogRecovered]
    assert recovered.offset == offset
    return recovered.event.recovery_id


def test_topics_holding_events_a_logged_recovery_cut_are_refused_naming_it(
        store, store_dir, keyring, open_store, kafka_bootstrap, topics, cli_keys, capsys):
    """Review of issue 21: after `log recover --truncate-to 3` of a log whose 6 events were published, publish
    said the checkpoint "belongs to another store", then (the log grown past it) that the log "diverges", and
    --from-beginning was refused too. The topics hold events past the cut that the log no longer holds: every
    run exits 1 naming the recovery (offset, id) and the options that publish to new topics, which work."""
    for i in range(6):
        acls(store, i, 1)  # one batch each: a cut may fall between any two
    store.close()
    history, state = topics("h"), topics("s")
    names = ["--store", str(store_dir), "--bootstrap-server", kafka_bootstrap]
    assert cli("kafka", "publish", "--once", *names, "--history-topic", history, "--state-topic", state) == 0
    recovery = _recover(store_dir, keyring, 3)
    capsys.readouterr()

    def refused(*extra: str) -> None:
        assert cli("kafka", "publish", "--once", *names, "--history-topic", history, "--state-topic", state,
                   *extra) == 1
        err = capsys.readouterr().err
        assert f"cut at offset 3 by the recovery {recovery} logged at offset 3" in err, err
        assert f"topic {history} holds log offsets through 5" in err
        assert "--history-topic NEW --state-topic NEW --from-beginning" in err
        assert "another store" not in err and "diverges" not in err
        assert logged_offsets(kafka_bootstrap, history) == list(range(6))

    refused()
    refused("--from-beginning")
    store = open_store()
    acls(store, 10, 5)  # the log (0-2, the recovery at 3, 4-8) grows past the old checkpoint (6)
    store.close()
    refused()
    refused("--from-beginning")
    new_history, new_state = topics("h"), topics("s")
    assert cli("kafka", "publish", "--once", "--from-beginning", *names, "--history-topic", new_history,
               "--state-topic", new_state) == 0
    values = [value for _, _, value, _ in read_topic(kafka_bootstrap, new_history)]
    assert logged_offsets(kafka_bootstrap, new_history) == list(range(9))
    assert recovery.encode() in values[3]  # the LogRecovered event, its id in the Avro record


def test_topics_holding_nothing_past_a_logged_cut_are_published_on_with_the_recovery(
        store, store_dir, keyring, open_store, kafka_bootstrap, topics, cli_keys):
    """The cut removed only events never published: the topics agree with the recovered log, and publishing
    continues from the checkpoint, carrying the LogRecovered event to the history topic."""
    acls(store, 0, 3)
    history, state = topics("h"), topics("s")
    assert publish(store_dir, keyring, kafka_bootstrap, history, state) == 3
    acls(store, 3, 1)
    acls(store, 4, 2)
    store.close()
    recovery = _recover(store_dir, keyring, 3)
    assert publish(store_dir, keyring, kafka_bootstrap, history, state) == 1
    assert logged_offsets(kafka_bootstrap, history) == [0, 1, 2, 3]
    with Log.open(store_dir, keyring=keyring, read_only=True) as log:
        (at_three,) = log.read(3, 4)
    assert type(at_three.event) is LogRecovered and at_three.event.recovery_id == recovery


def _history_of(first_id: int, count: int, link: int) -> list:
    """``count`` history messages of ACL creations (ids from ``first_id``) at log offsets 0.., one store batch each."""
    from secmeta.consumers.kafka.wire import message_encoder
    from secmeta.events.codec import EventCodec
    from secmeta.events.records import Envelope

    encode = message_encoder(EventCodec())
    return [encode(Envelope(i, 1_700_000_000_000, "User:admin", "10.0.0.1", f"r{i}", acl_created(first_id + i).event),
                   link=bytes([link, i]) * 16) for i in range(count)]


def _crashed(bootstrap: str, history: str, keyring, tmp_path):
    """A follower with a keyring killed with its local log ahead of its checkpoint, ``history`` holding
    ``_history_of(0, 4, 1)``: the copy of its checkpoint directory taken while it ran, its checkpoint at log offset 2
    and its local log at 3 (the last event applied waits for the rest of its store batch, or the next poll)."""
    produce_raw(bootstrap, history, _history_of(0, 4, 1))
    running = Follower(bootstrap, history_topic=history, checkpoint_dir=tmp_path / "f", keyring=keyring,
                       checkpoint_every=2, max_batch=2)
    try:
        assert running.catch_up(30) and running.next_offset == 4
        running.wait_for_checkpoint()  # the checkpoint at 2, written in the background, recorded
        assert json.loads((tmp_path / "f" / "follower.json").read_text())["next_offset"] == 2
        shutil.copytree(tmp_path / "f", tmp_path / "crashed")   # the disk as a kill now leaves it
    finally:
        running.close()
    return tmp_path / "crashed"


def test_a_follower_restarting_from_its_local_log_after_a_crash_still_refuses_another_topic(
        kafka_bootstrap, other_kafka_cluster, topics, keyring, tmp_path):
    """A follower with a keyring keeps a local log, flushed at every poll, while its checkpoint comes every
    ``checkpoint_every`` events: a crash between the two leaves the local log ahead of the checkpoint, which is
    the usual state after a kill. At restart the image is the local log's (``_take_replica``), and the follower
    must still check the topic it resumes on against what it applied, as it does from a checkpoint
    (``test_a_follower_on_another_cluster_holding_more_is_refused``): another cluster's topic of the same name
    holding other events is refused, not mixed in (events below the local log's end skipped as duplicates,
    the rest applied onto it)."""
    import uuid

    history = topics("h")
    crashed = _crashed(kafka_bootstrap, history, keyring, tmp_path)
    produce_raw(other_kafka_cluster, history, _history_of(100, 6, 2))   # another store's log
    with Follower(other_kafka_cluster, history_topic=history, checkpoint_dir=crashed, keyring=keyring) as restarted:
        try:
            restarted.catch_up(30)
        except FollowerError:
            return      # refused: the topic is not the one the image was read from
        held = sorted(acl_id for acl_id, _ in restarted.image.acls)
        pytest.fail(f"the restarted follower mixed another cluster's topic into its image: it holds ACL ids {held} "
                    f"at next offset {restarted.next_offset}, where its own topic held "
                    f"{[str(uuid.UUID(int=i)) for i in range(4)]}")


def test_a_follower_restarting_from_its_local_log_resumes_after_its_last_event(kafka_bootstrap, topics, keyring,
                                                                               tmp_path):
    """On its own topic, a follower restarted from its local log (ahead of its checkpoint) reads on from the message
    after the local log's last event: none of the events it holds is read again, and the next ones are applied."""
    history = topics("h")
    crashed = _crashed(kafka_bootstrap, history, keyring, tmp_path)
    produce_raw(kafka_bootstrap, history, _history_of(0, 6, 1)[4:])
    with Follower(kafka_bootstrap, history_topic=history, checkpoint_dir=crashed, keyring=keyring) as restarted:
        assert restarted.resumed_from == 3 and restarted.catch_up(30)
        assert (restarted.next_offset, restarted.applied, restarted.duplicates) == (6, 3, 0)
        assert len(restarted.image.acls) == 6


def test_a_follower_restarting_from_its_local_log_ahead_of_its_topic_is_refused(
        kafka_bootstrap, other_kafka_cluster, topics, keyring, tmp_path):
    """The topic holds fewer events than the local log (another cluster's, of the same name): FollowerAheadError
    naming both offsets, as from a checkpoint ahead of its topic."""
    history = topics("h")
    crashed = _crashed(kafka_bootstrap, history, keyring, tmp_path)
    produce_raw(other_kafka_cluster, history, _history_of(0, 2, 1))
    with Follower(other_kafka_cluster, history_topic=history, checkpoint_dir=crashed, keyring=keyring) as restarted:
        with pytest.raises(FollowerAheadError, match="it applied log offsets through 2"):
            restarted.catch_up(30)


def test_a_follower_restarting_from_its_local_log_refuses_another_event_where_its_last_one_was(
        kafka_bootstrap, topics, keyring, tmp_path):
    """What the local log records of its last event (its Kafka offset and link) is checked against the topic: the
    topic holding another store batch's event there is refused (here the record names another link)."""
    from dataclasses import replace

    from secmeta.consumers.kafka.replica_end import END_FILE, EndRecord

    history = topics("h")
    crashed = _crashed(kafka_bootstrap, history, keyring, tmp_path)
    record = EndRecord(crashed / END_FILE)
    try:
        recorded = record.read(3)
        assert recorded is not None and recorded.kafka_offset == 2 and recorded.link == bytes([1, 2]) * 16
        record.write(replace(recorded, link=b"\xab" * 32))   # the newest record of that end, now
    finally:
        record.close()
    with Follower(kafka_bootstrap, history_topic=history, checkpoint_dir=crashed, keyring=keyring) as restarted:
        with pytest.raises(FollowerError, match="diverges from its topic: it applied log offset 2 from Kafka offset 2"):
            restarted.catch_up(30)


def _power_lost(bootstrap: str, history: str, keyring, tmp_path, state: str):
    """A follower with a keyring whose checkpoint is at log offset 2 and its local log at 6 (one store batch per
    event), ``history`` holding ``_history_of(0, 6, 1)``, as a power loss leaves it in ``state``: the record of where
    the local log ends on the topic (``replica_end``, written without a sync) behind, ahead or missing, or the log
    itself cut back to offset 4 (at a batch boundary, or in the middle of the next batch, a torn tail its open cuts),
    its record then ahead of it. Made by the file states, not by timing: the checkpoint of an earlier run is put back
    (a checkpoint is written after the local log's append, less often)."""
    from secmeta.consumers.kafka.replica_end import END_FILE, SLOT, EndRecord, ReplicaEnd
    from secmeta.core.log.highwater import HighWater, Mark

    root = tmp_path / "f"
    messages = _history_of(0, 6, 1)
    produce_raw(bootstrap, history, messages[:2])
    with Follower(bootstrap, history_topic=history, checkpoint_dir=root, keyring=keyring) as first:
        assert first.catch_up(30) and first.next_offset == 2
    shutil.copytree(root / "snapshots", tmp_path / "kept-snapshots")
    shutil.copy(root / "follower.json", tmp_path / "kept-follower.json")
    produce_raw(bootstrap, history, messages[2:])
    with Follower(bootstrap, history_topic=history, checkpoint_dir=root, keyring=keyring) as second:
        assert second.catch_up(30) and second.next_offset == 6
    if state != "checkpoint past the log":
        shutil.rmtree(root / "snapshots")
        shutil.copytree(tmp_path / "kept-snapshots", root / "snapshots")
        shutil.copy(tmp_path / "kept-follower.json", root / "follower.json")
    record = root / END_FILE
    if state == "record missing":
        record.unlink()
    elif state in ("record behind", "record ahead"):  # the newest slot (recording 6) lost: the other records 5
        data = bytearray(record.read_bytes())
        at = next(n for n in range(2) if json.loads(data[n * SLOT + 8:n * SLOT + 8 + int.from_bytes(
            data[n * SLOT + 4:n * SLOT + 8], "big")])["next_offset"] == 6)
        data[at * SLOT:(at + 1) * SLOT] = bytes(SLOT)
        record.write_bytes(bytes(data))
        if state == "record ahead":  # the record of an append the power loss then lost, in the slot freed
            ahead = EndRecord(record)
            ahead.write(ReplicaEnd(7, 6, bytes([1, 6]) * 16, None))
            ahead.close()
    else:  # the log cut back to offset 4 (with its high-water mark, which is written after the data)
        log = Log.open(root / "store", keyring=keyring, read_only=True, create=False)
        try:
            [segment] = log.segments()
            batches = {b.next_offset: b for b in segment.frames(0, segment.size)}
            path, store_id, link = segment.path, log.store.store_id, log.link_at(4)
        finally:
            log.close()
        cut = batches[4].position + batches[4].size
        if state == "log cut mid-batch":
            cut += batches[5].size // 2
        os.truncate(path, cut)
        assert link is not None
        HighWater(root / "store" / "log", store_id, keyring).write(Mark(4, link))
    return root


def _replayed(bootstrap: str, history: str, tmp_path):
    """The image a follower without a local log builds from the topic's start."""
    with Follower(bootstrap, history_topic=history, checkpoint_dir=tmp_path / "replayed") as replay:
        assert replay.catch_up(30)
        return replay.image


@pytest.mark.parametrize("state", ["record missing", "record behind", "record ahead", "log cut at a batch boundary",
                                   "log cut mid-batch"])
def test_a_follower_ahead_of_its_checkpoint_restarts_after_a_power_loss(kafka_bootstrap, topics, keyring, tmp_path,
                                                                        state):
    """A power loss can leave the local log's end unrecorded (the record is written without a sync): the follower
    resumes from its checkpoint (its position, cluster and topic checked against the topic), reads the topic again
    from there checking each event against the local log, which keeps every event once, and serves the image a
    replay from the log's start gives; the local log's end is recorded again, so the next restart starts from it."""
    from secmeta.consumers.kafka.replica_end import END_FILE, EndRecord
    from secmeta.projections.image import SecurityImage, SecurityProjection
    from tests.consumers.conftest import image_state

    history = topics("h")
    root = _power_lost(kafka_bootstrap, history, keyring, tmp_path, state)
    with Follower(kafka_bootstrap, history_topic=history, checkpoint_dir=root, keyring=keyring) as restarted:
        assert restarted.resumed_from == 2 and restarted.catch_up(30)
        assert restarted.next_offset == 6 and restarted.duplicates == 0
        served = image_state(restarted.image)
    assert served == image_state(_replayed(kafka_bootstrap, history, tmp_path))
    log = Log.open(root / "store", keyring=keyring, read_only=True, create=False)
    try:
        logged = list(log.read(0))
        replayed = SecurityImage.EMPTY
        for batch in log.read_batches(0):
            replayed = SecurityProjection().apply(replayed, batch)
    finally:
        log.close()
    assert [(e.offset, e.request_id) for e in logged] == [(i, f"r{i}") for i in range(6)]
    assert image_state(replayed) == served
    record = EndRecord(root / END_FILE)
    try:
        assert record.read(6) is not None
    finally:
        record.close()


def test_a_follower_whose_checkpoint_is_past_its_local_logs_end_refuses_to_start(kafka_bootstrap, topics, keyring,
                                                                                 tmp_path):
    """Fail closed: a checkpoint past the end of a local log whose end is not recorded does not fit it (a power
    loss cannot leave that: the log is appended, synced, before a checkpoint is written); the follower refuses to
    open, naming the checkpoint file, both offsets and the fix."""
    history = topics("h")
    root = _power_lost(kafka_bootstrap, history, keyring, tmp_path, "checkpoint past the log")
    (root / "local-log-end").unlink()
    with pytest.raises(FollowerError, match=r"follower checkpoint .*follower\.json is at log offset 6, past its local "
                                            r"log's end 4 .*does not fit the log.*another --checkpoint-dir"):
        Follower(kafka_bootstrap, history_topic=history, checkpoint_dir=root, keyring=keyring).close()


def test_a_follower_restarting_after_a_power_loss_still_refuses_another_topic(kafka_bootstrap, other_kafka_cluster,
                                                                              topics, keyring, tmp_path):
    """Fail closed: resuming from its checkpoint after a power loss, the follower checks the topic against the
    checkpoint's cluster, topic and last event: another cluster's topic of the same name holding other events is
    refused, and the local log is left as it was."""
    history = topics("h")
    root = _power_lost(kafka_bootstrap, history, keyring, tmp_path, "record missing")
    produce_raw(other_kafka_cluster, history, _history_of(100, 8, 2))
    with Follower(other_kafka_cluster, history_topic=history, checkpoint_dir=root, keyring=keyring) as restarted:
        with pytest.raises(FollowerError, match="follower checkpoint .* was made on another topic"):
            restarted.catch_up(30)
    log = Log.open(root / "store", keyring=keyring, read_only=True, create=False)
    try:
        assert [e.request_id for e in log.read(0)] == [f"r{i}" for i in range(6)]
    finally:
        log.close()
