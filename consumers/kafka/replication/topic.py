"""The log topic: found, or created with one partition, the configured replication and no retention."""

from __future__ import annotations

import logging
from typing import Any, cast

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from confluent_kafka.admin import ResourceType as ConfigResourceType

from secmeta.consumers.kafka.client_config import client_settings
from secmeta.consumers.kafka.client_log import side_client_logger
from secmeta.consumers.kafka.replication.settings import ReplicationSettings
from secmeta.core.errors import SecmetaError

__all__ = ["ReplicationUnavailableError", "admin_client", "ensure_topic"]

logger = logging.getLogger("secmeta.replication")


class ReplicationUnavailableError(SecmetaError):
    """Kafka could not be reached, or the log topic cannot serve as one."""


def admin_client(settings: ReplicationSettings) -> AdminClient:
    config = client_settings(settings.bootstrap, settings.client, enforced={"logger": side_client_logger()})
    return AdminClient(cast(dict[str, Any], config))


def ensure_topic(settings: ReplicationSettings, topic: str) -> None:
    """Create ``topic`` when missing: one partition (one order of batches), ``replication_factor`` replicas,
    ``min.insync.replicas``, no unclean leader election, kept forever (a joiner rebuilds from it). An existing topic must have one partition.
    (Created first, looked at after: asking for a missing topic's metadata may auto-create it with defaults.)"""
    admin = admin_client(settings)
    timeout = settings.timeout_s
    config = {"min.insync.replicas": str(settings.min_insync_replicas), "unclean.leader.election.enable": "false",
              "retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}
    future = admin.create_topics([NewTopic(topic, 1, settings.replication_factor, config=config)],
                                 request_timeout=timeout, operation_timeout=timeout)[topic]
    try:
        future.result(timeout=timeout + 5)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise ReplicationUnavailableError(f"creating the log topic {topic} failed: {exc.args[0].str()}") from None
    except Exception as exc:  # noqa: BLE001 - a future that never completes, etc.
        raise ReplicationUnavailableError(f"creating the log topic {topic} failed: {exc!r}") from None
    else:
        logger.info("created the log topic %s (%s replicas, min.insync.replicas %s)", topic,
                    settings.replication_factor, settings.min_insync_replicas)
    try:
        found = admin.list_topics(topic, timeout=timeout).topics.get(topic)
    except KafkaException as exc:
        raise ReplicationUnavailableError(f"Kafka at {settings.bootstrap} did not answer: {exc.args[0]}") from None
    if found is None or found.error is not None or len(found.partitions) != 1:
        count = "no" if found is None or found.error is not None else len(found.partitions)
        raise ReplicationUnavailableError(f"the log topic {topic} has {count} partitions; it needs exactly one "
                                          "(one order of batches)")
    check_durability(admin, settings, topic)


def check_durability(admin: AdminClient, settings: ReplicationSettings, topic: str) -> None:
    """The topic (made here or found) must be as durable as the settings ask: min.insync.replicas at least
    ``min_insync_replicas`` (a commit must reach that many replicas), no unclean leader election (an out-of-sync
    replica made leader drops batches acks=all acknowledged) and no retention (a joiner rebuilds from the first
    record). Refused otherwise, naming the setting and the fix; nothing is written."""
    try:
        future = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                        request_timeout=settings.timeout_s)
        configs = next(iter(future.values())).result(timeout=settings.timeout_s + 5)
    except KafkaException as exc:
        raise ReplicationUnavailableError(f"the log topic {topic}'s settings could not be read (DescribeConfigs: "
                                          f"{exc.args[0].str()}): its durability cannot be checked") from None
    found = {name: entry.value for name, entry in configs.items()}
    problems = []
    insync = found.get("min.insync.replicas")
    if insync is not None and int(insync) < settings.min_insync_replicas:
        problems.append(f"min.insync.replicas is {insync}, below --min-insync-replicas "
                        f"{settings.min_insync_replicas}")
    unclean = found.get("unclean.leader.election.enable")
    if unclean is not None and unclean.lower() != "false":
        problems.append(f"unclean.leader.election.enable is {unclean}: an out-of-sync replica made leader would "
                        "drop acknowledged batches (it must be false)")
    for name in ("retention.ms", "retention.bytes"):
        if found.get(name) not in (None, "-1"):
            problems.append(f"{name} is {found[name]}: the topic must keep every batch (-1)")
    if problems:
        raise ReplicationUnavailableError(
            f"the log topic {topic} is not durable enough: " + "; ".join(problems) + ". Fix it with "
            f"kafka-configs.sh --alter --entity-type topics --entity-name {topic} --add-config ..., or give "
            "--min-insync-replicas to match")
