"""Avro single-object encoding of many events: encoders and decoders compiled per event type.

``EventCodec.to_single_object`` and ``from_single_object`` go through fastavro
one event at a time, building a dict per event (4-7 us an ACL event each way),
which bounds a Kafka mirror that sends every event as one message.
``SingleObjects`` compiles, from the same codec's current schemas, the
straight-line encoders and decoders the codec uses for batches (avro_encoder,
avro_decoder) for lone event records: ``C3 01``, the event schema's 8-byte
fingerprint, the body; the bytes are exactly the codec's (tested), at about
1 us an ACL event to encode and 1.5 us to decode.

The compiled decoder is a fast path only: a value under another fingerprint
(an older writer schema the codec registered), or one it cannot read whole, is
handed to ``EventCodec.from_single_object``, which resolves it or raises the
error that names the problem.

The compiled decoders are also handed out, in two tables by a value's first ten bytes
(``straight_decoders``): one reads events, the other reads each event as a replay takes it (an
ACL's creation as its row); a reader that checks messages for speed (the Kafka wire's straight
path) keeps no table of its own.
"""

from __future__ import annotations

import json
import operator
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from fastavro import parse_schema

from .avro_decoder import DecoderCompiler, Unsupported
from .avro_encoder import EncoderCompiler
from .avro_types import branch_name
from .codec import SINGLE_OBJECT_MARKER, EventCodec
from .event_mapping import event_plan
from .records import EVENT_TYPES, Event
from .schemas import collect_named_types

__all__ = ["SingleObjects", "Straight"]

_HEADER = len(SINGLE_OBJECT_MARKER) + 8
_Encoders = dict[type, tuple[bytes, Callable]]
#: A compiled decoder as ``straight_decoders`` gives it: ``(decode, fingerprint, key_of)``; ``decode(value)`` reads a
#: whole value, header included, as ``(what it read, end position)``; ``key_of(what it read)`` is its entity key.
Straight = tuple[Callable[[bytes], tuple[Any, int]], bytes, Callable[[Any], str]]
_Decoders = dict[bytes, Straight]
_Compiled = tuple[_Encoders, _Decoders, dict[type, bytes], _Decoders]
_entity_key = operator.attrgetter("entity_key")  # an event's key_of: its own entity_key
#: Each codec's compiled code, built once; it holds no reference to its codec, so a codec nothing else
#: holds is collected with its entry.
_BY_CODEC: weakref.WeakKeyDictionary[EventCodec, _Compiled] = weakref.WeakKeyDictionary()


class SingleObjects:
    """Compiled single-object encoding of a codec's events (compiled once per codec, however many are made)."""

    def __init__(self, codec: EventCodec) -> None:
        self.codec = codec
        compiled = _BY_CODEC.get(codec)
        if compiled is None:
            compiled = _BY_CODEC[codec] = _compile(codec)
        self._encoders, self._decoders, self.fingerprints, self._replay_decoders = compiled

    def encode(self, event: Event) -> bytes:
        """``codec.to_single_object(event)``: C3 01, the schema fingerprint, the body."""
        found = self._encoders.get(event.__class__)
        if found is None:
            return self.codec.to_single_object(event)  # names what is wrong
        header, write = found
        parts: list[bytes] = []
        try:
            write(event, parts.append)
        except Exception:  # noqa: BLE001 - a field that does not fit: the codec names it
            return self.codec.to_single_object(event)
        return header + b"".join(parts)[1:]

    def header(self, cls: type) -> bytes:
        """The single-object header of ``cls``'s events: C3 01 and the schema fingerprint (KeyError: not the codec's)."""
        return self._encoders[cls][0]

    def of_body(self, event: Event, body: bytes) -> bytes:
        """The single-object encoding of ``event`` given its body as its current schema writes it (a batch's
        record bytes: ``EventCodec.decode_batch_bodies``): ``encode(event)`` without encoding it again."""
        return self._encoders[event.__class__][0] + body

    def decode(self, value: bytes) -> Event:
        """``codec.from_single_object(value)``, compiled for the codec's current schemas."""
        found = self._decoders.get(value[:_HEADER]) if value.__class__ is bytes else None
        if found is not None:
            try:
                event, end = found[0](value)
            except Exception:  # noqa: BLE001 - malformed: the codec below names the problem
                pass
            else:
                if end == len(value):
                    return event
        return self.codec.from_single_object(value)

    def straight_decoders(self, replay: bool = False) -> Mapping[bytes, Straight]:
        """The compiled decoders ``decode`` uses, by a value's first ten bytes (marker and fingerprint):
        ``(decode, fingerprint, key_of)`` (``Straight``) for each event type of the codec's current schemas that has
        one. With ``replay``, each reads its type as a replay takes it (``records.replay_form``: an ``AclCreated`` as
        its row, ``AclCreated.ROW``, keyed by ``AclCreated.row_entity_key``; any other type as its event).

        A decoder checks nothing past what it reads: a caller that uses one for speed checks that ``end`` is the
        value's length (and whatever else it needs) and hands anything else (or an exception) to ``decode``, or to
        whatever names the problem. The tables are the codec's, shared: do not change them.
        """
        return self._replay_decoders if replay else self._decoders


def _compile_decoder(named: dict[str, Any], record: dict[str, Any], cls: type, row: bool = False) -> Callable:
    """``decode(value) -> (event, end position)`` reading a body after the single-object header (with ``row``:
    ``(the event's row, end position)``)."""
    compiler = DecoderCompiler(named)
    src = compiler.src
    src.line("def decode(buf):", 0)
    src.line(f"p = {_HEADER}", 4)
    src.line("end = len(buf)", 4)
    if row:
        compiler.read_row(record, event_plan(cls), cls.ROW, "ev", 4)  # type: ignore[attr-defined]
    else:
        compiler.read_record(record, event_plan(cls), "ev", 4)
    src.line("return ev, p", 4)
    return src.function("decode")


def _compile(codec: EventCodec) -> _Compiled:
    """Encoders by event type, decoders by fingerprint and fingerprints by event type, of the codec's schemas."""
    batch = json.loads(codec.writer_schema_json)
    named = {name: d for name, (d, _) in collect_named_types(batch, "batch").items()}
    parsed_named: dict[str, Any] = {}
    parse_schema(batch, named_schemas=parsed_named)
    encoder = EncoderCompiler(named, parsed_named)
    fields = {f["name"]: f["type"] for f in batch["items"]["fields"]}
    encoders: _Encoders = {}
    decoders: _Decoders = {}
    replay_decoders: _Decoders = {}
    fingerprints: dict[type, bytes] = {}
    for branch in fields["events"]["items"]:
        full_name = branch_name(branch)
        cls = EVENT_TYPES[full_name.rpartition(".")[2]]
        fingerprint = codec.event_fingerprint(cls.__name__)
        header = SINGLE_OBJECT_MARKER + fingerprint
        record = named[full_name]
        fingerprints[cls] = fingerprint
        # Branch 0: the body follows one constant byte (its union index), dropped in encode.
        encoders[cls] = (header, encoder.compile_event(record, cls, 0))
        try:
            decoders[header] = (_compile_decoder(named, record, cls), fingerprint, _entity_key)
            replay_decoders[header] = ((_compile_decoder(named, record, cls, row=True), fingerprint,
                                        cls.row_entity_key)  # type: ignore[attr-defined]
                                       if hasattr(cls, "ROW") else decoders[header])
        except Unsupported:  # fastavro (the codec) reads this type then
            pass
    return encoders, decoders, fingerprints, replay_decoders
