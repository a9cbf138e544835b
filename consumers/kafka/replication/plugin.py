"""The ``secmeta.replication`` entry point: replicated mode for ``secmeta serve`` and ``secmeta init --join``."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from secmeta.consumers.kafka.client_config import read_client_config
from secmeta.consumers.kafka.replication.controller import ElectedNode
from secmeta.consumers.kafka.replication.election import ElectionSettings
from secmeta.consumers.kafka.replication.join import join
from secmeta.consumers.kafka.replication.node import ReplicatedNode
from secmeta.consumers.kafka.replication.settings import ReplicationSettings
from secmeta.consumers.kafka.replication.standby import StandbyNode
from secmeta.core.store.facade import SecurityStore
from secmeta.events.keyring import Keyring

__all__ = ["REPLICATION", "KafkaReplication", "election_settings_from_args", "settings_from_args"]


def settings_from_args(args: argparse.Namespace, bootstrap: str) -> ReplicationSettings:
    config = getattr(args, "replication_command_config", None)
    return ReplicationSettings(
        bootstrap, node_id=getattr(args, "node_id", 1),
        client=read_client_config(config) if config else {},
        topic=getattr(args, "replication_topic", None),
        replication_factor=getattr(args, "replication_factor", 3),
        min_insync_replicas=getattr(args, "min_insync_replicas", 2),
        timeout_s=getattr(args, "replication_timeout", 10.0))


def election_settings_from_args(args: argparse.Namespace) -> ElectionSettings:
    return ElectionSettings(lease_ms=getattr(args, "controller_lease_ms", 3000),
                            topic_replication_factor=getattr(args, "replication_factor", 3))


class KafkaReplication:
    def start(self, store: SecurityStore, args: argparse.Namespace, on_failure: Callable[[BaseException], None], *,
              on_applied: Callable[[int], None] | None = None) -> StandbyNode | ElectedNode:
        election = election_settings_from_args(args)    # refused before anything reaches Kafka
        node = ReplicatedNode(store, settings_from_args(args, args.replication_bootstrap_server))
        try:
            node.catch_up()  # before the server listens: a local log the topic refutes is never served
            if not args.standby:  # knows who is active now; follows, and joins the election once the server listens
                return ElectedNode(node, election, on_failure).read_announcements()
            # follows, and reads who is active (Metadata names it; writes here are NOT_CONTROLLER)
            return StandbyNode(node, election).start(on_failure, on_applied)
        except BaseException:
            node.close()
            raise

    def join(self, path: str, args: argparse.Namespace, keyring: Keyring) -> SecurityStore:
        return join(path, settings_from_args(args, args.join), keyring)


REPLICATION = KafkaReplication()
