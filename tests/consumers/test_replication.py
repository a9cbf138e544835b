"""Replicated mode through a real Kafka-compatible broker (Tansu): the topic is the commit point, every node's
local log a bit-identical, verified replica of it (issue 25 items 1, 2, 6 and 7)."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from secmeta.consumers.kafka.replication.gate import FencedError
from secmeta.consumers.kafka.replication.join import join
from secmeta.consumers.kafka.replication.node import ReplicatedNode
from secmeta.consumers.kafka.replication.settings import ReplicationSettings
from secmeta.core import AclBindingFilter, SecurityStore, StoreConfig
from secmeta.core.log import DivergedError
from secmeta.core.store.commit_gate import NotWriterGate, WritesStoppedError
from secmeta.core.store.replica import create_replica
from tests.logkit import make_keyring
from tests.storekit import ADMIN, TOKEN_SECRET, acl, upsert


@pytest.fixture
def settings(tansu_bootstrap):
    return ReplicationSettings(tansu_bootstrap, node_id=1, replication_factor=1, min_insync_replicas=1, timeout_s=10)


def _of(settings: ReplicationSettings, node: ReplicatedNode) -> ReplicationSettings:
    """The settings naming ``node``'s topic (the broker holds the topics of every test)."""
    return replace(settings, topic=node.topic)


@pytest.fixture
def keyring(tmp_path):
    return make_keyring(tmp_path)


def _open(path, keyring, **kw) -> SecurityStore:
    return SecurityStore.open(path, StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring, **kw)


def _log_bytes(store: SecurityStore) -> bytes:
    return b"".join((store.log.store.log_dir / seg.name).read_bytes() for seg in store.log.segments())


def _topic_batches(settings: ReplicationSettings, topic: str) -> list[bytes]:
    """The committed batch records of ``topic``, as a plain consumer reads them."""
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": "check", "enable.partition.eof": True,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out = []
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, "the topic's end was not reached"
            if msg.error():
                break
            if dict(msg.headers())["secmeta.record"] == b"batch":
                out.append(msg.value())
    finally:
        consumer.close()
    return out


@pytest.fixture
def writer(tmp_path, keyring, settings):
    """A store with history written before replication, then the first node in replicated mode (it seeds)."""
    store = _open(tmp_path / "node1", keyring)
    store.create_acls([acl("before")], context=ADMIN)
    store.set_commit_gate(NotWriterGate())
    node = ReplicatedNode(store, settings)
    node.become_writer()
    yield store, node
    node.close()
    store.close()


def test_the_first_node_seeds_the_topic_and_each_write_is_committed_there_first(writer, settings):
    """The topic holds the seeded history and every later batch, byte for byte as the local log stores them."""
    store, node = writer
    store.create_acls([acl("after")], context=ADMIN)
    store.alter_user_scram_credentials([upsert("alice")], context=ADMIN)
    assert b"".join(_topic_batches(settings, node.topic)) == _log_bytes(store)
    assert store.log.end_offset == 3


def test_a_joiner_rebuilds_a_bit_identical_store_from_the_topic(writer, settings, tmp_path, keyring):
    """`init --join`: the same store id, log bytes, image and a snapshot, verified link by link."""
    store, node = writer
    store.create_acls([acl("after")], context=ADMIN)
    with join(tmp_path / "node2", _of(settings, node), keyring) as joined:
        assert joined.log.store.store_id == store.log.store.store_id
        assert _log_bytes(joined) == _log_bytes(store)
        assert joined.describe_acls(AclBindingFilter(), context=ADMIN) == store.describe_acls(AclBindingFilter(),
                                                                                               context=ADMIN)
        assert list(joined.log.store.snapshot_dir.iterdir())


def test_a_joiner_with_another_keyring_is_refused_and_leaves_nothing(writer, settings, tmp_path):
    """The keyring must hold the store's keys: the joiner is refused before writing anything."""
    from secmeta.events.errors import KeyringError

    (tmp_path / "other").mkdir()
    with pytest.raises(KeyringError, match="none of the keys"):
        join(tmp_path / "node2", _of(settings, writer[1]), make_keyring(tmp_path / "other"))
    assert not (tmp_path / "node2").exists()


def test_a_follower_appends_what_the_writer_commits(writer, settings, tmp_path, keyring):
    """A standby follows the topic into its local log and image: the same bytes as the writer's."""
    store, node = writer
    join(tmp_path / "node2", _of(settings, node), keyring).close()
    with _open(tmp_path / "node2", keyring, commit_gate=NotWriterGate()) as standby, \
            ReplicatedNode(standby, _of(settings, node)) as follower:
        failures: list[BaseException] = []
        applied: list[int] = []  # what serve tells a standby's serving processes to catch up to
        follower.follow(failures.append, applied.append)
        store.create_acls([acl("x"), acl("y")], context=ADMIN)
        assert standby.log.wait_for(store.log.end_offset - 1, timeout=20)
        assert _log_bytes(standby) == _log_bytes(store) and not failures
        assert applied[-1] == store.log.end_offset
        assert len(standby.describe_acls(AclBindingFilter(), context=ADMIN)) == 3


def test_a_fenced_writer_fails_its_write_and_appends_nothing(writer, settings, tmp_path, keyring):
    """A standby promoted to writer fences the older: the older's next write fails, nothing is appended, and it
    stops acknowledging writes; the new writer goes on from the same log."""
    store, node = writer
    join(tmp_path / "node2", _of(settings, node), keyring).close()
    with _open(tmp_path / "node2", keyring, commit_gate=NotWriterGate()) as second, \
            ReplicatedNode(second, replace(_of(settings, node), node_id=2)) as newer:
        failures: list[BaseException] = []
        newer.follow(failures.append)  # a standby first, then promoted
        store.create_acls([acl("while-standby")], context=ADMIN)
        assert second.log.wait_for(store.log.end_offset - 1, timeout=20)
        newer.become_writer()
        before = _log_bytes(store)
        with pytest.raises(FencedError, match="newer writer"):
            store.create_acls([acl("split-brain")], context=ADMIN)
        with pytest.raises(WritesStoppedError):
            store.create_acls([acl("again")], context=ADMIN)
        assert _log_bytes(store) == before
        second.create_acls([acl("from-node-2")], context=ADMIN)
        names = [b.pattern.name for b in second.describe_acls(AclBindingFilter(), context=ADMIN)]
        assert "split-brain" not in names and {"while-standby", "from-node-2"} <= set(names) and not failures
        assert b"".join(_topic_batches(settings, node.topic)) == _log_bytes(second)


def test_a_node_behind_the_topic_catches_up_at_start(writer, settings, tmp_path, keyring):
    """A node stopped while others wrote catches up with the topic before it serves."""
    store, node = writer
    join(tmp_path / "node2", _of(settings, node), keyring).close()
    store.create_acls([acl("while-away")], context=ADMIN)
    with _open(tmp_path / "node2", keyring, commit_gate=NotWriterGate()) as behind, \
            ReplicatedNode(behind, _of(settings, node)) as replica:
        replica.catch_up()
        assert _log_bytes(behind) == _log_bytes(store)


def test_catching_up_at_start_ends_while_the_writer_keeps_writing(writer, settings, tmp_path, keyring):
    """A node started while the active one takes a steady stream of writes catches up to where the topic ended
    when it began, then serves and follows the rest in the background: it does not chase the writer's end for
    as long as writes keep coming (at a cluster's start a joining node did, so it never joined the election
    and its clients never learnt the controller)."""
    import threading

    store, node = writer
    join(tmp_path / "node2", _of(settings, node), keyring).close()
    stop, twenty_written, written = threading.Event(), threading.Event(), [0]

    def write() -> None:
        while not stop.is_set():
            written[0] += 1
            store.create_acls([acl(f"steady-{written[0]}")], context=ADMIN)
            if written[0] == 20:
                twenty_written.set()

    load = threading.Thread(target=write, daemon=True)
    load.start()
    try:
        assert twenty_written.wait(60), "the writer did not write 20 ACLs"
        with _open(tmp_path / "node2", keyring, commit_gate=NotWriterGate()) as behind, \
                ReplicatedNode(behind, _of(settings, node)) as replica:
            catching = threading.Thread(target=replica.catch_up, daemon=True)
            catching.start()
            catching.join(20)
            assert not catching.is_alive(), "the catch-up chased the writer instead of ending"
            assert load.is_alive(), "the writer stopped: nothing shows the catch-up ended under load"
            assert behind.log.end_offset >= 20
    finally:
        stop.set()
        load.join(20)


def test_a_local_log_holding_what_the_topic_does_not_refuses_to_serve(writer, settings, tmp_path, keyring):
    """A local log ahead of the topic (forged, or the topic rolled back) is refused, naming the offset."""
    store, node = writer
    end = store.log.end_offset
    node.close()
    store.close()
    forged = tmp_path / "forged"
    shutil.copytree(tmp_path / "node1", forged)
    with _open(forged, keyring) as local:  # no gate: written past the topic
        local.create_acls([acl("forged")], context=ADMIN)
    with _open(forged, keyring, commit_gate=NotWriterGate()) as local, ReplicatedNode(local, _of(settings, node)) as replica:
        with pytest.raises(DivergedError, match=f"holds offsets {end} to {end + 1} .* that the log topic") as err:
            replica.become_writer()
        assert err.value.offset == end
        with pytest.raises(DivergedError, match=f"holds offsets {end} to"):
            replica.catch_up()


def test_a_local_log_rewritten_below_the_topic_end_is_refused_naming_both_links(writer, settings, tmp_path, keyring):
    """A local log of the same store whose history differs from the topic's is refused at the first batch
    that differs, with the local and the topic's links."""
    store, node = writer
    store.create_acls([acl("second")], context=ADMIN)
    topic_link = store.log.link_at(2).hex()[:16]
    other = tmp_path / "rewritten"  # the store's first batch, then another second one
    create_replica(other, store.log.store.store_id, store.log.store.created_ms, keyring)
    with _open(other, keyring) as copy:
        copy.append_replicated(next(iter(store.log.batches(0))).frame())
        copy.create_acls([acl("rewritten")], context=ADMIN)
        local_link = copy.log.link_at(2).hex()[:16]
    with _open(other, keyring, commit_gate=NotWriterGate()) as local, ReplicatedNode(local, _of(settings, node)) as replica:
        with pytest.raises(DivergedError, match=f"ending at offset 2: the local log's link there is {local_link}, "
                                                f"the topic's is {topic_link}"):
            replica.catch_up()


def test_serve_refuses_a_store_ahead_of_its_topic_naming_the_offset(writer, settings, tmp_path, keyring, capsys):
    """`secmeta serve` in replicated mode on a forged local log exits with an error naming the offset; it never
    listens."""
    from tests.clikit import run

    store, node = writer
    end, topic = store.log.end_offset, node.topic
    node.close()
    store.close()
    with _open(tmp_path / "node1", keyring) as local:  # written without the topic
        local.create_acls([acl("forged")], context=ADMIN)
    code, out, err = run(capsys, "serve", "--store", str(tmp_path / "node1"), "--key-file", str(tmp_path / "keys.json"),
                         "--listeners", "PLAINTEXT://127.0.0.1:0", "--processes", "1",
                         "--replication-bootstrap-server", settings.bootstrap, "--replication-topic", topic,
                         "--replication-factor", "1", "--min-insync-replicas", "1")
    assert code == 1 and "listening" not in out
    assert f"the local log holds offsets {end} to {end + 1}" in err and "does not serve" in err


@pytest.fixture
def private_broker(tmp_path):
    """A Tansu broker of this test's own, which the test may kill."""
    import socket
    import subprocess

    from tests.chaoskit import _tansu_binary, free_port, wait_for

    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    with open(tmp_path / "tansu.log", "wb") as out:
        broker = subprocess.Popen([_tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                                   "--storage-engine", "memory://tansu/"], stdout=out, stderr=subprocess.STDOUT)
    def listening() -> bool:
        assert broker.poll() is None, "tansu exited"
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    wait_for(listening, 30, "tansu to listen")
    yield broker, f"127.0.0.1:{port}"
    broker.kill()
    broker.wait(10)


@pytest.mark.kafka  # its own Tansu (private_broker), not the session's
def test_a_writer_cut_off_from_kafka_fails_closed(private_broker, tmp_path, keyring):
    """When Kafka does not confirm a commit, the write fails, nothing is appended locally, and the node stops
    acknowledging writes (whether Kafka has the batch is unknown)."""
    from secmeta.core.store.commit_gate import CommitGateError

    broker, bootstrap = private_broker
    with _open(tmp_path / "n", keyring, commit_gate=NotWriterGate()) as store, \
            ReplicatedNode(store, ReplicationSettings(bootstrap, replication_factor=1, min_insync_replicas=1,
                                                      timeout_s=2)) as node:
        node.become_writer()
        store.create_acls([acl("a")], context=ADMIN)
        before = _log_bytes(store)
        broker.kill()
        broker.wait(10)
        with pytest.raises(CommitGateError, match="offset 1 was not committed"):
            store.create_acls([acl("b")], context=ADMIN)
        with pytest.raises(WritesStoppedError):
            store.create_acls([acl("c")], context=ADMIN)
        assert _log_bytes(store) == before and not node.writing


def test_a_batch_too_large_for_the_topic_is_refused_and_the_writer_goes_on(tmp_path, keyring, settings):
    """A request whose batch exceeds the topic's record limit (message.max.bytes) is refused alone, naming the
    limit; nothing is sent or appended, and smaller writes still commit."""
    from secmeta.core.errors import InvalidValueError

    small = replace(settings, client={"message.max.bytes": "50000"})
    with _open(tmp_path / "n", keyring, commit_gate=NotWriterGate()) as store, ReplicatedNode(store, small) as node:
        node.become_writer()
        with pytest.raises(InvalidValueError, match="exceeds the log topic's record limit .* split the request"):
            store.create_acls([acl(f"t{i}") for i in range(1000)], context=ADMIN)
        store.create_acls([acl("one")], context=ADMIN)
        assert store.log.end_offset == 1 and node.writing
        assert b"".join(_topic_batches(settings, node.topic)) == _log_bytes(store)


def test_a_log_after_a_retention_anchor_seeds_what_a_joiner_needs(tmp_path, keyring, settings):
    """Seeded from a log whose first segments retention deleted, the topic carries the sealed anchor and a
    snapshot: a joiner starts its log at the anchor, loads the deleted history from the snapshot, and holds
    the same bytes and ACLs."""
    from secmeta.core.log import LogConfig

    node1 = tmp_path / "node1"
    config = StoreConfig(log=LogConfig(segment_bytes=4096, index_interval_bytes=256), delete_covered_segments=True)
    with SecurityStore.open(node1, config, keyring=keyring) as store:
        for i in range(60):
            store.create_acls([acl(f"t{i}")], context=ADMIN)
        store.snapshot()
        start = store.log.start_offset
    assert start > 0
    config.save(node1)
    with SecurityStore.open(node1, StoreConfig.load(node1), keyring=keyring, commit_gate=NotWriterGate()) as store, \
            ReplicatedNode(store, settings) as node:
        node.become_writer()
        store.create_acls([acl("after")], context=ADMIN)
        with join(tmp_path / "node2", _of(settings, node), keyring) as joined:
            assert joined.log.start_offset == start
            assert _log_bytes(joined) == _log_bytes(store)
            everything = AclBindingFilter()
            assert joined.describe_acls(everything, context=ADMIN) == store.describe_acls(everything, context=ADMIN)
            assert len(joined.describe_acls(everything, context=ADMIN)) == 61


def test_a_restarted_node_resumes_at_its_last_batch_and_a_wrong_hint_costs_only_time(writer, settings, tmp_path,
                                                                                      keyring, caplog):
    """A node reads the topic from the last batch record it applied (its resume point); a resume point that
    names another record makes it read from the first record instead, and it catches up all the same."""
    import json

    from secmeta.consumers.kafka.replication.resume import RESUME_FILE

    store, node = writer
    join(tmp_path / "node2", _of(settings, node), keyring).close()
    node2 = tmp_path / "node2"
    with _open(node2, keyring, commit_gate=NotWriterGate()) as standby, ReplicatedNode(standby, _of(settings, node)) as r:
        store.create_acls([acl("one")], context=ADMIN)
        r.catch_up()
    point = json.loads((node2 / RESUME_FILE).read_text())
    assert point["next_offset"] == store.log.end_offset and point["kafka_offset"] > 0
    for hint, reads_from_start in ((point, False), ({**point, "kafka_offset": 0}, True)):
        (node2 / RESUME_FILE).write_text(json.dumps(hint))
        store.create_acls([acl(f"more-{reads_from_start}")], context=ADMIN)
        caplog.clear()
        with caplog.at_level("INFO", logger="secmeta.replication"), \
                _open(node2, keyring, commit_gate=NotWriterGate()) as standby, \
                ReplicatedNode(standby, _of(settings, node)) as r:
            r.catch_up()
            assert _log_bytes(standby) == _log_bytes(store)
        assert ("from its first record" in caplog.text) == reads_from_start


def test_a_log_topic_less_durable_than_asked_is_refused(tmp_path, keyring, settings):
    """An existing log topic with min.insync.replicas below the setting, or with retention, is refused before
    anything is written, naming each setting."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from secmeta.consumers.kafka.replication.topic import ReplicationUnavailableError

    topic = f"__secmeta_log.weak-{tmp_path.name}"
    admin = AdminClient({"bootstrap.servers": settings.bootstrap})
    weak = {"min.insync.replicas": "1", "retention.ms": "86400000"}
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=weak)]).values():
        future.result(15)
    strict = ReplicationSettings(settings.bootstrap, topic=topic, replication_factor=3, min_insync_replicas=2)
    with _open(tmp_path / "n", keyring, commit_gate=NotWriterGate()) as store:
        with pytest.raises(ReplicationUnavailableError, match="min.insync.replicas is 1, below --min-insync-replicas 2"
                                                              ".*retention.ms is 86400000"):
            ReplicatedNode(store, strict)
        assert _topic_batches(settings, topic) == []


def _interrupted_seed(path, keyring, settings: ReplicationSettings, monkeypatch, transactions: int) -> str:
    """A store of five batches at ``path`` whose seed of its (returned) topic was cut after ``transactions``
    transactions of one record each: the topic holds a prefix of the log."""
    from secmeta.consumers.kafka.replication import gate as gate_module
    from secmeta.core.store.commit_gate import CommitGateError

    with _open(path, keyring) as store:
        for i in range(5):
            store.create_acls([acl(f"t{i}")], context=ADMIN)
    commit, calls = gate_module.KafkaCommitGate.commit_records, []

    def cut(self, records, what):
        calls.append(what)
        if len(calls) > transactions:
            raise CommitGateError("the network was cut")
        return commit(self, records, what)

    with monkeypatch.context() as patch:
        patch.setattr(gate_module, "SEED_TRANSACTION_BYTES", 1)  # one record per transaction
        patch.setattr(gate_module.KafkaCommitGate, "commit_records", cut)
        with _open(path, keyring, commit_gate=NotWriterGate()) as store:
            with ReplicatedNode(store, settings) as node, pytest.raises(CommitGateError, match="cut"):
                node.become_writer()
    return node.topic


def test_an_interrupted_seed_is_completed_by_the_next_writer(tmp_path, keyring, settings, monkeypatch):
    """A seed cut off after some of its transactions leaves a prefix of the log on the topic; the next writer
    completes it (the topic then holds the whole log and its seeded mark) instead of refusing its own log."""
    topic = _interrupted_seed(tmp_path / "n", keyring, settings, monkeypatch, transactions=3)
    with _open(tmp_path / "n", keyring, commit_gate=NotWriterGate()) as store:
        partial = b"".join(_topic_batches(settings, topic))
        assert partial and _log_bytes(store).startswith(partial) and partial != _log_bytes(store)
        with ReplicatedNode(store, settings) as node:
            node.become_writer()
            store.create_acls([acl("after")], context=ADMIN)
            assert b"".join(_topic_batches(settings, topic)) == _log_bytes(store)
            with join(tmp_path / "joined", _of(settings, node), keyring) as joined:
                assert _log_bytes(joined) == _log_bytes(store)


def test_init_join_without_a_topic_to_choose_names_the_choice_and_makes_nothing(writer, settings, tmp_path,
                                                                               capsys):
    """`secmeta init --join` on a cluster holding several stores' log topics asks for --replication-topic,
    lists them, and leaves no directory behind."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.clikit import run

    other = f"__secmeta_log.other-{tmp_path.name}"  # another store's log topic on the same cluster
    admin = AdminClient({"bootstrap.servers": settings.bootstrap})
    for future in admin.create_topics([NewTopic(other, 1, 1)]).values():
        future.result(15)
    code, out, err = run(capsys, "init", "--store", str(tmp_path / "new"), "--key-file", str(tmp_path / "keys.json"),
                         "--join", settings.bootstrap, "--replication-timeout", "10")
    assert code == 1 and writer[1].topic in err and other in err and "--replication-topic" in err
    assert not (tmp_path / "new").exists()


def test_init_join_of_a_topic_the_cluster_lacks_says_so(settings, tmp_path, capsys):
    """`secmeta init --join --replication-topic T` when the cluster has no T names it at once (no wait for a
    topic that never comes) and leaves no directory."""
    from tests.clikit import run

    make_keyring(tmp_path)
    code, out, err = run(capsys, "init", "--store", str(tmp_path / "new"), "--key-file", str(tmp_path / "keys.json"),
                         "--join", settings.bootstrap, "--replication-topic", "__secmeta_log.nowhere")
    assert code == 1 and "has no topic __secmeta_log.nowhere" in err
    assert not (tmp_path / "new").exists()


def test_a_node_holding_only_an_interrupted_seed_cannot_join_or_complete_it(tmp_path, keyring, settings, monkeypatch):
    """While a seed is interrupted, `init --join` is refused (wait for the first node) and leaves nothing, and a
    node whose log holds only what the topic holds cannot complete the seed (it would drop the rest of the
    seeder's history); the seeder then completes it with its whole log."""
    from secmeta.consumers.kafka.replication.topic import ReplicationUnavailableError
    from secmeta.core.store.commit_gate import CommitGateError

    topic = _interrupted_seed(tmp_path / "n", keyring, settings, monkeypatch, transactions=4)
    with _open(tmp_path / "n", keyring, commit_gate=NotWriterGate()) as store:
        store_id, created = store.log.store.store_id, store.log.store.created_ms
    prefix = _topic_batches(settings, topic)
    assert 0 < len(prefix) < 5
    with pytest.raises(ReplicationUnavailableError, match="not seeded yet .* wait for the first node"):
        join(tmp_path / "joiner", replace(settings, topic=topic), keyring)
    assert not (tmp_path / "joiner").exists()
    create_replica(tmp_path / "prefix", store_id, created, keyring)   # a node holding only the topic's batches
    with _open(tmp_path / "prefix", keyring, commit_gate=NotWriterGate()) as partial, \
            ReplicatedNode(partial, replace(settings, topic=topic, node_id=2)) as other:
        with pytest.raises(CommitGateError, match="only the node that began the seed can complete it"):
            other.become_writer()
        assert b"".join(_topic_batches(settings, topic)) == b"".join(prefix)
    with _open(tmp_path / "n", keyring, commit_gate=NotWriterGate()) as store, \
            ReplicatedNode(store, replace(settings, topic=topic)) as node:
        node.become_writer()
        assert b"".join(_topic_batches(settings, topic)) == _log_bytes(store) and store.log.end_offset == 5


def test_a_gate_refuses_batches_that_do_not_extend_the_topic_in_plain_words(settings, tmp_path):
    """A batch, or a group of batches, that does not start where the topic ends is refused, and the message reads
    right for either."""
    from secmeta.consumers.kafka.replication.gate import KafkaCommitGate
    from secmeta.core.store.commit_gate import CommitGateError, PendingBatch

    gate = KafkaCommitGate(settings, "grammar", f"grammar-{tmp_path.name}", "{}")
    try:
        gate.expect(5, b"x" * 32)
        one = PendingBatch(3, 4, 0, b"f", b"y" * 32, b"z" * 32)
        with pytest.raises(CommitGateError, match=r"^the batch at offset 3 was not committed: it does not extend .*"
                                                  r"which ends at offset 5"):
            gate.commit_group([one])
        with pytest.raises(CommitGateError, match=r"^the group of 2 batches at offsets 3 to 5 was not committed: it "
                                                  r"does not extend"):
            gate.commit_group([one, PendingBatch(4, 5, 0, b"f", b"z" * 32, b"w" * 32)])
    finally:
        gate.close()


@pytest.mark.kafka  # its own Tansu behind a KafkaCut
def test_a_node_following_a_silent_kafka_stops_following_at_once(tmp_path, keyring):
    """A node that stepped down follows patiently; while Kafka is silent (a network cut) it sits reading the topic
    to its end for up to the replication timeout. Becoming the writer first stops following, and that must not wait
    the timeout (60 s here) out."""
    import threading

    from tests.chaoskit import tansu_with_cut, wait_for

    with tansu_with_cut(tmp_path) as (bootstrap, network), \
            _open(tmp_path / "n", keyring, commit_gate=NotWriterGate()) as store, \
            ReplicatedNode(store, ReplicationSettings(bootstrap, client={"client.id": "chaos-node-1"},
                                                      replication_factor=1, min_insync_replicas=1,
                                                      timeout_s=60)) as node:
        node.become_writer()
        store.create_acls([acl("a")], context=ADMIN)
        network.cut(1)
        failures: list[BaseException] = []
        node.follow(failures.append, patient=True)
        stopped = threading.Thread(target=node._stop_following)
        stopped.start()
        wait_for(lambda: not stopped.is_alive(), 15, "following stops while Kafka is silent")
        assert failures == []
        network.heal(1)


def _copy_topic(settings: ReplicationSettings, topic: str, to: str, change_store) -> None:
    """Copy ``topic``'s committed records into a new topic ``to``, the store record's JSON passed through
    ``change_store`` (what one who can write to Kafka but holds no key can do)."""
    import json

    from confluent_kafka import Producer

    from secmeta.consumers.kafka.replication.topic import ensure_topic

    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": "copy", "enable.partition.eof": True,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    ensure_topic(settings, to)
    producer = Producer({"bootstrap.servers": settings.bootstrap})
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, "the topic's end was not reached"
            if msg.error():
                break
            value, headers = msg.value(), msg.headers()
            if dict(headers)["secmeta.record"] == b"store":
                value = json.dumps(change_store(json.loads(value)), sort_keys=True).encode()
            producer.produce(to, value, headers=headers)
        assert producer.flush(10) == 0
    finally:
        consumer.close()


def test_a_joiner_refuses_a_store_record_whose_settings_were_altered_and_leaves_nothing(writer, settings, tmp_path,
                                                                                       keyring):
    """Finding 1 of the review: the store record's settings become a joiner's config.json (super users, the ACL
    default). One who can write to Kafka but holds no key copies the topic with other settings: the joiner
    refuses it, naming the topic and the seal, and writes nothing."""
    from secmeta.consumers.kafka.replication.records import TopicFormatError

    store, node = writer
    forged = f"{node.topic}-forged"
    _copy_topic(settings, node.topic, forged, lambda body: dict(
        body, config={"super_users": ["User:mallory"], "allow_everyone_if_no_acl_found": True}))
    with pytest.raises(TopicFormatError, match=f"log topic {forged}'s store record fails its seal"):
        join(tmp_path / "node2", replace(settings, topic=forged), keyring)
    assert not (tmp_path / "node2").exists()
    with join(tmp_path / "node3", _of(settings, node), keyring) as joined:  # the topic it was copied from joins
        assert not joined.authorize("User:mallory", "h", "Write", "topic", "orders")


def test_a_node_refuses_a_store_record_with_other_settings_than_its_own_naming_what_differs(tmp_path, keyring,
                                                                                          settings):
    """A node reading the topic's store record (sealed, so written by a key holder) refuses it when the settings it
    carries differ from the node's config.json, naming the setting and both values, and appends nothing."""
    import json

    from secmeta.consumers.kafka.replication.records import TopicFormatError

    _open(tmp_path / "n1", keyring).close()
    (tmp_path / "n1" / "config.json").write_text(json.dumps({"super_users": ["User:admin"]}))
    with _open(tmp_path / "n1", keyring, commit_gate=NotWriterGate()) as store, \
            ReplicatedNode(store, settings) as node:
        node.become_writer()
        store.create_acls([acl("a")], context=ADMIN)
        topic = node.topic
    # tuning may differ from node to node, and the order super users are listed in decides nothing
    join(tmp_path / "n3", replace(settings, topic=topic), keyring).close()
    (tmp_path / "n3" / "config.json").write_text(json.dumps({"super_users": ["User:admin"],
                                                            "token_expiry_check_interval_ms": 60_000}))
    with _open(tmp_path / "n3", keyring, commit_gate=NotWriterGate()) as other, \
            ReplicatedNode(other, replace(settings, topic=topic)) as follower:
        follower.catch_up()
        assert other.authorize("User:admin", "h", "Write", "topic", "orders")
    join(tmp_path / "n2", replace(settings, topic=topic), keyring).close()
    (tmp_path / "n2" / "config.json").write_text(json.dumps({"super_users": ["User:admin", "User:eve"]}))
    with _open(tmp_path / "n2", keyring, commit_gate=NotWriterGate()) as standby:
        end = standby.log.end_offset
        with ReplicatedNode(standby, replace(settings, topic=topic)) as follower, \
                pytest.raises(TopicFormatError, match=rf"log topic {topic}'s store record holds other settings that "
                                                      r"decide access.*super_users is \['User:admin'\] there, "
                                                      r"\['User:admin', 'User:eve'\] here"):
            follower.catch_up()
        assert standby.log.end_offset == end


@pytest.mark.parametrize(("version", "why", "kept"), [
    (2, "did not seal its store record", ()),
    (3, "sealed its store record without the topic's name", ("seal",)),
])
def test_a_store_record_of_an_older_unsealed_format_is_refused_saying_what_to_do(writer, settings, tmp_path, keyring,
                                                                                  version, why, kept):
    """A topic whose store record was written by a secmeta that did not seal it (format version 2), or sealed it
    without the topic it was written to (version 3, never released), cannot be trusted for its settings: a
    joiner refuses it, naming the version, why and the fix (a new topic)."""
    store, node = writer
    old = f"{node.topic}-v{version}"
    _copy_topic(settings, node.topic, old, lambda body: {k: v for k, v in dict(body, version=version).items()
                                                         if k != "seal" or k in kept})
    with pytest.raises(Exception, match=f"log topic format version {version}.*{re.escape(why)}.*"
                                        "--replication-topic"):
        join(tmp_path / "node2", replace(settings, topic=old), keyring)
    assert not (tmp_path / "node2").exists()


def _resume_then_edit(writer, settings, tmp_path, keyring):
    """node2 joined, caught up once as a standby (so it keeps a resume point), then closed; the writer wrote on."""
    from secmeta.consumers.kafka.replication.resume import RESUME_FILE

    store, node = writer
    node2 = tmp_path / "node2"
    join(node2, _of(settings, node), keyring).close()
    with _open(node2, keyring, commit_gate=NotWriterGate()) as standby, ReplicatedNode(standby, _of(settings, node)) as r:
        store.create_acls([acl("seen")], context=ADMIN)
        r.catch_up()
    assert (node2 / RESUME_FILE).exists()
    store.create_acls([acl("while-away")], context=ADMIN)
    return node2


def test_a_resuming_node_checks_the_store_record_against_its_own_config(writer, settings, tmp_path, keyring):
    """Review finding 1 (resuming nodes): a node that resumes mid-topic (replication-resume.json) still reads the
    topic's store record first and refuses it when its config.json's settings that decide access differ, as a
    node reading from the start does; nothing is appended."""
    import json

    from secmeta.consumers.kafka.replication.records import TopicFormatError

    store, node = writer
    node2 = _resume_then_edit(writer, settings, tmp_path, keyring)
    (node2 / "config.json").write_text(json.dumps({"super_users": ["User:eve"]}))
    with _open(node2, keyring, commit_gate=NotWriterGate()) as standby:
        end = standby.log.end_offset
        with pytest.raises(TopicFormatError, match=rf"log topic {node.topic}'s store record holds other settings "
                                                   r"that decide access.*super_users is \['User:admin'\] there, "
                                                   r"\['User:eve'\] here"):
            with ReplicatedNode(standby, _of(settings, node)) as r:
                r.catch_up()
        assert standby.log.end_offset == end < store.log.end_offset


def test_a_resuming_node_refuses_an_unsealed_older_topic_as_a_joiner_does(writer, settings, tmp_path, keyring):
    """Review finding 1 (after an upgrade): a node whose resume point names a batch of a version-2 topic (an
    unsealed store record) refuses it with the joiner's error instead of working on from its resume point."""
    from secmeta.consumers.kafka.replication.resume import ResumePoint, write_resume_point

    store, node = writer
    old = f"{node.topic}-v2"
    _copy_topic(settings, node.topic, old, lambda body: {k: v for k, v in dict(body, version=2).items()
                                                         if k != "seal"})
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": "find", "enable.partition.eof": True})
    consumer.assign([TopicPartition(old, 0, OFFSET_BEGINNING)])
    last = None
    try:
        while (msg := consumer.poll(10)) is not None and not msg.error():
            if dict(msg.headers())["secmeta.record"] == b"batch":
                last = msg.offset()
    finally:
        consumer.close()
    assert last is not None
    node2 = tmp_path / "node2"
    join(node2, _of(settings, node), keyring).close()
    with _open(node2, keyring, commit_gate=NotWriterGate()) as standby:
        write_resume_point(standby.log, ResumePoint(old, last, standby.log.end_offset, standby.log.last_link, True))
        with pytest.raises(Exception, match="log topic format version 2.*did not seal its store record.*"
                                            "--replication-topic"):
            with ReplicatedNode(standby, replace(settings, topic=old)) as r:
                r.catch_up()


def _first_record(settings: ReplicationSettings, topic: str) -> bytes:
    """The value of ``topic``'s first committed record (its store record)."""
    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": "first", "enable.partition.eof": True,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:
        msg = consumer.poll(10)
        assert msg is not None and not msg.error()
        return msg.value()
    finally:
        consumer.close()



def test_a_joiner_refuses_a_sealed_store_record_replayed_from_another_topic_of_the_store(tmp_path, keyring, settings):
    """Review 2 (FAILING ON PURPOSE): the store record's seal covers its fields but not the topic it was written to,
    so one who can write to Kafka but holds no key replays a genuine record from an older topic of the same store
    (its settings since changed: User:eve no longer a super user) in front of the current topic's batches, and a
    joiner takes the old settings as its config.json. Fix: seal the record to its topic (the topic's name in the
    sealed bytes or the seal's context), so a record verifies only in the topic it was written to."""
    import json

    from secmeta.consumers.kafka.replication.records import TopicFormatError

    n1 = tmp_path / "n1"
    _open(n1, keyring).close()
    (n1 / "config.json").write_text(json.dumps({"super_users": ["User:admin", "User:eve"]}))
    old, new = f"secmeta-review2-old-{tmp_path.name}", f"secmeta-review2-new-{tmp_path.name}"
    with _open(n1, keyring, commit_gate=NotWriterGate()) as store, \
            ReplicatedNode(store, replace(settings, topic=old)) as node:
        node.become_writer()
    (n1 / "config.json").write_text(json.dumps({"super_users": ["User:admin"]}))   # eve's rights withdrawn
    with _open(n1, keyring, commit_gate=NotWriterGate()) as store, \
            ReplicatedNode(store, replace(settings, topic=new)) as node:
        node.become_writer()           # the store replicated to a new topic with the new settings
        store.create_acls([acl("a")], context=ADMIN)
    stale = json.loads(_first_record(settings, old))
    forged = f"{new}-forged"
    _copy_topic(settings, new, forged, lambda body: stale)
    with pytest.raises(TopicFormatError, match=f"log topic {re.escape(forged)}'s store record fails its seal"):
        join(tmp_path / "n2", replace(settings, topic=forged), keyring).close()
    assert not (tmp_path / "n2").exists()
