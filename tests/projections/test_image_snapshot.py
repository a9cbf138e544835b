"""SecurityImageSnapshot: the image round-trips through a snapshot file, secrets stay sealed."""

import fastavro

from events.keyring import SealedSecret
from events.records import AclCreated, DelegationTokenIssued, ScramCredentialUpserted
from events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from projections.image import SecurityDelta, SecurityImage
from projections.image_snapshot import SecurityImageSnapshot
from projections.snapshot import read_snapshot, write_snapshot

CODEC = SecurityImageSnapshot()
SECRET = SealedSecret("k-7", b"\x11" * 12, b"sealed-bytes-" * 3)


def sample_image(next_offset=42):
    delta = SecurityDelta(SecurityImage.EMPTY)
    delta.replay(ScramCredentialUpserted("alice", ScramMechanism.SCRAM_SHA_256, 4096, SECRET))
    delta.replay(ScramCredentialUpserted("alice", ScramMechanism.SCRAM_SHA_512, 8192, SECRET))
    for i, pattern in enumerate((PatternType.LITERAL, PatternType.PREFIXED)):
        binding = AclBinding.of(
            ResourceType.GROUP,
            f"g{i}",
            pattern,
            "User:bob",
            "10.0.0.1",
            AclOperation.DESCRIBE,
            AclPermissionType.DENY,
        )
        delta.replay(AclCreated(f"acl-{i}", binding))
    delta.replay(DelegationTokenIssued("t1", "User:a", "User:b", ("User:c", "User:d"), 1, 2, 3))
    return delta.apply(next_offset)


def round_trip(tmp_path, image):
    info = write_snapshot(
        tmp_path, CODEC, image, next_offset=image.next_offset, link=b"\0" * 32, timestamp_ms=0
    )
    return read_snapshot(info.path, CODEC)[1]


def all_fields(schema):
    """Every field of every record in a schema, nested ones included."""
    if isinstance(schema, list):
        for branch in schema:
            yield from all_fields(branch)
    elif isinstance(schema, dict):
        for field in schema.get("fields", ()):
            yield field
            yield from all_fields(field["type"])


def test_image_round_trips_through_a_snapshot(tmp_path):
    """An image with credentials, ACLs and a token reads back equal."""
    image = sample_image()
    assert round_trip(tmp_path, image) == image


def test_empty_image_round_trips(tmp_path):
    """The empty image reads back as an equal empty image."""
    assert round_trip(tmp_path, SecurityImage.EMPTY) == SecurityImage.EMPTY


def test_next_offset_is_restored(tmp_path):
    """build() restores the image's next_offset from the meta row."""
    assert round_trip(tmp_path, sample_image(next_offset=1234)).next_offset == 1234


def test_rows_hold_one_meta_row_then_one_row_per_item():
    """rows() yields a meta row, then one row per credential, ACL and token."""
    assert len(list(CODEC.rows(sample_image()))) == 1 + 2 + 2 + 1


def test_scram_rows_hold_the_sealed_secret():
    """A credential row carries the sealed key id, nonce and ciphertext as stored."""
    rows = [row for _, row in (r["row"] for r in CODEC.rows(sample_image())) if "user" in row]
    assert {(r["key_id"], r["nonce"], r["ciphertext"]) for r in rows} == {
        (SECRET.key_id, SECRET.nonce, SECRET.ciphertext)
    }


def test_every_schema_field_has_a_doc():
    """Every field of the snapshot schema, nested ones included, has a doc."""
    assert all(field.get("doc") for field in all_fields(CODEC.schema))


def test_schema_parses_as_avro():
    """The schema is a valid Avro record schema."""
    assert fastavro.parse_schema(CODEC.schema)["type"] == "record"


def test_kind_names_the_security_image():
    """The codec's kind is 'security-image'."""
    assert CODEC.kind == "security-image"
