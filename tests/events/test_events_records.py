"""Event records and envelopes: entity keys, type names, immutability."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.events.keyring import SealedSecret
from secmeta.events.records import (
    EVENT_TYPES,
    AclCreated,
    AclDeleted,
    ClientQuotaEntity,
    DelegationTokenExpired,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    DelegationTokenRenewed,
    Envelope,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
    TokenRemovalReason,
    entity_key,
)
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)

BINDING = AclBinding.of(
    ResourceType.TOPIC,
    "t",
    PatternType.LITERAL,
    "User:a",
    "*",
    AclOperation.READ,
    AclPermissionType.ALLOW,
)


@pytest.mark.parametrize(
    ("event", "key"),
    [
        (AclCreated("u-1", BINDING), "acl:u-1"),
        (AclDeleted("u-1", BINDING), "acl:u-1"),
        (
            ScramCredentialUpserted(
                "alice", ScramMechanism.SCRAM_SHA_256, 4096, SealedSecret("k", b"", b"")
            ),
            "scram:alice:SCRAM-SHA-256",
        ),
        (
            ScramCredentialDeleted("alice", ScramMechanism.SCRAM_SHA_512),
            "scram:alice:SCRAM-SHA-512",
        ),
        (DelegationTokenIssued("t1", "User:a", "User:a", (), 1, 2, 3), "token:t1"),
        (DelegationTokenRenewed("t1", -1, 5), "token:t1"),
        (DelegationTokenExpired("t1", 0, 5), "token:t1"),
        (DelegationTokenRemoved("t1", TokenRemovalReason.EXPIRED_BY_SWEEP), "token:t1"),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else "",
)
def test_entity_key_names_the_changed_entity(event, key):
    """Each event's entity key is acl:<id>, scram:<user>:<mechanism> or token:<id>."""
    assert event.entity_key == entity_key(event) == key


def test_event_types_maps_names_to_the_twelve_classes():
    """EVENT_TYPES maps each class name to its class."""
    assert len(EVENT_TYPES) == 12 and all(cls.__name__ == name for name, cls in EVENT_TYPES.items())


def test_envelope_event_type_is_the_event_class_name():
    """Envelope.event_type names the wrapped event's class."""
    env = Envelope(-1, 0, "User:a", "h", "r", DelegationTokenRenewed("t", -1, 5))
    assert (env.event_type, env.fingerprint) == ("DelegationTokenRenewed", b"")


def test_events_are_immutable():
    """Assigning to an event field raises FrozenInstanceError."""
    event = AclCreated("u-1", BINDING)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.acl_id = "u-2"


_QUOTA_NAMES = st.none() | st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.just("<default>")


@given(st.dictionaries(st.sampled_from(["user", "client-id", "ip", "other,=type"]), _QUOTA_NAMES))
def test_a_quota_entitys_canonical_form_reads_back_as_the_same_entity(parts):
    """Any names (commas, '=', ':', the literal '<default>') survive str() and parse()."""
    entity = ClientQuotaEntity.of(parts)
    assert ClientQuotaEntity.parse(str(entity)) == entity and entity.as_dict() == parts
    assert ":" not in str(entity)  # the entity key's separators stay unambiguous


def test_a_quota_entity_is_the_same_whatever_order_its_parts_were_given_in():
    """Kafka's ClientQuotaEntity is a map: {client-id, user} equals {user, client-id}; user is written first."""
    a = ClientQuotaEntity.of({"client-id": "c1", "user": "alice"})
    assert a == ClientQuotaEntity.of({"user": "alice", "client-id": "c1"}) and str(a) == "user=alice,client-id=c1"


def test_the_default_entity_differs_from_a_name_spelled_default():
    """ClientQuotasRequestTest.testClientQuotasWithDefaultName: '<default>' is an ordinary name in KRaft."""
    default, named = ClientQuotaEntity.of({"client-id": None}), ClientQuotaEntity.of({"client-id": "<default>"})
    assert default != named and str(default) != str(named)
    assert ClientQuotaEntity.parse(str(named)).as_dict() == {"client-id": "<default>"}
