"""The controllers' election (a lease on the election topic), against a real Tansu broker (issue 25, item 3).

Three in-process Elections over one Tansu; each activation runs a real transactional producer's
init_transactions with the transactional.id all nodes share, so the newest active node fences the
previous one as the replication's producer does.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaException, Producer

from secmeta.consumers.kafka.replication.election import Election, ElectionSettings
from secmeta.core.server.controllership import Controllership, NodeAddress
from tests.waiting import wait_for

# The default lease (3 s) on a one-broker cluster: no test waits a lease out (a node that leaves or resigns
# releases the lease at once), and a loaded machine does not make a node lose it between two heartbeats.
QUICK = ElectionSettings(topic_replication_factor=1)


class Node:
    """An Election whose activation fences through a transactional producer and records what happened."""

    def __init__(self, bootstrap: str, store_id: str, node_id: int, fail_activation: bool = False):
        self.bootstrap, self.store_id = bootstrap, store_id
        self.cluster = Controllership(node_id)
        self.producer: Producer | None = None
        self.fail_activation = fail_activation
        self.deactivations: list[str] = []
        self.election = Election({"bootstrap.servers": bootstrap}, store_id,
                                 NodeAddress(node_id, "127.0.0.1", 9000 + node_id), self.cluster,
                                 activate=self._activate, deactivate=self._deactivate, settings=QUICK)

    def _deactivate(self, _term: int, reason: str) -> None:
        self.deactivations.append(reason)

    def _activate(self, _term: int) -> None:
        if self.fail_activation:
            raise RuntimeError("cannot reach the log topic")
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": f"secmeta.{self.store_id}",
                             "enable.idempotence": True, "acks": "all"})
        producer.init_transactions(10)
        self.producer = producer

    def commit(self, topic: str) -> None:
        """One transaction of one record, as the commit gate makes for a batch."""
        assert self.producer is not None
        self.producer.begin_transaction()
        self.producer.produce(topic, b"batch", partition=0)
        self.producer.commit_transaction(10)


@pytest.fixture
def three(tansu_bootstrap):
    store_id = uuid.uuid4().hex
    nodes = [Node(tansu_bootstrap, store_id, n) for n in (1, 2, 3)]
    for node in nodes:
        node.election.start()
    yield nodes
    for node in nodes:
        if node.election._reader is not None:
            node.election.stop()


def _actives(nodes):
    return [n for n in nodes if n.cluster.accepts_writes]


def test_exactly_one_node_is_elected_and_every_node_names_it(three):
    """One of three becomes active; all three learn its id and every node's address from the announcements."""
    (active,) = wait_for(lambda: _actives(three) or None, what="a node becomes active")
    wait_for(lambda: all(n.cluster.active_id == active.cluster.node_id for n in three), what="every node names it")
    wait_for(lambda: all(set(n.cluster.nodes) == {1, 2, 3} for n in three), what="every node knows all three")
    assert three[0].cluster.nodes[2] == NodeAddress(2, "127.0.0.1", 9002)
    assert len(_actives(three)) == 1


def test_when_the_active_leaves_another_takes_over_and_the_old_writer_is_fenced(three, tansu_bootstrap):
    """The active node stops (leaving the group): another node is elected, its activation fences the old
    producer, whose next commit fails; the old node stepped down before that."""
    from tests.consumers.conftest import unique_topic

    topic = unique_topic("fenced")
    (first,) = wait_for(lambda: _actives(three) or None, what="a first active node")
    first.commit(topic)
    old_producer = first.producer
    first.election.stop()
    assert not first.cluster.accepts_writes and first.deactivations == ["this node is stopping"]
    rest = [n for n in three if n is not first]
    (second,) = wait_for(lambda: _actives(rest) or None, timeout=QUICK.lease_s + 10,
                         what="a standby takes over")
    wait_for(lambda: all(n.cluster.active_id == second.cluster.node_id for n in rest), what="both name it")
    assert first.cluster.node_id not in rest[0].cluster.nodes   # it announced that it left
    with pytest.raises(KafkaException) as fenced:
        old_producer.begin_transaction()
        old_producer.produce(topic, b"late", partition=0)
        old_producer.commit_transaction(10)
    assert fenced.value.args[0].fatal()
    second.commit(topic)


def test_a_node_whose_activation_fails_stands_down_and_another_is_elected(tansu_bootstrap):
    """A candidate that cannot activate never accepts writes; it gives the partition up and a node that can
    activate is elected."""
    store_id = uuid.uuid4().hex
    broken, healthy = Node(tansu_bootstrap, store_id, 1, fail_activation=True), Node(tansu_bootstrap, store_id, 2)
    for node in (broken, healthy):
        node.election.start()
    try:
        wait_for(lambda: healthy.cluster.accepts_writes, timeout=30, what="the healthy node is elected")
        assert not broken.cluster.accepts_writes
        assert broken.deactivations[0].startswith("activation failed: cannot reach the log topic")
    finally:
        for node in (broken, healthy):
            node.election.stop()


def test_announcements_read_outside_the_group_name_the_active_node_and_an_empty_topic_reads_at_once(three):
    """What a --standby node reads (Announcements): every announcement so far before start returns (the active
    node named at once), and nothing to wait for on a store whose election topic is still empty."""
    from secmeta.consumers.kafka.replication.election import Announcements

    (active,) = wait_for(lambda: _actives(three) or None, what="a node becomes active")
    # The active node names itself as soon as it activates, before its heartbeat saying so reaches Kafka; a node
    # that read that heartbeat back from the topic (every other node) shows it is there for the watcher to read.
    node = next(n for n in three if n is not active)
    wait_for(lambda: node.cluster.active_id == active.cluster.node_id and set(node.cluster.nodes) == {1, 2, 3},
             what="another node names the active node and knows all three")
    watcher = Controllership(9)
    announcements = Announcements({"bootstrap.servers": node.bootstrap}, node.store_id, watcher, QUICK).start()
    try:
        assert watcher.active_id == active.cluster.node_id and set(watcher.nodes) == {1, 2, 3}
        assert not watcher.accepts_writes
    finally:
        announcements.close()
    empty = Controllership(9)
    started = time.monotonic()
    announcements = Announcements({"bootstrap.servers": node.bootstrap}, uuid.uuid4().hex, empty, QUICK).start()
    announcements.close()
    assert empty.active_id is None and time.monotonic() - started < QUICK.topic_timeout_s


@pytest.mark.kafka  # its own Tansu behind a KafkaCut (review 26, 3.4: it ran in the -m "not kafka" loop)
def test_a_standby_cut_off_from_kafka_marks_itself_cut_off_and_never_campaigns(tmp_path):
    """A --standby node heartbeats as one that may not campaign (Election(candidate=False)): it is never elected
    (the lease stays vacant without a candidate), and when a network cut keeps its heartbeats from coming back for a
    lease it marks itself cut off (so its server serves nothing), by the same rule as a candidate; healed, it is not."""
    from tests.chaoskit import tansu_with_cut

    settings = ElectionSettings(lease_ms=1000, topic_replication_factor=1)
    with tansu_with_cut(tmp_path) as (bootstrap, network):
        cluster = Controllership(7)
        standby = Election({"bootstrap.servers": bootstrap, "client.id": "chaos-node-7"}, uuid.uuid4().hex,
                           NodeAddress(7, "127.0.0.1", 9007), cluster, activate=lambda term: None,
                           deactivate=lambda term, reason: None, settings=settings, candidate=False).start()
        try:
            wait_for(lambda: 7 in standby.view.heard, what="the standby's own heartbeat comes back")
            assert not standby.view.heard[7][1] and cluster.cut_off is None
            network.cut(7)
            reason = wait_for(lambda: cluster.cut_off, timeout=15, what="the standby marks itself cut off")
            assert "none of its heartbeats came back from Kafka within 1000 ms" in reason
            network.heal(7)
            wait_for(lambda: cluster.cut_off is None, timeout=30, what="healed, it serves again")
            assert not cluster.accepts_writes and standby.view.max_claimed == 0
        finally:
            standby.stop()
