"""The ``secmeta.replication`` entry point: replicated mode for ``secmeta serve`` and ``secmeta init --join``."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from secmeta.consumers.kafka.client_config import read_client_config
from secmeta.consumers.kafka.replication.join import join
from secmeta.consumers.kafka.replication.node import ReplicatedNode
from secmeta.consumers.kafka.replication.settings import ReplicationSettings
from secmeta.core.store.facade import SecurityStore
from secmeta.events.keyring import Keyring

__all__ = ["REPLICATION", "KafkaReplication", "settings_from_args"]


def settings_from_args(args: argparse.Namespace, bootstrap: str) -> ReplicationSettings:
    config = getattr(args, "replication_command_config", None)
    return ReplicationSettings(
        bootstrap, node_id=getattr(args, "node_id", 1),
        client=read_client_config(config) if config else {},
        topic=getattr(args, "replication_topic", None),
        replication_factor=getattr(args, "replication_factor", 3),
        min_insync_replicas=getattr(args, "min_insync_replicas", 2),
        timeout_s=getattr(args, "replication_timeout", 10.0))


class KafkaReplication:
    def start(self, store: SecurityStore, args: argparse.Namespace, on_failure: Callable[[BaseException], None], *,
              on_applied: Callable[[int], None] | None = None) -> ReplicatedNode:
        node = ReplicatedNode(store, settings_from_args(args, args.replication_bootstrap_server))
        try:
            if args.standby:
                node.follow(on_failure, on_applied)
            else:
                node.become_writer()
        except BaseException:
            node.close()
            raise
        return node

    def join(self, path: str, args: argparse.Namespace, keyring: Keyring) -> SecurityStore:
        return join(path, settings_from_args(args, args.join), keyring)


REPLICATION = KafkaReplication()
