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
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from typing import Any

from fastavro import parse_schema

from .avro_decoder import DecoderCompiler, Unsupported
from .avro_encoder import EncoderCompiler
from .avro_types import branch_name
from .codec import SINGLE_OBJECT_MARKER, EventCodec
from .event_mapping import event_plan
from .records import EVENT_TYPES, Event
from .schemas import collect_named_types

__all__ = ["SingleObjects"]

_HEADER = len(SINGLE_OBJECT_MARKER) + 8
_Encoders = dict[type, tuple[bytes, Callable]]
_Decoders = dict[bytes, Callable[[bytes], tuple[Event, int]]]
_Compiled = tuple[_Encoders, _Decoders, dict[type, bytes], _Decoders]
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
        self._encoders, self._decoders, self.fingerprints, self._row_decoders = compiled

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

    def decode(self, value: bytes) -> Event:
        """``codec.from_single_object(value)``, compiled for the codec's current schemas."""
        decode = self._decoders.get(value[2:_HEADER]) if value.__class__ is bytes else None
        if decode is not None and value[:2] == SINGLE_OBJECT_MARKER:
            try:
                event, end = decode(value)
            except Exception:  # noqa: BLE001 - malformed: the codec below names the problem
                pass
            else:
                if end == len(value):
                    return event
        return self.codec.from_single_object(value)

    def compiled_decoder(self, fingerprint: bytes) -> Callable[[bytes], tuple[Event, int]] | None:
        """The compiled decoder ``decode`` uses for values under ``fingerprint`` (None: there is none).

        It reads a whole value, header included, and returns ``(event, end position)``; it checks nothing
        else: a caller that uses it for speed checks the marker, that the value's fingerprint is this one and
        that ``end`` is the value's length, and hands anything else (or an exception) to ``decode``.
        """
        return self._decoders.get(fingerprint)

    def compiled_row_decoder(self, fingerprint: bytes) -> Callable[[bytes], tuple[tuple, int]] | None:
        """As ``compiled_decoder``, for an event type that declares a row (``AclCreated.ROW``): ``(row, end
        position)``, the row the codec's replay decoder reads (None: the type declares none, or has no decoder)."""
        return self._row_decoders.get(fingerprint)  # type: ignore[return-value]


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
    row_decoders: _Decoders = {}
    fingerprints: dict[type, bytes] = {}
    for branch in fields["events"]["items"]:
        full_name = branch_name(branch)
        cls = EVENT_TYPES[full_name.rpartition(".")[2]]
        fingerprint = codec.event_fingerprint(cls.__name__)
        record = named[full_name]
        fingerprints[cls] = fingerprint
        # Branch 0: the body follows one constant byte (its union index), dropped in encode.
        encoders[cls] = (SINGLE_OBJECT_MARKER + fingerprint, encoder.compile_event(record, cls, 0))
        try:
            decoders[fingerprint] = _compile_decoder(named, record, cls)
            if hasattr(cls, "ROW"):
                row_decoders[fingerprint] = _compile_decoder(named, record, cls, row=True)
        except Unsupported:  # fastavro (the codec) reads this type then
            pass
    return encoders, decoders, fingerprints, row_decoders
