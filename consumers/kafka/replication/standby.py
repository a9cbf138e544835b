"""A ``--standby`` node: it follows the log topic and serves reads, never writes, and never campaigns; it reads
the election's heartbeats so that Metadata names the active controller and a write sent to it is answered
NOT_CONTROLLER (41), naming that node, with nothing written.  Once it listens it heartbeats too (as a node that may
not campaign), so that it knows, by the election's one rule (``LeaseView.cut_off``), when it is cut off from Kafka:
then it serves nothing, as every node."""

from __future__ import annotations

from collections.abc import Callable

from secmeta.consumers.kafka.replication.election import Announcements, Election, ElectionSettings
from secmeta.consumers.kafka.replication.node import ReplicatedNode
from secmeta.core.server.controllership import Controllership, NodeAddress

__all__ = ["StandbyNode"]


class StandbyNode:
    """A ReplicatedNode that follows, with a Controllership that is never active (``cluster``, for the server)."""

    def __init__(self, node: ReplicatedNode, election: ElectionSettings):
        self.node = node
        self.cluster = Controllership(node.settings.node_id)
        self.cluster.step_down("this node is a standby (--standby): it never writes")
        self._client = node.settings.election_client()
        self._election_settings = election
        self._announcements: Announcements | None = Announcements(self._client, node.store.log.store.store_id,
                                                                  self.cluster, election)
        self.election: Election | None = None

    writing = False

    def __repr__(self) -> str:
        return f"<StandbyNode {self.cluster!r}>"

    def start(self, on_failure: Callable[[BaseException], None],
              on_applied: Callable[[int], None] | None = None) -> StandbyNode:
        """Follow the topic (ReplicatedNode.follow) and read who is active."""
        self.node.follow(on_failure, on_applied)
        assert self._announcements is not None
        self._announcements.start()
        return self

    def listening(self, broker) -> None:
        """The server listens (``broker``: its first listener's BrokerInfo): heartbeat as a node that never
        campaigns, reading the announcements from then on through the election's own reader."""
        address = NodeAddress(broker.node_id, broker.host, broker.port, broker.rack)
        self.election = Election(self._client, self.node.store.log.store.store_id, address, self.cluster,
                                 activate=_never, deactivate=lambda _term, _reason: None,
                                 settings=self._election_settings, candidate=False).start()
        announcements, self._announcements = self._announcements, None
        if announcements is not None:
            announcements.close()

    def close(self) -> None:
        if self.election is not None:
            self.election.stop()
            self.election = None
        if self._announcements is not None:
            self._announcements.close()
        self.node.close()

    def __enter__(self) -> StandbyNode:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _never(term: int) -> None:
    raise AssertionError(f"a standby never campaigns, so it never holds the lease (term {term})")
