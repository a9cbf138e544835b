"""The Kafka wire format: key, single-object value and headers of one event, and what is not ours."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.consumers.kafka.wire import (
    FORMAT,
    HEADER_ACTOR_PRINCIPAL,
    HEADER_FINGERPRINT,
    HEADER_OFFSET,
    HEADER_REQUEST,
    HEADER_TIMESTAMP,
    KIND_HISTORY,
    KIND_STATE,
    FormatMarker,
    NotOurMessage,
    _careful_decoder,
    decode_message,
    encode_message,
    encode_tombstone,
    event_reader,
    format_marker,
    header_map,
    history_position,
    is_format_marker,
    is_removal,
    linked_decoder,
    message_decoder,
    message_encoder,
    message_link,
    message_offset,
    message_pair_encoder,
    positioned_decoder,
    state_value,
)
from secmeta.events.codec import EventCodec
from secmeta.events.keyring import SealedSecret
from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    ClientQuotaAltered,
    DelegationTokenRemoved,
    Envelope,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
    TokenRemovalReason,
    replay_form,
)
from secmeta.events.single_object import SingleObjects
from secmeta.events.types import ScramMechanism
from tests.consumers.conftest import (
    format1_message,
    format2_message,
    format2_reader_verdict,
    format2_request_verdict,
)
from tests.logkit import acl_created, binding
from tests.strategies_events import envelopes, events, events_of_each_type

CODEC = EventCodec()


def at(envelope: Envelope, offset: int) -> Envelope:
    return dataclasses.replace(envelope, offset=offset)


def test_a_message_is_a_frame_then_the_event_and_carries_no_headers():
    """Message format 3: no headers; the value is the frame (magic, version 3, kind, the lengths, the request's
    values as JSON a tool can read, the link, the log offset), then the event's single-object encoding."""
    from dataclasses import replace

    env = replace(at(acl_created(1), 5), actor_asserted=False, operator_user="alice", operator_host="ws1",
                  operator_pid=42, operator_program="secmeta")
    link = bytes(range(32))
    key, value, headers = message_encoder(CODEC)(env, link=link)
    assert headers == []
    size = int.from_bytes(value[5:9], "big")
    assert (value[:3], value[3], value[4:5], value[9]) == (b"\x00SM", 3, b"H", 32)
    assert json.loads(value[10:10 + size]) == {
        "format": 3, "timestamp_ms": env.timestamp_ms, "actor_principal": env.actor_principal,
        "actor_host": env.actor_host, "request_id": env.request_id, "actor_asserted": False,
        "operator": ["alice", "ws1", 42, "secmeta"]}
    assert value[10 + size:10 + size + 32] == link
    assert int.from_bytes(value[10 + size + 32:18 + size + 32], "big") == 5
    assert value[18 + size + 32:] == CODEC.to_single_object(env.event)
    assert (message_offset(value, None), message_link(value, None), history_position(value, None)) == (5, link, None)


def test_the_operator_and_assertion_travel_with_the_request_and_format_1_messages_without_them_read_as_unknown():
    """A message names the writing process and whether its actor was asserted; a format-1 message without
    those headers (published before them) reads as asserted by an unknown operator; a malformed one is not
    ours."""
    from dataclasses import replace

    from secmeta.events.records import Operator

    env = replace(at(acl_created(1), 5), actor_asserted=False, operator_user="alice", operator_host="ws1",
                  operator_pid=42, operator_program="secmeta")
    key, value, headers = encode_message(CODEC, env)
    back = decode_message(CODEC, key, value, headers)
    assert (back.actor_asserted, back.operator) == (False, Operator("alice", "ws1", 42, "secmeta"))
    assert decode_message(CODEC, *format2_message(CODEC, env)) == back
    key, value, headers = format1_message(CODEC, env)
    assert decode_message(CODEC, key, value, headers) == back
    older = [(n, v) for n, v in headers if n not in ("secmeta.actor_asserted", "secmeta.operator")]
    old = decode_message(CODEC, key, value, older)
    assert (old.actor_asserted, old.operator) == (True, Operator.UNKNOWN)
    with pytest.raises(NotOurMessage, match="secmeta.operator"):
        decode_message(CODEC, key, value, [*older, ("secmeta.operator", b'["alice"]')])
    with pytest.raises(NotOurMessage, match="secmeta.actor_asserted"):
        decode_message(CODEC, key, value, [*older, ("secmeta.actor_asserted", b"yes")])


@given(envelopes(), st.integers(0, 2**62))
def test_round_trip_gives_back_the_envelope(envelope, offset):
    """decode(encode(e)) is e with its offset and its schema fingerprint, on either topic; so is the decoded
    format-2 and format-1 message of e (topics published before format 3 still read)."""
    envelope = at(envelope, offset)
    key, value, headers = encode_message(CODEC, envelope)
    expected = dataclasses.replace(envelope, fingerprint=CODEC.event_fingerprint(envelope.event_type))
    assert decode_message(CODEC, key, value, headers) == expected
    assert decode_message(CODEC, *message_encoder(CODEC)(envelope, history_offset=offset // 3)) == expected
    assert decode_message(CODEC, *format2_message(CODEC, envelope, link=b"ab" * 32)) == expected
    assert decode_message(CODEC, *format1_message(CODEC, envelope, link=b"ab" * 32)) == expected


def test_key_is_the_entity_key():
    """The message key is the entity the event changes, UTF-8."""
    envelope = at(acl_created(7), 0)
    key, _, _ = encode_message(CODEC, envelope)
    assert key == envelope.entity_key.encode() and key.startswith(b"acl:")


def test_value_ends_in_avro_single_object_encoding():
    """After the frame, the value is C3 01, the event schema's 8-byte fingerprint, then the body."""
    envelope = at(acl_created(2), 3)
    _, value, _ = encode_message(CODEC, envelope)
    single = CODEC.to_single_object(envelope.event)
    assert value.endswith(single) and single[:2] == b"\xc3\x01"
    assert single[2:10] == CODEC.event_fingerprint("AclCreated")


def test_secrets_travel_sealed():
    """A SCRAM upsert's value holds the sealed secret as stored, and it decodes back sealed."""
    secret = SealedSecret("k-1", b"n" * 12, b"ciphertext-and-tag")
    envelope = Envelope(4, 1, "User:admin", "h", "r", ScramCredentialUpserted("alice", ScramMechanism.SCRAM_SHA_256, 4096, secret))
    key, value, headers = encode_message(CODEC, envelope)
    assert b"ciphertext-and-tag" in value
    assert decode_message(CODEC, key, value, headers).event.secret == secret


def test_offset_header_is_decimal_ascii():
    """Format 2's secmeta.offset is the log offset in decimal."""
    _, value, headers = format2_message(CODEC, at(acl_created(1), 1234567))
    assert dict(headers)[HEADER_OFFSET] == b"1234567"
    assert message_offset(value, headers) == 1234567


def test_tombstone_has_the_key_no_value_and_the_offset():
    """A state-topic tombstone keeps the entity key and carries the offset header."""
    envelope = Envelope(9, 1, "User:admin", "h", "r", AclDeleted("id-1", binding(1)))
    key, value, headers = encode_tombstone(envelope)
    assert (key, value, message_offset(value, headers)) == (b"acl:id-1", None, 9)


@pytest.mark.parametrize("event", [
    AclDeleted("a", binding(1)),
    ScramCredentialDeleted("u", ScramMechanism.SCRAM_SHA_512),
    DelegationTokenRemoved("t", TokenRemovalReason.EXPIRED_BY_SWEEP),
    ClientQuotaAltered("user=alice", "producer_byte_rate", None),
])
def test_removals_are_recognised(event):
    """The three removal events and a quota's removed value are the ones followed by a tombstone."""
    assert is_removal(Envelope(0, 1, "p", "h", "r", event))


def test_a_creation_is_not_a_removal():
    """AclCreated keeps its entity, and a quota set keeps its key: no tombstone."""
    assert not is_removal(at(acl_created(1), 0))
    assert not is_removal(Envelope(0, 1, "p", "h", "r", ClientQuotaAltered("user=alice", "producer_byte_rate", 1.0)))


def _message():
    """A format 2 message: the refusals of its headers are still named."""
    return format2_message(CODEC, at(acl_created(3), 11))


def test_wrong_marker_is_not_ours():
    """A value without the C3 01 marker is refused, naming the marker."""
    key, value, headers = _message()
    with pytest.raises(NotOurMessage, match="marker"):
        decode_message(CODEC, key, b"\x00\x01" + value[2:], headers)


@pytest.mark.parametrize("form", [format2_message, format1_message])
def test_unknown_fingerprint_is_not_ours(form):
    """A fingerprint no known schema has is refused, naming it."""
    key, value, headers = form(CODEC, at(acl_created(3), 11))
    bogus = bytes(8)
    headers = [(n, bogus.hex().encode() if n == HEADER_FINGERPRINT else v) for n, v in headers]
    with pytest.raises(NotOurMessage, match="unknown schema fingerprint 0000000000000000"):
        decode_message(CODEC, key, value[:2] + bogus + value[10:], headers)


def test_a_format_1_type_or_fingerprint_header_that_is_not_the_values_is_not_ours():
    """Format 1 named the event type and fingerprint in headers too: one that contradicts the value is
    refused, naming the header."""
    key, value, headers = format1_message(CODEC, at(acl_created(3), 11))
    for name, wrong in ((HEADER_FINGERPRINT, b"00" * 8), ("secmeta.event_type", b"AclDeleted")):
        changed = [(n, wrong if n == name else v) for n, v in headers]
        with pytest.raises(NotOurMessage, match=f"header {name}"):
            decode_message(CODEC, key, value, changed)


def test_truncated_body_is_not_ours():
    """A body cut short is refused as truncated or corrupt."""
    key, value, headers = _message()
    with pytest.raises(NotOurMessage, match="truncated"):
        decode_message(CODEC, key, value[:14], headers)


def test_too_short_for_a_header_is_not_ours():
    """Fewer than 10 bytes cannot even hold the single-object header."""
    key, value, headers = _message()
    with pytest.raises(NotOurMessage, match="truncated"):
        decode_message(CODEC, key, value[:6], headers)


@pytest.mark.parametrize("name", [HEADER_OFFSET, HEADER_REQUEST])
def test_missing_headers_are_named(name):
    """A message without our headers is refused, naming the missing ones."""
    key, value, headers = _message()
    kept = [(n, v) for n, v in headers if n != name]
    with pytest.raises(NotOurMessage, match=f"missing headers: {name}$"):
        decode_message(CODEC, key, value, kept)


def test_a_format_1_message_missing_headers_is_named_in_format_1s_terms():
    key, value, headers = format1_message(CODEC, at(acl_created(3), 11))
    kept = [(n, v) for n, v in headers if n not in (HEADER_TIMESTAMP, HEADER_OFFSET)]
    with pytest.raises(NotOurMessage, match="missing headers: secmeta.offset, secmeta.timestamp_ms$"):
        decode_message(CODEC, key, value, kept)


def test_no_headers_at_all_is_not_ours():
    """Kafka gives None for a message without headers: refused, not a crash."""
    key, value, _ = _message()
    with pytest.raises(NotOurMessage, match="missing headers"):
        decode_message(CODEC, key, value, None)


def test_key_of_another_entity_is_not_ours():
    """The key must be the event's own entity key."""
    _, value, headers = _message()
    with pytest.raises(NotOurMessage, match="entity key"):
        decode_message(CODEC, b"acl:someone-else", value, headers)


def test_non_decimal_offset_is_not_ours():
    """A secmeta.offset that is not a decimal integer is refused."""
    key, value, headers = _message()
    headers = [(n, b"12x" if n == HEADER_OFFSET else v) for n, v in headers]
    with pytest.raises(NotOurMessage, match="decimal"):
        decode_message(CODEC, key, value, headers)


def test_tombstone_is_not_an_event():
    """decode_message refuses a tombstone (readers handle those by offset)."""
    key, _, headers = _message()
    with pytest.raises(NotOurMessage, match="tombstone"):
        decode_message(CODEC, key, None, headers)


def test_not_our_message_carries_its_reason():
    """NotOurMessage.reason is the text a dead-letter record stores."""
    key, value, headers = _message()
    with pytest.raises(NotOurMessage) as info:
        decode_message(CODEC, key, b"\x00\x00" + value[2:], headers)
    assert info.value.reason == str(info.value)


def test_a_header_repeated_with_no_value_keeps_the_last_value():
    """header_map: the last value of a name wins, a header without value is dropped, values are bytes."""
    assert header_map([("a", b"1"), ("a", None), ("b", bytearray(b"2"))]) == {"a": b"1", "b": b"2"}
    assert header_map([("a", None), ("a", b"2")]) == {"a": b"2"}
    assert header_map(None) == {}


def test_headers_given_as_bytearrays_decode_alike():
    """Readers that hand over bytearray or memoryview values get the same envelope."""
    key, value, headers = _message()
    loose = [(n, bytearray(v)) for n, v in headers]
    assert decode_message(CODEC, bytearray(key), memoryview(value), loose) == decode_message(CODEC, key, value, headers)


_BYTES_FORMS = st.sampled_from([bytes, bytearray, memoryview])


@given(st.data())
def test_header_values_of_any_bytes_type_decode_alike(data):
    """Each header as bytes, bytearray or memoryview, with or without a valueless repeat of its name
    before it (dropped: the value counts) gives the envelope plain bytes give."""
    key, value, headers = _message()
    loose = []
    for name, raw in headers:
        if data.draw(st.booleans(), label=f"{name} repeated without value first"):
            loose.append((name, None))
        loose.append((name, data.draw(_BYTES_FORMS, label=name)(raw)))
    assert decode_message(CODEC, key, value, loose) == decode_message(CODEC, key, value, headers)


@pytest.mark.parametrize("name", [HEADER_ACTOR_PRINCIPAL, HEADER_TIMESTAMP])
def test_a_format_1_header_that_does_not_read_is_named(name):
    """A timestamp that is not decimal, an actor that is not UTF-8: NotOurMessage naming the header."""
    key, value, headers = format1_message(CODEC, at(acl_created(3), 11))
    headers = [(n, b"\xff\xfe" if n == name else v) for n, v in headers]
    with pytest.raises(NotOurMessage, match=name):
        decode_message(CODEC, key, value, headers)


def test_a_refusal_reads_the_same_whatever_bytes_type_the_headers_come_in():
    key, value, headers = _message()
    bad = [(n, b"12x" if n == HEADER_OFFSET else v) for n, v in headers]
    reasons = []
    for form in (bad, [(n, bytearray(v)) for n, v in bad], [(n, memoryview(v)) for n, v in bad]):
        with pytest.raises(NotOurMessage) as info:
            decode_message(CODEC, key, value, form)
        reasons.append(info.value.reason)
    assert reasons[0] == reasons[1] == reasons[2] == f"header {HEADER_OFFSET} is not a decimal integer: b'12x'"


_HEADER_VALUES = st.one_of(
    st.none(),
    st.binary(max_size=12),
    st.sampled_from([b"-1", b"007", b"12x", b"1_2", b" 12", b"+5", b"\xff\xfe", b"true", b"false", b"yes", b'["u","h",1,"p"]', b"[1]",
                     b"AclCreated", b"AclDeleted", b"", b"0" * 16, b"{}", b"[]", b"null",
                     b'{"format":2,"timestamp_ms":1,"actor_principal":"User:a","actor_host":"h","request_id":"r",'
                     b'"actor_asserted":true,"operator":["u","h",1,"p"]}',
                     b'{"format":3,"timestamp_ms":1,"actor_principal":"User:a","actor_host":"h","request_id":"r",'
                     b'"actor_asserted":true,"operator":["u","h",1,"p"]}']),
)


def _mangled(envelope: Envelope, offset: int, data) -> tuple:
    """A message of ``envelope`` at ``offset`` in either format, perhaps mangled: headers changed, dropped, repeated
    or given as another bytes type, the value cut or changed, the key of another entity."""
    form = data.draw(st.sampled_from([encode_message, _linked_message, _state_message, format2_message,
                                      _linked2_message, format1_message]), label="format")
    key, value, headers = form(CODEC, at(envelope, offset))
    headers = list(headers)
    if not headers and data.draw(st.booleans(), label="headers added to a format 3 message"):
        headers = list(format2_message(CODEC, at(envelope, offset))[2])
    for _ in range(data.draw(st.integers(0, 3) if headers else st.just(0), label="header changes")):
        index = data.draw(st.integers(0, len(headers) - 1), label="header")
        name, raw = headers[index]
        change = data.draw(st.sampled_from(["value", "drop", "repeat", "form"]), label="change")
        if change == "value":
            headers[index] = (name, data.draw(_HEADER_VALUES, label="new value"))
        elif change == "drop":
            del headers[index]
        elif change == "repeat":
            headers.append((name, data.draw(_HEADER_VALUES, label="repeated value")))
        elif raw is not None:
            headers[index] = (name, data.draw(_BYTES_FORMS, label="form")(raw))
        if not headers:
            break
    value_change = data.draw(st.sampled_from(["none", "cut", "byte", "marker", "form", "absent"]), label="value")
    if value_change == "cut":
        value = value[:data.draw(st.integers(0, len(value) - 1), label="cut at")]
    elif value_change == "byte":
        at_byte = data.draw(st.integers(0, len(value) - 1), label="byte at")
        value = value[:at_byte] + bytes([value[at_byte] ^ 0xFF]) + value[at_byte + 1:]
    elif value_change == "marker":
        value = b"\xc3\x02" + value[2:] if value[:2] == b"\xc3\x01" else value.replace(b"\xc3\x01", b"\xc3\x02", 1)
    elif value_change == "form":
        value = data.draw(_BYTES_FORMS, label="value form")(value)
    elif value_change == "absent":
        value = None
    key = data.draw(st.sampled_from([key, None, b"acl:other", key[:-1], bytearray(key)]), label="key")
    return key, value, headers


def _linked_message(codec, envelope: Envelope) -> tuple[bytes, bytes, list]:
    """A format 3 history message with its batch's link."""
    return message_encoder(codec)(envelope, link=bytes(range(32)))


def _linked2_message(codec, envelope: Envelope) -> tuple[bytes, bytes, list]:
    """A format 2 history message with its batch's link (a secmeta.link header)."""
    return format2_message(codec, envelope, bytes(range(32)).hex().encode())


def _state_message(codec, envelope: Envelope) -> tuple[bytes, bytes, list]:
    """A format 3 message as the state topic carries it."""
    return message_encoder(codec)(envelope, history_offset=envelope.offset // 2)  # any int64 history offset


def _outcome(read, message: tuple):
    """What a reader gives for a message: what it read, or its refusal's reason."""
    try:
        return read(*message)
    except NotOurMessage as exc:
        return exc.reason


def _as_replay_takes_it(envelope: Envelope) -> tuple:
    """What a follower without a local log applies: the log offset and the event, an ACL's creation as its row."""
    return envelope.offset, replay_form(envelope.event)


# The two routes of a message: the event in its envelope (a follower with a local log, the publisher, audit), and
# the event as a replay takes it (a follower without one); each as the careful path would give it.
_ROUTES = {"event": (message_decoder, lambda envelope: envelope), "row": (event_reader, _as_replay_takes_it)}
# Half the draws an ACL's creation: the only event type the row route reads as a row.
_ACL_HEAVY = envelopes(st.one_of(events_of_each_type()[AclCreated], events))


@pytest.mark.parametrize("route", _ROUTES)
@given(_ACL_HEAVY, st.integers(0, 2**62), st.data())
def test_the_straight_path_reads_every_message_as_the_careful_path_does(route, envelope, offset, data):
    """Each route's straight path gives what the careful path gives for any message (an intact one, or one with
    headers changed, dropped, repeated or given as another bytes type, the value cut or changed, the key of another
    entity), or the same refusal."""
    reader, form = _ROUTES[route]
    message = _mangled(envelope, offset, data)
    topic = data.draw(st.sampled_from([None, KIND_HISTORY, KIND_STATE]), label="the topic read")
    careful = _outcome(_careful_decoder(SingleObjects(CODEC), topic), message)
    expected = careful if isinstance(careful, str) else form(careful)
    assert repr(_outcome(reader(CODEC, topic), message)) == repr(expected)  # a changed byte may make a NaN (nan != nan)


# The readers that give the frame's extra beside the envelope, each as its topic's message_decoder and the reader of
# that extra on its own (which parses the frame again) give it.
_WITH_EXTRA = {"linked": (linked_decoder, KIND_HISTORY, lambda v, h: _outcome(lambda: message_link(v, h), ())),
               "positioned": (positioned_decoder, KIND_STATE, history_position)}


@pytest.mark.parametrize("route", _WITH_EXTRA)
@given(_ACL_HEAVY, st.integers(0, 2**62), st.data())
def test_the_extra_read_with_the_event_is_what_its_own_reader_gives(route, envelope, offset, data):
    """linked_decoder gives the envelope message_decoder gives on the history topic and the link message_link gives
    (None where that refuses a link: an unknown one); positioned_decoder the envelope on the state topic and the
    position history_position gives; or the same refusal. Any message, intact or mangled, in any format."""
    reader, topic, extra = _WITH_EXTRA[route]
    key, value, headers = message = _mangled(envelope, offset, data)
    envelope_alone = _outcome(message_decoder(CODEC, topic), message)
    if isinstance(envelope_alone, str):
        expected: object = envelope_alone
    else:
        found = extra(value, headers)
        expected = (envelope_alone, None if isinstance(found, str) else found)
    assert repr(_outcome(reader(CODEC), message)) == repr(expected)


_DOCUMENTED_FRAMES = {(b"H", 0), (b"H", 32), (b"S", 8)}  # the module docstring's: a link of 0 or 32 bytes, an offset


def test_a_frame_is_read_exactly_when_its_kind_and_extra_length_are_the_documented_ones():
    """Each kind byte with each extra length: both routes read it, on its own topic and on either, exactly when the
    pair is a history frame with no link or a 32-byte one or a state frame with an 8-byte history offset; otherwise
    every reader refuses it with the careful path's reason, which names the kind or the length."""
    event = CODEC.to_single_object(acl_created(3).event)
    request = message_encoder(CODEC)(at(acl_created(3), 11))[1][10:-8 - len(event)]
    for kind in map(bytes, zip(range(256))):
        for extra in [*range(0, 41), 64, 255]:
            value = (b"\x00SM\x03" + kind + len(request).to_bytes(4, "big") + bytes([extra]) + request + b"\x05" * extra
                     + (11).to_bytes(8, "big") + event)
            for topic in (None, kind if kind in (b"H", b"S") else None):
                careful = _outcome(_careful_decoder(SingleObjects(CODEC), topic), (None, value, None))
                assert isinstance(careful, str) != ((kind, extra) in _DOCUMENTED_FRAMES), (kind, extra, careful)
                for reader in (message_decoder, event_reader):
                    got = _outcome(reader(CODEC, topic), (None, value, None))
                    assert got == careful if isinstance(careful, str) else not isinstance(got, str)
                if isinstance(careful, str):
                    assert careful.startswith(f"frame of unknown kind {kind!r}") if kind not in (b"H", b"S") else (
                        f"whose {'link' if kind == b'H' else 'history offset'} is {extra} bytes" in careful)


_ONE_READER = {"event": (lambda topic: message_decoder(CODEC, topic), lambda envelope: envelope),
               "row": (lambda topic: event_reader(CODEC, topic), _as_replay_takes_it),
               "linked": (lambda topic: linked_decoder(CODEC), None),
               "positioned": (lambda topic: positioned_decoder(CODEC), None)}


@pytest.mark.parametrize("route", _ONE_READER)
@given(st.lists(st.tuples(_ACL_HEAVY, st.integers(0, 2**62), st.booleans(),
                          st.sampled_from([b"", b"\x07" * 32, b"\x08" * 32])), min_size=2, max_size=8), st.data())
def test_one_reader_reads_a_run_of_messages_each_as_a_fresh_reader_does(route, drawn, data):
    """A reader keeps the last frame's head (checked once) for the run of messages that share it: each message of a
    run, intact or mangled (cut, a byte changed, another key), the request shared with the one before or changed, the
    link and history offset alike, reads as a fresh reader reads it alone, or is refused alike."""
    topic = {"linked": KIND_HISTORY, "positioned": KIND_STATE}.get(route, data.draw(
        st.sampled_from([KIND_HISTORY, KIND_STATE]), label="topic"))
    encode = message_encoder(CODEC)
    make, form = _ONE_READER[route]
    reader, messages, previous = make(topic), [], None
    for envelope, offset, same_request, link in drawn:
        if same_request and previous is not None:
            envelope = dataclasses.replace(envelope, **{f: getattr(previous, f) for f in _REQUEST_FIELDS})
        previous = envelope
        key, value, headers = (encode(at(envelope, offset), link=link) if topic == KIND_HISTORY else
                               encode(at(envelope, offset), history_offset=offset // 3))
        change = data.draw(st.sampled_from(["none", "none", "cut", "byte", "key"]), label="change")
        if change == "cut":
            value = value[:data.draw(st.integers(0, len(value) - 1), label="cut at")]
        elif change == "byte":
            at_byte = data.draw(st.integers(0, len(value) - 1), label="byte at")
            value = value[:at_byte] + bytes([value[at_byte] ^ data.draw(st.integers(1, 255), label="xor")]) + \
                value[at_byte + 1:]
        elif change == "key":
            key = b"acl:other"
        messages.append((key, value, headers))
    def shown(outcome) -> str:  # a refusal may name an object by its address
        return re.sub(r" at 0x[0-9a-f]+", "", repr(outcome))

    for message in messages:
        expected = _outcome(make(topic), message)
        if form is not None and not isinstance(expected, str):
            careful = _outcome(_careful_decoder(SingleObjects(CODEC), topic), message)
            assert shown(expected) == shown(form(careful))
        assert shown(_outcome(reader, message)) == shown(expected)


@given(_ACL_HEAVY, st.integers(0, 2**62), st.data())
def test_both_routes_refuse_a_message_alike(envelope, offset, data):
    """A message one route refuses, the other refuses with the same reason; one it reads, the other reads as the same
    event (a follower with a local log and one without apply the same events and dead-letter the same messages)."""
    message = _mangled(envelope, offset, data)
    as_event, as_row = _outcome(message_decoder(CODEC), message), _outcome(event_reader(CODEC), message)
    assert repr(as_row) == repr(as_event if isinstance(as_event, str) else _as_replay_takes_it(as_event))


@pytest.mark.parametrize("route", _ROUTES)
def test_a_message_is_refused_naming_the_problem_on_either_route(route):
    """Each route refuses what the other does, naming the problem: an ACL's creation keyed as another ACL, cut short,
    with a non-decimal offset, or without its request header."""
    reader = _ROUTES[route][0](CODEC)
    key, value, headers = _message()
    cases = {
        "key b'acl:someone-else' is not the event's entity key": (b"acl:someone-else", value, headers),
        "body does not decode (truncated or corrupt)": (key, value[:-1], headers),
        f"header {HEADER_OFFSET} is not a decimal integer: b'12x'":
            (key, value, [(n, b"12x" if n == HEADER_OFFSET else v) for n, v in headers]),
        f"missing headers: {HEADER_REQUEST}": (key, value, [(n, v) for n, v in headers if n != HEADER_REQUEST]),
    }
    for reason, message in cases.items():
        with pytest.raises(NotOurMessage) as info:
            reader(*message)
        assert info.value.reason.startswith(reason)


@pytest.mark.parametrize("raw", [b"1_2", b" 12", b"+5", b"12\n"])
@pytest.mark.parametrize("name", [HEADER_OFFSET, HEADER_TIMESTAMP])
def test_an_integer_header_is_decimal_digits_only(name, raw):
    """What Python's int() would also read (underscores, spaces, a plus sign) is no decimal header."""
    key, value, headers = format1_message(CODEC, at(acl_created(3), 11))
    headers = [(n, raw if n == name else v) for n, v in headers]
    with pytest.raises(NotOurMessage, match=f"header {name} is not a decimal integer"):
        decode_message(CODEC, key, value, headers)


_REQUEST_FIELDS = ("timestamp_ms", "actor_principal", "actor_host", "request_id", "actor_asserted", "operator_user",
                   "operator_host", "operator_pid", "operator_program")


@given(st.lists(envelopes(), min_size=1, max_size=6), st.data())
def test_a_bound_encoder_writes_each_message_as_a_lone_encode_does(batch, data):
    """message_encoder shares a request's headers across a run of its events: each message is still the one
    encode_message gives for that envelope alone, whichever request value changes from one event to the next."""

    run = [batch[0]]
    for envelope in batch[1:]:  # mostly the previous event's request, sometimes with one value changed
        same = dataclasses.replace(envelope, **{f: getattr(run[-1], f) for f in _REQUEST_FIELDS})
        changed = data.draw(st.sampled_from((None, *_REQUEST_FIELDS)), label="request value changed")
        run.append(same if changed is None else dataclasses.replace(same, **{changed: getattr(envelope, changed)}))
    encode = message_encoder(CODEC)
    assert [encode(e) for e in run] == [encode_message(CODEC, e) for e in run]


@given(st.lists(envelopes(st.one_of(events_of_each_type()[AclCreated], events)), min_size=1, max_size=12),
       st.binary(min_size=32, max_size=32))
def test_the_pair_encoder_writes_a_row_read_batch_as_the_whole_events(batch, link):
    """The publisher reads a logged batch with ACL creations left as rows (EventCodec.decode_batch_rows): each key,
    history value and state head and tail is the one the same batch read whole (decode_batch_bodies) gives, and the
    state value the one message_encoder gives with the history offset."""
    payload = CODEC.encode_batch(3, batch)
    whole, bodies = CODEC.decode_batch_bodies(payload, CODEC.fingerprint, 3)
    rows, row_bodies = CODEC.decode_batch_rows(payload, CODEC.fingerprint, 3)
    assert any(env.event.__class__ is tuple for env in rows) == any(isinstance(e.event, AclCreated) for e in batch)
    from_rows, from_whole = message_pair_encoder(CODEC), message_pair_encoder(CODEC)
    pairs = [from_rows(env, body, link) for env, body in zip(rows, row_bodies, strict=True)]
    assert pairs == [from_whole(env, body, link) for env, body in zip(whole, bodies, strict=True)]
    assert [state_value(head, 9, tail) for _, _, head, tail in pairs] == [
        message_encoder(CODEC)(env, history_offset=9)[1] for env in whole]


def _with_request(**changes) -> tuple[bytes, bytes, list]:
    """A message whose secmeta.request header has ``changes`` applied to its JSON (None: the field left out)."""
    key, value, headers = _message()
    request = json.loads(dict(headers)[HEADER_REQUEST])
    for name, changed in changes.items():
        if changed is None:
            del request[name]
        else:
            request[name] = changed
    raw = json.dumps(request).encode()
    return key, value, [(n, raw if n == HEADER_REQUEST else v) for n, v in headers]


@pytest.mark.parametrize(("changes", "reason"), [
    ({"format": 4}, r"is message format 4: newer than this secmeta reads \(up to 3\); upgrade it"),
    ({"format": 3}, "is message format 3: expected 2"),
    ({"format": 1}, "is message format 1: expected 2"),
    ({"format": "2"}, "is message format '2': expected 2"),
    ({"format": None}, "is message format None: expected 2"),
    ({"timestamp_ms": "12"}, "a field of the wrong type"),
    ({"timestamp_ms": 2**63}, "a field of the wrong type"),
    ({"actor_asserted": 1}, "a field of the wrong type"),
    ({"actor_principal": 5}, "a field of the wrong type"),
    ({"actor_host": "\ud800"}, "a field of the wrong type"),
    ({"operator": ["u", "h", True, "p"]}, "a field of the wrong type"),
    ({"operator": ["u", "h", 1]}, "a field of the wrong type"),
    ({"request_id": None}, r"wrong fields \(missing \['request_id'\], unknown \[\]\)"),
    ({"extra": 1}, r"wrong fields \(missing \[\], unknown \['extra'\]\)"),
])
def test_a_request_header_that_does_not_read_is_named(changes, reason):
    """A secmeta.request of a later format, or with a field missing, unknown or of the wrong type: not ours,
    naming the header and what is wrong (a later format is never guessed at)."""
    key, value, headers = _with_request(**changes)
    with pytest.raises(NotOurMessage, match=f"header {HEADER_REQUEST} .*{reason}"):
        decode_message(CODEC, key, value, headers)


@pytest.mark.parametrize("raw", [b"\xff{}", b"not json", b"[1, 2]", b'"text"'])
def test_a_request_header_that_is_no_json_object_is_named(raw):
    key, value, headers = _message()
    headers = [(n, raw if n == HEADER_REQUEST else v) for n, v in headers]
    with pytest.raises(NotOurMessage, match=f"header {HEADER_REQUEST} is not"):
        decode_message(CODEC, key, value, headers)


_SINGLE = CODEC.to_single_object(acl_created(3).event)


def _framed() -> tuple[bytes, bytes, list]:
    return message_encoder(CODEC)(at(acl_created(3), 11), link=b"\x07" * 32)


@pytest.mark.parametrize(("change", "reason"), [
    (lambda v: v[:3] + bytes([FORMAT + 1]) + v[4:], "frame of message format 4: newer than this secmeta reads (up to 3)"),
    (lambda v: v[:3] + b"\x02" + v[4:], "frame of message format 2: expected 3"),
    (lambda v: v[:8], "truncated frame: 8 bytes"),
    (lambda v: v[:4] + b"X" + v[5:], "frame of unknown kind b'X'"),
    (lambda v: v[:-len(_SINGLE) - 8] + (-1).to_bytes(8, "big", signed=True) + _SINGLE,
     "frame holds a negative log offset -1"),
    (lambda v: v[:5] + (2**31).to_bytes(4, "big") + v[9:], "truncated frame: its request, extra and log offset end"),
    (lambda v: v[:4] + b"S" + v[5:], "state frame whose history offset is 32 bytes, not 8"),
])
def test_a_frame_that_does_not_read_is_named(change, reason):
    """A format 3 value whose frame is of a later format (UnknownFormat), cut short, of an unknown kind, with a
    negative offset or lengths past its end: refused naming it, by the offset and link readers too."""
    from secmeta.consumers.kafka.wire import UnknownFormat

    key, value, headers = _framed()
    bad = change(value)
    for read in (message_decoder(CODEC), event_reader(CODEC), lambda k, v, h: message_offset(v, h),
                 lambda k, v, h: message_link(v, h)):
        with pytest.raises(NotOurMessage) as info:
            read(key, bad, headers)
        assert info.value.reason.startswith(reason)
        assert isinstance(info.value, UnknownFormat) == ("newer" in reason)


def test_a_state_frame_carries_the_history_offset_instead_of_the_link():
    """The state topic's value of an event is its history value's event and request, the history message's Kafka
    offset where the link was; a tombstone names both as headers."""
    key, value, headers = _framed()
    _, state, _ = message_encoder(CODEC)(at(acl_created(3), 11), history_offset=4242)
    assert decode_message(CODEC, key, state, headers) == decode_message(CODEC, key, value, headers)
    assert (history_position(state, None), message_link(state, None), message_offset(state, None)) == (4242, None, 11)
    _, none, tomb = encode_tombstone(at(acl_created(3), 11))
    assert history_position(none, tomb + [("secmeta.history_offset", b"77")]) == 77


# -- the format marker --------------------------------------------------------------------------------------------


def test_a_reader_from_before_format_3_skips_format_3_values_but_stops_on_the_format_marker():
    """Review 27, 1.1: a secmeta from before format 3 takes a format 3 value (no headers) as another writer's and
    skips it, so a follower bootstrapping from the state topic kept a rotated-away credential; the marker a publisher
    writes before its first format 3 message makes that reader stop instead (UnknownFormat), on either topic."""
    envelope = acl_created(0)
    key, value, headers = encode_message(CODEC, envelope)
    assert format2_reader_verdict(CODEC, key, value, headers) == \
        "NotOurMessage: missing headers: secmeta.offset, secmeta.request"
    assert format2_reader_verdict(CODEC, *format2_message(CODEC, envelope)) == "event"
    marker_key, marker_value, marker_headers = format_marker()
    assert format2_reader_verdict(CODEC, marker_key, marker_value, marker_headers).startswith(
        "UnknownFormat: unknown schema fingerprint")
    # its request header, as that reader's rule takes it, names the format it cannot read
    assert format2_request_verdict(dict(marker_headers)[HEADER_REQUEST]) == (
        "UnknownFormat: header secmeta.request is message format 3: newer than this secmeta reads (up to 2); "
        "upgrade it")
    assert not marker_key.decode().startswith(("acl:", "scram:", "token:", "quota:", "setting:"))


def test_the_format_marker_is_skipped_by_every_reader_and_only_it():
    """Every reader route gives FormatMarker (skip it, quietly) for the marker exactly; a message that differs from it
    in its key, value or any header stays a message refused as not ours, named."""
    marker = format_marker()
    for read in (message_decoder(CODEC), event_reader(CODEC), _careful_decoder(SingleObjects(CODEC))):
        with pytest.raises(FormatMarker):
            read(*marker)
    assert is_format_marker(*marker)
    key, value, headers = marker
    near = [(b"acl:1", value, headers), (key, value + b"\x00", headers), (key, value, headers[:1]),
            (key, value, [*headers, (HEADER_OFFSET, b"-1")]), (key, value, [(HEADER_OFFSET, b"0"), headers[1]]),
            (key, value, [headers[0], (HEADER_REQUEST, b'{"format":4}')])]
    for message in near:
        assert not is_format_marker(*message)
        for read in (message_decoder(CODEC), event_reader(CODEC)):
            with pytest.raises(NotOurMessage) as refused:
                read(*message)
            assert refused.type is not FormatMarker and refused.value.reason
    assert value[2:10] not in set(SingleObjects(CODEC).fingerprints.values())  # no event type's


def test_a_frame_is_read_only_on_its_own_topic_and_a_history_frame_holds_no_link_or_a_whole_one():
    """Review 27, section 2: a history reader took a state frame (its link silently None) and a history frame's link
    of any length. Now a reader of one topic refuses the other's frames, and a link of other than 0 or 32 bytes is
    refused, each naming what it found; on both routes."""
    envelope = at(acl_created(0), 7)
    encode = message_encoder(CODEC)
    history, unlinked, state = (encode(envelope, link=b"\x01" * 32), encode(envelope),
                                encode(envelope, history_offset=3))
    for route in (message_decoder, event_reader):
        for message, topic in ((history, KIND_HISTORY), (unlinked, KIND_HISTORY), (state, KIND_STATE),
                               (history, None), (state, None)):
            assert message_offset(message[1], []) == 7 and route(CODEC, topic)(*message)
        for message, topic, reason in (
                (state, KIND_HISTORY, "state frame (S) on the history topic"),
                (history, KIND_STATE, "history frame (H) on the state topic"),
                (encode(envelope, link=b"\x01" * 5), None, "history frame whose link is 5 bytes, not 0 or 32"),
                (encode(envelope, link=b"\x01" * 33), KIND_HISTORY, "history frame whose link is 33 bytes, not 0 or 32")):
            with pytest.raises(NotOurMessage) as refused:
                route(CODEC, topic)(*message)
            assert refused.value.reason == reason
