"""Questions about inlined Avro schemas that the compiled encoders and decoders ask.

Schemas here are the codec's inlined JSON schemas (``schemas.inline``), in which a
named type is defined once and referred to by its full name elsewhere; ``named``
maps each full name to its definition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .schemas import PRIMITIVES

__all__ = ["as_reference", "branch_name", "kind", "min_size", "resolve"]


def resolve(schema: Any, named: Mapping[str, Any]) -> Any:
    """The definition behind a name reference or a ``{"type": ...}`` wrapper."""
    while True:
        if isinstance(schema, str) and schema not in PRIMITIVES:
            schema = named[schema]
        elif (
            isinstance(schema, dict)
            and set(schema) <= {"type", "doc"}
            and isinstance(schema["type"], (str, list))
        ):
            schema = schema["type"]
        else:
            return schema


def kind(schema: Any) -> str:
    """The Avro type name of a resolved schema: a primitive, "record", "array", "union", ..."""
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        return schema["type"] if isinstance(schema.get("type"), str) else "union"
    return schema


def branch_name(branch: Any) -> str:
    """The full name of a union branch (a name reference or an inline named type)."""
    return branch if isinstance(branch, str) else branch.get("name", branch.get("type", ""))


def min_size(schema: Any, named: Mapping[str, Any], seen: frozenset[str] = frozenset()) -> int:
    """The fewest bytes a value of ``schema`` takes; 0 only for types that always take none."""
    if isinstance(schema, str) and schema in named:
        if schema in seen:  # a recursive reference: a value of it is already underway
            return 1
        seen = seen | {schema}
    schema = resolve(schema, named)
    k = kind(schema)
    if k == "null":
        return 0
    if k == "float":
        return 4
    if k == "double":
        return 8
    if k == "fixed":
        return int(schema["size"])
    if k == "record":
        return sum(min_size(f["type"], named, seen) for f in schema["fields"])
    return 1  # boolean, varints, lengths, enum and union indexes, array and map terminators


def as_reference(schema: Any) -> Any:
    """The same schema with named definitions replaced by their full names."""
    if isinstance(schema, list):
        return [as_reference(s) for s in schema]
    if isinstance(schema, dict):
        if "name" in schema and schema.get("type") in ("record", "error", "enum", "fixed"):
            return schema["name"]
        if schema.get("type") == "array":
            return {"type": "array", "items": as_reference(schema["items"])}
        if schema.get("type") == "map":
            return {"type": "map", "values": as_reference(schema["values"])}
    return schema
