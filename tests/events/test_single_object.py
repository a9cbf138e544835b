"""SingleObjects: the compiled single-object encoding gives the codec's bytes and events, and its errors."""

from __future__ import annotations

import gc
import weakref

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.events import single_object
from secmeta.events.codec import SINGLE_OBJECT_MARKER, EventCodec
from secmeta.events.errors import EventsError, MalformedEventError, UnknownSchemaError
from secmeta.events.records import AclCreated, AclRow, replay_form
from secmeta.events.single_object import SingleObjects
from tests.events.test_events_evolution import BINDING, schema_copy
from tests.events.test_events_evolution import add_comment as add_a_field
from tests.strategies_events import events, events_of_each_type

CODEC = EventCodec.default()
OBJECTS = SingleObjects(CODEC)
real_compile = single_object._compile


@given(events)
def test_encode_gives_the_codecs_bytes(event):
    """Every event of every type encodes to exactly what fastavro writes through the codec."""
    assert OBJECTS.encode(event) == CODEC.to_single_object(event)


@given(events)
def test_decode_gives_back_the_event(event):
    assert OBJECTS.decode(CODEC.to_single_object(event)) == event


def outcome(decode, value: bytes):
    try:
        return decode(value)
    except EventsError as exc:
        return type(exc), str(exc)


@given(events, st.data())
def test_damaged_values_decode_or_fail_as_the_codec_does(event, data):
    """Truncated, extended or flipped bytes: the same event, or the codec's own error, never another event."""
    value = bytearray(CODEC.to_single_object(event))
    how = data.draw(st.sampled_from(["truncate", "extend", "flip"]))
    if how == "truncate":
        value = value[: data.draw(st.integers(0, len(value) - 1))]
    elif how == "extend":
        value += data.draw(st.binary(min_size=1, max_size=4))
    else:
        at = data.draw(st.integers(10, len(value) - 1))
        value[at] ^= data.draw(st.integers(1, 255))
    value = bytes(value)
    assert outcome(OBJECTS.decode, value) == outcome(CODEC.from_single_object, value)


# Half the draws an ACL's creation: the only type with a row, the one the follower reads most.
_ACL_HEAVY = st.one_of(events_of_each_type()[AclCreated], events)
_ROUTES = {"event": (False, lambda event: event), "row": (True, replay_form)}


def _damaged(value: bytes, data) -> bytes:
    """``value`` truncated, extended or with one byte flipped (the header kept: it picks the decoder)."""
    value = bytearray(value)
    how = data.draw(st.sampled_from(["truncate", "extend", "flip"]), label="damage")
    if how == "truncate":
        value = value[: data.draw(st.integers(10, len(value) - 1), label="cut at")]
    elif how == "extend":
        value += data.draw(st.binary(min_size=1, max_size=4), label="extra")
    else:
        at = data.draw(st.integers(10, len(value) - 1), label="at")
        value[at] ^= data.draw(st.integers(1, 255), label="xor")
    return bytes(value)


@pytest.mark.parametrize("route", _ROUTES)
@given(_ACL_HEAVY, st.data())
def test_a_straight_decoder_reads_what_fastavro_reads_or_not_whole(route, event, data):
    """Each compiled decoder handed out for a fast path (the event route, and the row route a follower without a
    local log takes) reads a value, intact or damaged, as fastavro does (an ACL's creation as its row) and keys it as
    the event's entity key, or does not read it whole (an exception, or an end short of the value): it never accepts
    what fastavro refuses nor reads another event."""
    replay, form = _ROUTES[route]
    value = CODEC.to_single_object(event)
    if data.draw(st.booleans(), label="damaged"):
        value = _damaged(value, data)
    decode, fingerprint, key_of = OBJECTS.straight_decoders(replay)[value[:10]]
    assert fingerprint == value[2:10] == CODEC.event_fingerprint(type(event).__name__)
    try:
        read, end = decode(value)
    except Exception:  # noqa: BLE001 - not read: the caller's careful path decides
        return
    if end != len(value):
        return
    expected = CODEC.from_single_object(value)  # raises if fastavro refuses what the decoder took whole
    assert repr(read) == repr(form(expected))  # by repr: a flipped byte may make a quota's value NaN (nan != nan)
    assert key_of(read) == expected.entity_key


@given(events_of_each_type()[AclCreated])
def test_an_acls_row_is_keyed_as_its_event(event):
    """The row route's key check uses the event's own entity key, read from the row (``acl:<id>``)."""
    assert AclCreated.row_entity_key(event.row()) == event.entity_key


def test_every_event_type_has_a_straight_decoder_on_each_route():
    """Both tables cover every event type the codec writes, under its current fingerprint; only the row route reads
    an ACL's creation as its row."""
    for replay in (False, True):
        table = OBJECTS.straight_decoders(replay)
        assert {header[2:] for header in table} == set(OBJECTS.fingerprints.values())
        assert all(header[:2] == SINGLE_OBJECT_MARKER for header in table)
    value = CODEC.to_single_object(AclCreated("a", BINDING))
    row: AclRow = OBJECTS.straight_decoders(replay=True)[value[:10]][0](value)[0]
    assert row == AclCreated("a", BINDING).row()
    assert OBJECTS.straight_decoders()[value[:10]][0](value)[0] == AclCreated("a", BINDING)


def test_unknown_fingerprint_is_the_codecs_error():
    value = CODEC.to_single_object(AclCreated("a", BINDING))
    with pytest.raises(UnknownSchemaError):
        OBJECTS.decode(value[:2] + b"\xff" * 8 + value[10:])


def test_wrong_marker_is_malformed():
    value = CODEC.to_single_object(AclCreated("a", BINDING))
    with pytest.raises(MalformedEventError, match="marker 0001"):
        OBJECTS.decode(b"\x00\x01" + value[2:])


def test_a_field_that_does_not_fit_is_named_by_the_codec():
    bad = AclCreated(7, BINDING)  # type: ignore[arg-type] - an acl_id that is not a string
    with pytest.raises(EventsError, match="acl_id") as raised:
        OBJECTS.encode(bad)
    with pytest.raises(type(raised.value), match="acl_id"):
        CODEC.to_single_object(bad)


@pytest.fixture
def newer(tmp_path) -> EventCodec:
    """A codec whose AclCreated gained a field with a default that Python does not hold."""
    return EventCodec(schema_copy(tmp_path, add_a_field))


def test_a_schema_field_python_lacks_is_written_as_its_default(newer):
    event = AclCreated("a", BINDING)
    assert SingleObjects(newer).encode(event) == newer.to_single_object(event)
    assert SingleObjects(newer).decode(newer.to_single_object(event)) == event


def test_values_of_an_older_writer_schema_resolve_once_registered(newer):
    """An AclCreated written before the field was added reads through the codec's schema resolution."""
    old = CODEC.to_single_object(AclCreated("a", BINDING))
    newer.register_writer_schema(CODEC.writer_schema_json)
    assert old[:2] == SINGLE_OBJECT_MARKER and old[2:10] != newer.event_fingerprint("AclCreated")
    assert SingleObjects(newer).decode(old) == AclCreated("a", BINDING)


def test_compiled_once_per_codec(newer, monkeypatch):
    """Every SingleObjects of one codec shares the code compiled for the first; another codec gets its own."""
    compiled = []
    monkeypatch.setattr(single_object, "_compile", lambda codec: compiled.append(codec) or real_compile(codec))
    first, again = SingleObjects(newer), SingleObjects(newer)
    assert compiled == [newer]
    assert first.fingerprints is again.fingerprints and first.fingerprints != OBJECTS.fingerprints


def test_a_dropped_codec_is_collected():
    """The per-codec cache holds its codecs weakly: once nothing else holds one, it goes (with its compiled code)."""
    codecs = [EventCodec() for _ in range(3)]
    for codec in codecs:
        assert SingleObjects(codec).encode(AclCreated("a", BINDING)) == codec.to_single_object(AclCreated("a", BINDING))
    refs = [weakref.ref(codec) for codec in codecs]
    del codecs, codec
    gc.collect()
    assert [ref() for ref in refs] == [None, None, None]
