"""Replicated mode: the store's log through a Kafka topic (issue 25).

The topic (one partition) is the commit point: a batch is committed when a
transactional producer, whose transactional.id every node of the store shares,
commits it there; only then is it appended to the local log and acknowledged
(``KafkaCommitGate``, the store's commit gate). Every node's local log is a
verified replica of the topic: the same bytes, offsets and keyed hash chain
(``TopicReplica``). ``secmeta serve --replication-bootstrap-server`` starts a
node (``node``), ``secmeta init --join`` makes a node's store from the topic
(``join``). The active controller holds a lease on an election topic
(``election``), fenced by the shared transactional id; standbys follow the topic and serve reads.
"""
