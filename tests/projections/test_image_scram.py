"""ScramImage and ScramDelta: credentials by user and mechanism, structural sharing."""

import pytest

from secmeta.events.keyring import SealedSecret
from secmeta.events.types import ScramMechanism
from secmeta.projections.errors import InconsistentEventError
from secmeta.projections.scram import ScramDelta, ScramEntry, ScramImage

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
SECRET = SealedSecret("k-1", b"\x01" * 12, b"\xfe" * 40)


def image(*credentials, base=ScramImage.EMPTY):
    """An image with (user, mechanism, iterations) credentials upserted into ``base``."""
    delta = ScramDelta(base)
    for user, mechanism, iterations in credentials:
        delta.upsert(user, mechanism, iterations, SECRET)
    return delta.apply()


def deleted(base, user, mechanism):
    delta = ScramDelta(base)
    delta.delete(user, mechanism)
    return delta.apply()


def test_empty_image_has_no_users():
    """EMPTY holds no user."""
    assert len(ScramImage.EMPTY) == 0 and list(ScramImage.EMPTY.users()) == []


def test_upserted_credential_is_found():
    """get returns the upserted mechanism, iterations and sealed secret."""
    got = image(("alice", SHA256, 4096)).get("alice", SHA256)
    assert got == ScramEntry(SHA256, 4096, SECRET)


def test_upsert_replaces_existing_credential():
    """A second upsert of the same user and mechanism replaces the first."""
    got = image(("alice", SHA256, 8192), base=image(("alice", SHA256, 4096)))
    assert got.get("alice", SHA256).iterations == 8192


def test_mechanisms_of_unknown_user_is_empty():
    """mechanisms() of a user without credentials is an empty mapping."""
    assert dict(image(("alice", SHA256, 4096)).mechanisms("bob")) == {}


def test_mechanisms_lists_each_mechanism_of_a_user():
    """mechanisms() maps every mechanism the user has to its entry."""
    got = image(("alice", SHA256, 4096), ("alice", SHA512, 5000)).mechanisms("alice")
    assert {m: e.iterations for m, e in got.items()} == {SHA256: 4096, SHA512: 5000}


def test_len_counts_users_not_credentials():
    """len() is the number of users with at least one credential."""
    assert len(image(("alice", SHA256, 4096), ("alice", SHA512, 4096), ("bob", SHA256, 4096))) == 2


def test_users_lists_every_user():
    """users() yields each user with a credential."""
    assert sorted(image(("alice", SHA256, 4096), ("bob", SHA512, 4096)).users()) == ["alice", "bob"]


def test_deleting_last_credential_removes_the_user():
    """A user whose only credential is deleted is no longer in the image."""
    got = deleted(image(("alice", SHA256, 4096)), "alice", SHA256)
    assert "alice" not in got and len(got) == 0


def test_deleting_one_mechanism_keeps_the_other():
    """Deleting SHA-256 leaves the user's SHA-512 credential."""
    got = deleted(image(("alice", SHA256, 4096), ("alice", SHA512, 4096)), "alice", SHA256)
    assert list(got.mechanisms("alice")) == [SHA512]


def test_delete_then_upsert_in_one_delta_keeps_the_upsert():
    """Within one delta the last change to a credential wins."""
    delta = ScramDelta(image(("alice", SHA256, 4096)))
    delta.delete("alice", SHA256)
    delta.upsert("alice", SHA256, 9999, SECRET)
    assert delta.apply().get("alice", SHA256).iterations == 9999


def test_deleting_absent_credential_raises():
    """Deleting a credential that does not exist raises InconsistentEventError (Kafka: ScramControlManager.replay)."""
    base = image(("alice", SHA256, 4096))
    with pytest.raises(InconsistentEventError, match="SCRAM_SHA_512 credential of user 'alice'"):
        deleted(base, "alice", SHA512)


def test_upsert_of_identical_credential_returns_same_image():
    """Re-upserting an equal credential yields the very same image."""
    base = image(("alice", SHA256, 4096))
    assert image(("alice", SHA256, 4096), base=base) is base


def test_apply_leaves_base_image_unchanged():
    """The image a delta started from still holds its old credentials."""
    base = image(("alice", SHA256, 4096))
    deleted(base, "alice", SHA256)
    image(("bob", SHA256, 4096), base=base)
    assert base.get("alice", SHA256) is not None and "bob" not in base


def test_apply_shares_untouched_users():
    """A user the delta did not touch keeps the same mechanism map object."""
    base = image(("alice", SHA256, 4096), ("bob", SHA256, 4096))
    got = image(("bob", SHA512, 4096), base=base)
    assert got.mechanisms("alice") is base.mechanisms("alice")


def test_entry_repr_hides_secret_bytes():
    """An entry's repr shows the key id but none of the sealed bytes."""
    text = repr(image(("alice", SHA256, 4096)).get("alice", SHA256))
    assert "k-1" in text and "xfe" not in text and "x01" not in text
