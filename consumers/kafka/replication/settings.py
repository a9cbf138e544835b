"""What a replicated node needs to reach its topic: the cluster, client settings, topic name and its durability."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from secmeta.consumers.kafka.client_config import client_settings
from secmeta.core.errors import InvalidValueError

__all__ = ["TOPIC_PREFIX", "ReplicationSettings", "topic_name", "transactional_id"]

TOPIC_PREFIX = "__secmeta_log."
TRANSACTIONAL_PREFIX = "secmeta-log-writer."


def topic_name(store_id: str) -> str:
    """The default log topic of a store: one per store id."""
    return TOPIC_PREFIX + store_id


def transactional_id(store_id: str) -> str:
    """The one transactional.id every writer of a store uses, so a newer writer fences an older one."""
    return TRANSACTIONAL_PREFIX + store_id


@dataclass(frozen=True)
class ReplicationSettings:
    """``bootstrap``: the Kafka cluster; ``client``: librdkafka settings (--replication-command-config);
    ``topic``: the log topic (None: ``topic_name(store id)``); a topic created here gets
    ``replication_factor`` replicas and ``min_insync_replicas`` (3 and 2 suit a real cluster; a one-broker
    test cluster needs 1 and 1); ``timeout_s`` bounds each call to Kafka."""

    bootstrap: str
    node_id: int = 1
    client: Mapping[str, str] = field(default_factory=dict, repr=False)
    topic: str | None = None
    replication_factor: int = 3
    min_insync_replicas: int = 2
    timeout_s: float = 10.0

    def __post_init__(self):
        object.__setattr__(self, "client", MappingProxyType(dict(self.client)))
        if not self.bootstrap:
            raise InvalidValueError("replicated mode needs a Kafka bootstrap server (HOST:PORT)")
        if self.replication_factor < 1 or self.min_insync_replicas < 1:
            raise InvalidValueError("--replication-factor and --min-insync-replicas must be at least 1")
        if self.min_insync_replicas > self.replication_factor:
            raise InvalidValueError(f"--min-insync-replicas {self.min_insync_replicas} exceeds "
                                    f"--replication-factor {self.replication_factor}: no write could be committed")
        if self.timeout_s <= 0:
            raise InvalidValueError("the replication timeout must be positive")

    def topic_for(self, store_id: str) -> str:
        return self.topic or topic_name(store_id)

    def election_client(self) -> dict[str, object]:
        """The settings of a node's election clients (announcements, the election): the cluster and the user's
        settings, nothing added."""
        return client_settings(self.bootstrap, self.client)
