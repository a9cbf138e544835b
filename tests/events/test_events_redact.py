"""redacted(): JSON-safe envelopes with no secret material."""

from __future__ import annotations

import base64
import json

from hypothesis import given

from secmeta.events.keyring import Keyring, seal_scram
from secmeta.events.records import AclCreated, Envelope, ScramCredentialUpserted
from secmeta.events.redact import redacted
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from tests.strategies_events import envelopes

RING = Keyring.generate()


def scram_envelope() -> Envelope:
    sealed = seal_scram(RING, "alice", ScramMechanism.SCRAM_SHA_256, b"salt", b"s" * 32, b"k" * 32)
    event = ScramCredentialUpserted("alice", ScramMechanism.SCRAM_SHA_256, 8192, sealed)
    return Envelope(4, 1000, "User:admin", "10.0.0.1", "req-9", event)


def test_sealed_secret_is_shown_as_its_key_id():
    """The SCRAM secret appears as <sealed:KEY_ID>."""
    row = redacted(scram_envelope())
    assert row["payload"]["secret"] == f"<sealed:{RING.newest_id}>"


def test_redacted_scram_holds_no_nonce_or_ciphertext():
    """Neither the nonce nor the ciphertext appears in any common text form."""
    env = scram_envelope()
    text = json.dumps(redacted(env))
    for blob in (env.event.secret.nonce, env.event.secret.ciphertext):
        assert blob.hex() not in text and base64.b64encode(blob).decode() not in text
        assert repr(blob) not in text


def test_redacted_row_has_the_envelope_fields_and_entity_key():
    """A row carries offset, time, actor, request id, event type and entity key."""
    row = redacted(scram_envelope())
    assert {
        k: row[k]
        for k in (
            "offset",
            "timestamp_ms",
            "actor_principal",
            "actor_host",
            "request_id",
            "event_type",
            "entity_key",
        )
    } == {
        "offset": 4,
        "timestamp_ms": 1000,
        "actor_principal": "User:admin",
        "actor_host": "10.0.0.1",
        "request_id": "req-9",
        "event_type": "ScramCredentialUpserted",
        "entity_key": "scram:alice:SCRAM-SHA-256",
    }


def test_acl_payload_is_flat_with_enum_names():
    """An ACL payload lists the seven fields with enums as names."""
    binding = AclBinding.of(
        ResourceType.GROUP,
        "g",
        PatternType.PREFIXED,
        "User:b",
        "*",
        AclOperation.DELETE,
        AclPermissionType.DENY,
    )
    row = redacted(Envelope(0, 0, "User:a", "h", "r", AclCreated("id-1", binding)))
    assert row["payload"] == {
        "acl_id": "id-1",
        "resource_type": "GROUP",
        "resource_name": "g",
        "pattern_type": "PREFIXED",
        "principal": "User:b",
        "host": "*",
        "operation": "DELETE",
        "permission_type": "DENY",
    }


@given(env=envelopes())
def test_every_event_redacts_to_json(env):
    """Every event type redacts to something json.dumps accepts."""
    assert json.loads(json.dumps(redacted(env)))["event_type"] == env.event_type


def test_a_scram_mechanism_is_named_as_kafka_names_it():
    """Issue 23: the audit lines and Spark tables (both from this view) said SCRAM_SHA_256 where Kafka and the
    rest of the output say SCRAM-SHA-256."""
    assert redacted(scram_envelope())["payload"]["mechanism"] == "SCRAM-SHA-256"


def test_every_enum_value_reads_back_from_its_output_name():
    """Every member of every enum in the stored format reads back from the name the output gives it, and only
    from that name (a table or index row holding another spelling is refused, naming it)."""
    import pytest

    from secmeta.events.records import TokenRemovalReason
    from secmeta.events.types import from_output_name, output_name

    for enum in (AclOperation, AclPermissionType, PatternType, ResourceType, ScramMechanism, TokenRemovalReason):
        for member in enum:
            assert from_output_name(enum, output_name(member)) is member
    with pytest.raises(KeyError, match="'SCRAM_SHA_256' names no ScramMechanism"):
        from_output_name(ScramMechanism, "SCRAM_SHA_256")
