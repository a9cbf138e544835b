"""How one logged event travels as a Kafka message, both ways.

key
    The entity the event changes, UTF-8 (``acl:<id>``, ``scram:<user>:<mech>``,
    ``token:<id>``), so the compacted state topic keeps one value per entity.
value
    Avro single-object encoding of the event: ``C3 01``, the 8-byte schema
    fingerprint (which names the event type), the body.  Secrets appear only
    sealed, as in the log.  ``None`` (a tombstone) on the state topic after a removal.
headers (format 2)
    ``secmeta.offset``: the decimal log offset (also on tombstones);
    ``secmeta.request``: what the event shares with the other events of its request, as JSON made once
    per request: ``{"format":2,"timestamp_ms":..,"actor_principal":..,"actor_host":..,"request_id":..,
    "actor_asserted":true,"operator":[user,host,pid,program]}`` (``actor_asserted``: ``true`` the actor
    is a local caller's claim, ``false`` secmeta serve authenticated it; ``operator``: the process that
    wrote the event); from the publisher, on the history topic, also ``secmeta.link``: the hex
    keyed-hash-chain link of the log batch that holds the event, so a reader can tell whether the topic
    and a log agree at an offset (the link is an HMAC output: it reveals no key and no secret).

State-topic messages (values and tombstones) carry ``secmeta.history_offset`` instead of the link: the
Kafka offset in the history topic (partition 0) of the same event, so a reader that rebuilt the state
can follow the history from there.  An event that updates an entity appears on the state topic as the
whole entity (``state_form``: a token's expiry change as its ``DelegationTokenIssued`` with the new
expiry, at the change's log offset), so the latest value per key is always a complete entity.  Key and
removal follow the kind declarations (``secmeta.events.entities``).

Format 1 (published before format 2; still read): one header per field, ``secmeta.offset``,
``secmeta.event_type``, ``secmeta.fingerprint`` (hex), ``secmeta.timestamp_ms``,
``secmeta.actor_principal``, ``secmeta.actor_host``, ``secmeta.request_id``, optionally
``secmeta.actor_asserted`` and ``secmeta.operator`` (without them: asserted by an unknown operator), and
the link on both topics.  A message with ``secmeta.request`` is format 2; its ``format`` names the
version, and a later one is refused (naming it) rather than guessed at.  Format 2 carries a message's
metadata in three headers instead of ten: librdkafka allocates, copies and frees every header of every
message, about 0.4 us each on both sides.

``decode_message`` raises ``NotOurMessage`` (with a ``reason``) for anything
that is not a message written by ``encode_message`` (in either format).
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from secmeta.events.codec import SINGLE_OBJECT_MARKER, EventCodec
from secmeta.events.codegen import setter_constructor
from secmeta.events.entities import closes
from secmeta.events.errors import EventsError, SecmetaError, UnknownSchemaError
from secmeta.events.records import EVENT_TYPES, Envelope, replay_form
from secmeta.events.single_object import SingleObjects
from secmeta.events.types import is_int64

__all__ = [
    "FORMAT",
    "HEADER_ACTOR_ASSERTED",
    "HEADER_ACTOR_HOST",
    "HEADER_ACTOR_PRINCIPAL",
    "HEADER_EVENT_TYPE",
    "HEADER_FINGERPRINT",
    "HEADER_HISTORY_OFFSET",
    "HEADER_LINK",
    "HEADER_OFFSET",
    "HEADER_OPERATOR",
    "HEADER_REQUEST",
    "HEADER_REQUEST_ID",
    "HEADER_TIMESTAMP",
    "NotOurMessage",
    "UnknownFormat",
    "decode_message",
    "encode_message",
    "encode_tombstone",
    "event_reader",
    "header_map",
    "is_removal",
    "message_decoder",
    "message_encoder",
    "message_offset",
]

FORMAT = 2  # the message format encode_message writes (secmeta.request's "format")
HEADER_OFFSET = "secmeta.offset"
HEADER_REQUEST = "secmeta.request"
HEADER_HISTORY_OFFSET = "secmeta.history_offset"
HEADER_LINK = "secmeta.link"
# format 1's headers (read, no longer written)
HEADER_EVENT_TYPE = "secmeta.event_type"
HEADER_FINGERPRINT = "secmeta.fingerprint"
HEADER_TIMESTAMP = "secmeta.timestamp_ms"
HEADER_ACTOR_PRINCIPAL = "secmeta.actor_principal"
HEADER_ACTOR_HOST = "secmeta.actor_host"
HEADER_REQUEST_ID = "secmeta.request_id"
HEADER_ACTOR_ASSERTED = "secmeta.actor_asserted"
HEADER_OPERATOR = "secmeta.operator"

_REQUIRED_V1 = (
    HEADER_OFFSET,
    HEADER_EVENT_TYPE,
    HEADER_FINGERPRINT,
    HEADER_TIMESTAMP,
    HEADER_ACTOR_PRINCIPAL,
    HEADER_ACTOR_HOST,
    HEADER_REQUEST_ID,
)
_REQUIRED = (HEADER_OFFSET, HEADER_REQUEST)
_V1_ONLY = frozenset(_REQUIRED_V1[1:])  # a message with one of these and no secmeta.request is format 1
_required_v1 = operator.itemgetter(*_REQUIRED_V1)
_REQUEST_KEYS = ("format", "timestamp_ms", "actor_principal", "actor_host", "request_id", "actor_asserted",
                 "operator")
_REQUEST_KEY_SET = frozenset(_REQUEST_KEYS)
# Envelope.event_type (the event class's name) as bytes, by class, from the registry that owns the names
# (secmeta.events.records.EVENT_TYPES): format 1's event type header.
_TYPE_NAMES = {cls: name.encode() for name, cls in EVENT_TYPES.items()}
_new_envelope = setter_constructor(Envelope)

Headers = list[tuple[str, bytes]]


class NotOurMessage(SecmetaError, ValueError):
    """A Kafka message that is not a secmeta event; ``reason`` says why."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class UnknownFormat(NotOurMessage):
    """A message in a format this secmeta cannot read (a newer message format or an unknown writer schema): it may
    be a newer secmeta's event, so a reader whose answer depends on every message (a bootstrap) must stop."""


def is_removal(envelope: Envelope) -> bool:
    """Whether the event removes its entity (so the state topic gets a tombstone): its kind says."""
    return closes(envelope.event)


def encode_message(codec: EventCodec, envelope: Envelope) -> tuple[bytes, bytes, Headers]:
    """The (key, value, headers) of one logged event."""
    return message_encoder(codec)(envelope)


def message_encoder(codec: EventCodec) -> Callable[..., tuple[bytes, bytes, Headers]]:
    """``encode_message`` bound to one codec, for writers that encode many events.

    The ``secmeta.request`` header is made once for a run of envelopes that carry the same request values
    (a logged batch's events come by request); each message gets its own list of headers.  Given the event's
    ``body`` as its logged batch holds it (``EventCodec.decode_batch_bodies``), the value is made from it
    rather than encoded again (the same bytes: ``SingleObjects.of_body``).
    """
    objects = SingleObjects(codec)
    encode_value, of_body = objects.encode, objects.of_body
    shared: list = [None, None]  # the last envelope's request values, and their header

    def encode(envelope: Envelope, body: bytes | None = None) -> tuple[bytes, bytes, Headers]:
        event = envelope.event
        request = (envelope.timestamp_ms, envelope.actor_principal, envelope.actor_host, envelope.request_id,
                   envelope.actor_asserted, envelope.operator_user, envelope.operator_host, envelope.operator_pid,
                   envelope.operator_program)
        if request != shared[0]:
            shared[0], shared[1] = request, (HEADER_REQUEST, _request_header(*request))
        value = encode_value(event) if body is None else of_body(event, body)
        return event.entity_key.encode(), value, [(HEADER_OFFSET, b"%d" % envelope.offset), shared[1]]

    return encode


def _request_header(timestamp_ms: int, principal: str, host: str, request_id: str, asserted: bool,
                    operator_user: str, operator_host: str, operator_pid: int, operator_program: str) -> bytes:
    """The ``secmeta.request`` header: what an event shares with its request's other events."""
    return json.dumps(
        {"format": FORMAT, "timestamp_ms": timestamp_ms, "actor_principal": principal, "actor_host": host,
         "request_id": request_id, "actor_asserted": asserted,
         "operator": [operator_user, operator_host, operator_pid, operator_program]},
        separators=(",", ":"), ensure_ascii=False).encode()


def encode_tombstone(envelope: Envelope) -> tuple[bytes, None, Headers]:
    """The state-topic tombstone that follows a removal: key, no value, the offset header."""
    return envelope.entity_key.encode(), None, [(HEADER_OFFSET, b"%d" % envelope.offset)]


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
    """``decode_message`` bound to one codec, for readers that decode many messages (``_reader``)."""
    return _reader(SingleObjects(codec), replay=False)


def event_reader(codec: EventCodec) -> Callable[[bytes | None, bytes | None, Sequence | None], tuple[int, object]]:
    """``message_decoder`` for a reader that applies events and keeps no envelope (a follower without a local log):
    the message's log offset and its event as a replay takes it (``replay_form``: the creation of an ACL as its row,
    ``AclCreated.ROW``, which builds none of the binding's objects; ``SecurityDelta.replay_events`` takes it), read
    and refused exactly as ``message_decoder`` reads and refuses the message (``_reader``)."""
    return _reader(SingleObjects(codec), replay=True)


def _reader(objects: SingleObjects, replay: bool) -> Callable[[bytes | None, bytes | None, Sequence | None], Any]:
    """The one reader of messages, on either route: the envelope (``message_decoder``) or, with ``replay``, the log
    offset and the event as a replay takes it (``event_reader``).

    A message as ``encode_message`` writes it (format 2, the values bytes, the value's first ten bytes (marker and
    fingerprint) naming a compiled decoder of ``SingleObjects.straight_decoders`` that reads it whole, the key None
    or the entity key of what it read, the offset decimal digits) is read by this straight path, the request header
    parsed once per distinct value (``_request_fields``). Anything that path does not take whole (format 1, another
    bytes type, a missing or odd header, an older schema, a refusal) is read by the careful path, which alone
    decides refusals and names them; both give the same envelope (tested), and both routes refuse alike (tested).
    """
    decoders, careful = objects.straight_decoders(replay), _careful_decoder(objects)
    make, fields = _new_envelope, _request_fields

    def read(key: bytes | None, value: bytes | None, headers: Sequence | None) -> Any:
        try:
            found = dict(headers)  # type: ignore[arg-type]
            offset, request = found[HEADER_OFFSET], found[HEADER_REQUEST]
            compiled, fingerprint, key_of = decoders[value[:10]]  # type: ignore[index]
            if (value.__class__ is not bytes or offset.__class__ is not bytes or request.__class__ is not bytes
                    or not offset.isdigit()):
                raise ValueError
            got, end = compiled(value)
            if end != len(value) or (key is not None and key != key_of(got).encode()):
                raise ValueError
            before, after = fields(request)  # read and checked on both routes
            if replay:
                return int(offset), got
            return make(int(offset), *before, got, fingerprint, *after)
        except Exception:  # noqa: BLE001 - not the plain form: the careful path reads it or names the problem
            envelope = careful(key, value, headers)
            return (envelope.offset, replay_form(envelope.event)) if replay else envelope

    return read


def _careful_decoder(objects: SingleObjects) -> Callable[[bytes | None, bytes | None, Sequence | None], Envelope]:
    """The decoder that takes either format and any bytes type, and names every refusal (``_reader``'s careful
    path, on both routes)."""
    decode_value, fingerprints = objects.decode, objects.fingerprints
    make = _new_envelope

    def decode(key: bytes | None, value: bytes | None, headers: Sequence | None) -> Envelope:
        found = header_map(headers)  # valueless headers dropped (an earlier value counts), values as bytes
        request = found.get(HEADER_REQUEST)
        v1 = request is None and not _V1_ONLY.isdisjoint(found)
        missing = [name for name in (_REQUIRED_V1 if v1 else _REQUIRED) if name not in found]
        if missing:
            raise NotOurMessage(f"missing headers: {', '.join(missing)}")
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
            raise UnknownFormat(f"unknown schema fingerprint {value[2:10].hex()}") from None
        except EventsError as exc:
            raise NotOurMessage(f"body does not decode (truncated or corrupt): {exc}") from None
        cls = event.__class__
        if v1:
            offset, event_type, fingerprint_hex, timestamp, principal, host, request_id = _required_v1(found)
            if fingerprint_hex != value[2:10].hex().encode():
                raise NotOurMessage(f"header {HEADER_FINGERPRINT} {fingerprint_hex!r} does not match "
                                    f"the value's fingerprint {value[2:10].hex()}")
            if event_type != _TYPE_NAMES[cls]:
                raise NotOurMessage(
                    f"header {HEADER_EVENT_TYPE} {event_type!r} does not match the value's {cls.__name__}")
        if key is not None and bytes(key) != event.entity_key.encode():
            raise NotOurMessage(f"key {bytes(key)!r} is not the event's entity key {event.entity_key!r}")
        offset_value = _int_header(HEADER_OFFSET, found[HEADER_OFFSET])
        if not v1:
            before, after = _request_fields(request)  # type: ignore[arg-type]
            return make(offset_value, *before, event, fingerprints[cls], *after)
        return make(
            offset_value,
            _int_header(HEADER_TIMESTAMP, timestamp),
            _text_header(HEADER_ACTOR_PRINCIPAL, principal),
            _text_header(HEADER_ACTOR_HOST, host),
            _text_header(HEADER_REQUEST_ID, request_id),
            event,
            fingerprints[cls],
            *_attribution(found.get(HEADER_ACTOR_ASSERTED), found.get(HEADER_OPERATOR)),
        )

    return decode


_Request = tuple[tuple[int, str, str, str], tuple[bool, str, str, int, str]]


@functools.lru_cache(maxsize=1024)  # a request's events share it
def _request_fields(raw: bytes) -> _Request:
    """The envelope's fields a ``secmeta.request`` header holds: (timestamp_ms, actor principal, actor host,
    request id) and (asserted, operator user, host, pid, program); NotOurMessage naming what is wrong."""
    shown = raw if len(raw) <= 300 else raw[:300] + b"..."
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise NotOurMessage(f"header {HEADER_REQUEST} is not UTF-8 JSON: {shown!r}") from None
    if not isinstance(data, dict):
        raise NotOurMessage(f"header {HEADER_REQUEST} is not a JSON object: {shown!r}")
    version = data.get("format")
    if version != FORMAT or version.__class__ is not int:
        newer = is_int64(version) and version > FORMAT  # type: ignore[operator]
        raise (UnknownFormat if newer else NotOurMessage)(
            f"header {HEADER_REQUEST} is message format {version!r}: "
            + (f"newer than this secmeta reads (up to {FORMAT}); upgrade it" if newer else f"expected {FORMAT}"))
    if data.keys() != _REQUEST_KEY_SET:
        missing, extra = sorted(_REQUEST_KEY_SET - data.keys()), sorted(data.keys() - _REQUEST_KEY_SET)
        raise NotOurMessage(f"header {HEADER_REQUEST} has the wrong fields (missing {missing}, unknown {extra}): "
                            f"{shown!r}")
    timestamp, principal, host, request_id = (data["timestamp_ms"], data["actor_principal"], data["actor_host"],
                                              data["request_id"])
    asserted, operator = data["actor_asserted"], data["operator"]
    if not (is_int64(timestamp) and _is_text(principal) and _is_text(host) and _is_text(request_id)
            and asserted.__class__ is bool and _is_operator(operator)):
        raise NotOurMessage(f"header {HEADER_REQUEST} holds a field of the wrong type: {shown!r}")
    return (timestamp, principal, host, request_id), (asserted, *operator)


def _is_text(value: object) -> bool:
    """A str that is UTF-8 (JSON's escapes can spell a lone surrogate, which no log holds)."""
    if value.__class__ is not str:
        return False
    try:
        value.encode("utf-8")  # type: ignore[union-attr]
    except UnicodeEncodeError:
        return False
    return True


def _is_operator(value: object) -> bool:
    return (isinstance(value, list) and len(value) == 4 and _is_text(value[0]) and _is_text(value[1])
            and is_int64(value[2]) and _is_text(value[3]))


@functools.lru_cache(maxsize=256)
def _attribution(asserted: bytes | None, operator: bytes | None) -> tuple[bool, str, str, int, str]:
    """Format 1: Envelope.actor_asserted and operator_* from their headers (absent: asserted by an unknown
    operator)."""
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
