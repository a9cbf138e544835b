"""The chaos test's short form (issue 25, items 5 and 8): three ``secmeta serve`` nodes against Tansu, under write
load from confluent-kafka AdminClients, the active one killed with SIGKILL, then hung (SIGSTOP, resumed after the
failover), then cut off from Kafka (a proxy blackholes its connections; healed after the failover).

After each trial (tests/chaoskit.run_trial): every acknowledged write is in every node's log, every batch a
node logged as committed is the topic's (the local logs are byte-identical), and writes were acknowledged
again.  The full 30 trials, against the 10 s target, are ``python -m scripts.bench.replication``.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from tests.chaoskit import ReplicatedCluster, acl_binding, run_trial, tansu_with_cut, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

# The target (10 s, p99 over 30 trials with secmeta serve's default 3 s lease) is the benchmark's; this short form
# runs on a shared machine and bounds each failover loosely, so it fails on a stuck election only.
FAILOVER_BOUND_S = 20.0


def test_killing_hanging_or_cutting_off_the_active_loses_no_acknowledged_write_and_another_node_takes_over(tmp_path):
    """A kill -9 trial, a SIGSTOP trial (the hung node is resumed after the failover and must find itself fenced)
    and a network-cut trial (the node's lease lapses, it steps down and follows again once healed): 0 acknowledged
    writes lost, 0 acknowledged by a fenced node, another node took over each time."""
    with tansu_with_cut(tmp_path) as (bootstrap, network), \
            ReplicatedCluster(tmp_path / "cluster", bootstrap, network=network) as cluster:
        _admin_at_a_standby_writes_through_the_active(cluster)
        trials = [run_trial(cluster, writers=2, load_s=0.5, how=how) for how in ("kill", "hang", "cut")]
    for trial in trials:
        assert trial.acked > 0
        assert trial.lost == []
        assert trial.unfenced_acks == []
        assert trial.new_active != trial.killed
        assert trial.failover_s <= FAILOVER_BOUND_S, trials


def _admin_at_a_standby_writes_through_the_active(cluster: ReplicatedCluster) -> None:
    """An AdminClient given only a standby's address creates an ACL: Metadata names the active node, which
    commits it; the standbys then hold it too (followed from the topic)."""
    active = wait_for(cluster.active, 60, "an active node")
    standby = next(node for node in cluster.nodes if node is not active)
    admin = AdminClient({"bootstrap.servers": standby.address, "topic.metadata.refresh.interval.ms": 500})
    for future in admin.create_acls([acl_binding("through-a-standby")], request_timeout=30).values():
        future.result()
    wait_for(lambda: all("through-a-standby" in cluster.acl_names(node) for node in cluster.nodes), 30,
             "every node holds the ACL")
