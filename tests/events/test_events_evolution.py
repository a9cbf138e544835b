"""Schema evolution: logs written under older schemas stay readable."""

from __future__ import annotations

import json
import shutil
from io import BytesIO
from pathlib import Path

import fastavro
import pytest

from secmeta.events.codec import EventCodec
from secmeta.events.errors import EventSchemaError, UnknownSchemaError
from secmeta.events.records import AclCreated, Envelope
from secmeta.events.schemas import SCHEMA_DIR
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

OLD = EventCodec.default()
BINDING = AclBinding.of(
    ResourceType.GROUP,
    "payments",
    PatternType.PREFIXED,
    "User:bob",
    "*",
    AclOperation.DESCRIBE,
    AclPermissionType.DENY,
)
ENVELOPES = [
    Envelope(-1, 1_700_000_000_000 + i, "User:admin", "h", "r", AclCreated(f"acl-{i}", BINDING))
    for i in range(3)
]


def schema_copy(tmp_path: Path, edit, file: str = "events/AclCreated.avsc") -> Path:
    """A copy of the shipped schemas with one file (AclCreated.avsc) changed by ``edit``."""
    target = tmp_path / "schemas"
    shutil.copytree(SCHEMA_DIR, target, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    path = target / file
    schema = json.loads(path.read_text())
    edit(schema)
    path.write_text(json.dumps(schema))
    return target


def add_comment(schema: dict) -> None:
    schema["fields"].append(
        {"name": "comment", "type": "string", "default": "none", "doc": "Why the ACL was made."}
    )


@pytest.fixture
def new_codec(tmp_path) -> EventCodec:
    return EventCodec(schema_copy(tmp_path, add_comment))


def test_old_batches_decode_after_a_field_is_added(new_codec):
    """A batch written before AclCreated gained a field decodes to the same events."""
    payload = OLD.encode_batch(10, ENVELOPES)
    new_codec.register_writer_schema(OLD.writer_schema_json)
    decoded = new_codec.decode_batch(payload, OLD.fingerprint, 10)
    assert [(e.offset, e.timestamp_ms, e.event) for e in decoded] == [
        (10 + i, e.timestamp_ms, e.event) for i, e in enumerate(ENVELOPES)
    ]


def test_old_batches_replay_after_a_field_is_added(new_codec):
    """decode_events reads a batch of an older writer schema (through fastavro) as rows, as its own."""
    new_codec.register_writer_schema(OLD.writer_schema_json)
    rows = [e.event.row() for e in ENVELOPES]
    assert new_codec.decode_events(OLD.encode_batch(10, ENVELOPES), OLD.fingerprint) == rows
    assert new_codec.decode_events(new_codec.encode_batch(10, ENVELOPES), new_codec.fingerprint) == rows


def test_old_batches_read_the_current_event_fingerprint(new_codec):
    """An event resolved from an old batch carries the fingerprint of the schema it now fits."""
    new_codec.register_writer_schema(OLD.writer_schema_json)
    decoded = new_codec.decode_batch(OLD.encode_batch(0, ENVELOPES), OLD.fingerprint)
    assert {e.fingerprint for e in decoded} == {new_codec.event_fingerprint("AclCreated")}


def test_old_records_read_the_new_fields_default(new_codec):
    """Fields added since a batch was written read as their default."""
    payload = OLD.encode_batch(0, ENVELOPES)
    new_codec.register_writer_schema(OLD.writer_schema_json)
    raw = new_codec.decode_batch_raw(payload, OLD.fingerprint)
    assert [body["comment"] for group in raw for _, body in group["events"]] == ["none"] * 3


def test_old_writer_schema_must_be_registered_first(new_codec):
    """Without the old writer schema, its batches are refused with UnknownSchemaError."""
    with pytest.raises(UnknownSchemaError, match=OLD.fingerprint.hex()):
        new_codec.decode_batch(OLD.encode_batch(0, ENVELOPES), OLD.fingerprint)


def test_register_writer_schema_returns_its_fingerprint(new_codec):
    """Registering returns the fingerprint the old codec reported."""
    assert new_codec.register_writer_schema(OLD.writer_schema_json) == OLD.fingerprint


def test_fingerprint_changes_when_a_field_is_added(new_codec):
    """The writer and event fingerprints change with the schema; others stay."""
    assert new_codec.fingerprint != OLD.fingerprint
    assert new_codec.event_fingerprint("AclCreated") != OLD.event_fingerprint("AclCreated")
    assert new_codec.event_fingerprint("AclDeleted") == OLD.event_fingerprint("AclDeleted")


def test_doc_changes_do_not_change_the_fingerprint(tmp_path):
    """Docs are not part of the canonical form, so rewording one keeps the fingerprint."""
    codec = EventCodec(schema_copy(tmp_path, lambda s: s.update(doc="Reworded.")))
    assert codec.fingerprint == OLD.fingerprint


def test_new_codec_writes_the_default_for_fields_python_lacks(new_codec):
    """Events written by the new codec carry the new field's default, readable by any Avro reader."""
    payload = new_codec.encode_batch(0, ENVELOPES[:1])
    schema = fastavro.parse_schema(json.loads(new_codec.writer_schema_json))
    [group] = fastavro.schemaless_reader(BytesIO(payload), schema, None, return_record_name=True)
    assert group["events"][0][1]["comment"] == "none"


def test_new_codec_round_trips_its_own_batches(new_codec):
    """A codec built from changed schemas decodes what it encodes."""
    decoded = new_codec.decode_batch(new_codec.encode_batch(0, ENVELOPES), new_codec.fingerprint)
    assert [e.event for e in decoded] == [e.event for e in ENVELOPES]


def test_old_single_objects_decode_after_registering_the_old_schema(new_codec):
    """Single-object bytes from the old schema decode once its writer schema is registered."""
    data = OLD.to_single_object(ENVELOPES[0].event)
    new_codec.register_writer_schema(OLD.writer_schema_json)
    assert new_codec.from_single_object(data) == ENVELOPES[0].event


def test_enum_symbol_unknown_to_the_reader_reads_as_unknown(tmp_path):
    """An operation a newer writer knows but this reader does not decodes as UNKNOWN."""
    writer_dir = schema_copy(tmp_path, lambda s: None)
    op_path = writer_dir / "common" / "AclOperation.avsc"
    op = json.loads(op_path.read_text())
    op["symbols"].append("TELEPORT")
    op_path.write_text(json.dumps(op))
    writer = json.loads(EventCodec(writer_dir).writer_schema_json)
    body = {
        "acl_id": "a",
        "resource_type": "TOPIC",
        "resource_name": "t",
        "pattern_type": "LITERAL",
        "principal": "User:a",
        "host": "*",
        "operation": "TELEPORT",
        "permission_type": "ALLOW",
    }
    value = {
        "timestamp_ms": 1,
        "actor_principal": "User:a",
        "actor_host": "h",
        "request_id": "r",
        "events": [("secmeta.events.AclCreated", body)],
    }
    out = BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(writer), [value])
    reader = EventCodec()
    [env] = reader.decode_batch(out.getvalue(), reader.register_writer_schema(json.dumps(writer)))
    assert env.event.binding.operation is AclOperation.UNKNOWN


def add_group_fields(schema: dict) -> None:
    tags = {"type": "array", "items": "string", "doc": "Tags."}
    schema["fields"].insert(1, {"name": "tags", "type": tags, "default": ["x"], "doc": "Tags."})
    schema["fields"].append({"name": "region", "type": "string", "default": "eu", "doc": "Where."})


def test_group_fields_python_lacks_are_written_as_defaults_and_skipped(tmp_path):
    """A codec whose EnvelopeGroup gained fields Python lacks still round-trips its batches."""
    codec = EventCodec(schema_copy(tmp_path, add_group_fields, "EnvelopeGroup.avsc"))
    decoded = codec.decode_batch(codec.encode_batch(5, ENVELOPES), codec.fingerprint, 5)
    assert [(e.offset, e.timestamp_ms, e.event) for e in decoded] == [
        (5 + i, e.timestamp_ms, e.event) for i, e in enumerate(ENVELOPES)
    ]


def test_group_fields_python_lacks_hold_their_defaults(tmp_path):
    """Any Avro reader sees the defaults of group fields Python has no value for."""
    codec = EventCodec(schema_copy(tmp_path, add_group_fields, "EnvelopeGroup.avsc"))
    [group] = codec.decode_batch_raw(codec.encode_batch(0, ENVELOPES[:1]), codec.fingerprint)
    assert (group["tags"], group["region"]) == (["x"], "eu")


def test_added_field_without_default_is_rejected_when_the_codec_is_built(tmp_path):
    """A new field with neither a default nor a Python attribute cannot be written."""

    def add_required(schema):
        schema["fields"].append({"name": "ticket", "type": "string", "doc": "A ticket."})

    with pytest.raises(EventSchemaError, match="ticket"):
        EventCodec(schema_copy(tmp_path, add_required))


def test_compiled_decoder_skips_group_fields_python_lacks(tmp_path):
    """The compiled decoder steps over added group fields and agrees with fastavro."""
    codec = EventCodec(schema_copy(tmp_path, add_group_fields, "EnvelopeGroup.avsc"))
    payload = codec.encode_batch(3, ENVELOPES)
    compiled, end = codec._compiled_decode(payload, 3)
    assert (end, compiled) == (len(payload), codec._decode_resolved(payload, codec.fingerprint, 3))


def test_a_fresh_codec_knows_only_the_writer_schemas_registered_on_it(new_codec):
    """EventCodec.fresh() (what every log opens with) reads as a newly built codec does: a writer schema one
    fresh codec registered (one store's) is unknown to the next (another store's) until it registers it too."""
    payload = new_codec.encode_batch(0, ENVELOPES)
    first, second = EventCodec.fresh(), EventCodec.fresh()
    first.register_writer_schema(new_codec.writer_schema_json)
    decoded = first.decode_batch(payload, new_codec.fingerprint)
    assert [(e.offset, e.event) for e in decoded] == [(i, e.event) for i, e in enumerate(ENVELOPES)]
    for codec in (second, EventCodec.fresh(), EventCodec()):
        with pytest.raises(UnknownSchemaError, match=new_codec.fingerprint.hex()):
            codec.decode_batch(payload, new_codec.fingerprint)
        with pytest.raises(UnknownSchemaError):
            codec.decode_event(new_codec.event_fingerprint("AclCreated"), new_codec.encode_event(ENVELOPES[0].event))


def test_old_batches_give_no_bodies_to_reuse(new_codec):
    """A batch of an older writer schema decodes with decode_batch_bodies but gives no bodies: its bytes are
    not the current schema's encoding, so a writer must encode its events afresh."""
    new_codec.register_writer_schema(OLD.writer_schema_json)
    envelopes, bodies = new_codec.decode_batch_bodies(OLD.encode_batch(10, ENVELOPES), OLD.fingerprint, 10)
    assert bodies is None
    assert new_codec.decode_batch_rows(OLD.encode_batch(10, ENVELOPES), OLD.fingerprint, 10) is None
    assert [e.event for e in envelopes] == [e.event for e in ENVELOPES]
