"""Rows and envelopes: the one mapping between the log's events and the Spark sources' rows, both ways."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.consumers.spark.rows import (
    NO_SECRET,
    SCHEMA,
    RowError,
    arrow_batch,
    column_of,
    envelope_from_row,
    event_row,
    python_rows,
)
from secmeta.core import SecmetaError
from secmeta.events.entities import KINDS, kind_of
from secmeta.events.records import EVENT_TYPES, AclCreated, Envelope, ScramCredentialUpserted
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.strategies_events import envelopes, events_of_each_type

_BY_TYPE = events_of_each_type()


def _logged(event_type: type) -> st.SearchStrategy:
    """Envelopes of ``event_type`` as read back from the log (offset set, fingerprint aside)."""
    return st.builds(
        lambda env, offset: dataclasses.replace(env, offset=offset),
        envelopes(_BY_TYPE[event_type]), st.integers(0, 2**40),
    )


def _without_secret(envelope):
    if isinstance(envelope.event, ScramCredentialUpserted):
        return dataclasses.replace(envelope, event=dataclasses.replace(envelope.event, secret=NO_SECRET))
    return envelope


def _row(envelope) -> dict:
    return dict(zip(SCHEMA.fieldNames(), event_row(envelope), strict=True))


def test_every_event_type_has_a_generator():
    assert set(_BY_TYPE) == set(EVENT_TYPES.values())


@pytest.mark.parametrize("event_type", sorted(EVENT_TYPES.values(), key=lambda c: c.__name__), ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_row_gives_back_its_envelope_but_the_secret(event_type, data):
    envelope = data.draw(_logged(event_type))
    assert envelope_from_row(_row(envelope)) == _without_secret(envelope)


@settings(max_examples=40, deadline=None)
@given(batch=st.lists(st.one_of(*[_logged(t) for t in _BY_TYPE]), min_size=1, max_size=20))
def test_arrow_rows_give_back_their_envelopes(batch):
    """What the sources hand to Spark (Arrow, timestamps in microseconds) reads back the same."""
    assert [envelope_from_row(r) for r in python_rows(arrow_batch(batch))] == [_without_secret(e) for e in batch]


@settings(max_examples=40, deadline=None)
@given(envelope=_logged(ScramCredentialUpserted))
def test_no_row_carries_a_secret(envelope):
    secret = envelope.event.secret
    row = _row(envelope)
    assert not {secret.key_id, secret.nonce, secret.ciphertext} & {v for v in row.values() if not isinstance(v, list)}
    assert envelope_from_row(row).event.secret == NO_SECRET


_ACL = Envelope(7, 1_800_000_000_000, "User:admin", "10.0.0.1", "req-1", AclCreated("acl-1", AclBinding.of(
    ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)))


def test_an_unknown_event_type_is_refused_naming_the_offset():
    row = _row(_ACL) | {"event_type": "AclRenamed"}
    with pytest.raises(RowError, match=r"log offset 7 has an unknown event type 'AclRenamed'") as raised:
        envelope_from_row(row)
    assert isinstance(raised.value, SecmetaError)


def test_a_bad_column_is_refused_naming_the_event_and_offset():
    assert envelope_from_row(_row(_ACL)) == _ACL
    with pytest.raises(RowError, match=r"the AclCreated row at log offset 7 cannot be read: .*FLY"):
        envelope_from_row(_row(_ACL) | {"operation": "FLY"})


@settings(max_examples=40, deadline=None)
@given(envelope=st.one_of(*[_logged(t) for t in _BY_TYPE]))
def test_a_row_lists_the_principals_its_event_names(envelope):
    """The ``principals`` column is what the event's kind says it names (history's principal filter reads it)."""
    assert _row(envelope)["principals"] == list(kind_of(envelope.event).principals(envelope.event))


def test_every_declared_kinds_key_and_attributes_have_a_column():
    for kind in KINDS:
        assert all(column_of(field) in SCHEMA.fieldNames() for field in (*kind.key, *kind.attributes)), kind.name
    with pytest.raises(KeyError, match="'colour' has no column"):
        column_of("colour")
