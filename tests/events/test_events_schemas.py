"""The shipped .avsc files: well-formed, documented, and in step with the Python types."""

from __future__ import annotations

import json

import fastavro
import pytest

from secmeta.events import types
from secmeta.events.records import EVENT_TYPES, TokenRemovalReason
from secmeta.events.schemas import SCHEMA_DIR, read_named_types, schema_files

FILES = schema_files()
NAMED = read_named_types()


def load(path):
    return json.loads(path.read_text())


def walk_types(schema):
    """Every dict-shaped type inside a schema, the schema included."""
    if isinstance(schema, list):
        for branch in schema:
            yield from walk_types(branch)
    elif isinstance(schema, dict):
        yield schema
        for field in schema.get("fields", ()):
            yield from walk_types(field["type"])
        if "items" in schema:
            yield from walk_types(schema["items"])


def test_the_expected_schema_files_ship():
    """7 shared types, 11 event types and the envelope group are shipped."""
    relative = {p.relative_to(SCHEMA_DIR).parent.name or "." for p in FILES}
    assert len(FILES) == 20 and relative == {".", "common", "events"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_each_file_defines_the_type_it_is_named_after(path):
    """A file holds one named type in namespace secmeta.events, named as the file."""
    schema = load(path)
    assert (schema["namespace"], schema["name"]) == ("secmeta.events", path.stem)


def prerequisites(path):
    """The files a schema file refers to: shared types, and for the envelope group the events too."""
    layers = {"common": [], "events": ["common"], "schemas": ["common", "events"]}
    return [p for p in FILES if p.parent.name in layers[path.parent.name]]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_each_file_parses_with_the_types_it_refers_to(path):
    """fastavro parses every file once the named types it refers to are known."""
    named = {}
    for other in prerequisites(path):
        fastavro.parse_schema(load(other), named_schemas=named)
    assert fastavro.parse_schema(load(path), named_schemas=named)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_field_and_type_has_a_doc(path):
    """Every record field, named type and array type carries a non-empty doc."""
    for schema in walk_types(load(path)):
        assert schema.get("doc", "").strip(), schema.get("name", schema)
        for field in schema.get("fields", ()):
            assert field.get("doc", "").strip(), field["name"]


@pytest.mark.parametrize(
    "enum",
    [
        types.ScramMechanism,
        types.ResourceType,
        types.PatternType,
        types.AclOperation,
        types.AclPermissionType,
    ],
    ids=lambda e: e.__name__,
)
def test_kafka_enum_symbols_follow_the_python_enum(enum):
    """Symbols are the Kafka names in code order, defaulting to UNKNOWN."""
    schema = NAMED[f"secmeta.events.{enum.__name__}"][0]
    assert schema["symbols"] == [m.name for m in sorted(enum)]
    assert schema["default"] == "UNKNOWN"


def test_token_removal_reason_symbols_and_default():
    """TokenRemovalReason lists both reasons and defaults to EXPIRED_BY_SWEEP."""
    schema = NAMED["secmeta.events.TokenRemovalReason"][0]
    assert schema["symbols"] == [r.name for r in TokenRemovalReason]
    assert schema["default"] == "EXPIRED_BY_SWEEP"


GROUP = NAMED["secmeta.events.EnvelopeGroup"][0]


def test_envelope_group_events_are_an_array_of_exactly_the_event_types():
    """A group's events are an array of the union of every event record and nothing else."""
    [events] = [f["type"] for f in GROUP["fields"] if f["name"] == "events"]
    assert events["type"] == "array" and sorted(events["items"]) == sorted(EVENT_TYPES)


def test_envelope_group_stores_the_shared_header_and_the_events_only():
    """Time, actor, operator and request id are stored per group; offset, type and fingerprint are not."""
    names = [f["name"] for f in GROUP["fields"]]
    assert names == ["timestamp_ms", "actor_principal", "actor_host", "request_id", "actor_asserted",
                     "operator_user", "operator_host", "operator_pid", "operator_program", "events"]


def test_envelope_group_timestamp_is_a_plain_long():
    """timestamp_ms is a long with no logical type."""
    [field] = [f for f in GROUP["fields"] if f["name"] == "timestamp_ms"]
    assert field["type"] == "long"


@pytest.mark.parametrize("implied", ["offset", "event type", "fingerprint", "base offset"])
def test_envelope_group_doc_explains_what_is_implied(implied):
    """The group's doc says how each part of an envelope that is not stored is implied."""
    assert implied in GROUP["doc"]
