"""Avro encoding of events and envelope batches.

A batch on disk is one Avro value of type ``array<Envelope>``. Its writer
schema is identified by an 8-byte CRC-64-AVRO fingerprint; older writer
schemas can be registered and are resolved against the current (reader)
schema by fastavro. Single events use Avro single-object encoding:
``C3 01`` + the event schema's fingerprint + the body.

Encoding a batch is the log's hot path and fastavro's cost per field (not
per call) bounds it (~170k envelopes/s), so batches are written by straight-line
encoders compiled from the schemas, one per event type (``_EncoderCompiler``,
~2.5x faster); they write exactly fastavro's bytes (tested). Single events,
error diagnostics and all decoding go through fastavro.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from io import BytesIO
from pathlib import Path
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.validation import ValidationError, validate

from .errors import EventSchemaError, MalformedEventError, UnknownSchemaError
from .keyring import SealedSecret
from .records import (
    EVENT_TYPES,
    AclCreated,
    AclDeleted,
    DelegationTokenExpired,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    DelegationTokenRenewed,
    Envelope,
    Event,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
    TokenRemovalReason,
)
from .schemas import (
    ENVELOPE,
    NAMESPACE,
    PRIMITIVES,
    SCHEMA_DIR,
    avro_fingerprint,
    collect_named_types,
    inline,
    read_named_types,
)
from .types import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    ScramMechanism,
)

__all__ = ["EventCodec", "SINGLE_OBJECT_MARKER"]

SINGLE_OBJECT_MARKER = b"\xc3\x01"

# -- how each Avro event field is read off the Python record --------------------
# avro field name -> (attribute path on the event, Python enum of an Avro enum field)

_ACL_FIELDS: dict[str, tuple[str, type[Enum] | None]] = {
    "acl_id": ("acl_id", None),
    "resource_type": ("binding.pattern.resource_type", ResourceType),
    "resource_name": ("binding.pattern.name", None),
    "pattern_type": ("binding.pattern.pattern_type", PatternType),
    "principal": ("binding.entry.principal", None),
    "host": ("binding.entry.host", None),
    "operation": ("binding.entry.operation", AclOperation),
    "permission_type": ("binding.entry.permission_type", AclPermissionType),
}


def _same(*names: str) -> dict[str, tuple[str, None]]:
    return {name: (name, None) for name in names}


_BINDINGS: dict[type, dict[str, tuple[str, type[Enum] | None]]] = {
    ScramCredentialUpserted: {
        **_same("user"),
        "mechanism": ("mechanism", ScramMechanism),
        **_same("iterations", "secret"),
    },
    ScramCredentialDeleted: {**_same("user"), "mechanism": ("mechanism", ScramMechanism)},
    AclCreated: _ACL_FIELDS,
    AclDeleted: _ACL_FIELDS,
    DelegationTokenIssued: _same(
        "token_id",
        "owner",
        "requester",
        "renewers",
        "issue_timestamp_ms",
        "expiry_timestamp_ms",
        "max_timestamp_ms",
    ),
    DelegationTokenRenewed: _same("token_id", "renew_period_ms", "expiry_timestamp_ms"),
    DelegationTokenExpired: _same("token_id", "expiry_period_ms", "expiry_timestamp_ms"),
    DelegationTokenRemoved: {**_same("token_id"), "reason": ("reason", TokenRemovalReason)},
}

# Envelope fields taken from the Envelope's attributes; event_type, fingerprint and
# event follow from the event's class, offset from the batch position.
_ENVELOPE_ATTRS = ("timestamp_ms", "actor_principal", "actor_host", "request_id")


def _get_path(obj: Any, path: str) -> Any:
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj


# -- decoding: Avro values -> records ----------------------------------------------


def _constructor(cls: type) -> Callable[..., Any]:
    """A positional constructor for a frozen slots dataclass that skips the frozen __setattr__.

    The generated __init__ of a frozen dataclass stores each field through
    object.__setattr__; storing through the slot descriptors does the same at a
    third of the cost. Classes with __post_init__ or another layout get ``cls``.
    """
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
        return cls
    names = tuple(f.name for f in dataclasses.fields(cls))
    if getattr(cls, "__slots__", None) != names:
        return cls
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    body = []
    for i, name in enumerate(names):
        env[f"_s{i}"] = getattr(cls, name).__set__
        body.append(f"    _s{i}(o, {name})\n")
    source = f"def make({', '.join(names)}):\n    o = _new(_cls)\n{''.join(body)}    return o\n"
    exec(source, env)  # noqa: S102 - generated from dataclass field names only
    return env["make"]


class _SymbolMap(dict):
    """Avro enum symbol -> Python enum member; symbols Python lacks read as ``fallback``."""

    def __init__(self, enum: type[Enum], fallback: Enum) -> None:
        super().__init__((m.name, m) for m in enum)
        self.fallback = fallback

    def __missing__(self, key: str) -> Enum:
        return self.fallback


_MECH = _SymbolMap(ScramMechanism, ScramMechanism.UNKNOWN)
_RTYPE = _SymbolMap(ResourceType, ResourceType.UNKNOWN)
_PTYPE = _SymbolMap(PatternType, PatternType.UNKNOWN)
_OP = _SymbolMap(AclOperation, AclOperation.UNKNOWN)
_PERM = _SymbolMap(AclPermissionType, AclPermissionType.UNKNOWN)
_REASON = _SymbolMap(TokenRemovalReason, TokenRemovalReason.EXPIRED_BY_SWEEP)

_new_envelope = _constructor(Envelope)
_new_binding = _constructor(AclBinding)
_new_pattern = _constructor(ResourcePattern)
_new_entry = _constructor(AccessControlEntry)
_new_sealed = _constructor(SealedSecret)


def _acl_decoder(cls: type) -> Callable[[dict[str, Any]], Any]:
    new = _constructor(cls)

    def decode(d: dict[str, Any]) -> Any:
        return new(
            d["acl_id"],
            _new_binding(
                _new_pattern(
                    _RTYPE[d["resource_type"]], d["resource_name"], _PTYPE[d["pattern_type"]]
                ),
                _new_entry(
                    d["principal"], d["host"], _OP[d["operation"]], _PERM[d["permission_type"]]
                ),
            ),
        )

    return decode


_NEW = {cls: _constructor(cls) for cls in EVENT_TYPES.values()}


def _scram_upserted(d: dict[str, Any]) -> ScramCredentialUpserted:
    s = d["secret"]
    sealed = _new_sealed(s["key_id"], s["nonce"], s["ciphertext"])
    return _NEW[ScramCredentialUpserted](d["user"], _MECH[d["mechanism"]], d["iterations"], sealed)


_DECODERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "ScramCredentialUpserted": _scram_upserted,
    "ScramCredentialDeleted": lambda d: _NEW[ScramCredentialDeleted](
        d["user"], _MECH[d["mechanism"]]
    ),
    "AclCreated": _acl_decoder(AclCreated),
    "AclDeleted": _acl_decoder(AclDeleted),
    "DelegationTokenIssued": lambda d: _NEW[DelegationTokenIssued](
        d["token_id"],
        d["owner"],
        d["requester"],
        tuple(d["renewers"]),
        d["issue_timestamp_ms"],
        d["expiry_timestamp_ms"],
        d["max_timestamp_ms"],
    ),
    "DelegationTokenRenewed": lambda d: _NEW[DelegationTokenRenewed](
        d["token_id"], d["renew_period_ms"], d["expiry_timestamp_ms"]
    ),
    "DelegationTokenExpired": lambda d: _NEW[DelegationTokenExpired](
        d["token_id"], d["expiry_period_ms"], d["expiry_timestamp_ms"]
    ),
    "DelegationTokenRemoved": lambda d: _NEW[DelegationTokenRemoved](
        d["token_id"], _REASON[d["reason"]]
    ),
}

# -- Avro binary primitives for the compiled encoders ----------------------------


# Varints 14 bits at a time: _V14[n] is the whole varint of n < 2**14, _C14[n]
# the two bytes of a 14-bit group that more groups follow.
_V14 = tuple(
    bytes((i,)) if i < 0x80 else bytes(((i & 0x7F) | 0x80, i >> 7)) for i in range(1 << 14)
)
_C14 = tuple(bytes(((i & 0x7F) | 0x80, (i >> 7) | 0x80)) for i in range(1 << 14))
_SMALL = _V14[::2]  # zigzag varints of 0..8191


def _varint(n: int) -> bytes:
    """The Avro varint of a non-negative (already zigzagged) integer."""
    if n < 16384:
        return _V14[n]
    parts = []
    while n >= 16384:
        parts.append(_C14[n & 0x3FFF])
        n >>= 14
    parts.append(_V14[n])
    return b"".join(parts)


def _long(v: Any) -> bytes:
    if v.__class__ is int and 0 <= v < 8192:
        return _SMALL[v]
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"expected an integer, got {type(v).__name__}")
    if not -(2**63) <= v < 2**63:
        raise OverflowError(f"{v} does not fit an Avro long")
    return _varint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _int(v: Any) -> bytes:
    if v.__class__ is int and 0 <= v < 8192:
        return _SMALL[v]
    if isinstance(v, int) and not -(2**31) <= v < 2**31:
        raise OverflowError(f"{v} does not fit an Avro int")
    return _long(v)


def _str(v: Any) -> bytes:
    if v.__class__ is not str and not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    b = v.encode()
    n = len(b)
    return (_SMALL[n] if n < 8192 else _long(n)) + b


def _bytes(v: Any) -> bytes:
    if v.__class__ is not bytes:
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise TypeError(f"expected bytes, got {type(v).__name__}")
        v = bytes(v)
    n = len(v)
    return (_SMALL[n] if n < 8192 else _long(n)) + v


def _fixed(size: int) -> Callable[[Any], bytes]:
    def write(v: Any) -> bytes:
        if not isinstance(v, (bytes, bytearray)) or len(v) != size:
            raise ValueError(f"expected {size} bytes, got {v!r}")
        return bytes(v)

    return write


def _seq(v: Any) -> Any:
    if isinstance(v, (str, bytes, bytearray)) or not hasattr(v, "__len__"):
        raise TypeError(f"expected a sequence, got {type(v).__name__}")
    return v


_HELPERS = {"_long": _long, "_int": _int, "_str": _str, "_bytes": _bytes, "_seq": _seq}
_PRIMITIVE_WRITERS = {
    "int": "_int({})",
    "long": "_long({})",
    "bytes": "_bytes({})",
    "string": "_str({})",
}


def _as_reference(schema: Any) -> Any:
    """The same schema with named definitions replaced by their full names."""
    if isinstance(schema, list):
        return [_as_reference(s) for s in schema]
    if isinstance(schema, dict):
        if "name" in schema and schema.get("type") in ("record", "error", "enum", "fixed"):
            return schema["name"]
        if schema.get("type") == "array":
            return {"type": "array", "items": _as_reference(schema["items"])}
        if schema.get("type") == "map":
            return {"type": "map", "values": _as_reference(schema["values"])}
    return schema


class _EncoderCompiler:
    """Compiles straight-line Python that appends an envelope's Avro bytes to a list."""

    def __init__(self, named: Mapping[str, Any], parsed_named: dict[str, Any]) -> None:
        self.named = named  # full name -> inlined definition
        self.parsed_named = parsed_named  # fastavro's parsed named types, for constants
        self.env: dict[str, Any] = dict(_HELPERS)
        self.lines: list[str] = []
        self.pending = bytearray()
        self.pending_indent = 0
        self.count = 0
        self.where = ""

    def _name(self, prefix: str, value: Any) -> str:
        self.count += 1
        name = f"_{prefix}{self.count}"
        self.env[name] = value
        return name

    def _flush(self) -> None:
        if self.pending:
            const = self._name("c", bytes(self.pending))
            self.lines.append(" " * self.pending_indent + f"ap({const})")
            self.pending.clear()

    def const(self, data: bytes, indent: int) -> None:
        if self.pending and indent != self.pending_indent:
            self._flush()
        self.pending_indent = indent
        self.pending += data

    def line(self, code: str, indent: int) -> None:
        self._flush()
        self.lines.append(" " * indent + code)

    def value_bytes(self, schema: Any, value: Any) -> bytes:
        """The Avro bytes of a value known now (a default, an event type name, a fingerprint)."""
        target = self.resolve(schema)
        if isinstance(target, list):  # a union's default is a value of its first branch
            return _varint(0) + self.value_bytes(target[0], value)
        is_fixed = isinstance(target, dict) and target.get("type") == "fixed"
        if isinstance(value, str) and (is_fixed or target == "bytes"):
            value = value.encode("latin-1")  # Avro JSON writes bytes defaults as code points
        ref = _as_reference(schema)
        if isinstance(ref, str) and ref in self.parsed_named:
            parsed = self.parsed_named[ref]
        else:
            parsed = parse_schema(ref, named_schemas=dict(self.parsed_named))
        out = BytesIO()
        schemaless_writer(out, parsed, value)
        return out.getvalue()

    def resolve(self, schema: Any) -> Any:
        if isinstance(schema, str) and schema not in PRIMITIVES:
            return self.named[schema]
        if (
            isinstance(schema, dict)
            and set(schema) <= {"type", "doc"}
            and isinstance(schema["type"], str)
        ):
            return self.resolve(schema["type"])
        return schema

    def value(self, schema: Any, expr: str, indent: int, enum: type[Enum] | None = None) -> None:
        """Append the code that writes Python expression ``expr`` as ``schema``."""
        schema = self.resolve(schema)
        if isinstance(schema, str) and schema in _PRIMITIVE_WRITERS:
            self.line(f"ap({_PRIMITIVE_WRITERS[schema].format(expr)})", indent)
            return
        kind = schema.get("type") if isinstance(schema, dict) else schema
        if kind == "enum" and enum is not None:
            symbols = schema["symbols"]
            table = {m: _varint(symbols.index(m.name) << 1) for m in enum if m.name in symbols}
            self.line(f"ap({self._name('e', table)}[{expr}])", indent)
        elif kind == "fixed":
            self.line(f"ap({self._name('f', _fixed(schema['size']))}({expr}))", indent)
        elif kind == "record":
            for field in schema["fields"]:
                self.value(field["type"], f"{expr}.{field['name']}", indent)
        elif kind == "array":
            a = self._name("a", None)
            i = self._name("i", None)
            self.line(f"{a} = _seq({expr})", indent)
            self.line(f"if {a}:", indent)
            self.line(f"ap(_long(len({a})))", indent + 4)
            self.line(f"for {i} in {a}:", indent + 4)
            self.value(schema["items"], i, indent + 8)
            self._flush()
            self.const(b"\x00", indent)
        else:
            raise EventSchemaError(
                f"{self.where}: the batch encoder cannot write {expr} as Avro {json.dumps(kind)}"
            )

    def field_default(self, field: dict[str, Any], where: str, indent: int) -> None:
        if "default" not in field:
            raise EventSchemaError(
                f"{where}: field {field['name']} has no default and no Python attribute to write"
            )
        self.const(self.value_bytes(field["type"], field["default"]), indent)

    def compile_envelope(
        self, envelope: dict[str, Any], event: dict[str, Any], cls: type, fingerprint: bytes
    ) -> Callable:
        """A function (envelope, offset, ap) writing one envelope that holds a ``cls`` event."""
        self.where = cls.__name__
        self.lines = [f"def encode_{cls.__name__}(env, off, ap):", "    ev = env.event"]
        for field in envelope["fields"]:
            name, ftype = field["name"], field["type"]
            if name == "offset":
                self.value(ftype, "off", 4)
            elif name == "event_type":
                self.const(self.value_bytes(ftype, cls.__name__), 4)
            elif name == "fingerprint":
                self.const(self.value_bytes(ftype, fingerprint), 4)
            elif name == "event":
                names = [b if isinstance(b, str) else b["name"] for b in ftype]
                self.const(_varint(names.index(event["name"]) << 1), 4)
                self._event(event, cls, 4)
            elif name in _ENVELOPE_ATTRS:
                self.value(ftype, f"env.{name}", 4)
            else:
                self.field_default(field, "Envelope", 4)
        self._flush()
        source = "\n".join(self.lines) + "\n"
        exec(source, self.env)  # noqa: S102 - generated from the codec's own schemas
        function = self.env[f"encode_{cls.__name__}"]
        function.__source__ = source
        return function

    def _event(self, record: dict[str, Any], cls: type, indent: int) -> None:
        bindings = _BINDINGS[cls]
        for field in record["fields"]:
            bound = bindings.get(field["name"])
            if bound is None:
                self.field_default(field, cls.__name__, indent)
            else:
                path, enum = bound
                self.value(field["type"], f"ev.{path}", indent, enum)


# -- Python records -> Avro values (fastavro path: single events, diagnostics) ---


class _NotAMember:
    """Stands for a value given for an enum field that is not a member of its Python enum."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


@functools.cache
def _member_names(enum: type[Enum]) -> dict[Enum, str]:
    return {m: m.name for m in enum}


def _to_avro(value: Any, schema: Any, named: Mapping[str, Any], enum: type[Enum] | None) -> Any:
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    if enum is not None:  # the same lookup the compiled encoders do
        try:
            return _member_names(enum).get(value) or _NotAMember(value)
        except TypeError:  # unhashable
            return _NotAMember(value)
    if isinstance(schema, dict):
        if schema.get("type") == "record" and not isinstance(value, dict):
            return {
                f["name"]: _to_avro(getattr(value, f["name"], None), f["type"], named, None)
                for f in schema["fields"]
                if hasattr(value, f["name"])
            }
        if schema.get("type") == "array" and isinstance(value, (tuple, list)):
            return [_to_avro(v, schema["items"], named, None) for v in value]
    return value


# -- one event type as a codec knows it ------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _EventSchema:
    name: str
    full_name: str
    cls: type
    fingerprint: bytes
    inlined: dict[str, Any]
    parsed: Any
    decode: Callable[[dict[str, Any]], Any]

    def to_avro(self, event: Any, named: Mapping[str, Any]) -> dict[str, Any]:
        """The Avro value of an event, field by field (fields Python lacks are left to defaults)."""
        bindings = _BINDINGS[self.cls]
        out: dict[str, Any] = {}
        for field in self.inlined["fields"]:
            bound = bindings.get(field["name"])
            if bound is not None:
                path, enum = bound
                out[field["name"]] = _to_avro(_get_path(event, path), field["type"], named, enum)
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class _Writer:
    """A known writer schema and the reader schema it resolves to (None: the same)."""

    writer: Any
    reader: Any


# -- the codec --------------------------------------------------------------------


class EventCodec:
    """Encodes and decodes events, envelopes and envelope batches with one schema directory."""

    def __init__(self, schema_dir: Path | str | None = None) -> None:
        self.schema_dir = Path(schema_dir) if schema_dir is not None else SCHEMA_DIR
        named = read_named_types(self.schema_dir)
        if ENVELOPE not in named:
            raise EventSchemaError(f"{self.schema_dir}: no {ENVELOPE} schema")
        batch = {"type": "array", "items": inline(ENVELOPE, named)}
        self.writer_schema_json: str = json.dumps(batch)
        self.fingerprint: bytes = avro_fingerprint(batch)
        parsed_named: dict[str, Any] = {}
        self._batch = _parse(batch, "batch schema", parsed_named)
        self._named = {name: d for name, (d, _) in collect_named_types(batch, "batch").items()}
        self._writers: dict[bytes, _Writer] = {self.fingerprint: _Writer(self._batch, None)}
        self._by_type: dict[str, _EventSchema] = {}
        self._by_class: dict[type, _EventSchema] = {}
        self._by_full_name: dict[str, _EventSchema] = {}
        self._by_fingerprint: dict[bytes, tuple[_EventSchema, _Writer]] = {}
        for branch in _event_branches(batch):
            self._add_event_type(branch, named)
        self._encoders = self._compile(batch["items"], parsed_named)

    @classmethod
    @functools.cache
    def default(cls) -> EventCodec:
        """The shared codec for the shipped schemas (parsed and compiled once per process)."""
        return cls()

    def _add_event_type(self, branch: Any, named: Mapping[str, Any]) -> None:
        full_name = branch if isinstance(branch, str) else branch.get("name", "")
        name = full_name.rpartition(".")[2]
        cls = EVENT_TYPES.get(name)
        if cls is None:
            raise EventSchemaError(
                f"the envelope's event union names {full_name!r}, not an event type"
            )
        standalone = inline(full_name, named)
        schema = _EventSchema(
            name=name,
            full_name=full_name,
            cls=cls,
            fingerprint=avro_fingerprint(standalone),
            inlined=standalone,
            parsed=_parse(standalone, f"event schema {name}"),
            decode=_DECODERS[name],
        )
        self._by_type[name] = schema
        self._by_class[cls] = schema
        self._by_full_name[full_name] = schema
        self._by_fingerprint[schema.fingerprint] = (schema, _Writer(schema.parsed, None))

    def _compile(
        self, envelope: dict[str, Any], parsed_named: dict[str, Any]
    ) -> dict[type, Callable]:
        encoders: dict[type, Callable] = {}
        for schema in self._by_type.values():
            compiler = _EncoderCompiler(self._named, parsed_named)
            record = self._named[schema.full_name]
            encoders[schema.cls] = compiler.compile_envelope(
                envelope, record, schema.cls, schema.fingerprint
            )
        return encoders

    @property
    def event_types(self) -> tuple[str, ...]:
        """The event type names of this codec's envelope union."""
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
        try:
            batch = json.loads(schema_json)
        except ValueError as exc:
            raise EventSchemaError(f"writer schema is not valid JSON: {exc}") from None
        fp = avro_fingerprint(batch)
        if fp in self._writers:
            return fp
        parsed = _parse(batch, f"writer schema {fp.hex()}")
        named = collect_named_types(batch, f"writer schema {fp.hex()}")
        for branch in _event_branches(batch):
            full_name = branch if isinstance(branch, str) else branch.get("name", "")
            current = self._by_full_name.get(full_name)
            if current is None:
                continue
            standalone = inline(full_name, named)
            event_fp = avro_fingerprint(standalone)
            if event_fp not in self._by_fingerprint:
                writer = _parse(standalone, f"event schema {full_name} {event_fp.hex()}")
                self._by_fingerprint[event_fp] = (current, _Writer(writer, current.parsed))
        self._writers[fp] = _Writer(parsed, self._batch)
        return fp

    # -- batches --

    def encode_batch(self, base_offset: int, envelopes: Sequence[Envelope]) -> bytes:
        """One Avro ``array<Envelope>``; offsets become base_offset, base_offset+1, ..."""
        encoders = self._encoders
        parts: list[bytes] = []
        ap = parts.append
        try:
            if envelopes:
                ap(_long(len(envelopes)))
            offset = base_offset
            for env in envelopes:
                encoders[env.event.__class__](env, offset, ap)
                offset += 1
        except Exception as exc:
            raise self._explain(base_offset, envelopes, exc) from None
        ap(b"\x00")
        return b"".join(parts)

    def decode_batch(self, payload: bytes, writer_fingerprint: bytes) -> list[Envelope]:
        """Decode a batch written under the writer schema with ``writer_fingerprint``."""
        by_full_name = self._by_full_name
        new = _new_envelope
        out = []
        append = out.append
        for d in self.decode_batch_raw(payload, writer_fingerprint):
            full_name, body = d["event"]
            append(
                new(
                    d["offset"],
                    d["timestamp_ms"],
                    d["actor_principal"],
                    d["actor_host"],
                    d["request_id"],
                    by_full_name[full_name].decode(body),
                    d["fingerprint"],
                )
            )
        return out

    def decode_batch_raw(self, payload: bytes, writer_fingerprint: bytes) -> list[dict[str, Any]]:
        """A batch as plain Avro values: dicts whose ``event`` is ``(record full name, dict)``."""
        writer = self._writers.get(bytes(writer_fingerprint))
        if writer is None:
            raise UnknownSchemaError(writer_fingerprint)
        data = BytesIO(payload)
        try:
            values = schemaless_reader(data, writer.writer, writer.reader, return_record_name=True)
        except Exception as exc:
            raise MalformedEventError(f"batch payload does not decode: {exc!r}") from None
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
            raise MalformedEventError(f"{schema.name} body does not decode: {exc!r}") from None
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
        if not _is_long(base_offset):
            return EventSchemaError(f"base offset {base_offset!r} is not an Avro long")
        for index, env in enumerate(envelopes):
            where = f"envelope {index} (offset {base_offset + index})"
            schema = self._by_class.get(type(getattr(env, "event", None)))
            if schema is None:
                what = type(getattr(env, "event", env)).__name__
                return EventSchemaError(f"{where}: {what} is not an event type")
            for name in _ENVELOPE_ATTRS:
                value = getattr(env, name, None)
                ok = _is_long(value) if name == "timestamp_ms" else isinstance(value, str)
                if not ok:
                    return EventSchemaError(
                        f"{where}: {schema.name} envelope field {name} has invalid value {value!r}"
                    )
            problem = self._find_problem(schema, env.event)
            if problem:
                return EventSchemaError(f"{where}: {problem}")
            try:
                self._encoders[schema.cls](env, base_offset + index, [].append)
            except Exception as error:
                return EventSchemaError(f"{where}: {schema.name} does not encode: {error!r}")
        return EventSchemaError(f"batch does not encode: {exc!r}")

    def _find_problem(self, schema: _EventSchema, event: Any) -> str | None:
        """The first field of ``event`` that does not fit its Avro schema, or None."""
        bindings = _BINDINGS[schema.cls]
        raw: dict[str, Any] = {}
        for field in schema.inlined["fields"]:
            bound = bindings.get(field["name"])
            if bound is not None:
                try:
                    raw[field["name"]] = _get_path(event, bound[0])
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


def _is_long(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def _parse(schema: Any, what: str, named: dict[str, Any] | None = None) -> Any:
    try:
        return parse_schema(schema, named_schemas=named)
    except Exception as exc:  # fastavro raises several types for bad schemas
        raise EventSchemaError(f"{what}: invalid Avro schema: {exc}") from None


def _event_branches(batch: Any) -> list[Any]:
    """The event records of a batch schema's envelope union."""
    try:
        union = {f["name"]: f["type"] for f in batch["items"]["fields"]}["event"]
    except (KeyError, TypeError):
        raise EventSchemaError(
            "not a batch schema: expected array<Envelope> with an 'event' field"
        ) from None
    if not isinstance(union, list):
        raise EventSchemaError("the envelope's 'event' field is not a union")
    return union
