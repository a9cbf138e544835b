"""The shipped Avro schema files and helpers to load them as self-contained schemas.

Each .avsc file defines one named type in namespace ``secmeta.events``
(``common/`` shared types, ``events/`` one file per event type, ``EnvelopeGroup.avsc``,
the record a batch payload is an array of).
Files refer to each other by name; ``inline`` resolves those references into a
single JSON schema that defines every named type once, with full names.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fastavro.schema import to_parsing_canonical_form

from ..errors import EventSchemaError

__all__ = [
    "ENVELOPE_GROUP",
    "NAMESPACE",
    "SCHEMA_DIR",
    "avro_fingerprint",
    "collect_named_types",
    "inline",
    "read_named_types",
    "schema_files",
]

NAMESPACE = "secmeta.events"
ENVELOPE_GROUP = f"{NAMESPACE}.EnvelopeGroup"
SCHEMA_DIR = Path(__file__).resolve().parent
PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})

# full name -> (definition as written, namespace of the place it was written in)
NamedTypes = dict[str, tuple[dict[str, Any], str | None]]


def avro_fingerprint(schema: Any) -> bytes:
    """CRC-64-AVRO of a schema's parsing canonical form, 8 bytes little-endian."""
    return crc64_avro(to_parsing_canonical_form(schema).encode())


_CRC64_EMPTY = 0xC15D213AA4D7A795


@functools.cache
def _crc64_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (_CRC64_EMPTY & -(fp & 1))
        table.append(fp)
    return tuple(table)


def crc64_avro(data: bytes) -> bytes:
    """The Avro specification's 64-bit Rabin fingerprint of ``data``, little-endian as Java's and fastavro's
    (whose function builds its 256-entry table on every call: 0.35 ms, most of a codec's 13 fingerprints)."""
    table, fp = _crc64_table(), _CRC64_EMPTY
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp.to_bytes(8, "little")


def schema_files(schema_dir: Path | None = None) -> list[Path]:
    """Every .avsc file under a schema directory (default: the shipped one), sorted."""
    return sorted(Path(schema_dir or SCHEMA_DIR).rglob("*.avsc"))


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def collect_named_types(schema: Any, origin: str, into: NamedTypes | None = None) -> NamedTypes:
    """Every named type a schema defines, by full name; a second definition is an error."""
    named: NamedTypes = {} if into is None else into
    _collect(schema, None, named, origin)
    return named


def _collect(schema: Any, namespace: str | None, named: NamedTypes, origin: str) -> None:
    if isinstance(schema, list):
        for branch in schema:
            _collect(branch, namespace, named, origin)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if kind in _NAMED:
        full = _full_name(schema["name"], schema.get("namespace", namespace))
        if full in named and named[full][0] is not schema:
            raise EventSchemaError(f"{origin}: {full} is defined more than once")
        named[full] = (schema, namespace)
        inner = full.rpartition(".")[0] or None
        for field in schema.get("fields", ()):
            _collect(field["type"], inner, named, origin)
    elif kind == "array":
        _collect(schema["items"], namespace, named, origin)
    elif kind == "map":
        _collect(schema["values"], namespace, named, origin)
    elif isinstance(kind, (dict, list)):
        _collect(kind, namespace, named, origin)


def read_named_types(schema_dir: Path | None = None) -> NamedTypes:
    """The named types defined by every .avsc file of a schema directory."""
    files = schema_files(schema_dir)
    if not files:
        raise EventSchemaError(f"no .avsc files under {schema_dir or SCHEMA_DIR}")
    named: NamedTypes = {}
    for path in files:
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise EventSchemaError(f"schema file {path}: cannot read: {exc}") from None
        collect_named_types(schema, f"schema file {path}", named)
    return named


def inline(schema: Any, named: Mapping[str, tuple[dict[str, Any], str | None]]) -> Any:
    """A self-contained copy of ``schema``: full names, each named type defined at first use."""
    return _inline(schema, None, named, set())


def _inline(schema: Any, namespace: str | None, named: Mapping, done: set[str]) -> Any:
    if isinstance(schema, str):
        if schema in PRIMITIVES:
            return schema
        full = _full_name(schema, namespace)
        if full not in named and schema in named:
            full = schema
        if full in done:
            return full
        if full not in named:
            raise EventSchemaError(f"unknown Avro type {schema!r}")
        definition, def_namespace = named[full]
        return _inline(definition, def_namespace, named, done)
    if isinstance(schema, list):
        return [_inline(branch, namespace, named, done) for branch in schema]
    if not isinstance(schema, dict):
        raise EventSchemaError(f"not an Avro schema: {schema!r}")
    kind = schema.get("type")
    if isinstance(kind, (dict, list)) or (
        isinstance(kind, str)
        and kind not in PRIMITIVES
        and kind not in _NAMED
        and kind not in ("array", "map")
    ):
        return _inline(kind, namespace, named, done)
    out = {k: copy.deepcopy(v) for k, v in schema.items() if k != "namespace"}
    if kind in _NAMED:
        full = _full_name(schema["name"], schema.get("namespace", namespace))
        if full in done:
            return full
        done.add(full)
        out["name"] = full
        inner = full.rpartition(".")[0] or None
        if "fields" in schema:
            out["fields"] = [
                {**field, "type": _inline(field["type"], inner, named, done)}
                for field in schema["fields"]
            ]
    elif kind == "array":
        out["items"] = _inline(schema["items"], namespace, named, done)
    elif kind == "map":
        out["values"] = _inline(schema["values"], namespace, named, done)
    return out
