"""Which cluster and which topics a Kafka job talks to: the cluster id and each topic's id.

A topic name says nothing about what it holds: the same name on another cluster,
or a topic deleted and created again, starts empty.  Checkpoints (the
publisher's, the follower's) record the identity they were written against, and
``changes`` says what differs now.  The cluster id comes from Metadata; topic
ids from the admin API (DescribeTopics, KIP-516), which needs a reachable
controller: a cluster without one (librdkafka's mock cluster) or a broker that
has no topic ids gives ``None``, and an id recorded as ``None`` is not compared.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient

__all__ = ["TopicIdentity", "read_identity"]

logger = logging.getLogger("secmeta.kafka.identity")


@dataclass(frozen=True, slots=True)
class TopicIdentity:
    """A cluster id and topic name -> topic id (``None``: the cluster did not say)."""

    cluster_id: str | None
    topic_ids: Mapping[str, str | None] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "topic_ids", MappingProxyType(dict(self.topic_ids)))

    def to_json(self) -> dict:
        return {"cluster_id": self.cluster_id, "topic_ids": dict(self.topic_ids)}

    @classmethod
    def from_json(cls, data: object) -> TopicIdentity | None:
        """The identity a checkpoint recorded (None if it recorded none: written before identities)."""
        if data is None:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("topic_ids", {}), dict):
            raise ValueError(f"not a topic identity: {data!r}")
        return cls(data.get("cluster_id"), data.get("topic_ids", {}))

    def changes(self, now: TopicIdentity) -> list[str]:
        """What differs in ``now`` from this recorded identity, one phrase each (empty: the same topics)."""
        out = []
        if self.cluster_id is not None and now.cluster_id != self.cluster_id:
            out.append(f"the cluster is {now.cluster_id}, not {self.cluster_id}")
        for name, recorded in self.topic_ids.items():
            if recorded is not None and now.topic_ids.get(name) != recorded:
                out.append(f"topic {name} has id {now.topic_ids.get(name)}, not {recorded} "
                           "(it was deleted and created again)")
        return out


def read_identity(client, admin_config: Mapping[str, Any], topics: Sequence[str],
                  timeout: float) -> TopicIdentity:
    """The cluster id and the ids of ``topics`` (which must exist).  KafkaException if unreachable."""
    metadata = client.list_topics(timeout=timeout)
    ids: dict[str, str | None] = dict.fromkeys(topics)
    if metadata.controller_id in metadata.brokers:
        admin = AdminClient(dict(admin_config))
        futures = admin.describe_topics(TopicCollection(list(topics)), request_timeout=timeout)
        for name, future in futures.items():
            try:
                topic_id = future.result(timeout=timeout + 5).topic_id
            except KafkaException as exc:
                logger.debug("no topic id for %s: %s", name, exc.args[0])
                continue
            text = str(topic_id) if topic_id is not None else None
            ids[name] = None if text in (None, "", "AAAAAAAAAAAAAAAAAAAAAA") else text  # the zero Uuid: none
    return TopicIdentity(metadata.cluster_id, ids)
