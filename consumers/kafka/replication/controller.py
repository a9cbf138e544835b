"""A replicated node that takes part in the election: a standby following the topic until Kafka elects it.

``ElectedNode`` joins a ``ReplicatedNode`` (the log topic: follow, or write through the commit gate) to an
``Election`` (who writes).  Before the server listens it reads the election topic (``read_announcements``), so
its first Metadata names the active node and every node.  It starts as a standby: the store's gate refuses every
batch, the node follows the topic into its local log and image, and serves reads and logins from them.  When the election gives it
the lease, ``activate`` runs ``ReplicatedNode.become_writer``: stop following, fence every older writer
(``init_transactions`` with the shared transactional.id), read the topic to its last stable offset (seeding
an empty topic), refuse a local log ahead of it, and commit every later batch through Kafka.  Only then does
the Controllership accept writes.  When the node loses the lease it refuses writes at once (the
Controllership, on the election's thread); its store's gate becomes a refusing one and the node follows the
topic again, in a thread of its own (a commit in flight may hold the store's lock until its timeout).

Every batch committed as the writer is logged as "committed batch [BASE, NEXT) link LINK (node N, term T)"
before the client is answered: the chaos test compares these lines with the topic.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from secmeta.consumers.kafka.replication.election import Announcements, Election, ElectionSettings
from secmeta.consumers.kafka.replication.gate import KafkaCommitGate
from secmeta.consumers.kafka.replication.node import ReplicatedNode
from secmeta.core.errors import InvalidValueError
from secmeta.core.server.controllership import Controllership, NodeAddress
from secmeta.core.store.commit_gate import (
    CommitGateError,
    GroupingGate,
    NotWriterGate,
    PendingBatch,
)

__all__ = ["ElectedNode"]

logger = logging.getLogger("secmeta.replication")


class _Acknowledging(GroupingGate):
    """The writer's gate, logging each batch it committed (what this node acknowledges) with its term; a commit
    that fails makes the node resign (``on_failure(reason)``), except a batch the gate refused before sending
    anything (InvalidValueError: too large for the topic): that write alone fails, the node keeps writing.
    A local append that fails after the commit is fatal: the node resigns and stops (``on_fatal(error)``; its
    log refuses every append, so it cannot even follow; restarted, it catches up from the topic)."""

    def __init__(self, gate: KafkaCommitGate, node_id: int, term: int, on_failure: Callable[[str], None],
                 on_fatal: Callable[[BaseException], None]):
        self._gate, self._node_id, self._term, self._on_failure = gate, node_id, term, on_failure
        self._on_fatal = on_fatal
        self.max_group_batches, self.max_group_bytes = gate.max_group_batches, gate.max_group_bytes

    def check(self, batch: PendingBatch) -> None:
        self._gate.check(batch)

    def commit_group(self, batches: Sequence[PendingBatch]) -> None:
        try:
            self._gate.commit_group(batches)
        except InvalidValueError:
            raise
        except BaseException as exc:
            self._on_failure(f"its writer failed: {exc}")
            raise
        for batch in batches:
            logger.info("committed batch [%d, %d) link %s (node %d, election term %d)", batch.base_offset,
                        batch.next_offset, batch.link.hex()[:16], self._node_id, self._term)

    def append_failed(self, batch: PendingBatch, error: BaseException) -> None:
        logger.error("the batch at offset %d was committed to the log topic but the local append failed: %s; node %d "
                     "gives the controller's role up and stops", batch.base_offset, error, self._node_id)
        self._gate.append_failed(batch, error)
        self._on_failure(f"its local log failed after a commit: {error}")
        self._on_fatal(error)


class ElectedNode:
    """A node of a replicated store whose role the controllers' election decides."""

    def __init__(self, node: ReplicatedNode, election: ElectionSettings, on_failure: Callable[[BaseException], None]):
        self.node = node
        self.cluster = Controllership(node.settings.node_id)
        self._election_settings = election
        self._on_failure = on_failure
        self._transition = threading.Lock()   # one role change at a time: become writer, or go back to following
        self._writer_term = 0                 # the election term this node last became the writer in
        self._stepped_down = 0                # the election term of its latest step-down
        self.election: Election | None = None
        self._announcements: Announcements | None = None   # read_announcements' reader, until the election's
        self._client = node.settings.election_client()
        self._closing = False

    @property
    def writing(self) -> bool:
        return self.cluster.accepts_writes

    def __repr__(self) -> str:
        return f"<ElectedNode {self.cluster!r}>"

    def read_announcements(self) -> ElectedNode:
        """Learn the active controller and every node from the election topic, before the server listens: a
        client that connects at once is told where the controller is (Metadata), not that there is none and no
        other node (librdkafka would then wait for its next refresh, and know only this node)."""
        self._announcements = Announcements(self._client, self.node.store.log.store.store_id, self.cluster,
                                            self._election_settings).start()
        return self

    def start(self, address: NodeAddress) -> ElectedNode:
        """Follow the topic, then join the election announcing ``address`` (the server must be listening)."""
        self.node.store.set_commit_gate(NotWriterGate("this node is a standby: the active controller writes"))
        self.node.follow(self._on_failure)
        self.election = Election(self._client, self.node.store.log.store.store_id, address, self.cluster,
                                 activate=self._activate, deactivate=self._deactivate,
                                 settings=self._election_settings)
        self.election.start()
        self._close_announcements()   # the election's own reader reads them from now on
        return self

    def listening(self, broker) -> None:
        """The server listens (``broker``: its first listener's BrokerInfo): follow, and join the election."""
        self.start(NodeAddress(broker.node_id, broker.host, broker.port, broker.rack))

    def close(self) -> None:
        self._closing = True                  # the step-down that stopping the election causes follows nothing
        if self.election is not None:
            self.election.stop()
            self.election = None
        self._close_announcements()
        with self._transition:
            self.node.close()

    def _close_announcements(self) -> None:
        announcements, self._announcements = self._announcements, None
        if announcements is not None:
            announcements.close()

    def __enter__(self) -> ElectedNode:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _activate(self, term: int) -> None:
        with self._transition:
            if self._stepped_down >= term:
                raise CommitGateError(f"the election moved on from term {term} before this node could write")
            self._writer_term = term
            try:
                self.node.become_writer()   # stops following, fences, catches up, gives the store the Kafka gate
            except BaseException:
                self._stand_by("its activation failed")   # back to a standby that follows (the election steps down)
                raise
            assert self.node.gate is not None
            self.node.store.set_commit_gate(_Acknowledging(self.node.gate, self.cluster.node_id, term, self._resign,
                                                          self._on_failure))

    def _resign(self, reason: str) -> None:
        if self.election is not None:
            self.election.resign(reason)

    def _deactivate(self, term: int, reason: str) -> None:
        self._stepped_down = term           # an activation of an older term that has not begun yet is void
        threading.Thread(target=self._follow_again, args=(term, reason), name="secmeta-step-down",
                         daemon=True).start()

    def _follow_again(self, term: int, reason: str) -> None:
        with self._transition:
            if self._writer_term > term or self.node.gate is None or self._closing:
                return                      # elected again since, following already, or closing
            try:
                self._stand_by(reason)
            except BaseException as exc:  # noqa: BLE001 - cannot follow (divergence): the node stops serving
                self._on_failure(exc)

    def _stand_by(self, reason: str) -> None:
        """Refuse writes, close the writer's gate if there is one, and follow the topic (replacing any follower
        running); the caller holds ``_transition``."""
        try:
            self.node.store.set_commit_gate(NotWriterGate(f"this node stepped down: {reason}"))
        except CommitGateError:
            pass                            # a key rotation waiting to be logged: the next writer logs it
        gate, self.node.gate = self.node.gate, None
        if gate is not None:
            gate.close()
        self.node.follow(self._on_failure, patient=True)
