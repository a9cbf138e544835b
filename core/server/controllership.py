"""Which node is the active controller, and where every node listens: what Metadata tells Kafka's clients.

In the embedded default there is one node: it is always the controller and the only broker, and
``Call.cluster`` is None.  In replicated mode (issue 25) several ``secmeta serve`` nodes share one
store through a Kafka topic; an election outside core (``secmeta.consumers.kafka.replication.election``)
drives a ``Controllership``: ``become_active`` once this node holds the election, has fenced the previous
writer and caught up with the topic; ``step_down`` at once on losing it or on any doubt; ``observe``
for what the other nodes announce (their id, address and whether they are active).

Metadata and DescribeCluster list every node announced and name the active one as ``controller_id``
(librdkafka sends admin calls to it); while no node is known active, ``controller_id`` is -1, as Kafka
answers while it has no controller, and clients retry.  A write API on a node that is not active is
answered NOT_CONTROLLER (41) before the store sees it, so nothing is written
(``secmeta.core.server.handling.Handler``); Kafka's clients then refresh Metadata and retry at the
active controller.  Reads and logins are served by every node from its followed image.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from secmeta.core.errors import ApiError, ErrorCode

log = logging.getLogger("secmeta.replication")

__all__ = ["NO_CONTROLLER", "ClusterView", "Controllership", "NodeAddress", "cluster_view", "not_controller"]

#: Metadata's controller_id while no controller is known (Kafka's MetadataResponse.NO_CONTROLLER_ID).
NO_CONTROLLER = -1


def not_controller(node_id: int, active: int | None) -> ApiError:
    """The error a write gets on a node that is not the active controller."""
    where = "no controller is active yet" if active is None else f"the active controller is node {active}"
    return ApiError(ErrorCode.NOT_CONTROLLER, f"node {node_id} is not the active controller ({where})")


@dataclass(frozen=True, slots=True)
class NodeAddress:
    """One node of the cluster as Metadata lists it: id and the address clients connect to."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


class Controllership:
    """This node's view of the controllers: its own role, the active node, every node's address.

    Thread-safe: the election thread writes, request handlers read (one attribute read each).
    """

    def __init__(self, node_id: int):
        self.node_id = node_id
        self._lock = threading.Lock()
        self._active_here = False
        self._active: int | None = None
        self._last_named: int | None = None   # the last controller the listeners were told of
        self._claimed: int | None = None   # the newest other node's "active" claim still standing
        self._nodes: MappingProxyType[int, NodeAddress] = MappingProxyType({})
        self._reason = "not elected yet"
        self._listeners: list[Callable[[int], None]] = []
        self._cut_off: str | None = None    # why this node cannot reach the commit point (it serves nothing then)
        self._cut_listeners: list[Callable[[str | None], None]] = []

    def __repr__(self) -> str:
        role = "active" if self._active_here else f"standby ({self._reason})"
        return f"<Controllership node={self.node_id} {role} controller={self._active} nodes={sorted(self._nodes)}>"

    @property
    def accepts_writes(self) -> bool:
        """True only while this node is the active controller (elected, previous writer fenced, caught up)."""
        return self._active_here

    @property
    def active_id(self) -> int | None:
        """The node known to be the active controller, or None."""
        return self._active

    @property
    def nodes(self) -> MappingProxyType[int, NodeAddress]:
        """Every node announced (this one included once it announced itself), by id."""
        return self._nodes

    @property
    def standby_reason(self) -> str:
        return self._reason

    def on_new_controller(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(node_id)`` (on the thread that learnt it) whenever another node, or this one, becomes
        the known controller, other than the last one known (a controller unknown for a while that comes back is
        no move): the server closes its idle client connections then, because librdkafka refreshes
        its metadata when it connects, not when its controller dies (an admin client without topics otherwise
        refreshes only every 10 s)."""
        self._listeners.append(listener)

    @property
    def cut_off(self) -> str | None:
        """Why this node is cut off from the commit point (Kafka), or None. A cut-off node serves nothing: its
        image may be arbitrarily stale and it cannot tell clients who the controller is, so it closes every client
        connection and refuses new ones until it reaches Kafka again; clients go to the other nodes."""
        return self._cut_off

    def on_cut_off(self, listener: Callable[[str | None], None]) -> None:
        """Call ``listener(reason)`` when this node becomes cut off, ``listener(None)`` when it is reachable again."""
        self._cut_listeners.append(listener)

    def set_cut_off(self, reason: str | None) -> None:
        with self._lock:
            changed = (self._cut_off is None) != (reason is None)
            self._cut_off = reason
        if changed:
            for listener in self._cut_listeners:
                listener(reason)

    def _newly_named(self) -> int | None:
        """The controller now known when it is another node than the last one known (caller holds the lock): a
        controller unknown for a while, then the same one again (X, none, X), did not move."""
        after = self._active
        if after is None or after == self._last_named:
            return None
        self._last_named = after
        return after

    def _tell(self, named: int | None) -> None:
        if named is not None:
            for listener in self._listeners:
                listener(named)

    def become_active(self) -> None:
        with self._lock:
            self._active_here = True
            self._active = self.node_id
            named = self._newly_named()
        self._tell(named)

    def step_down(self, reason: str) -> None:
        """Stop accepting writes at once; the controller is then the node whose claim to be active came last
        (heard while this node was active, e.g. a process resumed after a stop finds a newer active one), else
        unknown until someone announces."""
        with self._lock:
            self._active_here = False
            self._reason = reason
            if self._active == self.node_id:
                self._active = self._claimed
            named = self._newly_named()
        self._tell(named)

    def observe(self, address: NodeAddress, active: bool | None) -> None:
        """What node ``address.node_id`` announced: its address, and whether it is active (None: it left)."""
        with self._lock:
            before = self._active
            self._observe(address, active)
            named = self._newly_named()
            after = self._active
        if after != before:
            log.info("node %d %s", self.node_id, "knows no active controller" if after is None else
                     f"learnt that node {after} is the active controller")
        self._tell(named)

    def _observe(self, address: NodeAddress, active: bool | None) -> None:
        """Caller holds the lock."""
        nodes = dict(self._nodes)
        if active is None:
            nodes.pop(address.node_id, None)
        else:
            nodes[address.node_id] = address
        self._nodes = MappingProxyType(nodes)
        if address.node_id == self.node_id:
            return  # this node's own role is decided here, never by an echo of its announcements
        if active:
            self._claimed = address.node_id
            if not self._active_here:   # while active here, another's claim waits for a step-down
                self._active = address.node_id
        else:
            if self._claimed == address.node_id:
                self._claimed = None
            if self._active == address.node_id:
                self._active = None


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What Metadata and DescribeCluster say of the cluster at one moment: its controller and its nodes
    (hashable, so an answer encoded for one view is kept until the view changes)."""

    controller_id: int
    brokers: tuple[NodeAddress, ...]


def cluster_view(broker: Any, cluster: Controllership | None) -> ClusterView:
    """The embedded default: this node, the controller; replicated: this node (at the address of the listener
    asked) and every other node announced, the active one the controller (-1 while none is known)."""
    here = NodeAddress(broker.node_id, broker.host, broker.port, broker.rack)
    if cluster is None:
        return ClusterView(broker.node_id, (here,))
    active = cluster.active_id
    others = tuple(node for node_id, node in sorted(cluster.nodes.items()) if node_id != broker.node_id)
    return ClusterView(NO_CONTROLLER if active is None else active, (here, *others))
