"""SecurityDelta and SecurityProjection: each event type's replay, immutability, sharing."""

import gc
from dataclasses import replace

import pytest

from secmeta.events.keyring import SealedSecret
from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    DelegationTokenExpired,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    DelegationTokenRenewed,
    Envelope,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
    TokenRemovalReason,
)
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from secmeta.projections.errors import InconsistentEventError
from secmeta.projections.image import SecurityDelta, SecurityImage, SecurityProjection
from secmeta.projections.tokens import TokenInfo
from tests.gckit import collections_seen

SHA256 = ScramMechanism.SCRAM_SHA_256
SECRET = SealedSecret("k-1", b"\x01" * 12, b"\x02" * 32)
BINDING = AclBinding.of(
    ResourceType.TOPIC,
    "orders",
    PatternType.LITERAL,
    "User:alice",
    "*",
    AclOperation.READ,
    AclPermissionType.ALLOW,
)
UPSERT = ScramCredentialUpserted("alice", SHA256, 4096, SECRET)
ISSUE = DelegationTokenIssued("t1", "User:alice", "User:bob", ("User:carol",), 10, 100, 1_000)


def replayed(*events, base=SecurityImage.EMPTY):
    delta = SecurityDelta(base)
    for event in events:
        delta.replay(event)
    return delta.apply()


def envelope(offset, event):
    return Envelope(offset, 0, "User:admin", "127.0.0.1", "r", event)


def test_empty_image_is_empty():
    """EMPTY has no credential, ACL or token and starts at offset 0."""
    image = SecurityImage.EMPTY
    assert (len(image.scram), len(image.acls), len(image.tokens), image.next_offset) == (0, 0, 0, 0)


def test_scram_upserted_adds_a_credential():
    """ScramCredentialUpserted stores the mechanism, iterations and sealed secret."""
    entry = replayed(UPSERT).scram.get("alice", SHA256)
    assert (entry.iterations, entry.secret) == (4096, SECRET)


def test_scram_deleted_removes_the_credential():
    """ScramCredentialDeleted removes the credential (and the user with it)."""
    assert "alice" not in replayed(UPSERT, ScramCredentialDeleted("alice", SHA256)).scram


def test_acl_created_adds_the_acl():
    """AclCreated adds the binding under its id."""
    assert replayed(AclCreated("a1", BINDING)).acls.get("a1") == BINDING


def test_acl_deleted_removes_the_acl():
    """AclDeleted removes the ACL with that id."""
    assert "a1" not in replayed(AclCreated("a1", BINDING), AclDeleted("a1", BINDING)).acls


def test_acl_deleted_of_unknown_id_raises_with_its_offset():
    """AclDeleted of an id not in the image raises, naming the event's offset.

    Kafka: AclsDelta.replay(RemoveAccessControlEntryRecord) throws for an unknown id.
    """
    base = replayed(AclCreated("a1", BINDING))
    with pytest.raises(InconsistentEventError, match="^the log is inconsistent at offset 7: removal of ACL 'zz'") as info:
        SecurityDelta(base).replay_all([envelope(6, AclCreated("a2", BINDING)), envelope(7, AclDeleted("zz", BINDING))])
    assert info.value.offset == 7


def test_token_issued_adds_the_token():
    """DelegationTokenIssued stores every field of the token."""
    got = replayed(ISSUE).tokens.get("t1")
    assert got == TokenInfo("t1", "User:alice", "User:bob", ("User:carol",), 10, 100, 1_000)


def test_token_renewed_sets_the_expiry():
    """DelegationTokenRenewed sets the token's new expiry timestamp."""
    got = replayed(ISSUE, DelegationTokenRenewed("t1", -1, 500)).tokens.get("t1")
    assert got.expiry_timestamp_ms == 500


def test_token_expired_sets_the_expiry():
    """DelegationTokenExpired sets the token's new expiry timestamp."""
    got = replayed(ISSUE, DelegationTokenExpired("t1", 5, 15)).tokens.get("t1")
    assert got.expiry_timestamp_ms == 15


@pytest.mark.parametrize("event", [
    DelegationTokenRenewed("nope", -1, 500),
    DelegationTokenExpired("nope", 5, 15),
    DelegationTokenRemoved("nope", TokenRemovalReason.EXPIRED_BY_SWEEP),
    ScramCredentialDeleted("nobody", ScramMechanism.SCRAM_SHA_256),
], ids=lambda e: type(e).__name__)
def test_change_of_an_absent_entity_raises_with_its_offset(event):
    """Renewal, expiry or removal of an unknown token, deletion of a missing credential: raises naming the offset.

    Kafka: ScramControlManager.replay(RemoveUserScramCredentialRecord) throws "Unable to find credential to delete".
    """
    with pytest.raises(InconsistentEventError, match="^the log is inconsistent at offset 3: .*'no(pe|body)'") as info:
        SecurityProjection().apply(SecurityImage.EMPTY, [envelope(3, event)])
    assert info.value.offset == 3


def test_token_removed_drops_the_token():
    """DelegationTokenRemoved removes the token."""
    removal = DelegationTokenRemoved("t1", TokenRemovalReason.EXPIRED_BY_SWEEP)
    assert "t1" not in replayed(ISSUE, removal).tokens


def test_replay_of_unknown_event_type_raises():
    """Replaying something that is not an event raises TypeError."""
    with pytest.raises(TypeError):
        SecurityDelta(SecurityImage.EMPTY).replay("not an event")


def test_replay_all_equals_replay_per_event():
    """replay_all gives the image that replay, one event at a time, gives."""
    events = [UPSERT, AclCreated("a1", BINDING), ISSUE, DelegationTokenRenewed("t1", 1, 50)]
    delta = SecurityDelta(SecurityImage.EMPTY)
    delta.replay_all(envelope(i, e) for i, e in enumerate(events))
    assert delta.apply() == replayed(*events)


def test_apply_leaves_the_old_image_unchanged():
    """The image a delta started from keeps all it held."""
    base = replayed(UPSERT, AclCreated("a1", BINDING), ISSUE)
    replayed(
        ScramCredentialDeleted("alice", SHA256),
        AclDeleted("a1", BINDING),
        DelegationTokenRemoved("t1", TokenRemovalReason.EXPIRED_BY_REQUEST),
        base=base,
    )
    assert (len(base.scram), len(base.acls), len(base.tokens)) == (1, 1, 1)


def test_acl_only_batch_shares_scram_and_tokens():
    """A batch of ACL events reuses the same SCRAM and token images."""
    base = replayed(UPSERT, ISSUE)
    got = replayed(AclCreated("a1", BINDING), base=base)
    assert got.scram is base.scram and got.tokens is base.tokens


def test_scram_only_batch_shares_acls_and_tokens():
    """A batch of SCRAM events reuses the same ACL and token images."""
    base = replayed(AclCreated("a1", BINDING), ISSUE)
    got = replayed(UPSERT, base=base)
    assert got.acls is base.acls and got.tokens is base.tokens


def test_apply_without_effect_returns_the_same_image():
    """A delta whose events change nothing, at the same offset, returns its base image."""
    base = replayed(UPSERT)
    assert replayed(UPSERT, base=base) is base


def test_projection_sets_next_offset_after_last_event():
    """SecurityProjection.apply sets next_offset to the last envelope's offset + 1."""
    batch = [envelope(7, UPSERT), envelope(8, AclCreated("a1", BINDING))]
    assert SecurityProjection().apply(SecurityImage.EMPTY, batch).next_offset == 9


def test_projection_of_empty_batch_returns_state():
    """An empty batch returns the very state it was given."""
    state = replayed(UPSERT)
    assert SecurityProjection().apply(state, []) is state


def test_projection_empty_is_the_empty_image():
    """The projection starts from SecurityImage.EMPTY."""
    assert SecurityProjection().empty is SecurityImage.EMPTY


def test_projection_leaves_the_collector_enabled():
    """The GC, paused while an image is built, is enabled again afterwards."""
    SecurityProjection().apply(SecurityImage.EMPTY, [envelope(0, UPSERT)])
    assert gc.isenabled()


def test_projection_keeps_a_disabled_collector_disabled():
    """If the GC was off before apply, it is still off after."""
    gc.disable()
    try:
        SecurityProjection().apply(SecurityImage.EMPTY, [envelope(0, UPSERT)])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_projection_moves_offset_even_without_state_change():
    """A batch with no effect still advances next_offset."""
    state = replayed(UPSERT)
    batch = [envelope(4, UPSERT)]
    got = SecurityProjection().apply(state, batch)
    assert got == replace(state, next_offset=5)


def test_a_run_of_events_applies_as_their_envelopes_without_a_collection():
    """apply_events (the Kafka follower's run of events after its image) gives what apply gives for the same events
    as envelopes, and no cyclic collection runs while it builds (its thousands of new objects would set off dozens),
    the collector enabled again after."""
    events = [AclCreated(f"a{n}", replace(BINDING, pattern=replace(BINDING.pattern, name=f"t{n}")))
              for n in range(3000)] + [UPSERT, AclDeleted("a7", BINDING)]
    base = replayed(ISSUE)
    with collections_seen() as collections:
        got = SecurityProjection().apply_events(base, events)
    assert len(collections) <= 1 and gc.isenabled()  # at most the one the block's new objects set off at its end
    assert got == SecurityProjection().apply(base, [envelope(n, e) for n, e in enumerate(events)])
    assert SecurityProjection().apply_events(base, []) is base
