"""Which node is the active controller: a lease held on the election topic, fenced by Kafka's transactional producer.

Every node of a replicated store writes a heartbeat to a one-partition election topic (``election_topic``)
every third of the lease (``ElectionSettings.lease_ms``, 3 s by default): its id, address, whether it accepts
writes, the lease term it holds (if any), the highest term it has seen and whether it may campaign.  Every
node reads every heartbeat back (``Announcements``, a consumer outside any group) into a ``LeaseView``, timed
by its own monotonic clock at receipt.

* **The lease.** The holder is the first node to claim the newest term (the topic's one order decides ties);
  its heartbeats of that term renew the lease.  No renewal for a whole lease, or a heartbeat releasing it,
  leaves the lease vacant.
* **Campaign.** When the lease is vacant, the live nodes that may campaign (heard within a lease; a node
  that resigned sits one lease out) go in the order of their ids: the n-th waits n half-leases, so the
  lowest live id claims first and the others see its claim before their turn.  A node claims term
  ``max seen + 1``, and only once its own claim is read back as that term's first does it activate
  (``activate``: the replication's transactional producer calls ``init_transactions`` with the
  transactional.id every node shares, which fences the previous writer; then the node catches up with the
  log topic), then ``Controllership.become_active`` and a heartbeat saying so.
* **Step-down.** A holder whose own heartbeats stopped reaching Kafka for a lease (counted from the send
  time of the newest one Kafka acknowledged, which is never later than when the others heard it), or that
  reads a newer holder, stops accepting writes at once (``Controllership.step_down``) and ``deactivate``s.

The lease never decides alone whether a write is safe: the fence is Kafka's transactional producer, whose
commit fails once a newer node ran ``init_transactions``.  A write is acknowledged only after its commit, so
a deposed node (hung, cut off, or just slow to notice) acknowledges nothing the new active node does not
read before it writes.  A node whose writer fails (fenced, a commit of unknown fate, a failed activation)
``resign``s: it steps down and sits one lease out, so another node is elected.

Timing (the failover target is 10 s): a dead, hung or cut-off active node is replaced about one lease after
its last heartbeat reached the others (3 s by default) plus the new node's fencing and catch-up (well under
a second on a healthy cluster), whatever the broker's group timings.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from secmeta.core.errors import SecmetaError
from secmeta.core.server.controllership import Controllership, NodeAddress

__all__ = ["Announcements", "Election", "ElectionError", "ElectionSettings", "Heartbeat", "LeaseView",
           "election_topic"]

log = logging.getLogger("secmeta.replication.election")

PARTITION = 0
_POLL_S = 0.05
HISTORY = 1000           # the election topic's newest records read at start: every heartbeat carries what matters
RETENTION_MS = 3_600_000  # the election topic keeps an hour (only the newest heartbeats are ever read)


class ElectionError(SecmetaError):
    """The election could not start (its topic cannot be created or read, or its settings are wrong)."""


@dataclass(frozen=True, slots=True)
class ElectionSettings:
    """``lease_ms``: how long the active node's role outlives its last heartbeat (see the module's docstring)."""

    lease_ms: int = 3000
    topic_replication_factor: int = 3
    topic_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if not 300 <= self.lease_ms <= 600_000:
            raise ElectionError(f"the controllers' lease (--controller-lease-ms) must be 300 to 600000 ms, not "
                                f"{self.lease_ms}")

    @property
    def lease_s(self) -> float:
        return self.lease_ms / 1000

    @property
    def heartbeat_s(self) -> float:
        """Every node's heartbeat interval: a third of the lease (two may be lost before it lapses)."""
        return self.lease_s / 3

    @property
    def rank_step_s(self) -> float:
        """How much longer each live node waits than the next lower id before it claims a vacant lease."""
        return self.lease_s / 2


def election_topic(store_id: str) -> str:
    """The one-partition topic the controllers' heartbeats go to."""
    return f"__secmeta_controllers.{store_id}"


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """What one node said: its address; ``active`` (it accepts writes); ``term``, the lease term it claims or
    renews (None: it holds none); ``seen``, the highest term it has seen; ``eligible``, it may campaign."""

    node: NodeAddress
    active: bool = False
    term: int | None = None
    seen: int = 0
    eligible: bool = True

    def encode(self) -> bytes:
        node = self.node
        return json.dumps({"node_id": node.node_id, "host": node.host, "port": node.port, "rack": node.rack,
                           "active": self.active, "term": self.term, "seen": self.seen,
                           "eligible": self.eligible}, sort_keys=True).encode()


def read_heartbeat(key: bytes | None, value: bytes | None) -> Heartbeat | int | None:
    """The heartbeat of a record; the node id alone for a tombstone (the node left); None for what is not ours."""
    try:
        node_id = int((key or b"").decode())
        if value is None:
            return node_id
        fields = json.loads(value)
        node = NodeAddress(int(fields["node_id"]), str(fields["host"]), int(fields["port"]), fields.get("rack"))
        term = fields.get("term")
        heartbeat = Heartbeat(node, _flag(fields["active"]), None if term is None else int(term),
                              int(fields.get("seen", 0)), _flag(fields.get("eligible", True)))
        return heartbeat if node.node_id == node_id else None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def _flag(value: object) -> bool:
    """A heartbeat's JSON true or false; anything else (the string "false", 0) makes the record malformed."""
    if value is True or value is False:
        return value
    raise ValueError(f"not a JSON boolean: {value!r}")


class LeaseView:
    """The lease as this node read the election topic: who holds it, since when it is vacant, who is live.
    Times are this node's monotonic clock when a heartbeat was read."""

    def __init__(self, lease_s: float, now: float):
        self.lease_s = lease_s
        self.heard: dict[int, tuple[float, bool]] = {}   # node -> (last heard, eligible)
        self.addresses: dict[int, NodeAddress] = {}
        self.max_term = 0
        self.max_claimed = 0                                # the highest term any heartbeat claimed
        self._first: dict[int, int] = {}                   # term -> its first claimant (the newest terms only)
        self.holder: tuple[int, int] | None = None          # (node, term)
        self.renewed = 0.0                                  # when the holder's last heartbeat was read
        self.vacant_since: float | None = now

    def apply(self, heartbeat: Heartbeat, now: float) -> None:
        node_id = heartbeat.node.node_id
        self.heard[node_id] = (now, heartbeat.eligible)
        self.addresses[node_id] = heartbeat.node
        term = heartbeat.term
        self.max_term = max(self.max_term, heartbeat.seen, term or 0)
        if term is not None:
            first = self._first.setdefault(term, node_id)
            if len(self._first) > 16:
                del self._first[min(self._first)]
            if first == node_id and term >= self.max_claimed:   # an older term never takes back even a vacant lease
                self.holder, self.renewed, self.vacant_since = (node_id, term), now, None
            self.max_claimed = max(self.max_claimed, term)
        elif self.holder is not None and self.holder[0] == node_id:
            self._vacate(now)                               # it released the lease

    def left(self, node_id: int, now: float) -> None:
        self.heard.pop(node_id, None)
        self.addresses.pop(node_id, None)
        if self.holder is not None and self.holder[0] == node_id:
            self._vacate(now)

    def expire(self, now: float) -> int | None:
        """Vacate a lease not renewed for a whole lease; the node whose lease lapsed, else None."""
        if self.holder is not None and now - self.renewed >= self.lease_s:
            lapsed = self.holder[0]
            self._vacate(self.renewed + self.lease_s)
            return lapsed
        return None

    def _vacate(self, at: float) -> None:
        self.holder, self.vacant_since = None, at

    def cut_off(self, node_id: int, since: float, now: float) -> str | None:
        """Why node ``node_id`` (this one, heartbeating since ``since``) is cut off from Kafka: none of its own
        heartbeats came back within a lease; None while they do. The one rule for a candidate and a standby."""
        heard = self.heard.get(node_id, (since, True))[0]
        if now - max(heard, since) < self.lease_s:
            return None
        return f"none of its heartbeats came back from Kafka within {round(self.lease_s * 1000)} ms"

    def first_claimant(self, term: int) -> int | None:
        return self._first.get(term)

    def active(self, heartbeat: Heartbeat) -> bool:
        """Whether Metadata may name the node of ``heartbeat`` the controller: it says so and holds the lease."""
        return heartbeat.active and self.holder == (heartbeat.node.node_id, heartbeat.term)

    def turn(self, node_id: int, now: float, step_s: float) -> float | None:
        """When ``node_id`` may claim the vacant lease (its rank among the live eligible nodes times ``step_s``
        after the lease fell vacant); None while it is held, or this node is not live and eligible itself."""
        if self.holder is not None or self.vacant_since is None:
            return None
        live = sorted(n for n, (at, eligible) in self.heard.items() if eligible and now - at < self.lease_s)
        if node_id not in live:
            return None
        return self.vacant_since + live.index(node_id) * step_s


class Election:
    """This node's heartbeats, campaigns and activation.

    ``start()`` reads the election topic's newest records and starts the election's thread; ``stop()`` steps
    down and says the node left (a tombstone: another is elected at once, not a lease later).
    ``activate(term)`` runs in a thread of its own (fencing and catching up may take seconds) while the
    heartbeats go on; ``deactivate(term, reason)`` runs on the election's thread and must return at once.
    ``term`` is the lease term: a later claim always has a higher one.
    """

    def __init__(self, client: Mapping[str, Any], store_id: str, node: NodeAddress, cluster: Controllership, *,
                 activate: Callable[[int], None], deactivate: Callable[[int, str], None],
                 settings: ElectionSettings = ElectionSettings(), topic: str | None = None, candidate: bool = True):
        if cluster.node_id != node.node_id:
            raise ElectionError(f"node {node.node_id} cannot run the election of node {cluster.node_id}")
        self.client = dict(client)
        self.store_id = store_id
        self.node = node
        self.cluster = cluster
        self.settings = settings
        self.topic = topic or election_topic(store_id)
        self._activate, self._deactivate = activate, deactivate
        self.candidate = candidate             # False: a ``--standby`` node, heartbeating only to tell it is cut off
        self._lock = threading.Lock()
        self._claim: int | None = None         # the lease term this node claims or holds
        self._last_claim = 0
        self._activating = False               # the activation of ``_claim`` was started
        self._renewed = 0.0                    # send time of this node's newest heartbeat Kafka acknowledged
        self._started = 0.0
        self._next_heartbeat = 0.0
        self._sit_out_until: float | None = None   # after resigning: no campaign until then
        self._resigning: str | None = None     # resign() asked the election's thread to give the role up
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._reader: Announcements | None = None
        self._producer: Producer | None = None

    def __repr__(self) -> str:
        return f"<Election {self.topic} node={self.node.node_id} claim={self._claim} {self.cluster!r}>"

    @property
    def view(self) -> LeaseView:
        assert self._reader is not None
        return self._reader.view

    @property
    def sitting_out(self) -> bool:
        """This node resigned and lets the others campaign first."""
        return self._sit_out_until is not None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Election:
        self._reader = Announcements(self.client, self.store_id, self.cluster, self.settings, self.topic).open()
        self._reader.read_to_end()
        self._producer = Producer({**self.client, "logger": log, "linger.ms": 0, "acks": "all",
                                   "message.timeout.ms": self.settings.lease_ms,   # a late heartbeat is worthless
                                   "client.id": f"{self.client.get('client.id', 'secmeta')}-election"})
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"secmeta-election-{self.node.node_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Step down, say this node left, close the clients."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self._lose("this node is stopping")
        if self._producer is not None:
            self._producer.produce(self.topic, key=str(self.node.node_id).encode(), value=None, partition=PARTITION)
            self._producer.flush(timeout)
        if self._reader is not None:
            self._reader.close()
        self._reader = self._producer = None

    def __enter__(self) -> Election:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the election's thread -------------------------------------------------------------

    def _run(self) -> None:
        reader, producer = self._reader, self._producer
        assert reader is not None and producer is not None
        while not self._stopping.is_set():
            reader.poll(_POLL_S)
            producer.poll(0)           # delivery reports: this node's lease renewals
            self._tick(time.monotonic())

    def _tick(self, now: float) -> None:
        view, settings = self.view, self.settings
        self.cluster.set_cut_off(view.cut_off(self.node.node_id, self._started, now))
        if self._resigning is not None:
            reason, self._resigning = self._resigning, None
            self._lose(reason)
            self._sit_out_until = now + settings.lease_s
            self._next_heartbeat = 0.0
        if self._sit_out_until is not None and now >= self._sit_out_until:
            self._sit_out_until, self._next_heartbeat = None, 0.0
        claim = self._claim
        if claim is not None:
            holder = view.holder
            first = view.first_claimant(claim)
            if now - self._renewed > settings.lease_s:
                self._lose(f"its lease lapsed: no heartbeat of it reached Kafka within {settings.lease_ms} ms")
            elif holder is not None and holder[0] != self.node.node_id and holder[1] >= claim:
                self._lose(f"node {holder[0]} holds the lease (term {holder[1]})")
            elif first is not None and first != self.node.node_id:
                self._lose(f"node {first} claimed lease term {claim} first")
            elif first == self.node.node_id and not self._activating:
                self._activating = True
                log.info("node %d holds the lease (term %d): activating", self.node.node_id, claim)
                threading.Thread(target=self._activation, args=(claim,), name=f"secmeta-activate-{self.node.node_id}",
                                 daemon=True).start()
        if now >= self._next_heartbeat:
            self._heartbeat(now)
        if self.candidate and self._claim is None and self._sit_out_until is None and not self._stopping.is_set():
            turn = view.turn(self.node.node_id, now, settings.rank_step_s)
            if turn is not None and now >= turn:
                self._campaign(now)

    def _campaign(self, now: float) -> None:
        with self._lock:
            self._claim = self._last_claim = max(self.view.max_term, self._last_claim) + 1
            self._activating = False
            self._renewed = now
        log.info("node %d claims the vacant lease (term %d)", self.node.node_id, self._claim)
        self._heartbeat(now)

    def _heartbeat(self, now: float) -> None:
        producer = self._producer
        if producer is None:
            return
        claim = self._claim
        beat = Heartbeat(self.node, self.cluster.accepts_writes, claim, max(self.view.max_term, self._last_claim),
                         self.candidate and self._sit_out_until is None)

        def delivered(error, _message, sent=now, term=claim) -> None:
            if error is None and term is not None and term == self._claim:
                self._renewed = max(self._renewed, sent)

        try:
            producer.produce(self.topic, key=str(self.node.node_id).encode(), value=beat.encode(),
                             partition=PARTITION, on_delivery=delivered)
        except BufferError:
            pass            # a heartbeat that cannot even be queued renews nothing
        producer.poll(0)
        self._next_heartbeat = now + self.settings.heartbeat_s

    def _lose(self, reason: str) -> None:
        with self._lock:
            term, was = self._claim, self._claim is not None or self.cluster.accepts_writes
            self._claim = None
            self._activating = False
            self.cluster.step_down(reason)
        if was:
            log.warning("node %d stepped down: %s", self.node.node_id, reason)
            self._deactivate(term or self._last_claim, reason)
            self._next_heartbeat = 0.0

    def _activation(self, term: int) -> None:
        try:
            self._activate(term)
        except Exception as exc:  # noqa: BLE001 - any doubt: stay standby, let another node try
            log.error("node %d could not become the active controller: %s", self.node.node_id, exc)
            if self._claim == term:
                self.resign(f"activation failed: {exc}")
            return
        with self._lock:
            if term != self._claim or self._stopping.is_set():
                return            # lost the lease while activating: the step-down is under way
            self.cluster.become_active()
            self._next_heartbeat = 0.0   # say so at once
        log.info("node %d is the active controller (lease term %d)", self.node.node_id, term)

    def resign(self, reason: str) -> None:
        """Give the role up (any thread): this node's writer failed (fenced, or a commit whose fate is unknown).
        It refuses writes at once, releases the lease and sits one lease out, so another node is elected."""
        self.cluster.step_down(reason)
        self._resigning = reason


class Announcements:
    """Every node's heartbeats read into a LeaseView and a Controllership, by a consumer outside any group: the
    election's own view, and a ``--standby`` node's (never active, but it names the active node in Metadata and
    NOT_CONTROLLER answers).  Metadata names a node active only while it holds the lease and says it writes.

    ``open()`` makes the election topic if need be and places the reader at its newest records;
    ``read_to_end()`` applies them; ``poll(timeout)`` applies what arrived (the election's thread calls it);
    ``start()`` opens, reads to the end, then polls in a thread of its own until ``close()``.
    """

    def __init__(self, client: Mapping[str, Any], store_id: str, cluster: Controllership,
                 settings: ElectionSettings = ElectionSettings(), topic: str | None = None):
        self.client = dict(client)
        self.store_id = store_id
        self.cluster = cluster
        self.settings = settings
        self.topic = topic or election_topic(store_id)
        self.view = LeaseView(settings.lease_s, time.monotonic())
        self._consumer: Consumer | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> Announcements:
        self._ensure_topic()
        self._consumer = Consumer({**self.client, "logger": log, "group.id": f"secmeta-controllers.{self.store_id}.reader",
                                   "enable.auto.commit": False, "fetch.wait.max.ms": 20,
                                   "client.id": f"{self.client.get('client.id', 'secmeta')}-election-reader"})
        partition = TopicPartition(self.topic, PARTITION)
        try:
            low, self._end = self._consumer.get_watermark_offsets(partition, timeout=self.settings.topic_timeout_s)
        except KafkaException as exc:
            raise ElectionError(f"cannot read the election topic {self.topic}: {exc.args[0]}") from None
        self._start = max(low, self._end - HISTORY)
        self._consumer.assign([TopicPartition(self.topic, PARTITION, self._start)])
        return self

    def start(self) -> Announcements:
        """Read the newest heartbeats (so the active node is known before the node serves), then go on reading in
        a thread of its own.  A start that fails closes what it opened before it raises."""
        try:
            self.open()
            self.read_to_end()
            self._thread = threading.Thread(target=self._run, name="secmeta-announcements", daemon=True)
            self._thread.start()
        except BaseException:
            self.close()
            raise
        return self

    def poll(self, timeout: float) -> None:
        assert self._consumer is not None
        view, cluster = self.view, self.cluster
        now = time.monotonic()
        for message in self._consumer.consume(100, timeout):
            if message.error() is not None:
                continue
            read = read_heartbeat(message.key(), message.value())
            if isinstance(read, int):
                view.left(read, now)
                cluster.observe(NodeAddress(read, "", 0), None)
            elif read is not None:
                view.apply(read, now)
                cluster.observe(read.node, view.active(read))
        lapsed = view.expire(time.monotonic())
        if lapsed is not None and lapsed in view.addresses:
            cluster.observe(view.addresses[lapsed], False)   # no controller named until the next one says so

    def _run(self) -> None:
        while not self._stopping.is_set():
            self.poll(_POLL_S)

    def read_to_end(self) -> None:
        """Apply every record up to the end the topic had when it was opened."""
        assert self._consumer is not None
        partition = TopicPartition(self.topic, PARTITION)
        deadline = time.monotonic() + self.settings.topic_timeout_s
        while self._end > self._start and self._consumer.position([partition])[0].offset < self._end:
            if time.monotonic() > deadline:
                raise ElectionError(f"the election topic {self.topic} was not read to its end (offset {self._end}) "
                                    f"within {self.settings.topic_timeout_s:g} s")
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
        topic = NewTopic(self.topic, 1, self.settings.topic_replication_factor,
                         config={"retention.ms": str(RETENTION_MS)})
        future = admin.create_topics([topic], request_timeout=self.settings.topic_timeout_s)[self.topic]
        try:
            future.result(self.settings.topic_timeout_s)
        except Exception as exc:  # noqa: BLE001 - one case is fine: it exists already
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None or error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ElectionError(f"cannot create the election topic {self.topic}: {exc}") from None
