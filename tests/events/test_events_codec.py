"""EventCodec: batches, single events, fingerprints and error reporting."""

from __future__ import annotations

import dataclasses
import json
from io import BytesIO

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.events.codec import SINGLE_OBJECT_MARKER, EventCodec
from secmeta.events.errors import EventSchemaError, MalformedEventError, UnknownSchemaError
from secmeta.events.keyring import SealedSecret
from secmeta.events.records import (
    EVENT_TYPES,
    AclCreated,
    DelegationTokenIssued,
    DelegationTokenRenewed,
    Envelope,
    ScramCredentialUpserted,
)
from secmeta.events.schemas import avro_fingerprint
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from tests.strategies_events import (
    envelopes,
    event_lists,
    events,
    events_of_each_type,
    request_batches,
)

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


def avro_event(env: Envelope) -> tuple[str, dict]:
    """The Avro union value the stored format documents for an envelope's event (an oracle)."""
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
    return (f"secmeta.events.{name}", body)


def avro_groups(envs: list[Envelope]) -> list[dict]:
    """The array<EnvelopeGroup> value documented for a batch: runs of one header share a group."""
    groups: list[dict] = []
    for env in envs:
        header = {
            "timestamp_ms": env.timestamp_ms,
            "actor_principal": env.actor_principal,
            "actor_host": env.actor_host,
            "request_id": env.request_id,
        }
        if not groups or {k: groups[-1][k] for k in header} != header:
            groups.append({**header, "events": []})
        groups[-1]["events"].append(avro_event(env))
    return groups


def fastavro_bytes(value) -> bytes:
    schema = fastavro.parse_schema(json.loads(CODEC.writer_schema_json))
    out = BytesIO()
    fastavro.schemaless_writer(out, schema, value)
    return out.getvalue()


@pytest.mark.parametrize("event_class", list(events_of_each_type()), ids=lambda c: c.__name__)
@given(data=st.data())
def test_every_event_type_round_trips_through_a_batch(event_class, data):
    """Each event type decodes to an equal record, with its offset and event fingerprint."""
    envs = data.draw(
        st.lists(envelopes(events_of_each_type()[event_class]), min_size=1, max_size=5)
    )
    base = data.draw(st.integers(0, 2**40))
    decoded = CODEC.decode_batch(CODEC.encode_batch(base, envs), CODEC.fingerprint, base)
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


@given(envs=st.one_of(event_lists, request_batches))
def test_batch_bytes_are_exactly_fastavros_encoding_of_the_documented_value(envs):
    """A batch is the Avro encoding of array<EnvelopeGroup> that any Avro library writes."""
    assert CODEC.encode_batch(0, envs) == fastavro_bytes(avro_groups(envs))


def test_a_plain_avro_reader_reads_enum_names_from_a_batch():
    """Enums are stored as Kafka's names, readable without secmeta."""
    payload = CODEC.encode_batch(7, [envelope(AclCreated("id-1", BINDING))])
    schema = fastavro.parse_schema(json.loads(CODEC.writer_schema_json))
    [group] = fastavro.schemaless_reader(BytesIO(payload), schema, None, return_record_name=True)
    assert group["events"][0][1]["operation"] == "READ"


@given(envs=request_batches, base=st.integers(0, 2**62))
def test_request_batches_round_trip(envs, base):
    """Batches of several requests decode to their envelopes, offsets base_offset + i."""
    decoded = CODEC.decode_batch(CODEC.encode_batch(base, envs), CODEC.fingerprint, base)
    assert decoded == [
        Envelope(
            base + i,
            e.timestamp_ms,
            e.actor_principal,
            e.actor_host,
            e.request_id,
            e.event,
            CODEC.event_fingerprint(e.event_type),
        )
        for i, e in enumerate(envs)
    ]


def test_a_batch_mixing_two_actors_keeps_each_envelopes_actor():
    """Envelopes of two actors in one batch come back with their own actor, offsets base + i."""
    alice = dict(actor_principal="User:alice", actor_host="10.0.0.2", request_id="r-a")
    bob = dict(actor_principal="User:bob", actor_host="10.0.0.3", request_id="r-b")
    envs = [
        envelope(AclCreated("a1", BINDING), **alice),
        envelope(AclCreated("a2", BINDING), **alice),
        envelope(AclCreated("b1", BINDING), **bob),
        envelope(AclCreated("a3", BINDING), **alice),
    ]
    decoded = CODEC.decode_batch(CODEC.encode_batch(40, envs), CODEC.fingerprint, 40)
    assert [
        (e.offset, e.actor_principal, e.actor_host, e.request_id, e.event) for e in decoded
    ] == [
        (40 + i, e.actor_principal, e.actor_host, e.request_id, e.event) for i, e in enumerate(envs)
    ]


def test_envelopes_sharing_a_header_are_stored_as_one_group():
    """A request's envelopes (one time, actor and request id) store their header once."""
    envs = [envelope(AclCreated(f"a{i}", BINDING)) for i in range(5)]
    [group] = CODEC.decode_batch_raw(CODEC.encode_batch(0, envs), CODEC.fingerprint)
    assert (group["request_id"], len(group["events"])) == ("req-1", 5)


def test_only_consecutive_envelopes_share_a_group():
    """Headers A, A, B, A make three groups, so the batch keeps its order."""
    envs = [
        envelope(AclCreated("1", BINDING)),
        envelope(AclCreated("2", BINDING)),
        envelope(AclCreated("3", BINDING), timestamp_ms=5),
        envelope(AclCreated("4", BINDING)),
    ]
    raw = CODEC.decode_batch_raw(CODEC.encode_batch(0, envs), CODEC.fingerprint)
    assert [len(g["events"]) for g in raw] == [2, 1, 1]


def test_decode_batch_offsets_start_at_zero_by_default():
    """Without a base offset, decoded offsets count from 0."""
    envs = [envelope(AclCreated(f"a{i}", BINDING)) for i in range(3)]
    decoded = CODEC.decode_batch(CODEC.encode_batch(9, envs), CODEC.fingerprint)
    assert [e.offset for e in decoded] == [0, 1, 2]


def test_offsets_and_fingerprints_given_to_encode_are_not_stored():
    """Offsets and fingerprints are implied: what a writer put in them does not change the bytes."""
    plain = [envelope(AclCreated("a", BINDING))]
    filled = [envelope(AclCreated("a", BINDING), offset=77, fingerprint=b"x" * 8)]
    assert CODEC.encode_batch(0, filled) == CODEC.encode_batch(0, plain)


def test_envelopes_of_one_group_share_the_header_strings():
    """The group's actor and request id strings are one object for all its envelopes."""
    envs = [envelope(AclCreated(f"a{i}", BINDING)) for i in range(2)]
    first, second = CODEC.decode_batch(CODEC.encode_batch(0, envs), CODEC.fingerprint)
    assert first.actor_principal is second.actor_principal and first.request_id is second.request_id


def test_a_bool_timestamp_is_rejected_after_an_equal_int_one():
    """timestamp_ms=True is not merged into a group whose timestamp is 1: it is refused."""
    envs = [envelope(AclCreated("a", BINDING), timestamp_ms=1)]
    envs.append(envelope(AclCreated("b", BINDING), timestamp_ms=True))
    with pytest.raises(EventSchemaError, match="envelope 1 .*timestamp_ms"):
        CODEC.encode_batch(0, envs)


@given(envs=st.one_of(event_lists, request_batches), base=st.integers(0, 2**62))
def test_compiled_decoder_agrees_with_fastavro(envs, base):
    """The compiled decoder of the codec's own batches returns what the fastavro path returns."""
    payload = CODEC.encode_batch(base, envs)
    compiled, end = CODEC._compiled_decode(payload, base)
    assert end == len(payload)
    assert compiled == CODEC._decode_resolved(payload, CODEC.fingerprint, base)


def _corrupted(envs, data):
    """A batch of ``envs`` with one byte changed, and what fastavro reads from it (None: malformed)."""
    payload = bytearray(CODEC.encode_batch(0, envs))
    at = data.draw(st.integers(0, len(payload) - 1))
    payload[at] = data.draw(st.integers(0, 255))
    try:
        return bytes(payload), CODEC._decode_resolved(bytes(payload), CODEC.fingerprint, 0)
    except MalformedEventError:
        return bytes(payload), None


@given(envs=request_batches.filter(bool), data=st.data())
def test_a_corrupted_batch_decodes_as_fastavro_decodes_it_or_is_malformed(envs, data):
    """After any byte is changed, decode_batch agrees with fastavro or raises MalformedEventError."""
    payload, expected = _corrupted(envs, data)
    if expected is None:
        with pytest.raises(MalformedEventError):
            CODEC.decode_batch(payload, CODEC.fingerprint)
    else:
        assert repr(CODEC.decode_batch(payload, CODEC.fingerprint)) == repr(expected)  # a changed byte may make a NaN


@given(envs=request_batches.filter(bool), data=st.data())
def test_every_truncation_of_a_batch_is_malformed(envs, data):
    """A batch cut anywhere raises MalformedEventError."""
    payload = CODEC.encode_batch(0, envs)
    cut = data.draw(st.integers(0, len(payload) - 1))
    with pytest.raises(MalformedEventError):
        CODEC.decode_batch(payload[:cut], CODEC.fingerprint)


def test_empty_batch_round_trips():
    """An empty batch encodes and decodes to an empty list."""
    assert CODEC.decode_batch(CODEC.encode_batch(0, []), CODEC.fingerprint) == []


def test_decoded_enums_are_the_kafka_int_enums():
    """Decoded enum fields are the IntEnums of secmeta.events.types, not strings."""
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
    assert len(fps) == len(CODEC.event_types) == len(EVENT_TYPES)


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
    """Long fields at varint size boundaries match fastavro's bytes."""
    env = envelope(DelegationTokenRenewed("t", value, abs(value) // 2), timestamp_ms=value)
    assert CODEC.encode_batch(0, [env]) == fastavro_bytes(avro_groups([env]))


@pytest.mark.parametrize("value", [0, -1, 63, 64, 8192, -16385, 2**28, -(2**63), 2**63 - 1])
def test_longs_at_varint_boundaries_decode_back(value):
    """Long fields at varint size boundaries read back as written."""
    env = envelope(DelegationTokenRenewed("t", value, abs(value) // 2), timestamp_ms=value)
    [back] = CODEC.decode_batch(CODEC.encode_batch(0, [env]), CODEC.fingerprint)
    assert (back.timestamp_ms, back.event) == (value, env.event)


def replay_form(event):
    """An event as decode_events gives it: its row when its class declares one."""
    return event.row() if hasattr(type(event), "ROW") else event


@given(envs=st.one_of(event_lists, request_batches))
def test_the_events_decoder_agrees_with_fastavro(envs):
    """decode_events' compiled decoder reads every event type as fastavro does (an AclCreated as its row)."""
    payload = CODEC.encode_batch(0, envs)
    compiled, end = CODEC._compiled_events(payload, 0)
    assert end == len(payload)
    assert compiled == [replay_form(env.event) for env in CODEC._decode_resolved(payload, CODEC.fingerprint, 0)]
    assert compiled == [replay_form(env.event) for env in envs]


@given(envs=request_batches.filter(bool), data=st.data())
def test_a_corrupted_batch_replays_as_fastavro_reads_it_or_is_malformed(envs, data):
    """After any byte is changed, decode_events agrees with fastavro or raises MalformedEventError."""
    payload, expected = _corrupted(envs, data)
    if expected is None:
        with pytest.raises(MalformedEventError):
            CODEC.decode_events(payload, CODEC.fingerprint)
    else:
        assert repr(CODEC.decode_events(payload, CODEC.fingerprint)) == repr([replay_form(e.event) for e in expected])


def test_an_acl_creation_replays_as_its_row_of_kafka_enums():
    """decode_events gives an AclCreated as (acl_id, type, name, pattern, principal, host, operation, permission)."""
    [row] = CODEC.decode_events(CODEC.encode_batch(0, [envelope(AclCreated("a", BINDING))]), CODEC.fingerprint)
    assert row == ("a", ResourceType.TOPIC, BINDING.name, BINDING.pattern.pattern_type, BINDING.entry.principal,
                   BINDING.entry.host, AclOperation.READ, BINDING.entry.permission_type)
    assert row[6] is AclOperation.READ


def test_every_shipped_schema_has_fastavros_crc64_fingerprint():
    """The codec's own CRC-64-AVRO gives fastavro's fingerprint for the batch schema and every event schema."""
    from fastavro.schema import fingerprint, to_parsing_canonical_form

    schemas = [json.loads(CODEC.writer_schema_json)] + [CODEC._event_schema(t).inlined for t in CODEC.event_types]
    for schema in schemas:
        assert avro_fingerprint(schema).hex() == fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO")


@given(envs=st.one_of(event_lists, request_batches))
def test_a_batchs_rows_are_its_envelopes_with_each_row_types_event_as_its_row(envs):
    """decode_batch_rows gives decode_batch_bodies' envelopes and bodies, but each event of a type that declares a row
    (AclCreated) as that row (the event's own row(), as a replay takes it), its envelope's fingerprint still its
    type's."""
    from secmeta.events.records import replay_form

    payload = CODEC.encode_batch(7, envs)
    envelopes, bodies = CODEC.decode_batch_bodies(payload, CODEC.fingerprint, 7)
    read = CODEC.decode_batch_rows(payload, CODEC.fingerprint, 7)
    assert read is not None and read[1] == bodies
    assert read[0] == [dataclasses.replace(env, event=replay_form(env.event)) for env in envelopes]
    assert [env.event.__class__ is tuple for env in read[0]] == [isinstance(env.event, AclCreated) for env in envs]


@given(envs=st.one_of(event_lists, request_batches))
def test_a_batchs_bodies_are_its_events_single_object_bodies(envs):
    """decode_batch_bodies gives decode_batch's envelopes, and each event's logged bytes make exactly the
    single-object encoding a fresh encode writes (so the Kafka publisher need not encode them again)."""
    from secmeta.events.single_object import SingleObjects

    payload = CODEC.encode_batch(7, envs)
    envelopes, bodies = CODEC.decode_batch_bodies(payload, CODEC.fingerprint, 7)
    assert envelopes == CODEC.decode_batch(payload, CODEC.fingerprint, 7)
    objects = SingleObjects(CODEC)
    assert [objects.of_body(env.event, body) for env, body in zip(envelopes, bodies, strict=True)] == [
        CODEC.to_single_object(env.event) for env in envs]
