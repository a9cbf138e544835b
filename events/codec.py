"""Avro encoding of events and envelope batches: ``EventCodec``.

A batch on disk is one Avro value of type ``array<EnvelopeGroup>`` (see
schemas/EnvelopeGroup.avsc): consecutive envelopes that share their commit
time, actor principal, actor host and request id form one group, which stores
those four once and then the events themselves. An envelope's offset, event
type and fingerprint are not stored but implied: the offset is the batch's base
offset plus the event's position in the batch, the event type is its union
branch, and the fingerprint is that event schema's CRC-64-AVRO as this codec
knows it. ``decode_batch`` rebuilds full ``Envelope`` values from them.

A batch's writer schema is identified by an 8-byte CRC-64-AVRO fingerprint;
older writer schemas can be registered and are resolved against the current
(reader) schema by fastavro. Single events use Avro single-object encoding:
``C3 01`` + the event schema's fingerprint + the body.

Batches are written by encoders compiled from the schemas (avro_encoder), and
batches under the codec's own writer schema are read by a decoder compiled
from it (avro_decoder); both are several times faster than fastavro, which
handles single events, older writer schemas, malformed input and diagnostics.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from io import BytesIO
from pathlib import Path
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.validation import ValidationError, validate

from .avro_decoder import DecoderCompiler, EventBranch, Unsupported
from .avro_encoder import EncoderCompiler, write_long
from .avro_types import branch_name
from .codegen import Source
from .error_text import error_text
from .errors import EventSchemaError, MalformedEventError, UnknownSchemaError
from .event_mapping import (
    BINDINGS,
    ENVELOPE_ATTRS,
    Node,
    compile_from_avro,
    event_plan,
    get_path,
    to_avro,
)
from .records import EVENT_TYPES, Envelope, Event, replay_form
from .schemas import (
    ENVELOPE_GROUP,
    NAMESPACE,
    SCHEMA_DIR,
    avro_fingerprint,
    collect_named_types,
    inline,
    read_named_types,
)
from .types import is_int64

__all__ = ["EventCodec", "SINGLE_OBJECT_MARKER"]

SINGLE_OBJECT_MARKER = b"\xc3\x01"


@dataclasses.dataclass(frozen=True, slots=True)
class _EventSchema:
    """One event type as a codec knows it."""

    name: str
    full_name: str
    cls: type
    fingerprint: bytes
    inlined: dict[str, Any]
    parsed: Any
    plan: Node
    decode: Callable[[dict[str, Any]], Any]  # fastavro's dict of the record -> the event

    def to_avro(self, event: Any, named: Mapping[str, Any]) -> dict[str, Any]:
        """The Avro value of an event, field by field (fields Python lacks are left to defaults)."""
        bindings = BINDINGS[self.cls]
        out: dict[str, Any] = {}
        for field in self.inlined["fields"]:
            bound = bindings.get(field["name"])
            if bound is not None:
                path, enum = bound
                out[field["name"]] = to_avro(get_path(event, path), field["type"], named, enum)
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class _Writer:
    """A known writer schema and the reader schema it resolves to (None: the same)."""

    writer: Any
    reader: Any


def _envelope_maker() -> Callable[..., Envelope]:
    src = Source()
    names = [f.name for f in dataclasses.fields(Envelope)]
    src.line(f"def make({', '.join(names)}):", 0)
    src.line(f"return {src.construct(Envelope, names, 4)}", 4)
    return src.function("make")


_new_envelope = _envelope_maker()
# the group fields an Envelope holds after its fingerprint, in its field order
_OPERATOR_ATTRS = tuple(f.name for f in dataclasses.fields(Envelope))[7:]
assert set(_OPERATOR_ATTRS) < set(ENVELOPE_ATTRS)
_NO_VALUE = object()


class EventCodec:
    """Encodes and decodes events, envelopes and envelope batches with one schema directory."""

    def __init__(self, schema_dir: Path | str | None = None) -> None:
        self.schema_dir = Path(schema_dir) if schema_dir is not None else SCHEMA_DIR
        named = read_named_types(self.schema_dir)
        if ENVELOPE_GROUP not in named:
            raise EventSchemaError(f"{self.schema_dir}: no {ENVELOPE_GROUP} schema")
        batch = {"type": "array", "items": inline(ENVELOPE_GROUP, named)}
        self.writer_schema_json: str = json.dumps(batch)
        self.fingerprint: bytes = avro_fingerprint(batch)
        parsed_named: dict[str, Any] = {}
        self._batch = _parse(batch, "batch schema", parsed_named)
        self._named = {name: d for name, (d, _) in collect_named_types(batch, "batch").items()}
        self._writers: dict[bytes, _Writer] = {self.fingerprint: _Writer(self._batch, None)}
        self._writer_texts: dict[str, bytes] = {}  # writer schema JSON as stored -> its fingerprint
        self._by_type: dict[str, _EventSchema] = {}
        self._by_class: dict[type, _EventSchema] = {}
        self._by_full_name: dict[str, _EventSchema] = {}
        self._by_fingerprint: dict[bytes, tuple[_EventSchema, _Writer]] = {}
        branches = _event_branches(batch)
        for branch in branches:
            self._add_event_type(branch, named)
        group = batch["items"]
        self._compile_encoders(group, branches, parsed_named)
        # the batch decoders (decode_batch's, of envelopes; decode_events'), each compiled on its first use (an open
        # from a snapshot decodes no batch in its thread, a CLI command that replays nothing never replays: ~7 ms
        # each) and shared with every _copy: [] until then, then [the decoder or None]
        self._envelope_decoder: list[Callable | None] = []
        self._events_decoder: list[Callable | None] = []
        self._bodies_decoder: list[Callable | None] = []  # decode_batch_bodies'
        self._rows_decoder: list[Callable | None] = []  # decode_batch_rows'
        self._group_branches = (group, branches)

    @classmethod
    @functools.cache
    def default(cls) -> EventCodec:
        """The shared codec for the shipped schemas (parsed and compiled once per process)."""
        return cls()

    @classmethod
    def fresh(cls) -> EventCodec:
        """A codec for the shipped schemas that knows no older writer schema yet, as ``EventCodec()``
        (what a log opens with: it registers its own store's writer schemas, and no other store's),
        copied from one compiled once per process: building one costs ~25 ms of CPU, a copy microseconds."""
        return _pristine()._copy()

    def _copy(self) -> EventCodec:
        """This codec with its own copies of what register_writer_schema adds to (the rest never changes)."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other._writers = dict(self._writers)
        other._writer_texts = dict(self._writer_texts)
        other._by_fingerprint = dict(self._by_fingerprint)
        return other

    def _add_event_type(self, branch: Any, named: Mapping[str, Any]) -> None:
        full_name = branch_name(branch)
        name = full_name.rpartition(".")[2]
        cls = EVENT_TYPES.get(name)
        if cls is None:
            raise EventSchemaError(
                f"the envelope group's event union names {full_name!r}, not an event type"
            )
        standalone = inline(full_name, named)
        plan = event_plan(cls)
        schema = _EventSchema(
            name=name,
            full_name=full_name,
            cls=cls,
            fingerprint=avro_fingerprint(standalone),
            inlined=standalone,
            parsed=_parse(standalone, f"event schema {name}"),
            plan=plan,
            decode=compile_from_avro(plan, standalone, self._named),
        )
        self._by_type[name] = schema
        self._by_class[cls] = schema
        self._by_full_name[full_name] = schema
        self._by_fingerprint[schema.fingerprint] = (schema, _Writer(schema.parsed, None))

    def _compile_encoders(
        self, group: dict[str, Any], branches: list[Any], parsed_named: dict[str, Any]
    ) -> None:
        compiler = EncoderCompiler(self._named, parsed_named)
        names = [f["name"] for f in group["fields"]]
        split = names.index("events")
        self._encode_head = compiler.compile_group_fields(group["fields"][:split], "head")
        self._encode_tail = compiler.compile_group_fields(group["fields"][split + 1 :], "tail")
        self._encoders: dict[type, Callable] = {}
        for index, branch in enumerate(branches):
            schema = self._by_full_name[branch_name(branch)]
            record = self._named[schema.full_name]
            self._encoders[schema.cls] = compiler.compile_event(record, schema.cls, index)

    def _compile_decoder(self, group: dict[str, Any], branches: list[Any], envelope: type | None,
                         bodies: bool = False, rows: bool = False) -> Callable | None:
        events = []
        for branch in branches:
            schema = self._by_full_name[branch_name(branch)]
            record = self._named[schema.full_name]
            events.append(EventBranch(record, schema.plan, schema.fingerprint, getattr(schema.cls, "ROW", None)))
        try:
            return DecoderCompiler(self._named).compile_batch(group, events, envelope, bodies, rows)
        except Unsupported:  # fastavro reads every batch then
            return None

    @property
    def event_types(self) -> tuple[str, ...]:
        """The event type names of this codec's event union."""
        return tuple(self._by_type)

    def event_fingerprint(self, event_type: str) -> bytes:
        """The 8-byte fingerprint of an event type's current schema."""
        return self._event_schema(event_type).fingerprint

    def _event_schema(self, event_type: str) -> _EventSchema:
        try:
            return self._by_type[event_type]
        except KeyError:
            known = ", ".join(self._by_type)
            raise EventSchemaError(f"unknown event type {event_type!r} (known: {known})") from None

    def register_writer_schema(self, schema_json: str) -> bytes:
        """Accept an older batch writer schema (a ``writer_schema_json``); return its fingerprint."""
        known = self._writer_texts.get(schema_json)
        if known is not None:  # every open of a log registers its schemas again: skip the fingerprinting
            return known
        try:
            batch = json.loads(schema_json)
        except ValueError as exc:
            raise EventSchemaError(f"writer schema is not valid JSON: {exc}") from None
        fp = avro_fingerprint(batch)
        if fp in self._writers:
            self._writer_texts[schema_json] = fp
            return fp
        parsed = _parse(batch, f"writer schema {fp.hex()}")
        named = collect_named_types(batch, f"writer schema {fp.hex()}")
        for branch in _event_branches(batch, _WRITER_REQUIRED_ATTRS):
            full_name = branch_name(branch)
            current = self._by_full_name.get(full_name)
            if current is None:
                continue
            standalone = inline(full_name, named)
            event_fp = avro_fingerprint(standalone)
            if event_fp not in self._by_fingerprint:
                writer = _parse(standalone, f"event schema {full_name} {event_fp.hex()}")
                self._by_fingerprint[event_fp] = (current, _Writer(writer, current.parsed))
        self._writers[fp] = _Writer(parsed, self._batch)
        self._writer_texts[schema_json] = fp
        return fp

    # -- batches --

    def encode_batch(self, base_offset: int, envelopes: Sequence[Envelope]) -> bytes:
        """One Avro ``array<EnvelopeGroup>`` of the envelopes, whose offsets are implied.

        The envelopes' own ``offset`` and ``fingerprint`` are ignored: they read
        back as base_offset, base_offset+1, ... and the event schemas' fingerprints.
        """
        encoders = self._encoders
        head = self._encode_head
        tail = self._encode_tail
        parts: list[bytes] = [b""]
        ap = parts.append
        groups = count = 0
        at = -1  # where the current group's event count goes
        ts = principal = host = request = asserted = pid = user = ohost = program = first = _NO_VALUE
        try:
            if not is_int64(base_offset):
                raise TypeError("base offset")
            for env in envelopes:
                t = env.timestamp_ms
                if (
                    (t is not ts and (t != ts or t.__class__ is not int))
                    or env.actor_principal != principal
                    or env.actor_host != host
                    or env.request_id != request
                    or env.actor_asserted is not asserted
                    or env.operator_pid != pid
                    or env.operator_user != user
                    or env.operator_host != ohost
                    or env.operator_program != program
                ):
                    if groups:
                        parts[at] = write_long(count)
                        ap(b"\x00")  # the end of the group's events
                        if tail is not None:
                            tail(first, ap)
                    if head is not None:
                        head(env, ap)
                    at = len(parts)
                    ap(b"")
                    groups += 1
                    count = 0
                    first = env
                    ts, principal, host, request = (
                        t,
                        env.actor_principal,
                        env.actor_host,
                        env.request_id,
                    )
                    asserted, pid, user = env.actor_asserted, env.operator_pid, env.operator_user
                    ohost, program = env.operator_host, env.operator_program
                event = env.event
                encoders[event.__class__](event, ap)
                count += 1
            if groups:
                parts[at] = write_long(count)
                ap(b"\x00")
                if tail is not None:
                    tail(first, ap)
                parts[0] = write_long(groups)
        except Exception as exc:
            raise self._explain(base_offset, envelopes, exc) from None
        ap(b"\x00")
        return b"".join(parts)

    def decode_batch(
        self, payload: bytes, writer_fingerprint: bytes, base_offset: int = 0
    ) -> list[Envelope]:
        """Decode a batch written under ``writer_fingerprint`` whose first offset is ``base_offset``.

        Every envelope comes back whole: its group's time, actor and request id,
        offset ``base_offset + position``, and the fingerprint of the event's
        current schema (events of older writer schemas are resolved to it).
        """
        decode = self._compiled_decode
        if decode is not None and writer_fingerprint == self.fingerprint:
            buf = payload if payload.__class__ is bytes else bytes(payload)
            try:
                envelopes, end = decode(buf, base_offset)
            except Exception:  # noqa: BLE001 - malformed: fastavro below names the problem
                pass
            else:
                if end == len(buf):
                    return envelopes
        return self._decode_resolved(payload, writer_fingerprint, base_offset)

    def decode_batch_bodies(
        self, payload: bytes, writer_fingerprint: bytes, base_offset: int = 0
    ) -> tuple[list[Envelope], list[bytes] | None]:
        """``decode_batch`` and each event's record bytes as the batch holds them, which are the body of its
        single-object encoding under its current schema (``SingleObjects.of_body``), so a writer of those
        (the Kafka publisher) need not encode what it just decoded; None for the bodies when the batch was
        written under another schema than the current one, or is read through fastavro (its events then
        encode afresh)."""
        decode = self._compiled_once(self._bodies_decoder, Envelope, bodies=True)
        if decode is not None and writer_fingerprint == self.fingerprint:
            buf = payload if payload.__class__ is bytes else bytes(payload)
            try:
                (envelopes, bodies), end = decode(buf, base_offset)
            except Exception:  # noqa: BLE001 - malformed: decode_batch names the problem
                pass
            else:
                if end == len(buf):
                    return envelopes, bodies
        return self.decode_batch(payload, writer_fingerprint, base_offset), None

    def decode_batch_rows(
        self, payload: bytes, writer_fingerprint: bytes, base_offset: int = 0
    ) -> tuple[list[Envelope], list[bytes]] | None:
        """``decode_batch_bodies`` with the event of a type that declares a row (``AclCreated.ROW``) left as that row
        in its envelope (``Envelope.event`` the row tuple; ``Envelope.fingerprint`` names its type), for a writer of
        the bodies that needs no such event built (the Kafka publisher); None where ``decode_batch_bodies`` would give
        no bodies (another schema than the current one, or a batch the compiled decoder does not read whole): the
        caller reads that batch with ``decode_batch_bodies``."""
        decode = self._compiled_once(self._rows_decoder, Envelope, bodies=True, rows=True)
        if decode is not None and writer_fingerprint == self.fingerprint:
            buf = payload if payload.__class__ is bytes else bytes(payload)
            try:
                read, end = decode(buf, base_offset)
            except Exception:  # noqa: BLE001 - malformed: decode_batch names the problem
                return None
            if end == len(buf):
                return read  # type: ignore[no-any-return]
        return None

    @property
    def _compiled_decode(self) -> Callable | None:
        """The envelopes' decoder (compiled on first use)."""
        return self._compiled_once(self._envelope_decoder, Envelope)

    @property
    def _compiled_events(self) -> Callable | None:
        """The events-only decoder (compiled on first use)."""
        return self._compiled_once(self._events_decoder, None)

    def _compiled_once(self, held: list[Callable | None], envelope: type | None,
                       bodies: bool = False, rows: bool = False) -> Callable | None:
        """The batch decoder ``held`` keeps, compiled into it on first use."""
        if not held:
            held.append(self._compile_decoder(*self._group_branches, envelope, bodies, rows))
        return held[0]

    def decode_events(self, payload: bytes, writer_fingerprint: bytes) -> list[Event | tuple]:
        """A batch's events alone, in order, as replay reads them: an event whose class declares a ``ROW``
        (``AclCreated``) as its ``row()``, the others as ``decode_batch`` gives them (its envelopes unbuilt)."""
        decode = self._compiled_events
        if decode is not None and writer_fingerprint == self.fingerprint:
            buf = payload if payload.__class__ is bytes else bytes(payload)
            try:
                events, end = decode(buf, 0)
            except Exception:  # noqa: BLE001 - malformed: fastavro below names the problem
                pass
            else:
                if end == len(buf):
                    return events
        return [replay_form(envelope.event) for envelope in self._decode_resolved(payload, writer_fingerprint, 0)]

    def _decode_resolved(
        self, payload: bytes, writer_fingerprint: bytes, base_offset: int
    ) -> list[Envelope]:
        """decode_batch through fastavro: any registered writer schema, and all errors."""
        by_full_name = self._by_full_name
        new = _new_envelope
        out = []
        append = out.append
        offset = base_offset
        for group in self.decode_batch_raw(payload, writer_fingerprint):
            ts = group["timestamp_ms"]
            principal = group["actor_principal"]
            host = group["actor_host"]
            request = group["request_id"]
            operator = [group[name] for name in _OPERATOR_ATTRS]
            for full_name, body in group["events"]:
                schema = by_full_name[full_name]
                event = schema.decode(body)
                append(new(offset, ts, principal, host, request, event, schema.fingerprint, *operator))
                offset += 1
        return out

    def decode_batch_raw(self, payload: bytes, writer_fingerprint: bytes) -> list[dict[str, Any]]:
        """A batch as plain Avro values, resolved to the current schema: its EnvelopeGroups.

        Each group is a dict of ``timestamp_ms``, ``actor_principal``,
        ``actor_host``, ``request_id`` and ``events``, a list of
        ``(record full name, dict)``; offsets and fingerprints are not in it.
        """
        writer = self._writers.get(bytes(writer_fingerprint))
        if writer is None:
            raise UnknownSchemaError(writer_fingerprint)
        data = BytesIO(payload)
        try:
            values = schemaless_reader(data, writer.writer, writer.reader, return_record_name=True)
        except Exception as exc:
            raise MalformedEventError(f"batch payload does not decode: {error_text(exc)}") from None
        if data.tell() != len(payload):
            raise MalformedEventError(
                f"batch payload has {len(payload) - data.tell()} trailing bytes"
            )
        return values

    # -- single events --

    def encode_event(self, event: Event) -> bytes:
        """The Avro body of one event under its current schema."""
        schema = self._by_class.get(type(event))
        if schema is None:
            raise EventSchemaError(f"{type(event).__name__} is not an event type")
        out = BytesIO()
        try:
            schemaless_writer(out, schema.parsed, schema.to_avro(event, self._named))
        except Exception as exc:
            problem = self._find_problem(schema, event)
            raise EventSchemaError(problem or f"{schema.name} does not encode: {exc!r}") from None
        return out.getvalue()

    def decode_event(self, event_type_or_fingerprint: str | bytes, body: bytes) -> Event:
        """Decode one event body given its type name (current schema) or its schema fingerprint."""
        if isinstance(event_type_or_fingerprint, str):
            schema = self._event_schema(event_type_or_fingerprint)
            writer = _Writer(schema.parsed, None)
        else:
            found = self._by_fingerprint.get(bytes(event_type_or_fingerprint))
            if found is None:
                raise UnknownSchemaError(event_type_or_fingerprint, "event schema")
            schema, writer = found
        data = BytesIO(body)
        try:
            value = schemaless_reader(data, writer.writer, writer.reader)
        except Exception as exc:
            raise MalformedEventError(f"{schema.name} body does not decode: {error_text(exc)}") from None
        if data.tell() != len(body):
            raise MalformedEventError(
                f"{schema.name} body has {len(body) - data.tell()} trailing bytes"
            )
        return schema.decode(value)

    def to_single_object(self, event: Event) -> bytes:
        """Avro single-object encoding: C3 01, the 8-byte schema fingerprint, the body."""
        body = self.encode_event(event)
        return SINGLE_OBJECT_MARKER + self._by_class[type(event)].fingerprint + body

    def from_single_object(self, data: bytes) -> Event:
        """Decode Avro single-object encoded bytes into an event."""
        data = bytes(data)
        if len(data) < 10:
            raise MalformedEventError(
                f"single-object encoding needs a 10-byte header, got {len(data)} bytes"
            )
        if data[:2] != SINGLE_OBJECT_MARKER:
            raise MalformedEventError(
                f"not Avro single-object encoding: marker {data[:2].hex()}, expected c301"
            )
        return self.decode_event(data[2:10], data[10:])

    # -- diagnostics (failure path only) --

    def _explain(
        self, base_offset: Any, envelopes: Sequence[Any], exc: Exception
    ) -> EventSchemaError:
        """Name the first envelope, field and value that do not fit the schema."""
        if not is_int64(base_offset):
            return EventSchemaError(f"base offset {base_offset!r} is not an Avro long")
        for index, env in enumerate(envelopes):
            where = f"envelope {index} (offset {base_offset + index})"
            schema = self._by_class.get(type(getattr(env, "event", None)))
            if schema is None:
                what = type(getattr(env, "event", env)).__name__
                return EventSchemaError(f"{where}: {what} is not an event type")
            for name in ENVELOPE_ATTRS:
                value = getattr(env, name, None)
                ok = _ENVELOPE_ATTR_CHECKS.get(name, _is_str)(value)
                if not ok:
                    return EventSchemaError(
                        f"{where}: {schema.name} envelope field {name} has invalid value {value!r}"
                    )
            problem = self._find_problem(schema, env.event)
            if problem:
                return EventSchemaError(f"{where}: {problem}")
            try:
                for write in (self._encode_head, self._encode_tail):
                    if write is not None:
                        write(env, [].append)
                self._encoders[schema.cls](env.event, [].append)
            except Exception as error:
                return EventSchemaError(f"{where}: {schema.name} does not encode: {error!r}")
        return EventSchemaError(f"batch does not encode: {exc!r}")

    def _find_problem(self, schema: _EventSchema, event: Any) -> str | None:
        """The first field of ``event`` that does not fit its Avro schema, or None."""
        bindings = BINDINGS[schema.cls]
        raw: dict[str, Any] = {}
        for field in schema.inlined["fields"]:
            bound = bindings.get(field["name"])
            if bound is not None:
                try:
                    raw[field["name"]] = get_path(event, bound[0])
                except AttributeError:
                    return f"{schema.name} has no value for field {field['name']}"
        try:
            validate(schema.to_avro(event, self._named), schema.parsed, raise_errors=True)
        except ValidationError as err:
            error = err.errors[0]
            path = str(error.field)
            prefix = schema.full_name + "."
            if path.startswith(prefix) and path[len(prefix) :] in raw:
                name, value = path[len(prefix) :], raw[path[len(prefix) :]]
            else:
                name, value = path.rpartition(NAMESPACE + ".")[2], error.datum
            return f"{schema.name} field {name} has invalid value {value!r}"
        return None


@functools.cache
def _pristine() -> EventCodec:
    """The template EventCodec.fresh copies: never handed out, so no writer schema is ever registered on it."""
    return EventCodec()


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


_ENVELOPE_ATTR_CHECKS: dict[str, Callable[[Any], bool]] = {
    "timestamp_ms": is_int64,
    "operator_pid": is_int64,
    "actor_asserted": lambda value: isinstance(value, bool),
}


def _parse(schema: Any, what: str, named: dict[str, Any] | None = None) -> Any:
    try:
        return parse_schema(schema, named_schemas=named)
    except Exception as exc:  # fastavro raises several types for bad schemas
        raise EventSchemaError(f"{what}: invalid Avro schema: {exc}") from None


# the group fields every writer schema has; the later ones (the operator's) read as their defaults when absent
_WRITER_REQUIRED_ATTRS = ENVELOPE_ATTRS[:4]


def _event_branches(batch: Any, required: Sequence[str] = ENVELOPE_ATTRS) -> list[Any]:
    """The event records of a batch schema's event union (its groups' events items); the group must
    have the ``required`` fields."""
    try:
        fields = {f["name"]: f["type"] for f in batch["items"]["fields"]}
        union = fields["events"]["items"]
        missing = [name for name in required if name not in fields]
    except (KeyError, TypeError):
        raise EventSchemaError(
            "not a batch schema: expected array<EnvelopeGroup> with an 'events' array"
        ) from None
    if missing:
        raise EventSchemaError(f"the envelope group lacks the fields {', '.join(missing)}")
    if not isinstance(union, list):
        raise EventSchemaError("the envelope group's 'events' items are not a union")
    return union
