"""An elected node's role against what goes wrong while it writes (issue 25, the reviewer's findings): a real
store, a real ReplicatedNode and a real Election through a Tansu broker, in this process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest

from secmeta.consumers.kafka.replication.controller import ElectedNode
from secmeta.consumers.kafka.replication.node import ReplicatedNode
from secmeta.consumers.kafka.replication.settings import ReplicationSettings
from secmeta.core import SecurityStore, StoreConfig
from secmeta.core.errors import InvalidValueError
from secmeta.core.server.controllership import NodeAddress
from secmeta.core.store.commit_gate import NotWriterGate, WritesStoppedError
from tests.consumers.replication.test_election import QUICK
from tests.logkit import make_keyring
from tests.storekit import ADMIN, TOKEN_SECRET, acl
from tests.waiting import wait_for


@contextmanager
def elected(tmp_path, bootstrap: str, **client: str) -> Iterator[tuple[SecurityStore, ElectedNode, list]]:
    """A one-node replicated store, elected (it seeds its topic and writes); the failures it reported."""
    keyring = make_keyring(tmp_path)
    settings = ReplicationSettings(bootstrap, node_id=1, replication_factor=1, min_insync_replicas=1, timeout_s=10,
                                   client=client)
    failures: list[BaseException] = []
    with SecurityStore.open(tmp_path / "n1", StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring,
                            commit_gate=NotWriterGate()) as store:
        # a lease no pause of a loaded machine outlasts: these tests are about writes, not failover
        node = ElectedNode(ReplicatedNode(store, settings), replace(QUICK, lease_ms=10_000), failures.append)
        try:
            node.start(NodeAddress(1, "127.0.0.1", 9001))
            wait_for(lambda: node.writing, what="the only node is elected")
            yield store, node, failures
        finally:
            node.close()


def test_an_oversized_batch_is_refused_and_the_active_controller_keeps_its_role(tmp_path, tansu_bootstrap):
    """A batch over the topic's record limit is refused before anything is sent: the write fails naming the
    limit, the node stays the active controller and the next write commits."""
    with elected(tmp_path, tansu_bootstrap, **{"message.max.bytes": "50000"}) as (store, node, failures):
        with pytest.raises(InvalidValueError, match="exceeds the log topic's record limit"):
            store.create_acls([acl(f"t{i}") for i in range(1000)], context=ADMIN)
        assert node.writing and node.cluster.accepts_writes
        store.create_acls([acl("one")], context=ADMIN)
        assert store.log.end_offset == 1 and node.writing and not failures


def test_a_local_append_failing_after_the_kafka_commit_makes_the_node_resign_and_stop(tmp_path, tansu_bootstrap,
                                                                                      monkeypatch):
    """The batch is committed to the topic, then the local fsync fails: the write fails, the node gives the
    controller's role up at once (another node can be elected) and reports the failure that stops it (serve
    exits; restarted, it catches up from the topic), instead of holding the role with a log that refuses
    every write."""
    import errno

    from secmeta.core.log import segment
    from secmeta.core.log.errors import LogFailedError

    def failing_sync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    with elected(tmp_path, tansu_bootstrap) as (store, node, failures):
        store.create_acls([acl("before")], context=ADMIN)
        monkeypatch.setattr(segment, "_datasync", failing_sync)
        with pytest.raises(LogFailedError):
            store.create_acls([acl("lost-locally")], context=ADMIN)
        assert not node.cluster.accepts_writes and not node.writing
        assert failures and isinstance(failures[0], LogFailedError)
        monkeypatch.undo()
        with pytest.raises(WritesStoppedError, match="Input/output error"):
            store.create_acls([acl("after")], context=ADMIN)


def _followers() -> int:
    import threading

    return sum(1 for thread in threading.enumerate() if thread.name == "secmeta-replica")


def test_an_activation_failing_after_the_writer_gate_was_made_leaves_one_follower_and_no_gate(
        tmp_path, tansu_bootstrap, monkeypatch):
    """The node fenced and caught up, then its activation fails (the disk refuses the resume point once): it
    goes back to a standby with its writer's gate closed and exactly one thread following the topic (not two
    appending the same batches), and is elected again once it rejoins."""
    from secmeta.core.store.commit_gate import NotWriterError

    note, failed = ReplicatedNode._note_resume_point, []

    def disk_refuses_once(self) -> None:
        if self.gate is not None and not failed:
            failed.append(self.gate)
            raise OSError(28, "No space left on device")
        note(self)

    monkeypatch.setattr(ReplicatedNode, "_note_resume_point", disk_refuses_once)
    keyring = make_keyring(tmp_path)
    settings = ReplicationSettings(tansu_bootstrap, node_id=1, replication_factor=1, min_insync_replicas=1,
                                   timeout_s=10)
    with SecurityStore.open(tmp_path / "n1", StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring,
                            commit_gate=NotWriterGate()) as store:
        before, failures = _followers(), []
        with ElectedNode(ReplicatedNode(store, settings), replace(QUICK), failures.append) as node:
            node.start(NodeAddress(1, "127.0.0.1", 9001))
            wait_for(lambda: failed and node.election is not None and node.election.sitting_out,
                     what="the activation failed")
            with node._transition:       # the step-down that followed is done
                assert node.node.gate is None and failed[0].failed is not None
                assert _followers() - before == 1
            with pytest.raises(NotWriterError):
                store.create_acls([acl("while-standing-by")], context=ADMIN)
            wait_for(lambda: node.writing, what="elected again after rejoining")
            store.create_acls([acl("one")], context=ADMIN)
            assert store.log.end_offset == 1 and not failures


def test_concurrent_writes_share_kafka_transactions_and_the_topic_holds_each_batch_as_logged(tmp_path, tansu_bootstrap):
    """Eight clients writing at once: writes that queue behind a commit go into the next Kafka transaction together,
    so the topic holds fewer transactions than batches; every write is acknowledged, and the topic's batch records
    are the local log's frames, in order."""
    import threading

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    with elected(tmp_path, tansu_bootstrap) as (store, node, failures):
        errors: list[BaseException] = []

        def client(n: int) -> None:
            try:
                for i in range(5):
                    store.create_acls([acl(f"c{n}-{i}")], context=ADMIN)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors and not failures and store.log.end_offset == 40
        consumer = Consumer({"bootstrap.servers": tansu_bootstrap, "group.id": "check", "enable.partition.eof": True,
                             "isolation.level": "read_committed"})
        consumer.assign([TopicPartition(node.node.topic, 0, OFFSET_BEGINNING)])
        offsets, frames = [], []
        while (msg := consumer.poll(10)) is not None and not msg.error():
            if dict(msg.headers())["secmeta.record"] == b"batch":
                offsets.append(msg.offset())
                frames.append(msg.value())
        consumer.close()
        local = [b.frame() for b in store.log.batches(0)]
        assert frames == local
        transactions = 1 + sum(1 for a, b in zip(offsets, offsets[1:], strict=False) if b != a + 1)
        assert transactions < len(frames)   # a transaction's records are consecutive; a commit marker parts them


def test_a_node_knows_the_active_controller_and_every_node_before_it_listens(tmp_path, tansu_bootstrap):
    """What ``secmeta serve`` does before its listeners open: a second node reads the election topic, so the first
    Metadata it answers names the active node and lists every node. (It answered controller -1 and only itself
    until its election started, after it listened; a client that connected then knew no other node and waited.)"""
    from secmeta.consumers.kafka.replication.join import join
    from secmeta.core.server.controllership import cluster_view
    from secmeta.events.keyring import Keyring

    with elected(tmp_path, tansu_bootstrap) as (store, first, _failures):
        settings = replace(first.node.settings, node_id=2, topic=first.node.topic)
        keyring = Keyring.from_file(tmp_path / "keys.json")     # the store's keyring, shared by every node
        join(tmp_path / "n2", settings, keyring).close()
        with SecurityStore.open(tmp_path / "n2", StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring,
                                commit_gate=NotWriterGate()) as second_store, \
                ElectedNode(ReplicatedNode(second_store, settings), replace(QUICK, lease_ms=10_000), []) as second:
            second.read_announcements()
            broker = NodeAddress(2, "127.0.0.1", 9002)
            view = cluster_view(broker, second.cluster)
            assert view.controller_id == 1
            assert [node.node_id for node in view.brokers] == [2, 1]
            assert view.brokers[1] == NodeAddress(1, "127.0.0.1", 9001)
