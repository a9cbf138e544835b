"""Validity intervals (consumers/spark/intervals.py) derived from the kind declarations alone."""

from __future__ import annotations

import pytest

from tests.entitykit import WIDGETS, WidgetMade, WidgetPainted, WidgetResized, WidgetScrapped
from tests.extras import require_extra

require_extra("pyspark", "spark")

from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from secmeta.consumers.spark import intervals  # noqa: E402
from secmeta.consumers.spark.rows import SCHEMA  # noqa: E402
from secmeta.events import entities  # noqa: E402

# The widget's event rows, as the row schema would flatten them (one column per payload field).
_WIDGET_ROWS = StructType([
    *(SCHEMA[c] for c in ("offset", "timestamp", "actor_principal", "actor_host", "request_id", "event_type")),
    StructField("principals", ArrayType(StringType())),
    *(StructField(c, StringType()) for c in ("widget_id", "owner", "colour", "brush")),
    StructField("size", LongType()),
])
WIDGET = intervals.Kind.of(WIDGETS, column_of=lambda field: field)


def _rows(spark, events, start=0):
    from datetime import UTC, datetime, timedelta

    def row(offset, event):
        values = {"owner": None, "colour": None, "brush": None, "size": None} | {
            f: getattr(event, f) for f in event.__slots__}
        return (offset, datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=offset), "User:admin", "h",
                f"r{offset}", type(event).__name__, [], values["widget_id"], values["owner"], values["colour"],
                values["brush"], values["size"])

    return spark.createDataFrame([row(start + i, e) for i, e in enumerate(events)], _WIDGET_ROWS)


EVENTS = [WidgetMade("w", "User:ann", "red", 3), WidgetPainted("w", "blue", "wide"), WidgetResized("w", None),
          WidgetMade("v", "User:bo", "red", 1), WidgetResized("v", 2), WidgetMade("x", "User:cy", "green", 1),
          WidgetScrapped("x"), WidgetPainted("v", "gold", "fine")]


def _intervals(out) -> set:
    return {(r.widget_id, r.owner, r.colour, r.size, r.valid_from_offset, r.valid_to_offset, r.closed_event)
            for r in out.collect()}


@pytest.mark.parametrize("cut", [len(EVENTS), 2, 5])
def test_a_kind_declared_anywhere_gets_its_intervals_with_no_code_of_its_own(spark, cut):
    """The widget kind: an update carries its attributes (the others carry over), a null size closes as
    scrapping does; the same intervals whether the events come in one batch or two."""
    snapshot = spark.createDataFrame([], intervals.schema(WIDGET, _WIDGET_ROWS))
    out = intervals.advance(WIDGET, snapshot, _rows(spark, EVENTS[:cut]))
    closed = {r for r in _intervals(out) if r[5] is not None}
    if cut < len(EVENTS):
        opened = out.where("valid_to_offset IS NULL")
        out = intervals.advance(WIDGET, opened, _rows(spark, EVENTS[cut:], start=cut))
    assert closed | _intervals(out) == {
        ("w", "User:ann", "red", 3, 0, 1, "WidgetPainted"), ("w", "User:ann", "blue", 3, 1, 2, "WidgetResized"),
        ("v", "User:bo", "red", 1, 3, 4, "WidgetResized"), ("v", "User:bo", "red", 2, 4, 7, "WidgetPainted"),
        ("v", "User:bo", "gold", 2, 7, None, None), ("x", "User:cy", "green", 1, 5, 6, "WidgetScrapped")}


def test_every_declared_kind_has_its_tables_and_columns():
    """Each kind of secmeta.events.entities has its Spark kind, with its key and attributes as row columns."""
    assert [(k.name, k.intervals) for k in intervals.KINDS] == [(k.table, k.intervals_table) for k in entities.KINDS]
    for kind in intervals.KINDS:
        schema = intervals.schema(kind)
        assert {*kind.key, *kind.attributes} <= set(schema.fieldNames()) <= set(SCHEMA.fieldNames()) | set(
            intervals.INTERVAL_COLUMNS)
    tokens = intervals.Kind.of(entities.TOKENS)
    assert isinstance(intervals.schema(tokens)["expiry_timestamp"].dataType, TimestampType)
