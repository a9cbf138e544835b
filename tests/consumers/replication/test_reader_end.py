"""The end of the log topic as a reader finds it: everything committed before the read began, or an error.

``ReplicatedNode.become_writer`` fences the older writer (``init_transactions``), then reads the topic "to its end"
and writes after what it read: a read that ends early makes the new writer miss the deposed writer's last
acknowledged batches and commit its own at their offsets."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from confluent_kafka import Consumer, TopicPartition

from secmeta.consumers.kafka.replication.node import ReplicatedNode
from secmeta.consumers.kafka.replication.reader import BURST, TopicReader
from secmeta.consumers.kafka.replication.records import BatchRecord
from secmeta.consumers.kafka.replication.settings import ReplicationSettings
from secmeta.consumers.kafka.replication.topic import ReplicationUnavailableError
from secmeta.core import AclBindingFilter, SecurityStore, StoreConfig
from secmeta.core.store.commit_gate import NotWriterGate
from tests.chaoskit import tansu_with_cut
from tests.logkit import make_keyring
from tests.storekit import ADMIN, TOKEN_SECRET, acl

pytestmark = [pytest.mark.kafka]


def _high_watermark(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check-end"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
    finally:
        consumer.close()


def _fetched_to(reader: TopicReader, topic: str, end: int, timeout: float = 20.0) -> None:
    """Wait until the reader's consumer has fetched up to ``end`` in the background (librdkafka prefetches from
    the moment a partition is assigned, and queues its end-of-partition event with the fetch that reached it)."""
    deadline = time.monotonic() + timeout
    while reader._consumer.get_watermark_offsets(TopicPartition(topic, 0), cached=True)[1] < end:
        assert time.monotonic() < deadline, "the reader's consumer never fetched the topic's end"
        time.sleep(0.05)
    time.sleep(0.3)  # the fetch response's records and end-of-partition event are queued after its watermark


def test_a_read_to_the_end_never_ends_before_a_batch_committed_before_the_read_began(tmp_path):
    """A batch committed (and acknowledged) before ``read_to_end`` is called is either applied by it, or the read
    fails (Kafka cannot be reached): it never reports the end while missing that batch.  Here the reader's
    consumer had fetched the topic's end earlier, then its connections were cut off (a slow or partitioned
    fetch), and the writer committed one more batch: the reader ends at the end-of-partition event it had
    queued before that commit."""
    keyring = make_keyring(tmp_path)
    with tansu_with_cut(tmp_path) as (bootstrap, network):
        settings = ReplicationSettings(bootstrap, node_id=1, client={"client.id": "chaos-node-1"},
                                       replication_factor=1, min_insync_replicas=1, timeout_s=5)
        with SecurityStore.open(tmp_path / "node1", StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring) as store:
            store.create_acls([acl("before")], context=ADMIN)
            store.set_commit_gate(NotWriterGate())
            with ReplicatedNode(store, settings) as node:
                node.become_writer()
                store.create_acls([acl("seen")], context=ADMIN)
                reader = TopicReader(replace(settings, node_id=2, client={"client.id": "chaos-node-2"}), node.topic)
                try:
                    _fetched_to(reader, node.topic, _high_watermark(bootstrap, node.topic))
                    network.cut(2)                       # the reader's fetches get no answer from now on
                    store.create_acls([acl("acknowledged")], context=ADMIN)   # committed in Kafka, acknowledged
                    acknowledged_end = store.log.end_offset
                    applied: list[int] = []
                    try:
                        reader.read_to_end(lambda record, _offset: applied.append(record.batch.next_offset)
                                           if isinstance(record, BatchRecord) else None)
                    except ReplicationUnavailableError:
                        return                           # failing closed is right: it could not know the end
                    finally:
                        network.heal(2)
                    assert applied and applied[-1] == acknowledged_end, (
                        f"read_to_end returned at log offset {applied[-1] if applied else None} although the topic "
                        f"held a batch committed before the read began, ending at {acknowledged_end}: it trusted an "
                        "end-of-partition event fetched before that commit")
                finally:
                    reader.close()


def _messages(bootstrap: str, topic: str) -> int:
    """How many records a read_committed consumer of ``topic`` is given (transaction markers are not)."""
    from confluent_kafka import OFFSET_BEGINNING

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "count", "enable.partition.eof": True,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    count = 0
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, "the topic's end was not reached"
            if msg.error():
                return count
            count += 1
    finally:
        consumer.close()


def _batch_starts(bootstrap: str, topic: str) -> list[int]:
    """The log offset each batch record of ``topic`` starts at, in the topic's order (read_committed)."""
    from confluent_kafka import OFFSET_BEGINNING

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "starts", "enable.partition.eof": True,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    starts = []
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, "the topic's end was not reached"
            if msg.error():
                return starts
            headers = dict(msg.headers() or [])
            if headers.get("secmeta.record") == b"batch":
                starts.append(int(headers["secmeta.offset"]))
    finally:
        consumer.close()


def test_a_read_to_the_end_after_following_was_stopped_mid_burst_applies_what_is_already_queued(tmp_path,
                                                                                                 tansu_bootstrap):
    """A follower stopped in the middle of a backlog (``follow`` returns after the burst it was applying, as
    ``become_writer`` stops it), then read to the end: a batch committed and acknowledged before the read, and
    already fetched by the reader's consumer, is applied. No slow network here: the consumer's queue holds the
    end-of-partition event of its first fetch, then that batch; a burst of the read that ends on that old event
    ends the read."""
    import threading

    keyring = make_keyring(tmp_path)
    settings = ReplicationSettings(tansu_bootstrap, node_id=1, replication_factor=1, min_insync_replicas=1,
                                   timeout_s=10)
    with SecurityStore.open(tmp_path / "node1", StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring) as store:
        for i in range(980):                         # local batches, seeded in one transaction
            store.create_acls([acl(f"backlog-{i}")], context=ADMIN)
        store.set_commit_gate(NotWriterGate())
        with ReplicatedNode(store, settings) as node:
            node.become_writer()
            while _messages(tansu_bootstrap, node.topic) < 2 * BURST - 1:   # 999: two bursts, the second's
                store.create_acls([acl(f"pad-{store.log.end_offset}")], context=ADMIN)   # last is the end event
            assert _messages(tansu_bootstrap, node.topic) == 2 * BURST - 1
            reader = TopicReader(replace(settings, node_id=2), node.topic)
            try:
                _fetched_to(reader, node.topic, _high_watermark(tansu_bootstrap, node.topic))
                stop, applied = threading.Event(), []

                def apply(record, _offset: int) -> None:
                    stop.set()                               # become_writer stops the follower: this burst ends it
                    if isinstance(record, BatchRecord):
                        applied.append(record.batch.next_offset)

                reader.follow(apply, stop)
                store.create_acls([acl("acknowledged")], context=ADMIN)    # committed in Kafka, acknowledged
                acknowledged_end = store.log.end_offset
                _fetched_to(reader, node.topic, _high_watermark(tansu_bootstrap, node.topic))
                reader.read_to_end(lambda record, _offset: applied.append(record.batch.next_offset)
                                   if isinstance(record, BatchRecord) else None)
                assert applied[-1] == acknowledged_end, (
                    f"read_to_end returned at log offset {applied[-1]}, its consumer holding a batch committed "
                    f"before the read began (ending at {acknowledged_end}): it ended at an end-of-partition event "
                    "fetched before that commit")
            finally:
                reader.close()


def test_a_standby_made_the_writer_while_following_a_backlog_holds_every_acknowledged_batch(tmp_path):
    """The node-level consequence: node 2 follows the topic behind a backlog (its consumer fetched 999 records
    while it applied slowly); node 1 acknowledges one more write; node 2 becomes the writer (fences node 1, reads
    the topic to its end). Its log must hold node 1's acknowledged batch before it writes, else its first write
    takes that batch's offsets: the acknowledged write is lost and the topic holds two batches at one offset."""
    import threading

    from secmeta.consumers.kafka.replication.join import join

    keyring = make_keyring(tmp_path)
    with tansu_with_cut(tmp_path) as (bootstrap, network):
        one = ReplicationSettings(bootstrap, node_id=1, client={"client.id": "chaos-node-1"}, replication_factor=1,
                                  min_insync_replicas=1, timeout_s=10)
        two = replace(one, node_id=2, client={"client.id": "chaos-node-2"})
        with SecurityStore.open(tmp_path / "node1", StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring) as store:
            store.set_commit_gate(NotWriterGate())
            with ReplicatedNode(store, one) as writer:
                writer.become_writer()
                store.create_acls([acl("first")], context=ADMIN)
                join(tmp_path / "node2", replace(two, topic=writer.topic), keyring).close()
                with SecurityStore.open(tmp_path / "node2", StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring,
                                        commit_gate=NotWriterGate()) as second, \
                        ReplicatedNode(second, replace(two, topic=writer.topic)) as standby:
                    calls, held, released = [], [threading.Event(), threading.Event()], threading.Event()

                    def slow_apply(_offset: int) -> None:   # a slow disk: the follower falls behind its consumer
                        calls.append(_offset)
                        if len(calls) <= 2:
                            held[len(calls) - 1].set()
                            released.wait(60)
                            released.clear() if len(calls) == 1 else time.sleep(0.5)

                    failures: list[BaseException] = []
                    standby.follow(failures.append, slow_apply)
                    store.create_acls([acl("x0")], context=ADMIN)
                    assert held[0].wait(30), "the standby did not apply x0"
                    network.cut(2)                          # the backlog reaches node 2 in one fetch, once healed
                    before = _messages(bootstrap, writer.topic)
                    for i in range(2 * BURST - 1):
                        store.create_acls([acl(f"backlog-{i}")], context=ADMIN)
                    assert _messages(bootstrap, writer.topic) - before == 2 * BURST - 1
                    network.heal(2)
                    _fetched_to(standby._reader, writer.topic, _high_watermark(bootstrap, writer.topic))
                    released.set()                          # x0 applied; the next burst is the backlog's first 500
                    assert held[1].wait(30), "the standby did not go on with the backlog"
                    store.create_acls([acl("acknowledged")], context=ADMIN)   # committed in Kafka, acknowledged
                    acknowledged_end = store.log.end_offset
                    _fetched_to(standby._reader, writer.topic, _high_watermark(bootstrap, writer.topic))
                    released.set()
                    standby.become_writer()                 # stops following (after this burst), fences, reads
                    held_at_activation = second.log.end_offset
                    second.create_acls([acl("from-node-2")], context=ADMIN)   # the new writer's first write
                    names = {b.pattern.name for b in second.describe_acls(AclBindingFilter(), context=ADMIN)}
                    starts = _batch_starts(bootstrap, writer.topic)
                    forked = sorted({o for o in starts if starts.count(o) > 1})
                    assert not failures
                    assert held_at_activation == acknowledged_end and "acknowledged" in names and not forked, (
                        f"the new writer's log ended at offset {held_at_activation} after reading the topic to its "
                        f"end, but node 1 had acknowledged a batch ending at {acknowledged_end}; the new writer's "
                        f"write was then committed at the same offset (the topic holds two batches at log offsets "
                        f"{forked}), and its image lacks the acknowledged ACL: {'acknowledged' in names}")


def test_a_node_whose_read_ended_short_of_the_topics_end_does_not_become_the_writer(tmp_path, tansu_bootstrap):
    """``become_writer`` asks Kafka for the topic's end after fencing and refuses, writing nothing, when its read of
    the topic ended short of it (whatever made the read short): committing after a short read would put its batches
    at the offsets of the older writer's acknowledged ones. Here node 2's read drops node 1's last batch."""
    from secmeta.consumers.kafka.replication.join import join
    from secmeta.core.store.commit_gate import CommitGateError

    keyring = make_keyring(tmp_path)
    one = ReplicationSettings(tansu_bootstrap, node_id=1, replication_factor=1, min_insync_replicas=1, timeout_s=10)
    with SecurityStore.open(tmp_path / "node1", StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring) as store:
        store.set_commit_gate(NotWriterGate())
        with ReplicatedNode(store, one) as writer:
            writer.become_writer()
            store.create_acls([acl("first")], context=ADMIN)
            two = replace(one, node_id=2, topic=writer.topic)
            join(tmp_path / "node2", two, keyring).close()
            cut = _high_watermark(tansu_bootstrap, writer.topic)
            store.create_acls([acl("acknowledged")], context=ADMIN)        # committed in Kafka, acknowledged
            starts = _batch_starts(tansu_bootstrap, writer.topic)
            with SecurityStore.open(tmp_path / "node2", StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring,
                                    commit_gate=NotWriterGate()) as second, ReplicatedNode(second, two) as standby:
                reader = standby._reader
                read_to_end = reader.read_to_end

                def short_read(apply, stop=None) -> int:               # a read that ends before the last batch
                    read_to_end(lambda record, offset: apply(record, offset) if offset < cut else None, stop)
                    return cut

                reader.read_to_end = short_read  # type: ignore[method-assign]
                with pytest.raises(CommitGateError, match=f"ends at Kafka offset .* read it only to {cut}"):
                    standby.become_writer()
                assert not standby.writing
                assert _batch_starts(tansu_bootstrap, writer.topic) == starts, "the refused writer wrote"


class _RewoundAfterSeek:
    """A reader's consumer whose position librdkafka moves back to Kafka offset 0 right after the reader's next
    seek to a later offset, once ``armed`` is set: what an OFFSET_BEGINNING offset query answered after that seek
    does (an outdated answer re-arms librdkafka's offset-query timer; the timer's query resets the position)."""

    def __init__(self, consumer: Consumer, armed) -> None:
        self._consumer, self.armed, self.rewound = consumer, armed, 0

    def seek(self, partition: TopicPartition) -> None:
        self._consumer.seek(partition)
        if self.armed.is_set() and partition.offset > 0:
            self.armed.clear()
            self._consumer.seek(TopicPartition(partition.topic, partition.partition, 0))
            self.rewound += 1

    def __getattr__(self, name: str):
        return getattr(self._consumer, name)


def test_a_standby_whose_consumer_is_rewound_to_the_topics_start_while_it_is_promoted_becomes_the_writer(
        tmp_path, tansu_bootstrap):
    """A standby follows the topic, then becomes the writer; its consumer's position goes back to Kafka offset 0
    just after ``become_writer``'s read seeks past what the follower applied (librdkafka re-delivers the store
    record and every batch before). The records it already applied are not applied again: it becomes the writer
    (no "second store record"), holding every batch the older writer committed, and its own writes go on after
    them."""
    import threading

    from secmeta.consumers.kafka.replication.join import join

    keyring = make_keyring(tmp_path)
    one = ReplicationSettings(tansu_bootstrap, node_id=1, replication_factor=1, min_insync_replicas=1, timeout_s=10)
    with SecurityStore.open(tmp_path / "node1", StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring) as store:
        store.create_acls([acl("before")], context=ADMIN)
        store.set_commit_gate(NotWriterGate())
        with ReplicatedNode(store, one) as writer:
            writer.become_writer()
            two = replace(one, node_id=2, topic=writer.topic)
            join(tmp_path / "node2", two, keyring).close()
            with SecurityStore.open(tmp_path / "node2", StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring,
                                    commit_gate=NotWriterGate()) as second, ReplicatedNode(second, two) as newer:
                armed = threading.Event()
                consumer = _RewoundAfterSeek(newer._reader._consumer, armed)
                newer._reader._consumer = consumer  # type: ignore[assignment]
                failures: list[BaseException] = []
                newer.follow(failures.append)
                store.create_acls([acl("while-standby")], context=ADMIN)
                assert second.log.wait_for(store.log.end_offset - 1, timeout=20)
                acknowledged_end = store.log.end_offset
                armed.set()
                newer.become_writer()
                assert consumer.rewound == 1, "the consumer was not rewound: the test did not test anything"
                assert not failures
                assert second.log.end_offset == acknowledged_end
                second.create_acls([acl("from-node-2")], context=ADMIN)
                names = {b.pattern.name for b in second.describe_acls(AclBindingFilter(), context=ADMIN)}
                assert names == {"before", "while-standby", "from-node-2"}
                starts = _batch_starts(tansu_bootstrap, writer.topic)
                assert starts == sorted(set(starts)), f"the topic holds two batches at one offset: {starts}"
