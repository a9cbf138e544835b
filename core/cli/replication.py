"""Replicated mode's command-line side: its options, and the implementation found through an entry point.

Core never imports Kafka: ``secmeta serve --replication-bootstrap-server`` and ``secmeta init --join`` load
the ``secmeta.replication`` entry point (the kafka extra's secmeta.consumers.kafka.replication.plugin), as
plugins.py finds commands. Without the extra they say what to install.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

from secmeta.core.cli.plugins import MissingExtraError

if TYPE_CHECKING:
    from secmeta.core.store.facade import SecurityStore
    from secmeta.events.keyring import Keyring

GROUP = "secmeta.replication"


class ReplicatedNode(Protocol):
    """A started node: ``writing`` when its store commits through the replication's gate.

    A node has ``cluster`` (a secmeta.core.server.controllership.Controllership, given to the server: a
    ``--standby`` node's is never active and names the active node); one that takes part in the controllers'
    election also has ``listening(broker)``, called once the server listens with the BrokerInfo of its first
    listener (the address it announces)."""

    @property
    def writing(self) -> bool: ...


class Replication(Protocol):
    def start(self, store: SecurityStore, args: argparse.Namespace, on_failure: Callable[[BaseException], None], *,
              on_applied: Callable[[int], None] | None = None) -> AbstractContextManager[ReplicatedNode]:
        """Replicate ``store`` (opened with a NotWriterGate) as the options say; the node stops with the context.
        ``on_failure`` gets what stopped a node in the background; ``on_applied`` the log's end after batches
        from the topic were appended (a standby's serving processes catch up)."""
        ...

    def join(self, path: str, args: argparse.Namespace, keyring: Keyring) -> SecurityStore:
        """Make a new store at ``path`` from the replicated log ``args.join`` names; returned open."""
        ...


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """How to reach the log topic (serve and init --join alike)."""
    parser.add_argument("--replication-command-config", metavar="FILE",
                        help="Kafka client properties for the log topic's cluster (security.protocol, SASL, TLS)")
    parser.add_argument("--replication-topic", metavar="NAME",
                        help="the log topic (default: __secmeta_log.<store id>)")
    parser.add_argument("--replication-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="give up a call to Kafka after this long (default: %(default)s)")


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("replicated mode (the log through Kafka; needs the kafka extra)")
    group.add_argument("--replication-bootstrap-server", metavar="HOST:PORT",
                       help="replicate the log through a topic on this Kafka cluster: a batch is committed when "
                            "Kafka holds it, then appended here; the first node seeds an empty topic")
    add_connection_options(group)  # type: ignore[arg-type]
    group.add_argument("--replication-factor", type=int, default=3, metavar="N",
                       help="replicas of a log topic this node creates (default: %(default)s)")
    group.add_argument("--min-insync-replicas", type=int, default=2, metavar="N",
                       help="min.insync.replicas of a log topic this node creates (default: %(default)s)")
    group.add_argument("--standby", action="store_true",
                       help="follow the log topic and serve reads; never write (without it the node joins the "
                            "controllers' election and writes while it is the active controller)")
    group.add_argument("--controller-lease-ms", type=int, default=3000, metavar="MS",
                       help="the active controller's lease: a dead, hung or cut-off active node is replaced about "
                            "this long after its last heartbeat reached Kafka (default: %(default)s)")


def replication() -> Replication:
    """The installed replication (MissingExtraError naming the extra when there is none)."""
    from importlib import metadata

    for entry in metadata.entry_points(group=GROUP):
        return entry.load()
    raise MissingExtraError("replicated mode needs the kafka extra: pip install 'secmeta[kafka]'")
