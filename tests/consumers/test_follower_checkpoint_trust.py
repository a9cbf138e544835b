"""Review 26, 1.1: what a Kafka follower trusts in its checkpoint directory.

A follower given a keyring signs its checkpoint snapshots and loads only one that keyring signed: a forged one
(CRC-valid, which anyone can compute) is not served, the follower starts over.  Without a keyring only the CRC
vouches for a snapshot, so its ACL section is checked whole at open: an id table with no empty slot (which made
every lookup by id loop for ever) is refused.  No broker is needed: the follower loads its checkpoint as it
opens, before it reads anything.
"""

from __future__ import annotations

import json
import logging

import pytest

from secmeta.consumers.kafka.follower import CHECKPOINT_FILE, SNAPSHOT_DIR, Follower
from secmeta.events.keyring import Keyring
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections import image_snapshot
from secmeta.projections.acl_section import read_section
from secmeta.projections.acls import AclsImage
from secmeta.projections.image import SecurityImage
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import list_snapshots, read_snapshot, write_snapshot
from secmeta.projections.token_section import encode_tokens

UNREACHABLE = "127.0.0.1:1"  # never contacted: the checkpoint is loaded as the follower opens
GRANT = AclBinding.of(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:mallory", "*",
                      AclOperation.ALL, AclPermissionType.ALLOW)
FORGED = SecurityImage(acls=AclsImage.of([("forged-1", GRANT)]), next_offset=0)


def mallory_may_alter(follower: Follower) -> bool:
    return follower.view().authorize("User:mallory", "10.0.0.9", AclOperation.ALTER, ResourceType.CLUSTER,
                                     "kafka-cluster")


def plant_checkpoint(directory, codec=None, keyring=None) -> None:
    """A checkpoint of FORGED in ``directory`` as a follower writes one: the snapshot and follower.json."""
    info = write_snapshot(directory / SNAPSHOT_DIR, codec or SecurityImageSnapshot(), FORGED, next_offset=0,
                          link=b"\0" * 32, timestamp_ms=0, keyring=keyring)
    (directory / CHECKPOINT_FILE).write_text(json.dumps(
        {"history_topic": "secmeta.history", "position": None, "next_offset": 0, "snapshot": info.path.name}))


class NoEmptyIdSlot(SecurityImageSnapshot):
    """Writes the ACL section with every slot of its id table naming ACL 1 (then a CRC over it, as it is)."""

    def section(self, image):
        acls = bytearray(b"".join(image_snapshot._NodesRow.of(image.acls.index).section()))
        slots = read_section(memoryview(acls))._slots  # a view of ``acls``
        for at in range(len(slots)):
            slots[at] = 1
        return image_snapshot.image_section([bytes(acls)], encode_tokens(image.tokens))


@pytest.fixture
def keyring(tmp_path) -> Keyring:
    Keyring.generate_file(tmp_path / "keys.json")
    return Keyring.from_file(tmp_path / "keys.json")


def test_a_forged_checkpoint_is_not_served_by_a_follower_with_a_keyring(tmp_path, keyring, caplog):
    """A CRC-valid checkpoint granting User:mallory ALL on the cluster, written without the keyring: the follower
    says it does not trust it and starts over, and mallory may not ALTER the cluster."""
    plant_checkpoint(tmp_path / "f")
    with caplog.at_level(logging.WARNING, "secmeta.kafka.follower"):
        follower = Follower(UNREACHABLE, checkpoint_dir=tmp_path / "f", keyring=keyring)
    try:
        assert not mallory_may_alter(follower), "the follower serves a forged, unauthenticated checkpoint"
        assert follower.resumed_from is None
        assert "is not authenticated" in caplog.text and "not trusted, starting over" in caplog.text
    finally:
        follower.close()


def test_a_follower_with_a_keyring_signs_its_checkpoint_and_resumes_from_it(tmp_path, keyring):
    """The checkpoint a follower with a keyring writes loads under that keyring; another keyring's is not used."""
    Follower(UNREACHABLE, checkpoint_dir=tmp_path / "f", keyring=keyring).close()
    [snap] = list_snapshots(tmp_path / "f" / SNAPSHOT_DIR)
    assert read_snapshot(snap, SecurityImageSnapshot(), keyring)[0].next_offset == 0
    resumed = Follower(UNREACHABLE, checkpoint_dir=tmp_path / "f", keyring=keyring)
    resumed.close()
    assert resumed.resumed_from == 0
    plant_checkpoint(tmp_path / "g", keyring=keyring)
    Keyring.generate_file(tmp_path / "other.json")
    other = Follower(UNREACHABLE, checkpoint_dir=tmp_path / "g", keyring=Keyring.from_file(tmp_path / "other.json"))
    other.close()
    assert other.resumed_from is None


def test_a_checkpoint_whose_id_table_has_no_empty_slot_is_refused_without_a_keyring(tmp_path, caplog):
    """Without a keyring (only a CRC vouches), a section whose id table has no empty slot is refused at open and
    the follower starts over, rather than serving a table whose next lookup by id never ends."""
    plant_checkpoint(tmp_path / "f", NoEmptyIdSlot())
    with caplog.at_level(logging.WARNING, "secmeta.kafka.follower"):
        follower = Follower(UNREACHABLE, checkpoint_dir=tmp_path / "f")
    try:
        assert follower.resumed_from is None and not mallory_may_alter(follower)
        assert "the id table does not list each of the section's 1 ACLs once" in caplog.text
    finally:
        follower.close()


def test_a_follower_without_a_keyring_resumes_from_a_sound_checkpoint(tmp_path):
    """The whole checks pass a sound section: without a keyring a follower still resumes from its checkpoint."""
    plant_checkpoint(tmp_path / "f")
    follower = Follower(UNREACHABLE, checkpoint_dir=tmp_path / "f")
    try:
        assert follower.resumed_from == 0 and mallory_may_alter(follower)
    finally:
        follower.close()
