"""The envelope records who operated a write (OS user, host, pid, program) and whether its actor was asserted."""

from __future__ import annotations

import json
from io import BytesIO

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.events.codec import EventCodec
from secmeta.events.errors import EventSchemaError
from secmeta.events.records import AclCreated, Envelope, Operator
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

CODEC = EventCodec.default()
BINDING = AclBinding.of(ResourceType.TOPIC, "payments", PatternType.LITERAL, "User:bob", "*",
                        AclOperation.READ, AclPermissionType.ALLOW)
OPERATOR_FIELDS = ("actor_asserted", "operator_user", "operator_host", "operator_pid", "operator_program")


def envelope(i: int, **attrs) -> Envelope:
    return Envelope(-1, 1_700_000_000_000, "User:admin", "10.0.0.1", "r", AclCreated(f"acl-{i}", BINDING), **attrs)


def pre_operator_batch() -> tuple[str, bytes]:
    """The batch schema as it was before operators were recorded, and a batch of two events written under it."""
    schema = json.loads(CODEC.writer_schema_json)
    schema["items"]["fields"] = [f for f in schema["items"]["fields"] if f["name"] not in OPERATOR_FIELDS]
    raw = CODEC.decode_batch_raw(CODEC.encode_batch(0, [envelope(0), envelope(1)]), CODEC.fingerprint)
    for group in raw:
        for name in OPERATOR_FIELDS:
            del group[name]
    out = BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), raw)
    return json.dumps(schema), out.getvalue()


def test_a_log_written_before_operators_reads_as_asserted_by_an_unknown_operator():
    """Batches from before the operator fields decode, their actor asserted and their operator unknown."""
    schema, payload = pre_operator_batch()
    fp = CODEC.register_writer_schema(schema)
    assert fp != CODEC.fingerprint
    decoded = CODEC.decode_batch(payload, fp, 5)
    assert [e.offset for e in decoded] == [5, 6]
    assert all(e.actor_asserted and e.operator == Operator.UNKNOWN for e in decoded)
    assert str(decoded[0].operator) == "unknown"


@given(user=st.text(max_size=8), host=st.text(max_size=8), pid=st.integers(0, 2**31), program=st.text(max_size=8),
       asserted=st.booleans())
def test_operator_and_assertion_round_trip(user, host, pid, program, asserted):
    """Whatever operator and assertion a write records is what the log reads back."""
    written = [envelope(0, actor_asserted=asserted, operator_user=user, operator_host=host, operator_pid=pid,
                        operator_program=program)]
    (back,) = CODEC.decode_batch(CODEC.encode_batch(0, written), CODEC.fingerprint)
    assert back.operator == Operator(user, host, pid, program)
    assert back.actor_asserted is asserted


def test_envelopes_of_different_operators_are_stored_in_different_groups():
    """One request's events share a group; another process's events get their own group with their operator."""
    a = dict(operator_user="alice", operator_host="ws1", operator_pid=10, operator_program="secmeta")
    b = dict(a, operator_pid=11)
    payload = CODEC.encode_batch(0, [envelope(0, **a), envelope(1, **a), envelope(2, **b),
                                     envelope(3, **b, actor_asserted=False)])
    groups = CODEC.decode_batch_raw(payload, CODEC.fingerprint)
    assert [(g["operator_pid"], g["actor_asserted"], len(g["events"])) for g in groups] == [
        (10, True, 2), (11, True, 1), (11, False, 1)]
    assert [e.operator_pid for e in CODEC.decode_batch(payload, CODEC.fingerprint)] == [10, 10, 11, 11]


@pytest.mark.parametrize(("field", "value"), [("actor_asserted", 1), ("operator_pid", "12"), ("operator_user", None)])
def test_an_invalid_operator_value_is_refused_naming_it(field, value):
    """A non-bool assertion, a non-int pid or a missing user is refused with the field's name."""
    with pytest.raises(EventSchemaError, match=field):
        CODEC.encode_batch(0, [envelope(0, **{field: value})])
