"""How one logged event travels as a Kafka message, both ways.

key
    The entity the event changes, UTF-8 (``acl:<id>``, ``scram:<user>:<mech>``,
    ``token:<id>``), so the compacted state topic keeps one value per entity.
value
    Avro single-object encoding of the event: ``C3 01``, the 8-byte schema
    fingerprint, the body.  Secrets appear only sealed, as in the log.
    ``None`` (a tombstone) on the state topic after a removal.
headers
    ``secmeta.offset`` (decimal log offset, also on tombstones),
    ``secmeta.event_type``, ``secmeta.fingerprint`` (hex),
    ``secmeta.timestamp_ms``, ``secmeta.actor_principal``,
    ``secmeta.actor_host``, ``secmeta.request_id``; from the publisher also
    ``secmeta.link``: the hex keyed-hash-chain link of the log batch that holds
    the event, so a reader can tell whether the topic and a log agree at an
    offset (the link is an HMAC output: it reveals no key and no secret);
    ``secmeta.actor_asserted``
    (``true``: the actor is a local caller's claim, ``false``: secmeta serve
    authenticated it) and ``secmeta.operator`` (JSON ``[user, host, pid,
    program]``: the process that wrote the event), optional on reading (messages
    from before them read as asserted by an unknown operator).

State-topic messages (values and tombstones) also carry
``secmeta.history_offset``: the Kafka offset in the history topic (partition 0)
of the same event, so a reader that rebuilt the state can follow the history
from there.  An event that updates an entity appears on the state topic as the
whole entity (``state_form``: a token's expiry change as its
``DelegationTokenIssued`` with the new expiry, at the change's log offset), so
the latest value per key is always a complete entity.  Key and removal follow
the kind declarations (``secmeta.events.entities``).

``decode_message`` raises ``NotOurMessage`` (with a ``reason``) for anything
that is not a message written by ``encode_message``.
"""

from __future__ import annotations

import functools
import json
import operator
import weakref
from collections.abc import Callable, Iterable, Sequence

from secmeta.events.codec import SINGLE_OBJECT_MARKER, EventCodec
from secmeta.events.codegen import setter_constructor
from secmeta.events.entities import closes
from secmeta.events.errors import EventsError, SecmetaError, UnknownSchemaError
from secmeta.events.records import EVENT_TYPES, Envelope
from secmeta.events.single_object import SingleObjects
from secmeta.events.types import is_int64

__all__ = [
    "HEADER_ACTOR_ASSERTED",
    "HEADER_ACTOR_HOST",
    "HEADER_ACTOR_PRINCIPAL",
    "HEADER_EVENT_TYPE",
    "HEADER_FINGERPRINT",
    "HEADER_HISTORY_OFFSET",
    "HEADER_LINK",
    "HEADER_OFFSET",
    "HEADER_OPERATOR",
    "HEADER_REQUEST_ID",
    "HEADER_TIMESTAMP",
    "NotOurMessage",
    "decode_message",
    "encode_message",
    "encode_tombstone",
    "header_map",
    "is_removal",
    "message_decoder",
    "message_encoder",
    "message_offset",
]

HEADER_OFFSET = "secmeta.offset"
HEADER_EVENT_TYPE = "secmeta.event_type"
HEADER_FINGERPRINT = "secmeta.fingerprint"
HEADER_TIMESTAMP = "secmeta.timestamp_ms"
HEADER_ACTOR_PRINCIPAL = "secmeta.actor_principal"
HEADER_ACTOR_HOST = "secmeta.actor_host"
HEADER_REQUEST_ID = "secmeta.request_id"
HEADER_HISTORY_OFFSET = "secmeta.history_offset"
HEADER_LINK = "secmeta.link"
HEADER_ACTOR_ASSERTED = "secmeta.actor_asserted"
HEADER_OPERATOR = "secmeta.operator"
_ASSERTED = {True: b"true", False: b"false"}

_REQUIRED = (
    HEADER_OFFSET,
    HEADER_EVENT_TYPE,
    HEADER_FINGERPRINT,
    HEADER_TIMESTAMP,
    HEADER_ACTOR_PRINCIPAL,
    HEADER_ACTOR_HOST,
    HEADER_REQUEST_ID,
)
_required = operator.itemgetter(*_REQUIRED)
_ALL_BYTES = (bytes,) * len(_REQUIRED)  # the fast path's header values; others go through header_map
# Envelope.event_type (the event class's name) as bytes, by class, from the registry that owns the names
# (secmeta.events.records.EVENT_TYPES): a 17 ns lookup per message where envelope.event_type.encode() takes 53 ns,
# and decode needs it from the event's class before there is an envelope (the round-trip test pins the two).
_TYPE_NAMES = {cls: name.encode() for name, cls in EVENT_TYPES.items()}
_new_envelope = setter_constructor(Envelope)

Headers = list[tuple[str, bytes]]


class NotOurMessage(SecmetaError, ValueError):
    """A Kafka message that is not a secmeta event; ``reason`` says why."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def is_removal(envelope: Envelope) -> bool:
    """Whether the event removes its entity (so the state topic gets a tombstone): its kind says."""
    return closes(envelope.event)


def encode_message(codec: EventCodec, envelope: Envelope) -> tuple[bytes, bytes, Headers]:
    """The (key, value, headers) of one logged event."""
    return message_encoder(codec)(envelope)


_Tables = tuple[dict[type, bytes], dict[bytes, tuple]]
#: Per codec (weakly: nothing in them refers back to it), made once: each event type's fingerprint header, and
#: by a value's first ten bytes (marker and fingerprint) its compiled decoder, fingerprint header, type name and
#: fingerprint, for the types that have one.
_BY_CODEC: weakref.WeakKeyDictionary[EventCodec, _Tables] = weakref.WeakKeyDictionary()


def _tables(objects: SingleObjects) -> _Tables:
    found = _BY_CODEC.get(objects.codec)
    if found is None:
        hexes = {cls: fingerprint.hex().encode() for cls, fingerprint in objects.fingerprints.items()}
        known = {}
        for cls, fingerprint in objects.fingerprints.items():
            compiled = objects.compiled_decoder(fingerprint)
            if compiled is not None:
                known[SINGLE_OBJECT_MARKER + fingerprint] = (compiled, hexes[cls], _TYPE_NAMES[cls], fingerprint)
        found = _BY_CODEC[objects.codec] = (hexes, known)
    return found


def message_encoder(codec: EventCodec) -> Callable[[Envelope], tuple[bytes, bytes, Headers]]:
    """``encode_message`` bound to one codec, for writers that encode many events.

    The headers a request's events share (time, actor, request id, operator) are made once for a run of
    envelopes that carry the same values (a logged batch's events come by request), and the fingerprint
    header once per event type; each message gets its own list of them.
    """
    objects = SingleObjects(codec)
    encode_value = objects.encode
    hexes, _ = _tables(objects)
    shared: list = [None, ()]  # the last envelope's request values, and their headers

    def encode(envelope: Envelope) -> tuple[bytes, bytes, Headers]:
        event = envelope.event
        value = encode_value(event)
        cls = event.__class__
        request = (envelope.timestamp_ms, envelope.actor_principal, envelope.actor_host, envelope.request_id,
                   envelope.actor_asserted, envelope.operator_user, envelope.operator_host, envelope.operator_pid,
                   envelope.operator_program)
        if request != shared[0]:
            shared[0], shared[1] = request, _request_headers(*request)
        return event.entity_key.encode(), value, [
            (HEADER_OFFSET, b"%d" % envelope.offset),
            (HEADER_EVENT_TYPE, _TYPE_NAMES[cls]),
            (HEADER_FINGERPRINT, hexes[cls]),
            *shared[1],
        ]

    return encode


def _request_headers(timestamp_ms: int, principal: str, host: str, request_id: str, asserted: bool,
                     operator_user: str, operator_host: str, operator_pid: int,
                     operator_program: str) -> tuple[tuple[str, bytes], ...]:
    """The headers of what an event's request shares with the request's other events."""
    return (
        (HEADER_TIMESTAMP, b"%d" % timestamp_ms),
        (HEADER_ACTOR_PRINCIPAL, principal.encode()),
        (HEADER_ACTOR_HOST, host.encode()),
        (HEADER_REQUEST_ID, request_id.encode()),
        (HEADER_ACTOR_ASSERTED, _ASSERTED[asserted]),
        (HEADER_OPERATOR, _operator_header(operator_user, operator_host, operator_pid, operator_program)),
    )


def encode_tombstone(envelope: Envelope) -> tuple[bytes, None, Headers]:
    """The state-topic tombstone that follows a removal: key, no value, the offset header."""
    return envelope.entity_key.encode(), None, [(HEADER_OFFSET, str(envelope.offset).encode())]


def header_map(headers: Iterable[tuple[str, bytes | None]] | None) -> dict[str, bytes]:
    """Headers as a dict (the last value of a repeated name wins; None values are dropped)."""
    found = dict(headers or ())
    for value in found.values():
        if value.__class__ is not bytes:  # None, bytearray, memoryview: the careful way
            break
    else:
        return found
    out: dict[str, bytes] = {}
    for name, value in headers or ():
        if value is not None:
            out[name] = bytes(value)
    return out


def message_offset(headers: Sequence[tuple[str, bytes | None]] | dict[str, bytes] | None) -> int:
    """The log offset a message carries in ``secmeta.offset``; NotOurMessage if absent or bad."""
    found = headers if isinstance(headers, dict) else header_map(headers)
    raw = found.get(HEADER_OFFSET)
    if raw is None:
        raise NotOurMessage(f"missing header {HEADER_OFFSET}")
    return _int_header(HEADER_OFFSET, raw)


def decode_message(
    codec: EventCodec,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
) -> Envelope:
    """The envelope a message carries; NotOurMessage naming what is wrong otherwise."""
    return message_decoder(codec)(key, value, headers)


def message_decoder(codec: EventCodec) -> Callable[[bytes | None, bytes | None, Sequence | None], Envelope]:
    """``decode_message`` bound to one codec, for readers that decode many messages.

    A message as ``encode_message`` writes it (bytes values, the codec's current schemas) is read by a
    straight path: the value's first ten bytes (marker and fingerprint) pick the event type, whose
    fingerprint and name headers are compared as bytes, and no header is decoded twice. Anything that path
    does not take whole (another bytes type, a missing or odd header, an older schema, a refusal) is read
    by the careful path, which alone decides refusals and names them; both give the same envelope
    (tested).
    """
    objects = SingleObjects(codec)
    careful = _careful_decoder(objects)
    _, known = _tables(objects)
    make, attribution = _new_envelope, _attribution

    def decode(key: bytes | None, value: bytes | None, headers: Sequence | None) -> Envelope:
        try:
            found = dict(headers)  # type: ignore[arg-type]
            compiled, fingerprint_hex, type_name, fingerprint = known[value[:10]]  # type: ignore[index]
            offset, timestamp = found[HEADER_OFFSET], found[HEADER_TIMESTAMP]
            if (value.__class__ is not bytes or found[HEADER_FINGERPRINT] != fingerprint_hex
                    or found[HEADER_EVENT_TYPE] != type_name or offset.__class__ is not bytes
                    or timestamp.__class__ is not bytes or not offset.isdigit() or not timestamp.isdigit()):
                raise ValueError
            event, end = compiled(value)
            asserted, operator = found.get(HEADER_ACTOR_ASSERTED), found.get(HEADER_OPERATOR)
            if (end != len(value) or (key is not None and key != event.entity_key.encode())
                    or asserted.__class__ not in _PLAIN or operator.__class__ not in _PLAIN):
                raise ValueError
            return make(int(offset), int(timestamp), found[HEADER_ACTOR_PRINCIPAL].decode(),
                        found[HEADER_ACTOR_HOST].decode(), found[HEADER_REQUEST_ID].decode(), event,
                        fingerprint, *attribution(asserted, operator))
        except Exception:  # noqa: BLE001 - not the plain form: the careful path reads it or names the problem
            return careful(key, value, headers)

    return decode


_PLAIN = (bytes, type(None))  # header values the straight path passes to _attribution as they are


def _careful_decoder(objects: SingleObjects) -> Callable[[bytes | None, bytes | None, Sequence | None], Envelope]:
    """The decoder that takes any bytes type and names every refusal (message_decoder's careful path)."""
    decode_value, fingerprints = objects.decode, objects.fingerprints
    make = _new_envelope

    def decode(key: bytes | None, value: bytes | None, headers: Sequence | None) -> Envelope:
        try:
            found = dict(headers or ())
            fields = _required(found)
            if tuple(map(type, fields)) != _ALL_BYTES:
                raise KeyError
        except KeyError:  # missing; valueless (header_map drops those: an earlier value counts); not bytes
            found = header_map(headers)
            try:
                fields = _required(found)
            except KeyError:
                missing = [name for name in _REQUIRED if name not in found]
                raise NotOurMessage(f"missing headers: {', '.join(missing)}") from None
        offset, event_type, fingerprint_hex, timestamp, principal, host, request = fields
        if value is None:
            raise NotOurMessage("tombstone (no value): not an event")
        if value.__class__ is not bytes:
            value = bytes(value)
        if len(value) < 10:
            raise NotOurMessage(f"truncated: {len(value)} bytes, the single-object header alone needs 10")
        if value[:2] != SINGLE_OBJECT_MARKER:
            raise NotOurMessage(f"wrong marker {value[:2].hex()}: not Avro single-object encoding (c301)")
        try:
            event = decode_value(value)
        except UnknownSchemaError:
            raise NotOurMessage(f"unknown schema fingerprint {value[2:10].hex()}") from None
        except EventsError as exc:
            raise NotOurMessage(f"body does not decode (truncated or corrupt): {exc}") from None
        if fingerprint_hex != value[2:10].hex().encode():
            raise NotOurMessage(f"header {HEADER_FINGERPRINT} {bytes(fingerprint_hex)!r} does not match "
                                f"the value's fingerprint {value[2:10].hex()}")
        cls = event.__class__
        if event_type != _TYPE_NAMES[cls]:
            raise NotOurMessage(
                f"header {HEADER_EVENT_TYPE} {bytes(event_type)!r} does not match the value's {cls.__name__}")
        if key is not None and bytes(key) != event.entity_key.encode():
            raise NotOurMessage(f"key {bytes(key)!r} is not the event's entity key {event.entity_key!r}")
        return make(
            int(offset) if offset.isdigit() else _int_header(HEADER_OFFSET, offset),
            int(timestamp) if timestamp.isdigit() else _int_header(HEADER_TIMESTAMP, timestamp),
            _text_header(HEADER_ACTOR_PRINCIPAL, principal),
            _text_header(HEADER_ACTOR_HOST, host),
            _text_header(HEADER_REQUEST_ID, request),
            event,
            fingerprints[cls],
            *_attribution(_bytes_or_none(found.get(HEADER_ACTOR_ASSERTED)), _bytes_or_none(found.get(HEADER_OPERATOR))),
        )

    return decode


@functools.lru_cache(maxsize=256)  # a batch's events share their operator
def _operator_header(user: str, host: str, pid: int, program: str) -> bytes:
    return json.dumps([user, host, pid, program], separators=(",", ":")).encode()


def _bytes_or_none(value: object) -> bytes | None:
    return None if value is None else bytes(value)  # type: ignore[call-overload]


@functools.lru_cache(maxsize=256)
def _attribution(asserted: bytes | None, operator: bytes | None) -> tuple[bool, str, str, int, str]:
    """Envelope.actor_asserted and operator_* from their headers (absent: asserted by an unknown operator)."""
    if asserted is None:
        flag = True
    elif asserted in (b"true", b"false"):
        flag = asserted == b"true"
    else:
        raise NotOurMessage(f"header {HEADER_ACTOR_ASSERTED} is not true or false: {asserted!r}")
    if operator is None:
        return flag, "", "", 0, ""
    try:
        user, host, pid, program = json.loads(operator)
        if not (isinstance(user, str) and isinstance(host, str) and is_int64(pid) and isinstance(program, str)):
            raise ValueError
    except (ValueError, TypeError):
        raise NotOurMessage(f"header {HEADER_OPERATOR} is not [user, host, pid, program]: {operator!r}") from None
    return flag, user, host, pid, program


def _int_header(name: str, raw: bytes) -> int:
    text = raw.decode("ascii", "replace")
    if not text.isascii() or not text.lstrip("-").isdigit():
        raise NotOurMessage(f"header {name} is not a decimal integer: {bytes(raw)!r}")
    return int(text)


def _text_header(name: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise NotOurMessage(f"header {name} is not UTF-8: {bytes(raw)!r}") from None
