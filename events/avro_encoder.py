"""Avro binary writing for batches: primitives and encoders compiled from the schemas.

fastavro's cost per field (not per call) would bound the log's append rate, so
batches are written by straight-line functions compiled from the schemas:
one per event type, writing the event's union branch index and its fields, and
one each for the EnvelopeGroup fields before and after its ``events``. They
append exactly fastavro's bytes (tested) to a list of parts.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from enum import Enum
from io import BytesIO
from typing import Any

from fastavro import parse_schema, schemaless_writer

from .avro_types import as_reference, kind, resolve
from .codegen import Source
from .errors import EventSchemaError
from .event_mapping import BINDINGS, ENVELOPE_ATTRS
from .types import INT64_MAX, INT64_MIN

__all__ = ["EncoderCompiler", "write_long", "varint"]

# Varints 14 bits at a time: _V14[n] is the whole varint of n < 2**14, _C14[n]
# the two bytes of a 14-bit group that more groups follow.
_V14 = tuple(
    bytes((i,)) if i < 0x80 else bytes(((i & 0x7F) | 0x80, i >> 7)) for i in range(1 << 14)
)
_C14 = tuple(bytes(((i & 0x7F) | 0x80, (i >> 7) | 0x80)) for i in range(1 << 14))
_SMALL = _V14[::2]  # zigzag varints of 0..8191


def varint(n: int) -> bytes:
    """The Avro varint of a non-negative (already zigzagged) integer."""
    if n < 16384:
        return _V14[n]
    parts = []
    while n >= 16384:
        parts.append(_C14[n & 0x3FFF])
        n >>= 14
    parts.append(_V14[n])
    return b"".join(parts)


def write_long(v: Any) -> bytes:
    """The Avro bytes of a long; TypeError or OverflowError for anything else."""
    if v.__class__ is int and 0 <= v < 8192:
        return _SMALL[v]
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"expected an integer, got {type(v).__name__}")
    if not INT64_MIN <= v <= INT64_MAX:
        raise OverflowError(f"{v} does not fit an Avro long")
    return varint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _write_int(v: Any) -> bytes:
    if v.__class__ is int and 0 <= v < 8192:
        return _SMALL[v]
    if isinstance(v, int) and not -(2**31) <= v < 2**31:
        raise OverflowError(f"{v} does not fit an Avro int")
    return write_long(v)


def _write_str(v: Any) -> bytes:
    if v.__class__ is not str and not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    b = v.encode()
    n = len(b)
    return (_SMALL[n] if n < 8192 else write_long(n)) + b


def _write_bytes(v: Any) -> bytes:
    if v.__class__ is not bytes:
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise TypeError(f"expected bytes, got {type(v).__name__}")
        v = bytes(v)
    n = len(v)
    return (_SMALL[n] if n < 8192 else write_long(n)) + v


def _fixed_writer(size: int) -> Callable[[Any], bytes]:
    def write(v: Any) -> bytes:
        if not isinstance(v, (bytes, bytearray)) or len(v) != size:
            raise ValueError(f"expected {size} bytes, got {v!r}")
        return bytes(v)

    return write


def _write_double(v: Any) -> bytes:
    if v.__class__ is not float and (isinstance(v, bool) or not isinstance(v, (int, float))):
        raise TypeError(f"expected a number, got {type(v).__name__}")
    return _DOUBLE(v)


_DOUBLE = struct.Struct("<d").pack


def _write_boolean(v: Any) -> bytes:
    if v is True:
        return b"\x01"
    if v is False:
        return b"\x00"
    raise TypeError(f"expected a bool, got {type(v).__name__}")


def _seq(v: Any) -> Any:
    if isinstance(v, (str, bytes, bytearray)) or not hasattr(v, "__len__"):
        raise TypeError(f"expected a sequence, got {type(v).__name__}")
    return v


_HELPERS = {
    "_long": write_long,
    "_int": _write_int,
    "_str": _write_str,
    "_bytes": _write_bytes,
    "_seq": _seq,
    "_double": _write_double,
    "_boolean": _write_boolean,
}
_PRIMITIVE_WRITERS = {
    "int": "_int({})",
    "long": "_long({})",
    "bytes": "_bytes({})",
    "string": "_str({})",
    "double": "_double({})",
    "boolean": "_boolean({})",
}


class EncoderCompiler:
    """Compiles straight-line Python that appends a value's Avro bytes to a list (``ap``).

    Constant bytes (union indexes, defaults of fields Python lacks) are merged
    into one ``ap`` call where they are adjacent.
    """

    def __init__(self, named: Mapping[str, Any], parsed_named: dict[str, Any]) -> None:
        self.named = named  # full name -> inlined definition
        self.parsed_named = parsed_named  # fastavro's parsed named types, for constants
        self.src = Source(_HELPERS)
        self.pending = bytearray()
        self.pending_indent = 0
        self.where = ""

    def _flush(self) -> None:
        if self.pending:
            const = self.src.name("c", bytes(self.pending))
            self.src.line(f"ap({const})", self.pending_indent)
            self.pending.clear()

    def const(self, data: bytes, indent: int) -> None:
        if self.pending and indent != self.pending_indent:
            self._flush()
        self.pending_indent = indent
        self.pending += data

    def line(self, code: str, indent: int) -> None:
        self._flush()
        self.src.line(code, indent)

    def value_bytes(self, schema: Any, value: Any) -> bytes:
        """The Avro bytes of a value known now (a field's default)."""
        target = resolve(schema, self.named)
        if isinstance(target, list):  # a union's default is a value of its first branch
            return varint(0) + self.value_bytes(target[0], value)
        if isinstance(value, str) and kind(target) in ("fixed", "bytes"):
            value = value.encode("latin-1")  # Avro JSON writes bytes defaults as code points
        ref = as_reference(schema)
        if isinstance(ref, str) and ref in self.parsed_named:
            parsed = self.parsed_named[ref]
        else:
            parsed = parse_schema(ref, named_schemas=dict(self.parsed_named))
        out = BytesIO()
        schemaless_writer(out, parsed, value)
        return out.getvalue()

    def value(self, schema: Any, expr: str, indent: int, enum: type[Enum] | None = None) -> None:
        """Append the code that writes Python expression ``expr`` as ``schema``."""
        schema = resolve(schema, self.named)
        k = kind(schema)
        if k in _PRIMITIVE_WRITERS:
            self.line(f"ap({_PRIMITIVE_WRITERS[k].format(expr)})", indent)
        elif k == "enum" and enum is not None:
            symbols = schema["symbols"]
            table = {m: varint(symbols.index(m.name) << 1) for m in enum if m.name in symbols}
            self.line(f"ap({self.src.name('e', table)}[{expr}])", indent)
        elif k == "fixed":
            self.line(f"ap({self.src.name('f', _fixed_writer(schema['size']))}({expr}))", indent)
        elif k == "record":
            for field in schema["fields"]:
                self.value(field["type"], f"{expr}.{field['name']}", indent)
        elif k == "union" and len(schema) == 2 and resolve(schema[0], self.named) == "null":
            self.line(f"if {expr} is None:", indent)  # an optional value: ["null", T]
            self.const(b"\x00", indent + 4)
            self.line("else:", indent)
            self.const(b"\x02", indent + 4)
            self.value(schema[1], expr, indent + 4)
            self._flush()
        elif k == "array":
            a = self.src.temp("a")
            i = self.src.temp("i")
            self.line(f"{a} = _seq({expr})", indent)
            self.line(f"if {a}:", indent)
            self.line(f"ap(_long(len({a})))", indent + 4)
            self.line(f"for {i} in {a}:", indent + 4)
            self.value(schema["items"], i, indent + 8)
            self._flush()
            self.const(b"\x00", indent)
        else:
            raise EventSchemaError(
                f"{self.where}: the batch encoder cannot write {expr} as Avro {json.dumps(k)}"
            )

    def field_default(self, field: dict[str, Any], where: str, indent: int) -> None:
        if "default" not in field:
            raise EventSchemaError(
                f"{where}: field {field['name']} has no default and no Python attribute to write"
            )
        self.const(self.value_bytes(field["type"], field["default"]), indent)

    def _finish(self, name: str) -> Callable:
        self._flush()
        function = self.src.function(name)
        self.src.lines = []
        return function

    def compile_event(self, record: dict[str, Any], cls: type, branch: int) -> Callable:
        """A function (event, ap) writing a ``cls`` event as union branch ``branch``."""
        self.where = cls.__name__
        self.src.line(f"def encode_{cls.__name__}(ev, ap):", 0)
        self.const(varint(branch << 1), 4)
        bindings = BINDINGS[cls]
        for field in record["fields"]:
            bound = bindings.get(field["name"])
            if bound is None:
                self.field_default(field, cls.__name__, 4)
            else:
                path, enum = bound
                self.value(field["type"], f"ev.{path}", 4, enum)
        return self._finish(f"encode_{cls.__name__}")

    def compile_group_fields(self, fields: list[dict[str, Any]], name: str) -> Callable | None:
        """A function (envelope, ap) writing these EnvelopeGroup fields, or None if there are none."""
        if not fields:
            return None
        self.where = "EnvelopeGroup"
        self.src.line(f"def {name}(env, ap):", 0)
        for field in fields:
            if field["name"] in ENVELOPE_ATTRS:
                self.value(field["type"], f"env.{field['name']}", 4)
            else:
                self.field_default(field, "EnvelopeGroup", 4)
        return self._finish(name)
