"""One row schema for every secmeta Spark source, and how envelopes become rows and rows envelopes.

``SCHEMA``: the envelope (offset, time, actor, request, event type, entity key,
the principals the event names: its kind's ``principals``, ``secmeta.events.entities``),
then the payload flattened into nullable columns: those listed in ``_COLUMNS``, then
one per field of a logged event that has none there (a new kind's fields), typed
from the field's annotation. Secrets never appear: a SCRAM credential row carries
the mechanism and iteration count only, tokens carry no HMAC, because only the
columns here are ever read from an event (a sealed secret or bytes field gets none).
``column_of`` names the column a payload field is in (``issue_timestamp_ms`` is the
timestamp column ``issue_timestamp``).

``event_row`` makes one Python row (for tests and small reads);
``arrow_batches`` turns envelopes into pyarrow RecordBatches, which is what the
sources hand to Spark (several times faster than tuples).

``envelope_from_row`` goes back (the Spark audit job runs its rules on the
rebuilt envelopes, the embedded engine of ``secmeta.consumers.tables_query`` its
history and token questions); ``python_rows`` reads a pyarrow batch or table as such
rows.

The column types are Arrow's (the tables' Parquet and Delta types); ``SCHEMA``, the Spark
form, is built from them when first asked for, so this module loads without pyspark. Both directions follow the one column table, so a field added to an event
whose type has no Spark column fails when this module loads. Rows never
carry a secret, so a rebuilt ``ScramCredentialUpserted`` holds ``NO_SECRET``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from enum import Enum
from itertools import islice
from typing import Any

import pyarrow as pa

from secmeta.core.times import datetime_to_ms, ms_to_datetime
from secmeta.events.entities import kind_of
from secmeta.events.errors import InvalidValueError
from secmeta.events.keyring import SealedSecret
from secmeta.events.records import EVENT_TYPES, Envelope
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    from_output_name,
    output_name,
)
from secmeta.projections.gc_pause import paused_gc

__all__ = [
    "ARROW_BATCH",
    "ARROW_SCHEMA",
    "NO_SECRET",
    "RowError",
    "arrow_batch",
    "arrow_batches",
    "column_of",
    "envelope_from_row",
    "event_row",
    "python_rows",
]

ARROW_BATCH = 8192  # rows per Arrow batch handed to Spark

_TS = pa.timestamp("us", tz="UTC")
_STRING, _LONG, _STRINGS = pa.string(), pa.int64(), pa.list_(pa.string())

# (column, Arrow type, payload field it comes from; None: an envelope column).
# Timestamps in milliseconds become timestamps (UTC, exact to the millisecond).
_COLUMNS: list[tuple[str, Any, str | None]] = [
    ("offset", _LONG, None),
    ("timestamp", _TS, None),
    ("timestamp_ms", _LONG, None),
    ("actor_principal", _STRING, None),
    ("actor_host", _STRING, None),
    ("request_id", _STRING, None),
    ("actor_asserted", pa.bool_(), None),
    ("operator_user", _STRING, None),
    ("operator_host", _STRING, None),
    ("operator_pid", _LONG, None),
    ("operator_program", _STRING, None),
    ("event_type", _STRING, None),
    ("entity_key", _STRING, None),
    ("principals", _STRINGS, None),
    ("acl_id", _STRING, "acl_id"),
    ("resource_type", _STRING, "resource_type"),
    ("resource_name", _STRING, "resource_name"),
    ("pattern_type", _STRING, "pattern_type"),
    ("principal", _STRING, "principal"),
    ("host", _STRING, "host"),
    ("operation", _STRING, "operation"),
    ("permission_type", _STRING, "permission_type"),
    ("user", _STRING, "user"),
    ("mechanism", _STRING, "mechanism"),
    ("iterations", pa.int32(), "iterations"),
    ("token_id", _STRING, "token_id"),
    ("owner", _STRING, "owner"),
    ("requester", _STRING, "requester"),
    ("renewers", _STRINGS, "renewers"),
    ("issue_timestamp", _TS, "issue_timestamp_ms"),
    ("expiry_timestamp", _TS, "expiry_timestamp_ms"),
    ("max_timestamp", _TS, "max_timestamp_ms"),
    ("renew_period_ms", _LONG, "renew_period_ms"),
    ("expiry_period_ms", _LONG, "expiry_period_ms"),
    ("reason", _STRING, "reason"),
]
_ENVELOPE_WIDTH = next(i for i, (_n, _t, source) in enumerate(_COLUMNS) if source is not None)
_UNCOLUMNED = (SealedSecret, AclBinding)  # never a column: secrets, and the binding (its seven columns above)
_COLUMN_TYPES = {str: _STRING, int: _LONG, float: pa.float64(), bool: pa.bool_()}


def _column_type(hint: Any, where: str) -> Any:
    """The column type of a payload field's annotation: optional values are nullable columns anyway."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        if len(present) == 1:
            return _column_type(present[0], where)
    elif typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        return pa.list_(_column_type(args[0], where))
    elif isinstance(hint, type) and issubclass(hint, Enum):
        return _STRING  # by its output name (types.output_name)
    elif hint in _COLUMN_TYPES:
        return _COLUMN_TYPES[hint]
    raise TypeError(f"{where}: {hint!r} has no Spark column type; give it a column in secmeta.consumers.spark.rows")


def _new_columns() -> list[tuple[str, Any, str]]:
    """A column for each payload field of a logged event that ``_COLUMNS`` does not list, in event order."""
    listed = {source for _n, _t, source in _COLUMNS}
    found: dict[str, Any] = {}
    for event_type in EVENT_TYPES.values():
        hints = typing.get_type_hints(event_type)
        for f in dataclasses.fields(event_type):
            hint = hints[f.name]
            if f.name in listed or (isinstance(hint, type) and issubclass(hint, _UNCOLUMNED)):
                continue
            dtype = _column_type(hint, f"{event_type.__name__}.{f.name}")
            if found.setdefault(f.name, dtype) != dtype:
                raise TypeError(f"{event_type.__name__}.{f.name}: {dtype} where another event has {found[f.name]}")
    return [(name, dtype, name) for name, dtype in found.items()]


_COLUMNS += _new_columns()

ARROW_SCHEMA = pa.schema([pa.field(name, dtype) for name, dtype, _ in _COLUMNS])


def _spark_type(dtype: pa.DataType):
    from pyspark.sql import types as T

    if pa.types.is_list(dtype):
        return T.ArrayType(_spark_type(dtype.value_type))
    return {pa.int64(): T.LongType(), pa.int32(): T.IntegerType(), pa.string(): T.StringType(),
            pa.float64(): T.DoubleType(), pa.bool_(): T.BooleanType(), _TS: T.TimestampType()}[dtype]


def __getattr__(name: str):
    """``SCHEMA``: the Spark schema of the rows (pyspark is imported on first use)."""
    if name == "SCHEMA":
        from pyspark.sql.types import StructField, StructType

        schema = StructType([StructField(c, _spark_type(dtype), nullable=True) for c, dtype, _ in _COLUMNS])
        globals()["SCHEMA"] = schema
        return schema
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# How the columns filled from an ACL binding are read from an event's ``binding``.
_BINDING_FIELDS: dict[str, str] = {
    "resource_type": "NAMES_ResourceType[b.pattern.resource_type]",
    "resource_name": "b.pattern.name",
    "pattern_type": "NAMES_PatternType[b.pattern.pattern_type]",
    "principal": "b.entry.principal",
    "host": "b.entry.host",
    "operation": "NAMES_AclOperation[b.entry.operation]",
    "permission_type": "NAMES_AclPermissionType[b.entry.permission_type]",
}
_BINDING_ENUMS = (ResourceType, PatternType, AclOperation, AclPermissionType)


def _names(enum: type[Enum]) -> dict[Enum, str]:
    """Each member's column value: its name in every output (``types.output_name``: SCRAM-SHA-256, TOPIC)."""
    return {member: output_name(member) for member in enum}


def _expression(source: str, dtype: Any, hints: dict[str, Any]) -> str:
    """The Python expression reading one payload column from event ``e`` (binding ``b``); "None" if absent.

    Enums become their output names (``NAMES_<enum>``, ``_names``); timestamp columns stay in milliseconds (the
    caller converts them).
    """
    if source in _BINDING_FIELDS and "binding" in hints:
        return _BINDING_FIELDS[source]
    if source not in hints:
        return "None"
    if pa.types.is_list(dtype):
        return f"list(e.{source})"
    hint = hints[source]
    if isinstance(hint, type) and issubclass(hint, Enum):
        return f"NAMES_{hint.__name__}[e.{source}]"
    return f"e.{source}"


# The envelope columns, read from ``env`` (its event ``e``; TYPE: the event type's name).
_ENVELOPE_EXPRESSIONS = {
    "offset": "env.offset", "timestamp": "env.timestamp_ms", "timestamp_ms": "env.timestamp_ms",
    "actor_principal": "env.actor_principal", "actor_host": "env.actor_host", "request_id": "env.request_id",
    "actor_asserted": "env.actor_asserted", "operator_user": "env.operator_user",
    "operator_host": "env.operator_host", "operator_pid": "env.operator_pid",
    "operator_program": "env.operator_program",
    "event_type": "TYPE", "entity_key": "e.entity_key", "principals": "list(PRINCIPALS(e))",
}
_ROW_MAKERS: dict[type, Any] = {}


def _row_maker(event_type: type):
    """A function from an envelope of ``event_type`` to its row (timestamps in ms), compiled once.

    One tuple expression per event type: several times faster than filling a list
    column by column, and rows are what the sources spend their time on.
    """
    maker = _ROW_MAKERS.get(event_type)
    if maker is None:
        hints = typing.get_type_hints(event_type)
        envelope = [_ENVELOPE_EXPRESSIONS[name].replace("TYPE", repr(event_type.__name__))
                    for name, _t, _s in _COLUMNS[:_ENVELOPE_WIDTH]]
        payload = [_expression(source, dtype, hints) for _c, dtype, source in _COLUMNS[_ENVELOPE_WIDTH:]]
        source = (
            "def row(env):\n"
            "    e = env.event\n"
            + ("    b = e.binding\n" if "binding" in hints else "")
            + f"    return ({', '.join(envelope + payload)})\n")
        namespace: dict[str, Any] = {"PRINCIPALS": kind_of(event_type).principals}
        enums: list[type[Enum]] = [*_BINDING_ENUMS,
                                   *(h for h in hints.values() if isinstance(h, type) and issubclass(h, Enum))]
        namespace |= {f"NAMES_{enum.__name__}": _names(enum) for enum in enums}
        exec(compile(source, f"<secmeta row of {event_type.__name__}>", "exec"), namespace)  # noqa: S102
        maker = _ROW_MAKERS[event_type] = namespace["row"]
    return maker


def _raw_row(envelope) -> tuple:
    """A row with timestamps still in milliseconds."""
    return _row_maker(type(envelope.event))(envelope)


_TIME_COLUMNS = [i for i, (_n, dtype, _s) in enumerate(_COLUMNS) if pa.types.is_timestamp(dtype)]


def event_row(envelope) -> tuple:
    """One row of ``SCHEMA`` for a decoded envelope (secrets left out by construction)."""
    row = list(_raw_row(envelope))
    for i in _TIME_COLUMNS:
        if row[i] is not None:
            row[i] = ms_to_datetime(row[i])
    return tuple(row)


_MS = pa.timestamp("ms", tz="UTC")


def arrow_batch(envelopes: Sequence) -> pa.RecordBatch:
    """The rows of ``envelopes`` as one RecordBatch of ``ARROW_SCHEMA``."""
    if not envelopes:
        return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)
    columns = list(zip(*[_row_maker(type(env.event))(env) for env in envelopes], strict=True))
    arrays = []
    for i, field in enumerate(ARROW_SCHEMA):
        if i in _TIME_COLUMNS:
            arrays.append(pa.array(columns[i], type=_MS).cast(field.type))
        else:
            arrays.append(pa.array(columns[i], type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def arrow_batches(envelopes: Iterable, size: int = ARROW_BATCH) -> Iterator[pa.RecordBatch]:
    """``envelopes`` as RecordBatches of ``size`` rows, decoded with Python's cyclic garbage collector paused.

    Decoding makes millions of short-lived, acyclic objects; with the collector on,
    its sweeps cost about 40% of a source's read rate. The collector is paused
    only while this generator runs (taking envelopes and building a batch) and
    is back in its previous state whenever the caller has control.
    """
    envelopes = iter(envelopes)
    while True:
        with paused_gc():
            chunk = list(islice(envelopes, size))
            batch = arrow_batch(chunk) if chunk else None
        if batch is None:
            return
        yield batch


# -- rows back to envelopes -------------------------------------------------------------

#: Stands for the sealed secret of a ``ScramCredentialUpserted`` rebuilt from a row: rows
#: never carry one, and no alert rule reads it. It holds nothing.
NO_SECRET = SealedSecret("<not in rows>", b"", b"")


class RowError(InvalidValueError):
    """A row that is not one of ``SCHEMA``'s events; the message names its log offset and what is wrong."""


def _ms(value: Any) -> int:
    """Milliseconds since the epoch from a row's timestamp (ms as an int, or a datetime; naive = UTC)."""
    if isinstance(value, datetime):
        return datetime_to_ms(value)
    return int(value)


def _binding(row: Mapping[str, Any]) -> AclBinding:
    """The inverse of ``_BINDING_FIELDS``."""
    return AclBinding.of(
        from_output_name(ResourceType, row["resource_type"]),
        row["resource_name"],
        from_output_name(PatternType, row["pattern_type"]),
        row["principal"],
        row["host"],
        from_output_name(AclOperation, row["operation"]),
        from_output_name(AclPermissionType, row["permission_type"]),
    )


_COLUMN_OF = {source: (name, dtype) for name, dtype, source in _COLUMNS[_ENVELOPE_WIDTH:]}


def column_of(field: str) -> str:
    """The column of ``SCHEMA`` a flattened payload field (``redact.redacted``'s) is in."""
    if field in _BINDING_FIELDS:
        return field
    try:
        return _COLUMN_OF[field][0]
    except KeyError:
        raise KeyError(f"the payload field {field!r} has no column in the Spark row schema") from None


def _field_reader(event_type: type, field: str, hint: Any) -> Callable[[Mapping[str, Any]], Any]:
    """How one field of ``event_type`` is read back from its column (the inverse of ``_expression``)."""
    if field == "binding":
        return _binding
    if field == "secret":
        return lambda _row: NO_SECRET
    if field not in _COLUMN_OF:
        raise TypeError(f"{event_type.__name__}.{field} has no column in the Spark row schema")
    name, dtype = _COLUMN_OF[field]
    if pa.types.is_timestamp(dtype):
        return lambda row: _ms(row[name])
    if pa.types.is_list(dtype):
        return lambda row: tuple(row[name] or ())
    if isinstance(hint, type) and issubclass(hint, Enum):
        return lambda row: from_output_name(hint, row[name])
    if pa.types.is_integer(dtype):
        return lambda row: int(row[name])
    return lambda row: row[name]


def _event_builder(event_type: type) -> Callable[[Mapping[str, Any]], Any]:
    hints = typing.get_type_hints(event_type)
    readers = [_field_reader(event_type, f.name, hints[f.name]) for f in dataclasses.fields(event_type)]
    return lambda row: event_type(*[read(row) for read in readers])


_BUILDERS = {name: _event_builder(cls) for name, cls in EVENT_TYPES.items()}


def envelope_from_row(row: Mapping[str, Any]) -> Envelope:
    """The envelope a row of ``SCHEMA`` was made from, its secret (if any) replaced by ``NO_SECRET``.

    Timestamp columns may hold milliseconds or datetimes (naive ones are read as UTC).
    Raises RowError for an unknown event type or a column that cannot be read.
    """
    event_type = row["event_type"]
    build = _BUILDERS.get(event_type)
    if build is None:
        raise RowError(f"the row at log offset {row.get('offset')} has an unknown event type {event_type!r}")
    try:
        event = build(row)
    except (KeyError, TypeError, ValueError) as exc:
        raise RowError(f"the {event_type} row at log offset {row.get('offset')} cannot be read: {exc!r}") from None
    return Envelope(
        int(row["offset"]),
        int(row["timestamp_ms"]),
        row["actor_principal"],
        row["actor_host"],
        row["request_id"],
        event,
        actor_asserted=bool(row.get("actor_asserted", True)),
        operator_user=row.get("operator_user") or "",
        operator_host=row.get("operator_host") or "",
        operator_pid=int(row.get("operator_pid") or 0),
        operator_program=row.get("operator_program") or "",
    )


def python_rows(data: pa.RecordBatch | pa.Table) -> list[dict[str, Any]]:
    """The rows as dicts, timestamp columns as milliseconds since the epoch (whatever their zone)."""
    columns = []
    for column in data.columns:
        if pa.types.is_timestamp(column.type):
            column = column.cast(pa.timestamp("ms", tz=column.type.tz), safe=False).cast(pa.int64())
        columns.append(column)
    return pa.table(columns, names=data.schema.names).to_pylist()
