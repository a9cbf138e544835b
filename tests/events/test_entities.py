"""secmeta.events.entities: every logged event type belongs to exactly one declared kind."""

from dataclasses import replace

import pytest

from secmeta.events.entities import KINDS, Parties, involves, kind_of
from secmeta.events.records import (
    EVENT_TYPES,
    AclCreated,
    ClientQuotaAltered,
    ClientQuotaEntity,
    DelegationTokenIssued,
    DelegationTokenRenewed,
    ScramCredentialDeleted,
)
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from tests.entitykit import WIDGETS, WidgetMade, WidgetPainted, WidgetResized, WidgetScrapped


def test_every_event_type_has_one_kind():
    """No event type is left out of the declarations, and none is claimed twice."""
    declared = [t for kind in KINDS for t in kind.event_types]
    assert len(declared) == len(set(declared))
    assert {t.__name__ for t in declared} == set(EVENT_TYPES)


def test_an_events_key_starts_with_its_kinds_name():
    event = ScramCredentialDeleted("alice", ScramMechanism.SCRAM_SHA_256)
    assert kind_of(event).name == "scram" and event.entity_key.startswith("scram:")
    assert kind_of("ScramCredentialDeleted") is kind_of(ScramCredentialDeleted) is kind_of(event)


def test_an_acl_involves_its_principal_and_a_credential_its_user():
    binding = AclBinding.of(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:bob", "*", AclOperation.READ,
                            AclPermissionType.ALLOW)
    assert involves(AclCreated("id-1", binding), "User:bob")
    assert not involves(AclCreated("id-1", binding), "User:alice")
    assert involves(ScramCredentialDeleted("alice", ScramMechanism.SCRAM_SHA_256), "User:alice")


def test_a_renewal_involves_the_parties_of_the_token_it_renews():
    """The renewal names only the token id; its owner, requester and renewers are parties to it."""
    issued = DelegationTokenIssued("tok", "User:alice", "User:mallory", ("User:ops",), 1, 2, 3)
    renewed = DelegationTokenRenewed("tok", -1, 5)
    parties = Parties()
    assert not involves(renewed, "User:alice", parties)
    parties.observe(issued)
    assert [p for p in ("User:alice", "User:mallory", "User:ops", "User:eve") if involves(renewed, p, parties)] == [
        "User:alice", "User:mallory", "User:ops"]


def test_each_event_opens_updates_or_closes_as_its_kind_declares():
    issued = DelegationTokenIssued("tok", "User:alice", "User:alice", (), 1, 2, 3)
    token = kind_of(issued)
    assert (token.role(issued), token.role(DelegationTokenRenewed("tok", -1, 5))) == ("open", "update")
    assert kind_of(ScramCredentialDeleted).role(ScramCredentialDeleted("a", ScramMechanism.SCRAM_SHA_256)) == "close"


def test_an_update_carries_its_attributes_and_the_others_carry_over():
    """A renewal's state is the issued token with the renewal's expiry; its renew period is no attribute."""
    issued = DelegationTokenIssued("tok", "User:alice", "User:alice", ("User:ops",), 1, 2, 3)
    assert kind_of(issued).updated(issued, DelegationTokenRenewed("tok", 99, 7)) == DelegationTokenIssued(
        "tok", "User:alice", "User:alice", ("User:ops",), 1, 7, 3)


def test_closed_when_none_closes_only_the_events_that_carry_its_field():
    """A widget resized to None closes; a repaint (no size field) stays an update; a made widget opens."""
    assert WIDGETS.role(WidgetResized("w", None)) == "close"
    assert WIDGETS.role(WidgetResized("w", 2)) == "update"
    assert WIDGETS.role(WidgetPainted("w", "red", "b")) == "update"
    assert WIDGETS.role(WidgetMade("w", "User:a", "red", 1)) == "open"
    assert WIDGETS.role(WidgetScrapped("w")) == "close"


def test_a_closed_when_none_field_no_event_carries_is_refused():
    with pytest.raises(TypeError, match="colour_code"):
        replace(WIDGETS, closed_when_none="colour_code")


def test_a_quota_involves_the_user_it_names_and_a_removal_closes_it():
    """A quota of user alice (with any client-id) involves User:alice; a default user's or a client's none."""
    alice = ClientQuotaAltered(str(ClientQuotaEntity.of({"client-id": "app", "user": "alice"})), "producer_byte_rate", 1e6)
    default = ClientQuotaAltered(str(ClientQuotaEntity.of({"user": None})), "producer_byte_rate", 1e6)
    client = ClientQuotaAltered(str(ClientQuotaEntity.of({"client-id": "alice"})), "producer_byte_rate", 1e6)
    assert involves(alice, "User:alice") and not involves(default, "User:alice") and not involves(client, "User:alice")
    quota = kind_of(alice)
    assert quota.name == "quota" and alice.entity_key == "quota:user=alice,client-id=app:producer_byte_rate"
    assert (quota.role(alice), quota.role(ClientQuotaAltered(alice.entity, alice.key, None))) == ("open", "close")
