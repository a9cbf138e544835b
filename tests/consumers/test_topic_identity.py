"""TopicIdentity: what a checkpoint records of its cluster and topics, and what it reports as changed."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from secmeta.consumers.kafka.topic_identity import TopicIdentity

ids = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=22)
names = st.sampled_from(["secmeta.history", "secmeta.state", "h-1", "s-2"])
identities = st.builds(TopicIdentity, st.none() | ids, st.dictionaries(names, st.none() | ids, max_size=3))


@given(identities)
def test_an_identity_survives_its_checkpoint_and_is_unchanged(identity):
    """Written to a checkpoint (JSON) and read back, an identity equals itself and reports no change."""
    back = TopicIdentity.from_json(json.loads(json.dumps(identity.to_json())))
    assert back == identity and back.changes(identity) == []


@given(identities, ids)
def test_another_cluster_is_reported_naming_both_ids(identity, other):
    """A recorded cluster id that differs now is a change naming the new and the recorded id."""
    if identity.cluster_id is None or other == identity.cluster_id:
        return
    now = TopicIdentity(other, identity.topic_ids)
    assert now.cluster_id != identity.cluster_id
    assert identity.changes(now) == [f"the cluster is {other}, not {identity.cluster_id}"]


@given(identities, st.data())
def test_a_recreated_topic_is_reported_naming_it_and_both_ids(identity, data):
    """Any recorded topic id that differs now (another id, or none given) is reported for that topic."""
    recorded = [name for name, topic_id in identity.topic_ids.items() if topic_id is not None]
    if not recorded:
        return
    name = data.draw(st.sampled_from(recorded))
    new = data.draw(st.none() | ids.filter(lambda i: i != identity.topic_ids[name]))
    now = TopicIdentity(identity.cluster_id, {**identity.topic_ids, name: new})
    changes = identity.changes(now)
    assert len(changes) == 1
    assert changes[0].startswith(f"topic {name} has id {new}, not {identity.topic_ids[name]}")


def test_ids_the_cluster_did_not_give_are_not_compared():
    """A checkpoint written where the cluster gave no ids (librdkafka's mock) accepts the ids given now."""
    recorded = TopicIdentity(None, {"h": None})
    assert recorded.changes(TopicIdentity("c1", {"h": "AaIaBKftfSKEfC8t6eAQzg"})) == []


def test_a_checkpoint_without_an_identity_records_none():
    """Checkpoints written before identities were recorded have none (not an empty one)."""
    assert TopicIdentity.from_json(None) is None
