"""How one logged event travels as a Kafka message, both ways.

key
    The entity the event changes, UTF-8 (``acl:<id>``, ``scram:<user>:<mech>``,
    ``token:<id>``), so the compacted state topic keeps one value per entity.
value (format 3)
    A frame, then the Avro single-object encoding of the event (``C3 01``, the 8-byte schema fingerprint,
    which names the event type, the body; secrets appear only sealed, as in the log). The frame, integers
    big-endian: ``00 53 4D`` ("\\0SM"), the format version (one byte, 3), the kind (``H`` on the history
    topic, ``S`` on the state topic), the request's length (4 bytes), the extra's length (1 byte), the
    request, the extra, the log offset (8 bytes, signed). The request is what the event shares with the other
    events of its request, as JSON made once per request: ``{"format":3,"timestamp_ms":..,
    "actor_principal":..,"actor_host":..,"request_id":..,"actor_asserted":true,"operator":[user,host,pid,
    program]}`` (``actor_asserted``: ``true`` the actor is a local caller's claim, ``false`` secmeta serve
    authenticated it; ``operator``: the process that wrote the event). The extra is, on the history topic,
    the keyed-hash-chain link of the log batch that holds the event (raw, 32 bytes: an HMAC output that
    reveals no key and no secret), so a reader can tell whether the topic and a log agree at an offset; on
    the state topic, the Kafka offset (8 bytes) in the history topic (partition 0) of the same event, so a
    reader that rebuilt the state can follow the history from there.
headers
    None on a format 3 value. A tombstone (the state topic's ``None`` value after a removal) carries
    ``secmeta.offset`` (the decimal log offset) and ``secmeta.history_offset`` (decimal) as headers.

An event that updates an entity appears on the state topic as the whole entity (``state_form``: a
token's expiry change as its ``DelegationTokenIssued`` with the new expiry, at the change's log offset), so
the latest value per key is always a complete entity.  Key and removal follow the kind declarations
(``secmeta.events.entities``).

Format 3 carries a message's metadata in its value because librdkafka allocates, copies and frees every
header of every message on both sides (about 1.5 us a message for format 2's three headers).  Older
formats are still read: format 2 (the value is the single-object encoding alone; headers
``secmeta.offset``, ``secmeta.request`` with ``"format":2``, and ``secmeta.link`` (hex) on the history
topic or ``secmeta.history_offset`` on the state topic) and format 1 (one header per field,
``secmeta.offset``, ``secmeta.event_type``, ``secmeta.fingerprint`` (hex), ``secmeta.timestamp_ms``,
``secmeta.actor_principal``, ``secmeta.actor_host``, ``secmeta.request_id``, optionally
``secmeta.actor_asserted`` and ``secmeta.operator`` (without them: asserted by an unknown operator), and
the link).  A frame or a ``secmeta.request`` naming a later format is refused (``UnknownFormat``, naming
it) rather than guessed at.

``decode_message`` raises ``NotOurMessage`` (with a ``reason``) for anything
that is not a message written by ``encode_message`` (in any of the formats); ``FormatMarker`` for the format
marker (``format_marker``: the format-2-shaped message a publisher writes on each topic before its first format 3
message, so that a reader from before format 3 stops on it with its UnknownFormat), which a reader skips.
"""

from __future__ import annotations

import functools
import json
import operator
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from secmeta.events.codec import SINGLE_OBJECT_MARKER, EventCodec
from secmeta.events.codegen import setter_constructor
from secmeta.events.entities import closes
from secmeta.events.errors import EventsError, SecmetaError, UnknownSchemaError
from secmeta.events.records import EVENT_TYPES, Envelope, Event, replay_form
from secmeta.events.single_object import SingleObjects
from secmeta.events.types import is_int64

__all__ = [
    "dead_letter_reason",
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
    "KIND_HISTORY",
    "KIND_STATE",
    "MAGIC",
    "NotOurMessage",
    "FORMAT_MARKER_KEY",
    "FormatMarker",
    "UnknownFormat",
    "decode_message",
    "encode_message",
    "encode_tombstone",
    "format_marker",
    "batch_link",
    "event_reader",
    "header_map",
    "history_position",
    "is_format_marker",
    "is_framed",
    "is_removal",
    "linked_decoder",
    "message_decoder",
    "message_encoder",
    "message_link",
    "message_pair_encoder",
    "message_offset",
    "positioned_decoder",
    "row_types",
    "state_value",
]

FORMAT = 3  # the message format encode_message writes (its frame's version, and its request's "format")
MAGIC = b"\x00SM"  # a format 3 value's first bytes (then the version byte)
KIND_HISTORY = b"H"  # a frame on the history topic: its extra is the link
KIND_STATE = b"S"  # a frame on the state topic: its extra is the history offset
# magic, version, kind, request length, extra length; then the request, the extra, the log offset, the event (the
# head, everything before the log offset, is the same for a request's events: made once per run of them)
_FRAME = struct.Struct(">3sBcIB")
_FRAME_SIZE = _FRAME.size
_OFFSET = struct.Struct(">q")
_FRAMED = MAGIC + bytes([FORMAT])  # a format 3 value starts with these
# The frame kinds, the one owner of what a frame may be: each kind's topic, what its extra holds and the lengths that
# extra may have (a history frame's link: none, or a batch's 32 bytes; a state frame's history offset: 8 bytes).
# _frame_of names a refusal from it; _reader's straight path takes the (kind, extra length) pairs it allows (_FRAMES).
_KINDS = {KIND_HISTORY: ("history", "link", (0, 32)), KIND_STATE: ("state", "history offset", (8,))}
_FRAMES = {kind: frozenset((kind, size) for size in sizes) for kind, (_, _, sizes) in _KINDS.items()}
_ANY_FRAME = frozenset().union(*_FRAMES.values())
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
# The format marker: the message a publisher writes on each topic before its first format 3 message, in format 2's
# shape (its value the single-object encoding's header for a fingerprint no schema has, its headers format 2's
# required ones, the request naming format 3), so that a secmeta from before format 3, which reads a format 3 value
# as another writer's (no headers) and skips it, stops on this message instead (UnknownFormat). Under a reserved key
# (no entity key starts with "secmeta."), which compaction keeps on the state topic.
FORMAT_MARKER_KEY = b"secmeta.format"
_MARKER_VALUE = SINGLE_OBJECT_MARKER + b"\x00SM\x00mark" + bytes([FORMAT])
_MARKER_HEADERS = [(HEADER_OFFSET, b"-1"), (HEADER_REQUEST, b'{"format":%d}' % FORMAT)]

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


def dead_letter_reason(topic: str, partition: int, kafka_offset: int, reason: str) -> str:
    """The reason a dead-letter record gives for a refused message: where it lies (``topic[partition]@offset``), then
    why (``NotOurMessage.reason``, whose decode failures name the event type and the exception's class and stable
    text: ``events.error_text``). The same message refused again gives the same text."""
    return f"{topic}[{partition}]@{kafka_offset}: {reason}"


class UnknownFormat(NotOurMessage):
    """A message in a format this secmeta cannot read (a newer message format or an unknown writer schema): it may
    be a newer secmeta's event, so a reader whose answer depends on every message (a bootstrap) must stop."""


class FormatMarker(NotOurMessage):
    """The format marker (``format_marker``): no event, and nothing wrong; a reader skips it."""


def format_marker() -> tuple[bytes, bytes, Headers]:
    """The (key, value, headers) of the format marker a publisher writes on a topic before its first format 3
    message (``FORMAT_MARKER_KEY``)."""
    return FORMAT_MARKER_KEY, _MARKER_VALUE, list(_MARKER_HEADERS)


def is_format_marker(key: bytes | None, value: bytes | None, headers: Sequence | None) -> bool:
    """Whether a message is the format marker, exactly (anything else stays a message to read or refuse)."""
    return key == FORMAT_MARKER_KEY and value == _MARKER_VALUE and list(headers or ()) == _MARKER_HEADERS


def _refuse_marker(key: bytes | None, value: bytes | None, headers: Sequence | None) -> None:
    if value == _MARKER_VALUE and is_format_marker(key, value, headers):
        raise FormatMarker(f"the format marker (key {FORMAT_MARKER_KEY.decode()}): not an event")


def is_framed(value: bytes | None) -> bool:
    """Whether a value is in this format (3: a frame at its start)."""
    return value is not None and value[:4] == _FRAMED


def is_removal(envelope: Envelope) -> bool:
    """Whether the event removes its entity (so the state topic gets a tombstone): its kind says."""
    return closes(envelope.event)


def encode_message(codec: EventCodec, envelope: Envelope) -> tuple[bytes, bytes, Headers]:
    """The (key, value, headers) of one logged event, as the history topic carries it (without a link)."""
    return message_encoder(codec)(envelope)


def message_encoder(codec: EventCodec) -> Callable[..., tuple[bytes, bytes, Headers]]:
    """``encode_message`` bound to one codec, for writers that encode many events:
    ``encode(envelope, body=None, link=b"", history_offset=None)``.

    Given the event's ``body`` as its logged batch holds it (``EventCodec.decode_batch_bodies``), the value is made
    from it rather than encoded again (the same bytes: ``SingleObjects.of_body``).  The frame is a history one
    holding ``link``, or given ``history_offset`` a state one holding it.  The headers are an empty list: format 3
    has none.
    """
    pair = message_pair_encoder(codec)

    def encode(envelope: Envelope, body: bytes | None = None, link: bytes = b"",
               history_offset: int | None = None) -> tuple[bytes, bytes, Headers]:
        key, value, state_head, tail = pair(envelope, body, link)
        if history_offset is not None:
            value = state_value(state_head, history_offset, tail)
        return key, value, []

    return encode


def message_pair_encoder(codec: EventCodec) -> Callable[[Envelope, bytes | None, bytes],
                                                        tuple[bytes, bytes, bytes, bytes]]:
    """For the publisher, which sends each event to both topics: ``encode(envelope, body, link)`` gives the key, the
    history message's value, and the state message's value but for the history offset: its head and its tail (the
    value is ``state_value(head, history_offset, tail)``).

    The heads (everything before the log offset) are made once for a run of envelopes that carry the same request
    values and link (a logged batch's events come by request).

    An envelope may hold its event as a row (``EventCodec.decode_batch_rows``: a type of ``row_types``, named by the
    envelope's fingerprint), given its body: its value is the same bytes, its key its type's ``row_entity_key``.
    """
    objects = SingleObjects(codec)
    encode_value, of_body = objects.encode, objects.of_body
    rows = {fingerprint: (objects.header(cls), cls.row_entity_key)  # type: ignore[attr-defined]
            for fingerprint, cls in row_types(codec).items()}
    pack, offset_bytes = _FRAME.pack, _OFFSET.pack
    # the last envelope's request values, link, history head and state head
    shared: list = [None, None, b"", b""]

    def encode(envelope: Envelope, body: bytes | None, link: bytes) -> tuple[bytes, bytes, bytes, bytes]:
        event = envelope.event
        request = (envelope.timestamp_ms, envelope.actor_principal, envelope.actor_host, envelope.request_id,
                   envelope.actor_asserted, envelope.operator_user, envelope.operator_host, envelope.operator_pid,
                   envelope.operator_program)
        if request != shared[0] or link != shared[1]:
            raw = _request_json(*request)
            shared[:] = (request, link, pack(MAGIC, FORMAT, KIND_HISTORY, len(raw), len(link)) + raw + link,
                         pack(MAGIC, FORMAT, KIND_STATE, len(raw), 8) + raw)
        if event.__class__ is tuple:  # a row, with its body (decode_batch_rows)
            header, key_of = rows[envelope.fingerprint]
            tail = offset_bytes(envelope.offset) + header + body  # type: ignore[operator]
            return key_of(event).encode(), shared[2] + tail, shared[3], tail
        tail = offset_bytes(envelope.offset) + (encode_value(event) if body is None else of_body(event, body))
        return event.entity_key.encode(), shared[2] + tail, shared[3], tail

    return encode


def row_types(codec: EventCodec) -> dict[bytes, type]:
    """The event types ``EventCodec.decode_batch_rows`` leaves as rows in their envelopes (those that declare a
    ``ROW``), by their fingerprint (the envelope's)."""
    return {fingerprint: cls for cls, fingerprint in SingleObjects(codec).fingerprints.items() if hasattr(cls, "ROW")}


def state_value(head: bytes, history_offset: int, tail: bytes) -> bytes:
    """A state message's value from its frame's head (``message_pair_encoder``'s: everything before the extra) and
    its tail (the log offset and the event): the history message's Kafka offset, 8 bytes big-endian, between them."""
    return head + history_offset.to_bytes(8, "big", signed=True) + tail


def _request_json(timestamp_ms: int, principal: str, host: str, request_id: str, asserted: bool,
                  operator_user: str, operator_host: str, operator_pid: int, operator_program: str) -> bytes:
    """The frame's request: what an event shares with its request's other events."""
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


def message_offset(value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | dict[str, bytes] | None) -> int:
    """The log offset a message carries (a format 3 frame's, else ``secmeta.offset``'s, as on a tombstone);
    NotOurMessage if absent or bad."""
    frame = _frame_of(value)
    if frame is not None:
        return frame[1]
    found = headers if isinstance(headers, dict) else header_map(headers)
    raw = found.get(HEADER_OFFSET)
    if raw is None:
        raise NotOurMessage(f"missing header {HEADER_OFFSET}")
    return _int_header(HEADER_OFFSET, raw)


def message_link(value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None) -> bytes | None:
    """The chain link of the log batch a history message's event was logged in (None: the message carries none);
    NotOurMessage if it is not one (a format 1 or 2 ``secmeta.link`` that is not hex)."""
    frame = _frame_of(value)
    if frame is not None:
        return frame[3] if frame[0] == KIND_HISTORY and frame[3] else None
    raw = header_map(headers).get(HEADER_LINK)
    try:
        return None if raw is None else bytes.fromhex(raw.decode("ascii"))
    except ValueError:
        raise NotOurMessage(f"header {HEADER_LINK} is not hex: {raw!r}") from None


def batch_link(value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None) -> bytes | None:
    """``message_link``, for a reader that has read the message as an event: a link it cannot read (a format 1 or 2
    ``secmeta.link`` that is not hex) is an unknown one, None."""
    try:
        return message_link(value, headers)
    except NotOurMessage:
        return None


def history_position(value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None) -> int | None:
    """The Kafka offset in the history topic of a state message's event (a state frame's, else
    ``secmeta.history_offset``'s, as on a tombstone); None if it names none."""
    frame = _frame_of(value)
    if frame is not None:
        return int.from_bytes(frame[3], "big", signed=True) if frame[0] == KIND_STATE else None
    raw = header_map(headers).get(HEADER_HISTORY_OFFSET)
    try:
        return None if raw is None else int(raw.decode("ascii"))
    except ValueError:
        return None


def _frame_of(value: bytes | bytearray | memoryview | None,
              topic: bytes | None = None) -> tuple[bytes, int, bytes, bytes, bytes] | None:
    """A format 3 value's (kind, log offset, request, extra, event); None for a value that is no frame (an older
    format's, a tombstone's); NotOurMessage naming what is wrong with a frame (UnknownFormat: a later format's), or
    that it is not of ``topic``'s kind (None: either)."""
    if value is None or bytes(value[:3]) != MAGIC:
        return None
    value = bytes(value)  # a no-op on bytes
    if len(value) < _FRAME_SIZE:
        raise NotOurMessage(f"truncated frame: {len(value)} bytes, its fixed part alone needs {_FRAME_SIZE}")
    _, version, kind, size, extra = _FRAME.unpack_from(value)
    if version != FORMAT:
        raise (UnknownFormat if version > FORMAT else NotOurMessage)(
            f"frame of message format {version}: "
            + (f"newer than this secmeta reads (up to {FORMAT}); upgrade it" if version > FORMAT else
               f"expected {FORMAT}"))
    if kind not in _KINDS:
        raise NotOurMessage(f"frame of unknown kind {kind!r} (expected {' or '.join(map(repr, _KINDS))})")
    name, holds, sizes = _KINDS[kind]
    if extra not in sizes:
        raise NotOurMessage(f"{name} frame whose {holds} is {extra} bytes, not {' or '.join(map(str, sizes))}")
    if topic is not None and kind != topic:
        raise NotOurMessage(f"{name} frame ({kind.decode()}) on the {_KINDS[topic][0]} topic")
    offset_at = _FRAME_SIZE + size + extra
    if offset_at + 8 > len(value):
        raise NotOurMessage(f"truncated frame: its request, extra and log offset end at byte {offset_at + 8} of "
                            f"{len(value)}")
    (offset,) = _OFFSET.unpack_from(value, offset_at)
    if offset < 0:
        raise NotOurMessage(f"frame holds a negative log offset {offset}")
    return kind, offset, value[_FRAME_SIZE:_FRAME_SIZE + size], value[_FRAME_SIZE + size:offset_at], value[offset_at + 8:]


def decode_message(
    codec: EventCodec,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
    topic: bytes | None = None,
) -> Envelope:
    """The envelope a message carries; NotOurMessage naming what is wrong otherwise. ``topic``: the kind of topic it
    was read from (``KIND_HISTORY`` or ``KIND_STATE``: a frame of the other kind is refused; None: either)."""
    return message_decoder(codec, topic)(key, value, headers)


def message_decoder(codec: EventCodec,
                    topic: bytes | None = None) -> Callable[[bytes | None, bytes | None, Sequence | None], Envelope]:
    """``decode_message`` bound to one codec and topic kind, for readers that decode many messages (``_reader``)."""
    return _reader(SingleObjects(codec), replay=False, topic=topic)


def event_reader(codec: EventCodec, topic: bytes | None = None
                 ) -> Callable[[bytes | None, bytes | None, Sequence | None], tuple[int, object]]:
    """``message_decoder`` for a reader that applies events and keeps no envelope (a follower without a local log):
    the message's log offset and its event as a replay takes it (``replay_form``: the creation of an ACL as its row,
    ``AclCreated.ROW``, which builds none of the binding's objects; ``SecurityDelta.replay_events`` takes it), read
    and refused exactly as ``message_decoder`` reads and refuses the message (``_reader``)."""
    return _reader(SingleObjects(codec), replay=True, topic=topic)


def linked_decoder(codec: EventCodec) -> Callable[[bytes | None, bytes | None, Sequence | None],
                                                  tuple[Envelope, bytes | None]]:
    """``message_decoder`` for the history topic that also gives the chain link of the event's log batch
    (``batch_link``'s), read from the same frame as the envelope (a follower that keeps a local log, which keeps the
    store's batches)."""
    return _reader(SingleObjects(codec), replay=False, topic=KIND_HISTORY, extra=(_frame_link, batch_link))


def positioned_decoder(codec: EventCodec) -> Callable[[bytes | None, bytes | None, Sequence | None],
                                                      tuple[Envelope, int | None]]:
    """``message_decoder`` for the state topic that also gives the event's Kafka offset in the history topic
    (``history_position``'s), read from the same frame as the envelope (a bootstrap from the state topic)."""
    return _reader(SingleObjects(codec), replay=False, topic=KIND_STATE, extra=(_frame_position, history_position))


def _frame_link(extra: bytes) -> bytes | None:
    return extra or None  # a history frame's extra: the link, or none (a kind the topic takes: 0 or 32 bytes)


def _frame_position(extra: bytes) -> int:
    return int.from_bytes(extra, "big", signed=True)  # a state frame's extra: the history offset (8 bytes)


def _reader(objects: SingleObjects, replay: bool, topic: bytes | None,
            extra: tuple[Callable[[bytes], Any], Callable[[Any, Any], Any]] | None = None,
            ) -> Callable[[bytes | None, bytes | None, Sequence | None], Any]:
    """The one reader of messages, on either route: the envelope (``message_decoder``) or, with ``replay``, the log
    offset and the event as a replay takes it (``event_reader``).

    A message as ``encode_message`` writes it (format 3, the value bytes, its frame's kind known and its log offset
    not negative, the event's first ten bytes (marker and fingerprint) naming a compiled decoder of
    ``SingleObjects.straight_decoders`` that reads it whole, the key None or the entity key of what it read) is read
    by this straight path, the request parsed once per distinct value (``_request_fields``); so is one of format 2
    (the value the event alone, the offset header decimal digits). Anything that path does not take whole (format 1,
    another bytes type, a missing or odd header or frame, an older schema, a refusal) is read by the careful path,
    which alone decides refusals and names them; both give the same envelope (tested), and both routes refuse alike
    (tested).

    Given ``extra`` (of_frame, of_message), a reader of ``topic`` gives the envelope and what the message's frame
    extra holds: ``of_frame(extra)`` from the frame the straight path read, ``of_message(value, headers)`` for any
    other message it reads (format 2 or 1, the careful path's), so a frame is parsed once (``linked_decoder``,
    ``positioned_decoder``).
    """
    decoders, careful = objects.straight_decoders(replay), _careful_decoder(objects, topic)
    of_frame, of_message = extra or (None, None)
    frames = _ANY_FRAME if topic is None else _FRAMES[topic]  # the (kind, extra length) the topic takes
    make, fields, unpack, framed, size = _new_envelope, _request_fields, _FRAME.unpack_from, _FRAMED, _FRAME_SIZE
    log_offset = _OFFSET.unpack_from
    # The last frame's head (everything before its log offset) once checked whole: its request's fields, its length
    # and what its extra holds (of_frame's). A request's events come in a run: the same head, compared in one step.
    held: list = [None, None, 0, None]

    def read(key: bytes | None, value: bytes | None, headers: Sequence | None) -> Any:
        try:
            head = held[0]
            framed_value = (head is not None and value.startswith(head)  # type: ignore[union-attr]
                            and value.__class__ is bytes)
            if framed_value:  # the last frame's head: its kind, lengths and request are checked
                offset_at, (before, after) = held[2], held[1]
            elif value[:4] == framed and value.__class__ is bytes:  # type: ignore[index]
                _, _, kind, length, extra = unpack(value)  # type: ignore[arg-type]
                offset_at = size + length + extra
                log_offset(value, offset_at)  # type: ignore[arg-type]  # the head is whole: a log offset follows
                if (kind, extra) not in frames:
                    raise ValueError
                before, after = fields(value[size:size + length], FORMAT)  # type: ignore[index]  # on both routes
                held[:] = (value[:offset_at], (before, after), offset_at,  # type: ignore[index]
                           None if of_frame is None else of_frame(value[size + length:offset_at]))  # type: ignore[index]
                framed_value = True
            if framed_value:
                (offset,) = log_offset(value, offset_at)  # type: ignore[arg-type]
                event = value[offset_at + 8:]  # type: ignore[index]
                compiled, fingerprint, key_of = decoders[event[:10]]
                if offset < 0:
                    raise ValueError
                got, end = compiled(event)
                if end != len(event) or (key is not None and key != key_of(got).encode()):
                    raise ValueError
                if of_frame is not None:
                    return make(offset, *before, got, fingerprint, *after), held[3]
            else:
                found = dict(headers)  # type: ignore[arg-type]
                raw, request = found[HEADER_OFFSET], found[HEADER_REQUEST]
                compiled, fingerprint, key_of = decoders[value[:10]]  # type: ignore[index]
                if (value.__class__ is not bytes or raw.__class__ is not bytes or request.__class__ is not bytes
                        or not raw.isdigit()):
                    raise ValueError
                got, end = compiled(value)
                if end != len(value) or (key is not None and key != key_of(got).encode()):
                    raise ValueError
                before, after = fields(request, 2)  # read and checked on both routes
                offset = int(raw)
            if replay:
                return offset, got
            if of_message is not None:
                return make(offset, *before, got, fingerprint, *after), of_message(value, headers)
            return make(offset, *before, got, fingerprint, *after)
        except Exception:  # noqa: BLE001 - not the plain form: the careful path reads it or names the problem
            envelope = careful(key, value, headers)
            if of_message is not None:
                return envelope, of_message(value, headers)
            return (envelope.offset, replay_form(envelope.event)) if replay else envelope

    return read


def _careful_decoder(objects: SingleObjects,
                     topic: bytes | None = None) -> Callable[[bytes | None, bytes | None, Sequence | None], Envelope]:
    """The decoder that takes either format and any bytes type, and names every refusal (``_reader``'s careful
    path, on both routes); a frame not of ``topic``'s kind (None: either) is refused."""
    decode_value, fingerprints = objects.decode, objects.fingerprints
    make = _new_envelope

    def _event_of(value: bytes) -> Event:
        """The event a value's single-object encoding holds; NotOurMessage (UnknownFormat) naming what is wrong."""
        if len(value) < 10:
            raise NotOurMessage(f"truncated: {len(value)} bytes, the single-object header alone needs 10")
        if value[:2] != SINGLE_OBJECT_MARKER:
            raise NotOurMessage(f"wrong marker {value[:2].hex()}: not Avro single-object encoding (c301)")
        try:
            return decode_value(value)
        except UnknownSchemaError:
            raise UnknownFormat(f"unknown schema fingerprint {value[2:10].hex()}") from None
        except EventsError as exc:
            raise NotOurMessage(f"body does not decode (truncated or corrupt): {exc}") from None

    def decode(key: bytes | None, value: bytes | None, headers: Sequence | None) -> Envelope:
        frame = _frame_of(value, topic)
        if frame is not None:
            _, offset, framed_request, _, framed_event = frame
            event = _event_of(framed_event)
            if key is not None and bytes(key) != event.entity_key.encode():
                raise NotOurMessage(f"key {bytes(key)!r} is not the event's entity key {event.entity_key!r}")
            before, after = _request_fields(framed_request, FORMAT)
            return make(offset, *before, event, fingerprints[event.__class__], *after)
        _refuse_marker(key, value, headers)
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
        event = _event_of(value)
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
            before, after = _request_fields(request, 2)  # type: ignore[arg-type]
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
def _request_fields(raw: bytes, expected: int) -> _Request:
    """The envelope's fields a request holds (format 3's in the frame, format 2's in the ``secmeta.request`` header,
    ``expected`` naming which): (timestamp_ms, actor principal, actor host, request id) and (asserted, operator
    user, host, pid, program); NotOurMessage naming what is wrong (UnknownFormat: a later format than we read)."""
    shown = raw if len(raw) <= 300 else raw[:300] + b"..."
    where = "the frame's request" if expected == FORMAT else f"header {HEADER_REQUEST}"
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise NotOurMessage(f"{where} is not UTF-8 JSON: {shown!r}") from None
    if not isinstance(data, dict):
        raise NotOurMessage(f"{where} is not a JSON object: {shown!r}")
    version = data.get("format")
    if version != expected or version.__class__ is not int:
        newer = is_int64(version) and version > FORMAT  # type: ignore[operator]
        raise (UnknownFormat if newer else NotOurMessage)(
            f"{where} is message format {version!r}: "
            + (f"newer than this secmeta reads (up to {FORMAT}); upgrade it" if newer else f"expected {expected}"))
    if data.keys() != _REQUEST_KEY_SET:
        missing, extra = sorted(_REQUEST_KEY_SET - data.keys()), sorted(data.keys() - _REQUEST_KEY_SET)
        raise NotOurMessage(f"{where} has the wrong fields (missing {missing}, unknown {extra}): "
                            f"{shown!r}")
    timestamp, principal, host, request_id = (data["timestamp_ms"], data["actor_principal"], data["actor_host"],
                                              data["request_id"])
    asserted, operator = data["actor_asserted"], data["operator"]
    if not (is_int64(timestamp) and _is_text(principal) and _is_text(host) and _is_text(request_id)
            and asserted.__class__ is bool and _is_operator(operator)):
        raise NotOurMessage(f"{where} holds a field of the wrong type: {shown!r}")
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
