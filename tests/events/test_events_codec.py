"""EventCodec: batches, single events, fingerprints and error reporting."""

from __future__ import annotations

import json
from io import BytesIO

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.codec import SINGLE_OBJECT_MARKER, EventCodec
from events.errors import EventSchemaError, MalformedEventError, UnknownSchemaError
from events.keyring import SealedSecret
from events.records import (
    AclCreated,
    DelegationTokenIssued,
    DelegationTokenRenewed,
    Envelope,
    ScramCredentialUpserted,
)
from events.schemas import avro_fingerprint
from events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from tests.strategies_events import envelopes, event_lists, events, events_of_each_type

CODEC = EventCodec.default()
BINDING = AclBinding.of(
    ResourceType.TOPIC,
    "orders",
    PatternType.LITERAL,
    "User:alice",
    "*",
    AclOperation.READ,
    AclPermissionType.ALLOW,
)


def envelope(event, **kw) -> Envelope:
    fields = dict(
        offset=-1,
        timestamp_ms=1_700_000_000_000,
        actor_principal="User:admin",
        actor_host="10.0.0.1",
        request_id="req-1",
        event=event,
    )
    fields.update(kw)
    return Envelope(**fields)


def scram(iterations=4096) -> ScramCredentialUpserted:
    return ScramCredentialUpserted(
        "alice", ScramMechanism.SCRAM_SHA_256, iterations, SealedSecret("k-1", b"n" * 12, b"c" * 40)
    )


def avro_value(env: Envelope, offset: int, codec: EventCodec = CODEC) -> dict:
    """The Avro value the stored format documents for an envelope (an independent oracle)."""
    e = env.event
    name = type(e).__name__
    if isinstance(e, AclCreated) or name == "AclDeleted":
        b = e.binding
        body = {
            "acl_id": e.acl_id,
            "resource_type": b.restype.name,
            "resource_name": b.name,
            "pattern_type": b.resource_pattern_type.name,
            "principal": b.principal,
            "host": b.host,
            "operation": b.operation.name,
            "permission_type": b.permission_type.name,
        }
    elif isinstance(e, ScramCredentialUpserted):
        body = {
            "user": e.user,
            "mechanism": e.mechanism.name,
            "iterations": e.iterations,
            "secret": {
                "key_id": e.secret.key_id,
                "nonce": e.secret.nonce,
                "ciphertext": e.secret.ciphertext,
            },
        }
    else:
        body = {k: getattr(e, k) for k in e.__dataclass_fields__}
        body = {
            k: (v.name if hasattr(v, "name") and not isinstance(v, str) else v)
            for k, v in body.items()
        }
        if "renewers" in body:
            body["renewers"] = list(body["renewers"])
    return {
        "offset": offset,
        "timestamp_ms": env.timestamp_ms,
        "actor_principal": env.actor_principal,
        "actor_host": env.actor_host,
        "request_id": env.request_id,
        "event_type": name,
        "fingerprint": codec.event_fingerprint(name),
        "event": (f"secmeta.events.{name}", body),
    }


@pytest.mark.parametrize("event_class", list(events_of_each_type()), ids=lambda c: c.__name__)
@given(data=st.data())
def test_every_event_type_round_trips_through_a_batch(event_class, data):
    """Each event type decodes to an equal record, with its offset and event fingerprint."""
    envs = data.draw(
        st.lists(envelopes(events_of_each_type()[event_class]), min_size=1, max_size=5)
    )
    base = data.draw(st.integers(0, 2**40))
    decoded = CODEC.decode_batch(CODEC.encode_batch(base, envs), CODEC.fingerprint)
    assert decoded == [
        Envelope(
            base + i,
            e.timestamp_ms,
            e.actor_principal,
            e.actor_host,
            e.request_id,
            e.event,
            CODEC.event_fingerprint(event_class.__name__),
        )
        for i, e in enumerate(envs)
    ]


@given(envs=event_lists, base=st.integers(0, 2**62))
def test_batch_bytes_are_exactly_fastavros_encoding_of_the_documented_value(envs, base):
    """A batch is the Avro encoding of array<Envelope> that any Avro library writes."""
    schema = fastavro.parse_schema(json.loads(CODEC.writer_schema_json))
    expected = BytesIO()
    fastavro.schemaless_writer(
        expected, schema, [avro_value(e, base + i) for i, e in enumerate(envs)]
    )
    assert CODEC.encode_batch(base, envs) == expected.getvalue()


def test_a_plain_avro_reader_reads_enum_names_from_a_batch():
    """Enums are stored as Kafka's names, readable without secmeta."""
    payload = CODEC.encode_batch(7, [envelope(AclCreated("id-1", BINDING))])
    schema = fastavro.parse_schema(json.loads(CODEC.writer_schema_json))
    [value] = fastavro.schemaless_reader(BytesIO(payload), schema, None, return_record_name=True)
    assert (value["offset"], value["event"][1]["operation"]) == (7, "READ")


def test_empty_batch_round_trips():
    """An empty batch encodes and decodes to an empty list."""
    assert CODEC.decode_batch(CODEC.encode_batch(0, []), CODEC.fingerprint) == []


def test_decoded_enums_are_the_kafka_int_enums():
    """Decoded enum fields are the IntEnums of events.types, not strings."""
    [env] = CODEC.decode_batch(
        CODEC.encode_batch(0, [envelope(AclCreated("a", BINDING))]), CODEC.fingerprint
    )
    assert env.event.binding.operation is AclOperation.READ


def test_crc64_avro_matches_the_avro_specification_vector():
    """The fingerprint of the schema "int" is the spec's 0x7275d51a3f395c8f, little-endian."""
    assert avro_fingerprint("int") == bytes.fromhex("8f5c393f1ad57572")


def test_writer_fingerprint_is_eight_bytes_and_stable_across_codecs():
    """Two codecs over the same schemas agree on the 8-byte writer fingerprint."""
    assert len(CODEC.fingerprint) == 8 and EventCodec().fingerprint == CODEC.fingerprint


def test_writer_fingerprint_is_crc64_of_the_saved_writer_schema():
    """The writer fingerprint identifies writer_schema_json."""
    assert avro_fingerprint(json.loads(CODEC.writer_schema_json)) == CODEC.fingerprint


def test_event_fingerprints_differ_per_event_type():
    """Every event type has its own schema fingerprint."""
    fps = {CODEC.event_fingerprint(t) for t in CODEC.event_types}
    assert len(fps) == len(CODEC.event_types) == 8


def test_unknown_writer_fingerprint_is_named_in_the_error():
    """Decoding under an unregistered writer schema names the hex fingerprint."""
    with pytest.raises(UnknownSchemaError, match="0102030405060708"):
        CODEC.decode_batch(CODEC.encode_batch(0, []), bytes.fromhex("0102030405060708"))


def test_truncated_batch_is_malformed():
    """A batch cut short raises MalformedEventError."""
    payload = CODEC.encode_batch(0, [envelope(AclCreated("a", BINDING))])
    with pytest.raises(MalformedEventError):
        CODEC.decode_batch(payload[:-5], CODEC.fingerprint)


def test_batch_with_trailing_bytes_is_malformed():
    """Bytes after the array's end raise MalformedEventError."""
    payload = CODEC.encode_batch(0, [envelope(AclCreated("a", BINDING))])
    with pytest.raises(MalformedEventError, match="trailing"):
        CODEC.decode_batch(payload + b"\x00", CODEC.fingerprint)


def test_wrongly_typed_field_is_named_with_its_value():
    """iterations='x' fails with an error naming the event type, the field and the value."""
    with pytest.raises(EventSchemaError) as info:
        CODEC.encode_batch(0, [envelope(AclCreated("a", BINDING)), envelope(scram(iterations="x"))])
    message = str(info.value)
    assert "ScramCredentialUpserted" in message and "iterations" in message and "'x'" in message
    assert "envelope 1" in message


def test_int_field_out_of_range_is_rejected():
    """An iterations value beyond Avro int is an EventSchemaError naming the field."""
    with pytest.raises(EventSchemaError, match="iterations"):
        CODEC.encode_batch(0, [envelope(scram(iterations=2**40))])


def test_enum_field_given_a_string_is_rejected():
    """An enum field given a plain string names the field."""
    bad = AclCreated(
        "a",
        AclBinding.of(
            ResourceType.TOPIC,
            "t",
            PatternType.LITERAL,
            "User:a",
            "*",
            "READ",
            AclPermissionType.ALLOW,
        ),
    )
    with pytest.raises(EventSchemaError, match="operation"):
        CODEC.encode_batch(0, [envelope(bad)])


def test_string_array_given_a_string_is_rejected():
    """renewers must be a sequence of principals, not one string."""
    bad = DelegationTokenIssued("t", "User:a", "User:a", "User:b", 1, 2, 3)
    with pytest.raises(EventSchemaError, match="renewers"):
        CODEC.encode_batch(0, [envelope(bad)])


def test_bad_envelope_field_is_named():
    """A non-string actor principal is named in the error."""
    with pytest.raises(EventSchemaError, match="actor_principal"):
        CODEC.encode_batch(0, [envelope(AclCreated("a", BINDING), actor_principal=None)])


def test_non_event_payload_is_rejected():
    """An envelope holding something that is not an event is an EventSchemaError."""
    with pytest.raises(EventSchemaError, match="not an event type"):
        CODEC.encode_batch(0, [envelope("hello")])


@given(event=events)
def test_single_object_encoding_round_trips(event):
    """to_single_object / from_single_object return an equal event."""
    assert CODEC.from_single_object(CODEC.to_single_object(event)) == event


def test_single_object_starts_with_marker_and_event_fingerprint():
    """Single-object bytes are C3 01, the event schema fingerprint, then the body."""
    data = CODEC.to_single_object(AclCreated("a", BINDING))
    assert data[:2] == SINGLE_OBJECT_MARKER
    assert data[2:10] == CODEC.event_fingerprint("AclCreated")
    assert data[10:] == CODEC.encode_event(AclCreated("a", BINDING))


def test_single_object_with_wrong_marker_is_malformed():
    """Bytes not starting with C3 01 raise MalformedEventError naming the marker."""
    data = CODEC.to_single_object(AclCreated("a", BINDING))
    with pytest.raises(MalformedEventError, match="marker"):
        CODEC.from_single_object(b"\x00\x01" + data[2:])


def test_single_object_with_unknown_fingerprint_is_rejected():
    """An unknown schema fingerprint raises UnknownSchemaError naming it."""
    data = CODEC.to_single_object(AclCreated("a", BINDING))
    with pytest.raises(UnknownSchemaError, match="ffffffffffffffff"):
        CODEC.from_single_object(data[:2] + b"\xff" * 8 + data[10:])


def test_single_object_with_truncated_body_is_malformed():
    """A body cut short raises MalformedEventError."""
    data = CODEC.to_single_object(AclCreated("a", BINDING))
    with pytest.raises(MalformedEventError):
        CODEC.from_single_object(data[:-3])


def test_single_object_shorter_than_its_header_is_malformed():
    """Fewer than 10 bytes raise MalformedEventError."""
    with pytest.raises(MalformedEventError, match="header"):
        CODEC.from_single_object(SINGLE_OBJECT_MARKER + b"\x01\x02")


def test_decode_event_accepts_a_type_name():
    """decode_event with an event type name reads the body under that type's schema."""
    body = CODEC.encode_event(scram())
    assert CODEC.decode_event("ScramCredentialUpserted", body) == scram()


def test_decode_event_with_unknown_type_name_is_rejected():
    """An unknown event type name raises EventSchemaError listing the known ones."""
    with pytest.raises(EventSchemaError, match="AclCreated"):
        CODEC.decode_event("NoSuchEvent", b"")


def test_encode_event_names_the_bad_field():
    """encode_event reports the offending field like encode_batch does."""
    with pytest.raises(EventSchemaError, match="iterations"):
        CODEC.encode_event(scram(iterations="x"))


@pytest.mark.parametrize(
    "value",
    [
        0,
        1,
        -1,
        63,
        64,
        8191,
        8192,
        16383,
        16384,
        -16385,
        2**28 - 1,
        2**28,
        2**62,
        -(2**63),
        2**63 - 1,
    ],
)
def test_longs_at_varint_boundaries_encode_as_fastavro_does(value):
    """Offsets and long fields at varint size boundaries match fastavro's bytes."""
    env = envelope(DelegationTokenRenewed("t", value, abs(value) // 2), timestamp_ms=value)
    base = max(0, value - 1)
    schema = fastavro.parse_schema(json.loads(CODEC.writer_schema_json))
    expected = BytesIO()
    fastavro.schemaless_writer(expected, schema, [avro_value(env, base)])
    assert CODEC.encode_batch(base, [env]) == expected.getvalue()
