"""From events to validity intervals: the Spark transformation behind the compacted tables.

For each kind of entity (``secmeta.events.entities.KINDS``: ACLs, SCRAM credentials,
delegation tokens, ...) the state at any point is a set of *intervals*: an entity with
its attributes, valid from the event that set them to the event that replaced or removed
them. The open intervals are the current snapshot; closed ones never change again.

``advance(kind, snapshot, events)`` takes the snapshot (open intervals) before
a micro-batch and the batch's event rows, and returns one DataFrame: the new
snapshot (open intervals, ``valid_to_offset`` null) and the intervals the batch
closed, so one job writes both. Only entities the batch touches are windowed;
the others pass through. The rules are the kind's declaration, as the projections
replay it (``EntityKind.role``):

- an opening event opens a new interval (closing the open one of its key: a
  replaced credential);
- an update carries some attributes (the others are null in its row and carry
  over from the interval before): it closes the interval and opens one with the
  changed attributes (a token's new expiry);
- a closing event closes, and so does an opening or update event whose
  ``closed_when_none`` column is null (a removed quota value);
- single-use keys (acl ids are never reused): the batch's closes are joined to
  the open rows: no window, and no shuffle of the snapshot when the closes are
  few enough to broadcast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from secmeta.consumers.spark.rows import SCHEMA, column_of
from secmeta.core.errors import InvalidValueError
from secmeta.events import entities
from secmeta.events.entities import EntityKind

__all__ = ["CLOSE_COLUMNS", "INTERVAL_COLUMNS", "KINDS", "OPEN_COLUMNS", "Kind", "advance", "columns", "project",
           "schema"]


@dataclass(frozen=True)
class Kind:
    """One entity kind in Spark's terms (``Kind.of`` an ``EntityKind``): table names, key and attribute
    columns, the names of the events that open, update or close it."""

    name: str  # snapshot table name
    intervals: str  # validity-interval table name
    key: tuple[str, ...]
    attributes: tuple[str, ...]
    opens: tuple[str, ...]
    closes: tuple[str, ...]
    updates: tuple[str, ...] = ()  # events carrying only some attributes (the others carry over)
    # Each key opens at most once and closes at most once (acl ids are never reused): an interval is
    # then an opening row joined with its closing event, and no window over the key is needed.
    single_use_keys: bool = False
    # A null here closes the entity, for the events named in closing_when_none (those carrying the column).
    closed_when_none: str | None = None
    closing_when_none: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.single_use_keys and self.updates:
            raise InvalidValueError(f"{self.name}: a kind with update events needs the window, not single-use keys")

    @classmethod
    def of(cls, kind: EntityKind, column_of: Callable[[str], str] = column_of) -> Kind:
        """The Spark form of a declared kind: payload fields become their row columns (``rows.column_of``)."""
        return cls(
            kind.table, kind.intervals_table, tuple(map(column_of, kind.key)), tuple(map(column_of, kind.attributes)),
            kind.open_names, kind.close_names, kind.update_names, kind.single_use_keys,
            None if kind.closed_when_none is None else column_of(kind.closed_when_none),
            tuple(t.__name__ for t in kind.closing_when_none))

    @property
    def event_types(self) -> tuple[str, ...]:
        return self.opens + self.updates + self.closes


KINDS = tuple(Kind.of(kind) for kind in entities.KINDS)

# Who and what opened an interval (every table), and closed it (interval tables only).
OPEN_COLUMNS = ("valid_from_offset", "valid_from", "opened_by", "opened_by_host", "opened_request_id",
                "opened_event")
CLOSE_COLUMNS = ("valid_to_offset", "valid_to", "closed_by", "closed_by_host", "closed_request_id",
                  "closed_event")
INTERVAL_COLUMNS = OPEN_COLUMNS + CLOSE_COLUMNS
_EVENT_FIELDS = ("offset", "timestamp", "actor_principal", "actor_host", "request_id", "event_type")
_ACTION = "_action"
_CLOSE_TYPES = {"valid_to_offset": LongType(), "valid_to": TimestampType()}  # the other close columns: strings


def project(kind: Kind, events: DataFrame) -> DataFrame:
    """The events of ``kind`` as interval-opening rows (close events carry no attributes), plus an action column."""
    types = F.col("event_type")
    closing = types.isin(*kind.closes)
    if kind.closed_when_none is not None:
        closing = closing | (types.isin(*kind.closing_when_none) & F.col(kind.closed_when_none).isNull())
    action = F.when(closing, F.lit("close"))
    if kind.updates:
        action = action.when(types.isin(*kind.updates), F.lit("update"))
    action = action.otherwise(F.lit("open"))
    # an update carries the attributes it changes (the others are null and carry over); a close none
    attributes = [F.when(action != "close", F.col(a)).alias(a) for a in kind.attributes]
    return events.where(types.isin(*kind.event_types)).select(
        *[F.col(k) for k in kind.key], *attributes,
        *[F.col(src).alias(dst) for src, dst in zip(_EVENT_FIELDS, OPEN_COLUMNS, strict=True)],
        *[F.lit(None).cast(_CLOSE_TYPES.get(c, StringType())).alias(c) for c in CLOSE_COLUMNS],
        action.alias(_ACTION),
    )


def schema(kind: Kind, events: StructType = SCHEMA) -> StructType:
    """The schema of ``kind``'s interval and snapshot tables (``advance``'s output), from the event schema."""
    source = {f.name: f.dataType for f in events.fields}
    types = {**{c: source[c] for c in (*kind.key, *kind.attributes)},
             **{dst: source[src] for src, dst in zip(_EVENT_FIELDS, OPEN_COLUMNS, strict=True)},
             **{c: _CLOSE_TYPES.get(c, StringType()) for c in CLOSE_COLUMNS}}
    return StructType([StructField(c, types[c], nullable=True) for c in columns(kind)])


def columns(kind: Kind) -> list[str]:
    """The columns of an interval (and snapshot) table of ``kind``, in order."""
    return [*kind.key, *kind.attributes, *INTERVAL_COLUMNS]


def advance(kind: Kind, snapshot: DataFrame, events: DataFrame, few_closes: bool = False) -> DataFrame:
    """The snapshot after ``events`` (rows with a null ``valid_to_offset``) and the intervals they closed.

    ``snapshot``: the open intervals before ``events`` (as ``columns(kind)``).
    ``few_closes``: the events close few enough intervals to send them to every
    task (a broadcast join: no shuffle of the snapshot) where ``kind`` allows it.
    """
    changes = project(kind, events)
    if kind.single_use_keys:
        return _joined(kind, snapshot, changes, few_closes)
    touched = changes.select(*kind.key).distinct()
    keep = snapshot.join(touched, list(kind.key), "left_anti")
    rows = (snapshot.join(touched, list(kind.key), "left_semi").withColumn(_ACTION, F.lit("open"))
            .unionByName(changes))
    by_key = Window.partitionBy(*kind.key).orderBy("valid_from_offset")
    if kind.updates:
        carried = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        rows = rows.select(
            *kind.key, *[F.last(a, ignorenulls=True).over(carried).alias(a) for a in kind.attributes],
            *OPEN_COLUMNS, _ACTION)
    rows = rows.select(
        *kind.key, *kind.attributes, *OPEN_COLUMNS, _ACTION,
        *[F.lead(src).over(by_key).alias(dst) for src, dst in zip(OPEN_COLUMNS, CLOSE_COLUMNS, strict=True)])
    states = rows.where(F.col(_ACTION) != "close").select(*columns(kind))
    return keep.select(*columns(kind)).unionByName(states)


def _joined(kind: Kind, snapshot: DataFrame, changes: DataFrame, few_closes: bool) -> DataFrame:
    """``advance`` for single-use keys: every opening row (snapshot or batch) left-joined with its close."""
    opens = changes.where(F.col(_ACTION) == "open").select(*columns(kind))
    closes = changes.where(F.col(_ACTION) == "close").select(
        *kind.key, *[F.col(src).alias(dst) for src, dst in zip(OPEN_COLUMNS, CLOSE_COLUMNS, strict=True)])
    if few_closes:
        closes = F.broadcast(closes)
    rows = snapshot.select(*columns(kind)).unionByName(opens).drop(*CLOSE_COLUMNS)
    return rows.join(closes, list(kind.key), "left").select(*columns(kind))
