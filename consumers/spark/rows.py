"""One row schema for every secmeta Spark source, and how envelopes become rows.

``SCHEMA``: the envelope (offset, time, actor, request, event type, entity key),
then the payload flattened into nullable columns. Secrets never appear: a SCRAM
credential row carries the mechanism and iteration count only, tokens carry no
HMAC, because only the columns listed here are ever read from an event.

``event_row`` makes one Python row (for tests and small reads);
``arrow_batch`` makes a pyarrow RecordBatch of many envelopes, which is what the
sources hand to Spark (several times faster than tuples).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from enum import Enum
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

__all__ = ["ARROW_SCHEMA", "SCHEMA", "arrow_batch", "event_row"]

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
_ENVELOPE_WIDTH = 8
_WIDTH = len(_COLUMNS)

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


def _name(value: Any) -> Any:
    return value.name if isinstance(value, Enum) else value


_BINDING_FIELDS: dict[str, Any] = {
    "resource_type": lambda b: b.restype.name,
    "resource_name": lambda b: b.name,
    "pattern_type": lambda b: b.resource_pattern_type.name,
    "principal": lambda b: b.principal,
    "host": lambda b: b.host,
    "operation": lambda b: b.operation.name,
    "permission_type": lambda b: b.permission_type.name,
}


def _extractor(source: str, dtype: Any, event_type: type):
    """How one payload column is read from an event of ``event_type`` (None: the column is null).

    Timestamp columns are read as milliseconds; the caller converts them.
    """
    names = {f.name for f in fields(event_type)}
    if source in _BINDING_FIELDS and "binding" in names:
        get = _BINDING_FIELDS[source]
        return lambda event: get(event.binding)
    if source not in names:
        return None
    if isinstance(dtype, ArrayType):
        return lambda event: [str(v) for v in getattr(event, source)]
    return lambda event: _name(getattr(event, source))


_PLANS: dict[type, list[tuple[int, Any]]] = {}


def _plan(event_type: type) -> list[tuple[int, Any]]:
    """(column index, extractor) for every payload column an event type fills."""
    plan = _PLANS.get(event_type)
    if plan is None:
        plan = []
        for i, (_column, dtype, source) in enumerate(_COLUMNS):
            if source is not None and (get := _extractor(source, dtype, event_type)) is not None:
                plan.append((i, get))
        _PLANS[event_type] = plan
    return plan


def _raw_row(envelope) -> list:
    """A row with timestamps still in milliseconds."""
    event = envelope.event
    row: list[Any] = [None] * _WIDTH
    row[0] = envelope.offset
    row[1] = row[2] = envelope.timestamp_ms
    row[3] = envelope.actor_principal
    row[4] = envelope.actor_host
    row[5] = envelope.request_id
    row[6] = type(event).__name__
    row[7] = event.entity_key
    for index, get in _plan(type(event)):
        row[index] = get(event)
    return row


_TIME_COLUMNS = [i for i, (_n, dtype, _s) in enumerate(_COLUMNS) if isinstance(dtype, TimestampType)]


def event_row(envelope) -> tuple:
    """One row of ``SCHEMA`` for a decoded envelope (secrets left out by construction)."""
    row = _raw_row(envelope)
    for i in _TIME_COLUMNS:
        if row[i] is not None:
            row[i] = _EPOCH + timedelta(milliseconds=row[i])
    return tuple(row)


_MS = pa.timestamp("ms", tz="UTC")


def arrow_batch(envelopes: Sequence) -> pa.RecordBatch:
    """The rows of ``envelopes`` as one RecordBatch of ``ARROW_SCHEMA``."""
    if not envelopes:
        return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)
    columns = list(zip(*map(_raw_row, envelopes), strict=True))
    arrays = []
    for i, field in enumerate(ARROW_SCHEMA):
        if i in _TIME_COLUMNS:
            arrays.append(pa.array(columns[i], type=_MS).cast(field.type))
        else:
            arrays.append(pa.array(columns[i], type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
