"""A ``--standby`` node: it follows the log topic and serves reads, never writes, and takes no part in the
election; it reads the election's heartbeats so that Metadata names the active
controller and a write sent to it is answered NOT_CONTROLLER (41), naming that node, with nothing written."""

from __future__ import annotations

from collections.abc import Callable

from secmeta.consumers.kafka.client_config import client_settings
from secmeta.consumers.kafka.replication.election import Announcements, ElectionSettings
from secmeta.consumers.kafka.replication.node import ReplicatedNode
from secmeta.core.server.controllership import Controllership

__all__ = ["StandbyNode"]


class StandbyNode:
    """A ReplicatedNode that follows, with a Controllership that is never active (``cluster``, for the server)."""

    def __init__(self, node: ReplicatedNode, election: ElectionSettings):
        self.node = node
        self.cluster = Controllership(node.settings.node_id)
        self.cluster.step_down("this node is a standby (--standby): it never writes")
        settings = node.settings
        self._announcements = Announcements(client_settings(settings.bootstrap, settings.client, defaults={},
                                                            enforced={}),
                                            node.store.log.store.store_id, self.cluster, election)

    writing = False

    def __repr__(self) -> str:
        return f"<StandbyNode {self.cluster!r}>"

    def start(self, on_failure: Callable[[BaseException], None],
              on_applied: Callable[[int], None] | None = None) -> StandbyNode:
        """Follow the topic (ReplicatedNode.follow) and read who is active."""
        self.node.follow(on_failure, on_applied)
        try:
            self._announcements.start()
        except BaseException:
            self._announcements.close()
            raise
        return self

    def close(self) -> None:
        self._announcements.close()
        self.node.close()

    def __enter__(self) -> StandbyNode:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
