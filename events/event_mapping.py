"""How event records map to Avro values and back.

``BINDINGS`` says, for each event class, which attribute (a dotted path) every
Avro field of its record is written from, and the Python enum of an Avro enum
field; Avro fields Python lacks are written with their schema default.
Reading goes the other way: ``event_plan`` works out from the bindings and the
dataclass fields which objects to build from which Avro fields (a ``Node``
tree whose ``Leaf``s are Avro field names), and ``emit_node`` writes the code
that builds them, for the compiled batch decoder (avro_decoder) and for
``compile_from_avro``, which turns fastavro's dict of a record into the record.

Avro enums are stored as Kafka's names; a symbol Python does not know reads as
the enum's fallback member (``ENUM_FALLBACKS``, UNKNOWN for Kafka enums).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .avro_types import kind, resolve
from .codegen import Source
from .errors import EventSchemaError
from .records import (
    AclCreated,
    AclDeleted,
    ClientQuotaAltered,
    DelegationTokenExpired,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    DelegationTokenRenewed,
    KeyRotated,
    LogRecovered,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
    SecuritySettingAltered,
    TokenRemovalReason,
)
from .types import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)

__all__ = [
    "BINDINGS",
    "ENUM_FALLBACKS",
    "ENVELOPE_ATTRS",
    "Const",
    "Leaf",
    "Node",
    "NotAMember",
    "compile_from_avro",
    "emit_node",
    "event_plan",
    "get_path",
    "leaves",
    "member_by_symbol",
    "record_class",
    "record_plan",
    "symbol_map",
    "to_avro",
]

# -- how each Avro event field is read off the Python record -----------------------
# avro field name -> (attribute path on the event, Python enum of an Avro enum field)

Binding = tuple[str, type[Enum] | None]

_ACL_FIELDS: dict[str, Binding] = {
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


BINDINGS: dict[type, dict[str, Binding]] = {
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
    ClientQuotaAltered: _same("entity", "key", "value"),
    SecuritySettingAltered: _same("setting_name", "setting_value"),
    LogRecovered: _same("recovery_id", "operator", "reason", "from_offset", "to_offset", "events", "link", "digest",
                        "quarantine", "cut_link"),
    KeyRotated: _same("key_id", "previous_key_id"),
}

# The EnvelopeGroup fields taken from an Envelope's attributes (the rest of an
# envelope is implied: offset by position, event type and fingerprint by the event).
ENVELOPE_ATTRS = (
    "timestamp_ms",
    "actor_principal",
    "actor_host",
    "request_id",
    "actor_asserted",
    "operator_user",
    "operator_host",
    "operator_pid",
    "operator_program",
)

# The member a symbol Python does not know reads as.
ENUM_FALLBACKS: dict[type[Enum], Enum] = {
    ScramMechanism: ScramMechanism.UNKNOWN,
    ResourceType: ResourceType.UNKNOWN,
    PatternType: PatternType.UNKNOWN,
    AclOperation: AclOperation.UNKNOWN,
    AclPermissionType: AclPermissionType.UNKNOWN,
    TokenRemovalReason: TokenRemovalReason.EXPIRED_BY_SWEEP,
}


def get_path(obj: Any, path: str) -> Any:
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj


# -- records -> Avro values (fastavro path: single events, diagnostics) -------------


class NotAMember:
    """Stands for a value given for an enum field that is not a member of its Python enum."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


@functools.cache
def _member_names(enum: type[Enum]) -> dict[Enum, str]:
    return {m: m.name for m in enum}


def to_avro(value: Any, schema: Any, named: Mapping[str, Any], enum: type[Enum] | None) -> Any:
    """The Avro value (as fastavro takes it) of a Python value for ``schema``."""
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    if enum is not None:  # the same lookup the compiled encoders do
        try:
            return _member_names(enum).get(value) or NotAMember(value)
        except TypeError:  # unhashable
            return NotAMember(value)
    if isinstance(schema, dict):
        if schema.get("type") == "record" and not isinstance(value, dict):
            return {
                f["name"]: to_avro(getattr(value, f["name"], None), f["type"], named, None)
                for f in schema["fields"]
                if hasattr(value, f["name"])
            }
        if schema.get("type") == "array" and isinstance(value, (tuple, list)):
            return [to_avro(v, schema["items"], named, None) for v in value]
    return value


# -- Avro values -> records ----------------------------------------------------------


class _SymbolMap(dict):
    """Avro enum symbol -> Python enum member; symbols Python lacks read as ``fallback``."""

    def __init__(self, enum: type[Enum], fallback: Enum) -> None:
        super().__init__((m.name, m) for m in enum)
        self.fallback = fallback

    def __missing__(self, key: str) -> Enum:
        return self.fallback


@functools.cache
def symbol_map(enum: type[Enum]) -> Mapping[str, Enum]:
    """Avro symbol -> member of ``enum``, unknown symbols reading as its fallback."""
    fallback = ENUM_FALLBACKS.get(enum)
    return _SymbolMap(enum, next(iter(enum)) if fallback is None else fallback)


def member_by_symbol(enum: type[Enum], symbols: list[str]) -> tuple[Enum, ...]:
    """The member each symbol of an Avro enum reads as, by symbol index."""
    members = symbol_map(enum)
    return tuple(members[s] for s in symbols)


@dataclass(frozen=True)
class Leaf:
    """A Python field filled from the Avro field ``name`` (``hint``: its annotation)."""

    name: str
    hint: Any
    enum: type[Enum] | None


@dataclass(frozen=True)
class Const:
    """A Python field no Avro field fills: its dataclass default."""

    value: Any


@dataclass(frozen=True)
class Node:
    """Build ``cls`` from ``args``, one per dataclass field in order."""

    cls: type
    args: tuple[Leaf | Const | Node, ...]


def _dataclass_fields(cls: type) -> tuple[tuple[dataclasses.Field, Any], ...]:
    if not dataclasses.is_dataclass(cls):
        raise EventSchemaError(f"{cls!r} is not a dataclass the codec can build")
    hints = typing.get_type_hints(cls)
    return tuple((f, hints.get(f.name)) for f in dataclasses.fields(cls))


def _default(cls: type, field: dataclasses.Field, what: str) -> Const:
    if field.default is dataclasses.MISSING:
        raise EventSchemaError(f"{cls.__name__}.{field.name} has no Avro field {what}")
    return Const(field.default)


@functools.cache
def event_plan(cls: type) -> Node:
    """What to build for an event class, from the Avro fields its bindings name."""
    bound = {path: (name, enum) for name, (path, enum) in BINDINGS[cls].items()}
    return _plan(cls, "", bound)


def _plan(cls: type, prefix: str, bound: dict[str, tuple[str, type[Enum] | None]]) -> Node:
    args: list[Leaf | Const | Node] = []
    for field, hint in _dataclass_fields(cls):
        path = prefix + field.name
        if path in bound:
            name, enum = bound[path]
            args.append(Leaf(name, hint, enum))
        elif any(p.startswith(path + ".") for p in bound):
            if not isinstance(hint, type):
                raise EventSchemaError(f"{cls.__name__}.{field.name}: no class to build")
            args.append(_plan(hint, path + ".", bound))
        else:
            args.append(_default(cls, field, "bound to it"))
    return Node(cls, tuple(args))


def record_plan(cls: type, avro_fields: tuple[str, ...]) -> Node:
    """What to build for a nested Avro record read as ``cls``: fields matched by name."""
    args: list[Leaf | Const | Node] = []
    for field, hint in _dataclass_fields(cls):
        if field.name in avro_fields:
            args.append(Leaf(field.name, hint, None))
        else:
            args.append(_default(cls, field, "of that name"))
    return Node(cls, tuple(args))


def leaves(node: Node) -> Iterator[Leaf]:
    for arg in node.args:
        if isinstance(arg, Leaf):
            yield arg
        elif isinstance(arg, Node):
            yield from leaves(arg)


def record_class(hint: Any, schema: dict[str, Any]) -> type:
    """The Python class a nested Avro record is read as (its field's annotation)."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    raise EventSchemaError(f"no dataclass to read Avro record {schema.get('name')} as")


def item_hint(hint: Any) -> Any:
    """The item annotation of ``tuple[X, ...]`` (None if unknown)."""
    args = typing.get_args(hint)
    return args[0] if args else None


def emit_node(src: Source, node: Node, leaf_vars: Mapping[str, str], indent: int) -> str:
    """Emit the construction of ``node`` from leaf variables; return the result's variable."""
    args = []
    for arg in node.args:
        if isinstance(arg, Leaf):
            args.append(leaf_vars[arg.name])
        elif isinstance(arg, Const):
            args.append(src.name("k", arg.value))
        else:
            args.append(emit_node(src, arg, leaf_vars, indent))
    return src.construct(node.cls, args, indent)


def compile_from_avro(
    node: Node, record: dict[str, Any], named: Mapping[str, Any]
) -> Callable[[dict[str, Any]], Any]:
    """A function turning fastavro's dict of ``record`` into the object ``node`` describes."""
    src = Source()
    src.line("def from_avro(d):", 0)
    fields = {f["name"]: f["type"] for f in record["fields"]}
    leaf_vars = {}
    for leaf in leaves(node):
        if leaf.name not in fields:
            raise EventSchemaError(
                f"{record['name']} has no field {leaf.name} for {node.cls.__name__}"
            )
        var = src.temp()
        expr = _from_avro_expr(src, f"d[{leaf.name!r}]", fields[leaf.name], leaf, named)
        src.line(f"{var} = {expr}", 4)
        leaf_vars[leaf.name] = var
    src.line(f"return {emit_node(src, node, leaf_vars, 4)}", 4)
    return src.function("from_avro")


def _from_avro_expr(src: Source, expr: str, schema: Any, leaf: Leaf, named: Mapping) -> str:
    schema = resolve(schema, named)
    k = kind(schema)
    if k == "enum" and leaf.enum is not None:
        return f"{src.name('sym', symbol_map(leaf.enum))}[{expr}]"
    if k == "record":
        cls = record_class(leaf.hint, schema)
        plan = record_plan(cls, tuple(f["name"] for f in schema["fields"]))
        return f"{src.name('rec', compile_from_avro(plan, schema, named))}({expr})"
    if k == "array":
        item = src.temp("x")
        inner = _from_avro_expr(
            src, item, schema["items"], Leaf("", item_hint(leaf.hint), None), named
        )
        return f"tuple({expr})" if inner == item else f"tuple([{inner} for {item} in {expr}])"
    return expr
