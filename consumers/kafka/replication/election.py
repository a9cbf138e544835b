"""Which node is the active controller: decided by Kafka's group membership, never by a protocol of ours.

Every node of a replicated store joins one consumer group (``group_id``, derived from the store id)
subscribed to a one-partition election topic (``election_topic``); the member Kafka's group
coordinator assigns the partition is the candidate, as Confluent Schema Registry elects its primary.
The candidate then activates (``activate``: the replication's transactional producer calls
``init_transactions`` with the transactional.id every node shares, which fences the previous writer,
then the node catches up to the log topic's last stable offset) and only then accepts writes
(``Controllership.become_active``) and announces itself active.  On a revoke, a lost assignment
(librdkafka's own check: no successful heartbeat for session.timeout.ms, so a cut from Kafka or a
hung process loses it) or an activation that failed, it stops accepting writes at once
(``Controllership.step_down``) and calls ``deactivate``; after a failed activation it leaves the
group and joins again, so another node can be elected.

The election never decides alone whether a write is safe: the fence is Kafka's transactional
producer, whose commit fails once a newer node ran init_transactions.  A write is acknowledged only
after that commit, so a deposed node's acknowledgements are all of batches the new active node reads
before it writes.

Announcements: each node writes its id, address and role to the election topic (key = node id,
JSON value; a tombstone when it stops cleanly) and reads every node's announcements back with a
group-less consumer, so Metadata can list every node and name the active one: the newest "active"
announcement is the latest activation's.  An announcement is only a hint for clients (a node that is
not active answers NOT_CONTROLLER).  A node whose writer fails (fenced by a newer one, or a commit of
unknown fate) ``resign``s: it leaves the group for a session timeout so another node is elected.

Timing (the failover target is 10 s): the defaults below detect a dead or cut-off node within
``session_timeout_ms`` (6 s, the smallest a Kafka broker accepts by default,
group.min.session.timeout.ms); the rebalance that follows waits at most one heartbeat for the
survivors and ``max_poll_interval_ms`` for a member that is still joining.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from secmeta.core.errors import SecmetaError
from secmeta.core.server.controllership import Controllership, NodeAddress

__all__ = ["Announcements", "Election", "ElectionError", "ElectionSettings", "election_topic", "group_id"]

log = logging.getLogger("secmeta.replication.election")

PARTITION = 0
_POLL_S = 0.05


class ElectionError(SecmetaError):
    """The election could not start (its topic cannot be created or read)."""


@dataclass(frozen=True, slots=True)
class ElectionSettings:
    """The group's timing (librdkafka's names); see the module's docstring for what each bounds."""

    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 1000
    max_poll_interval_ms: int = 6000
    topic_replication_factor: int = 3
    topic_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms <= self.max_poll_interval_ms:
            raise ElectionError("election timing: need 0 < heartbeat_interval_ms < session_timeout_ms <= "
                                f"max_poll_interval_ms, not {self.heartbeat_interval_ms}, "
                                f"{self.session_timeout_ms}, {self.max_poll_interval_ms}")


def election_topic(store_id: str) -> str:
    """The one-partition topic the controllers' group subscribes to and announces on."""
    return f"__secmeta_controllers.{store_id}"


def group_id(store_id: str) -> str:
    """The controllers' consumer group: one per store."""
    return f"secmeta-controllers.{store_id}"


def _announcement(node: NodeAddress, active: bool) -> bytes:
    return json.dumps({"node_id": node.node_id, "host": node.host, "port": node.port, "rack": node.rack,
                       "active": active}, sort_keys=True).encode()


def _read_announcement(key: bytes | None, value: bytes | None) -> tuple[NodeAddress, bool | None] | None:
    """(address, active) of a record, (address, None) for a node that left; None for what is not ours."""
    try:
        node_id = int((key or b"").decode())
        if value is None:
            return NodeAddress(node_id, "", 0), None
        fields = json.loads(value)
        node = NodeAddress(int(fields["node_id"]), str(fields["host"]), int(fields["port"]), fields.get("rack"))
        return (node, bool(fields["active"])) if node.node_id == node_id else None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


class Election:
    """This node's membership in the controllers' group, its activation and its announcements.

    ``start()`` joins; ``stop()`` steps down, announces the node gone and leaves the group (so a standby
    is elected at once, not after a session timeout).  ``activate(term)`` runs in its own thread (it may take
    seconds: fencing and catching up) while the group keeps being polled; ``deactivate(term, reason)`` runs
    on the election's thread and must return at once.  ``term`` grows with every change of the assignment,
    so a callee can tell a late activation from a later one.
    """

    def __init__(self, client: Mapping[str, Any], store_id: str, node: NodeAddress, cluster: Controllership, *,
                 activate: Callable[[int], None], deactivate: Callable[[int, str], None],
                 settings: ElectionSettings = ElectionSettings(), topic: str | None = None):
        if cluster.node_id != node.node_id:
            raise ElectionError(f"node {node.node_id} cannot run the election of node {cluster.node_id}")
        self.client = dict(client)
        self.store_id = store_id
        self.node = node
        self.cluster = cluster
        self.settings = settings
        self.topic = topic or election_topic(store_id)
        self._activate, self._deactivate = activate, deactivate
        self._lock = threading.Lock()
        self._term = 0                  # bumped on every assignment change: an activation of an older term is void
        self._holding = False           # Kafka assigned this node the election partition
        self._rejoin_at: float | None = None   # after a failed activation: out of the group until then
        self._resigning: str | None = None     # resign() asked the election's thread to give the role up
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._member: Consumer | None = None
        self._reader: Announcements | None = None
        self._producer: Producer | None = None

    def __repr__(self) -> str:
        return f"<Election {self.topic} node={self.node.node_id} holding={self._holding} {self.cluster!r}>"

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Election:
        self._reader = Announcements(self.client, self.store_id, self.cluster, self.settings, self.topic).open()
        quiet = {"logger": log}
        self._producer = Producer({**self.client, **quiet, "linger.ms": 0, "acks": "all"})
        self._member = Consumer({
            **self.client, **quiet, "group.id": group_id(self.store_id),
            "client.id": f"secmeta-controller-{self.node.node_id}",
            "session.timeout.ms": self.settings.session_timeout_ms,
            "heartbeat.interval.ms": self.settings.heartbeat_interval_ms,
            "max.poll.interval.ms": self.settings.max_poll_interval_ms,
            "partition.assignment.strategy": "cooperative-sticky", "enable.auto.commit": False,
            "enable.partition.eof": False})
        self._subscribe()
        self._announce(active=False)
        self._thread = threading.Thread(target=self._run, name=f"secmeta-election-{self.node.node_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Step down, announce this node gone, leave the group, close the clients."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self._lose("this node is stopping")
        if self._producer is not None:
            self._producer.produce(self.topic, key=str(self.node.node_id).encode(), value=None, partition=PARTITION)
            self._producer.flush(timeout)
        for consumer in (self._member, self._reader):
            if consumer is not None:
                consumer.close()    # the member leaves the group: a standby is elected at once
        self._member = self._reader = self._producer = None

    def __enter__(self) -> Election:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the election's thread -------------------------------------------------------------

    def _subscribe(self) -> None:
        assert self._member is not None
        self._member.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked,
                               on_lost=self._lost)

    def _run(self) -> None:
        member, reader, producer = self._member, self._reader, self._producer
        assert member is not None and reader is not None and producer is not None
        while not self._stopping.is_set():
            member.poll(_POLL_S)          # the membership callbacks run here
            reader.poll(_POLL_S)
            producer.poll(0)
            if self._resigning is not None:
                reason, self._resigning = self._resigning, None
                self._lose(reason)
                self._leave_for_a_while()
            if self._rejoin_at is not None and time.monotonic() >= self._rejoin_at:
                self._rejoin_at = None
                self._subscribe()

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if not any(p.topic == self.topic and p.partition == PARTITION for p in partitions):
            return
        with self._lock:
            self._term += 1
            self._holding = True
            term = self._term
        log.info("node %d holds the election partition: activating", self.node.node_id)
        threading.Thread(target=self._activation, args=(term,), name=f"secmeta-activate-{self.node.node_id}",
                         daemon=True).start()

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if any(p.topic == self.topic for p in partitions):
            self._lose("the election partition was revoked")

    def _lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._lose("the group session was lost (no heartbeat reached Kafka within session.timeout.ms)")

    def _lose(self, reason: str) -> None:
        with self._lock:
            was = self._holding or self.cluster.accepts_writes
            self._term += 1
            term = self._term
            self._holding = False
            self.cluster.step_down(reason)
        if was:
            log.warning("node %d stepped down: %s", self.node.node_id, reason)
            self._deactivate(term, reason)
            self._announce(active=False)

    def _activation(self, term: int) -> None:
        try:
            self._activate(term)
        except Exception as exc:  # noqa: BLE001 - any doubt: stay standby, let another node try
            log.error("node %d could not become the active controller: %s", self.node.node_id, exc)
            with self._lock:
                void = term != self._term
            if not void:   # the election's thread leaves the group (its consumer is polled there alone)
                self.resign(f"activation failed: {exc}")
            return
        with self._lock:
            if term != self._term or self._stopping.is_set():
                return            # revoked while activating: the revoke stepped down already
            self.cluster.become_active()
        log.info("node %d is the active controller", self.node.node_id)
        self._announce(active=True)

    def resign(self, reason: str) -> None:
        """Give the role up (any thread): this node's writer failed (fenced, or a commit whose fate is unknown).
        It refuses writes at once and leaves the group for one session timeout, so another node is elected:
        a node that Kafka still counts as the holder (a resumed process whose session the broker kept) must
        not keep the role while it can no longer write."""
        self.cluster.step_down(reason)
        self._resigning = reason

    def _leave_for_a_while(self) -> None:
        """Give the partition up for one session timeout, so another node is elected meanwhile (on the election's
        thread only: the group's consumer is not thread-safe)."""
        assert self._member is not None
        self._member.unsubscribe()
        self._rejoin_at = time.monotonic() + self.settings.session_timeout_ms / 1000

    def _announce(self, active: bool) -> None:
        if self._producer is not None:
            self._producer.produce(self.topic, key=str(self.node.node_id).encode(),
                                   value=_announcement(self.node, active), partition=PARTITION)
            self._producer.poll(0)



class Announcements:
    """Every node's announcements read into a Controllership, by a consumer outside the group (it never takes
    part in the election): the election's own view, and a ``--standby`` node's, which is never active but
    names the active node in Metadata and NOT_CONTROLLER answers.

    ``open()`` makes the election topic if need be and reads it from its start; ``poll(timeout)`` applies
    what arrived (the election's thread calls it); ``start()`` polls in a thread of its own until ``close()``.
    """

    def __init__(self, client: Mapping[str, Any], store_id: str, cluster: Controllership,
                 settings: ElectionSettings = ElectionSettings(), topic: str | None = None):
        self.client = dict(client)
        self.store_id = store_id
        self.cluster = cluster
        self.settings = settings
        self.topic = topic or election_topic(store_id)
        self._consumer: Consumer | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> Announcements:
        self._ensure_topic()
        self._consumer = Consumer({**self.client, "logger": log, "group.id": f"{group_id(self.store_id)}.reader",
                                   "enable.auto.commit": False, "isolation.level": "read_committed"})
        self._consumer.assign([TopicPartition(self.topic, PARTITION, OFFSET_BEGINNING)])
        return self

    def start(self) -> Announcements:
        """Read every announcement made so far (so the active node is known before the node serves), then go on
        reading in a thread of its own."""
        self.open()
        self._read_to_end()
        self._thread = threading.Thread(target=self._run, name="secmeta-announcements", daemon=True)
        self._thread.start()
        return self

    def poll(self, timeout: float) -> None:
        assert self._consumer is not None
        for message in self._consumer.consume(100, timeout):
            if message.error() is None:
                read = _read_announcement(message.key(), message.value())
                if read is not None:
                    self.cluster.observe(*read)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self.poll(_POLL_S)

    def _read_to_end(self) -> None:
        assert self._consumer is not None
        partition = TopicPartition(self.topic, PARTITION)
        try:
            low, end = self._consumer.get_watermark_offsets(partition, timeout=self.settings.topic_timeout_s)
        except KafkaException as exc:
            raise ElectionError(f"cannot read the election topic {self.topic}: {exc.args[0]}") from None
        deadline = time.monotonic() + self.settings.topic_timeout_s
        while end > low and self._consumer.position([partition])[0].offset < end:
            if time.monotonic() > deadline:
                raise ElectionError(f"the election topic {self.topic} was not read to its end (offset {end}) within "
                                    f"{self.settings.topic_timeout_s:g} s")
            self.poll(_POLL_S)

    def close(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _ensure_topic(self) -> None:
        settings: dict[str, Any] = {**self.client, "logger": log}
        admin = AdminClient(settings)
        future = admin.create_topics([NewTopic(self.topic, 1, self.settings.topic_replication_factor)],
                                     request_timeout=self.settings.topic_timeout_s)[self.topic]
        try:
            future.result(self.settings.topic_timeout_s)
        except Exception as exc:  # noqa: BLE001 - one case is fine: it exists already
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None or error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ElectionError(f"cannot create the election topic {self.topic}: {exc}") from None
