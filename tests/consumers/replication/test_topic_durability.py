"""The log topic is the commit point: an existing topic whose settings let Kafka lose acknowledged batches is
refused before anything is written, as one with too low a min.insync.replicas or with retention is."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from secmeta.consumers.kafka.replication.settings import ReplicationSettings
from secmeta.consumers.kafka.replication.topic import ReplicationUnavailableError, ensure_topic

pytestmark = [pytest.mark.kafka]


def test_a_log_topic_allowing_unclean_leader_election_is_refused_naming_the_setting(tmp_path, tansu_bootstrap):
    """With unclean.leader.election.enable=true Kafka may make an out-of-sync replica the leader, dropping batches
    acks=all had acknowledged: the next active node would read a topic without them and write over them.  The
    README lists it false among the Kafka side's requirements; the durability check must refuse it."""
    topic = f"__secmeta_log.unclean-{tmp_path.name}"
    admin = AdminClient({"bootstrap.servers": tansu_bootstrap})
    settings = {"min.insync.replicas": "2", "retention.ms": "-1", "unclean.leader.election.enable": "true"}
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=settings)]).values():
        future.result(15)
    described = next(iter(admin.describe_configs([ConfigResource("topic", topic)]).values())).result(15)
    assert described["unclean.leader.election.enable"].value == "true", "the broker does not report the setting"
    with pytest.raises(ReplicationUnavailableError, match="unclean.leader.election.enable"):
        ensure_topic(ReplicationSettings(tansu_bootstrap, topic=topic, replication_factor=1, min_insync_replicas=1),
                     topic)
