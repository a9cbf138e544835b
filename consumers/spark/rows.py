"""One row schema for every secmeta Spark source, and how envelopes become rows.

``SCHEMA``: the envelope (offset, time, actor, request, event type, entity key),
then the payload flattened into nullable columns. Secrets never appear: a SCRAM
credential row carries the mechanism and iteration count only, tokens carry no
HMAC, because only the columns listed here are ever read from an event.

``event_row`` makes one Python row (for tests and small reads);
``arrow_batches`` turns envelopes into pyarrow RecordBatches, which is what the
sources hand to Spark (several times faster than tuples).
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from enum import Enum
from itertools import islice
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from projections.gc_pause import paused_gc

__all__ = ["ARROW_BATCH", "ARROW_SCHEMA", "SCHEMA", "arrow_batch", "arrow_batches", "event_row"]

ARROW_BATCH = 8192  # rows per Arrow batch handed to Spark

_TS = TimestampType()

# (column, Spark type, payload field it comes from; None: an envelope column).
# Timestamps in milliseconds become Spark timestamps (UTC, exact to the millisecond).
_COLUMNS: list[tuple[str, Any, str | None]] = [
    ("offset", LongType(), None),
    ("timestamp", _TS, None),
    ("timestamp_ms", LongType(), None),
    ("actor_principal", StringType(), None),
    ("actor_host", StringType(), None),
    ("request_id", StringType(), None),
    ("event_type", StringType(), None),
    ("entity_key", StringType(), None),
    ("acl_id", StringType(), "acl_id"),
    ("resource_type", StringType(), "resource_type"),
    ("resource_name", StringType(), "resource_name"),
    ("pattern_type", StringType(), "pattern_type"),
    ("principal", StringType(), "principal"),
    ("host", StringType(), "host"),
    ("operation", StringType(), "operation"),
    ("permission_type", StringType(), "permission_type"),
    ("user", StringType(), "user"),
    ("mechanism", StringType(), "mechanism"),
    ("iterations", IntegerType(), "iterations"),
    ("token_id", StringType(), "token_id"),
    ("owner", StringType(), "owner"),
    ("requester", StringType(), "requester"),
    ("renewers", ArrayType(StringType()), "renewers"),
    ("issue_timestamp", _TS, "issue_timestamp_ms"),
    ("expiry_timestamp", _TS, "expiry_timestamp_ms"),
    ("max_timestamp", _TS, "max_timestamp_ms"),
    ("renew_period_ms", LongType(), "renew_period_ms"),
    ("expiry_period_ms", LongType(), "expiry_period_ms"),
    ("reason", StringType(), "reason"),
]
_ENVELOPE_WIDTH = next(i for i, (_n, _t, source) in enumerate(_COLUMNS) if source is not None)

SCHEMA = StructType([StructField(name, dtype, nullable=True) for name, dtype, _ in _COLUMNS])

_ARROW_TYPES = {
    LongType: pa.int64(), IntegerType: pa.int32(), StringType: pa.string(),
    TimestampType: pa.timestamp("us", tz="UTC"),
}


def _arrow_type(dtype: Any) -> pa.DataType:
    if isinstance(dtype, ArrayType):
        return pa.list_(_arrow_type(dtype.elementType))
    return _ARROW_TYPES[type(dtype)]


ARROW_SCHEMA = pa.schema([pa.field(name, _arrow_type(dtype)) for name, dtype, _ in _COLUMNS])

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# How the columns filled from an ACL binding are read from an event's ``binding``.
_BINDING_FIELDS: dict[str, str] = {
    "resource_type": "b.pattern.resource_type._name_",
    "resource_name": "b.pattern.name",
    "pattern_type": "b.pattern.pattern_type._name_",
    "principal": "b.entry.principal",
    "host": "b.entry.host",
    "operation": "b.entry.operation._name_",
    "permission_type": "b.entry.permission_type._name_",
}


def _expression(source: str, dtype: Any, hints: dict[str, Any]) -> str:
    """The Python expression reading one payload column from event ``e`` (binding ``b``); "None" if absent.

    Enums become their names; timestamp columns stay in milliseconds (the caller converts them).
    """
    if source in _BINDING_FIELDS and "binding" in hints:
        return _BINDING_FIELDS[source]
    if source not in hints:
        return "None"
    if isinstance(dtype, ArrayType):
        return f"list(e.{source})"
    hint = hints[source]
    if isinstance(hint, type) and issubclass(hint, Enum):
        return f"e.{source}._name_"
    return f"e.{source}"


# The envelope columns, read from ``env`` (its event ``e``; TYPE: the event type's name).
_ENVELOPE_EXPRESSIONS = {
    "offset": "env.offset", "timestamp": "env.timestamp_ms", "timestamp_ms": "env.timestamp_ms",
    "actor_principal": "env.actor_principal", "actor_host": "env.actor_host", "request_id": "env.request_id",
    "event_type": "TYPE", "entity_key": "e.entity_key",
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
        namespace: dict[str, Any] = {}
        exec(compile(source, f"<secmeta row of {event_type.__name__}>", "exec"), namespace)  # noqa: S102
        maker = _ROW_MAKERS[event_type] = namespace["row"]
    return maker


def _raw_row(envelope) -> tuple:
    """A row with timestamps still in milliseconds."""
    return _row_maker(type(envelope.event))(envelope)


_TIME_COLUMNS = [i for i, (_n, dtype, _s) in enumerate(_COLUMNS) if isinstance(dtype, TimestampType)]


def event_row(envelope) -> tuple:
    """One row of ``SCHEMA`` for a decoded envelope (secrets left out by construction)."""
    row = list(_raw_row(envelope))
    for i in _TIME_COLUMNS:
        if row[i] is not None:
            row[i] = _EPOCH + timedelta(milliseconds=row[i])
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
