"""Delegation tokens alive at some moment of a time window, from the token interval table.

Definitions (times in epoch ms):

- a token interval (one row of ``token_intervals``: the token with one expiry)
  is in the state at time t when ``valid_from <= t < valid_to`` (``valid_to``
  null: still open at the tables' version). This is the store's rule, the state
  after every batch stamped <= t, given that batch times do not go backwards;
- a token is *alive* at t when one of its intervals is in the state at t and
  it is not expired at t. Kafka's rule (``secmeta.projections.tokens.TokenInfo.is_expired``,
  the one the store authenticates by): expired iff t > expiry or t > max
  timestamp, so a token is still alive at its expiry instant;
- a token is alive in [T1, T2] when it is alive at some t with T1 <= t <= T2.
  Within one interval the earliest such t is best, t* = max(T1, valid_from), so
  an interval counts iff ``t* <= T2 AND (valid_to IS NULL OR valid_to > t*) AND
  t* <= least(expiry_timestamp, max_timestamp)``.

Equivalently: the tokens of ``store.as_of(timestamp_ms=t)`` not expired at t,
for t = T1 and every batch time in (T1, T2] (the state only changes at batch
times).

``token_access_at``: who could act as whom through a token at a point, by the store's
rule (``secmeta.core.forensics.token_access``) over the token events of the history table.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from secmeta.consumers.spark.rows import SCHEMA, column_of, envelope_from_row
from secmeta.consumers.spark.table_reader import TableReader
from secmeta.consumers.tables_query import rules
from secmeta.consumers.tables_query.answers import AliveToken
from secmeta.consumers.tables_query.points import check_time, require_order
from secmeta.core.forensics.backend import HistoryEntry
from secmeta.core.forensics.token_access import TokenAccess, token_accesses
from secmeta.core.times import Point
from secmeta.events.entities import TOKENS
from secmeta.projections.tokens import TOKEN_FIELDS

__all__ = ["AliveToken", "alive_in", "token_access_at", "token_columns", "tokens_alive"]


def token_columns() -> list[Column]:
    """The columns of a token table row as ``TOKEN_FIELDS`` (timestamps as epoch ms): ``TokenInfo.of`` reads them."""
    def read(field: str) -> Column:
        column = column_of(field)
        value = F.unix_millis(column) if isinstance(SCHEMA[column].dataType, TimestampType) else F.col(column)
        return value.alias(field)

    return [read(field) for field in TOKEN_FIELDS]


def tokens_alive(reader: TableReader, t1: int | str | Point, t2: int | str | Point | None = None) -> list[AliveToken]:
    """Tokens alive at some moment of [t1, t2] (inclusive; t2 defaults to t1), sorted by token id.

    ``t1``/``t2`` are times: epoch ms (an int here is a time, not an offset), ISO-8601
    text with a zone, or ``Point.at_time``. Raises PointInTimeError / QueryError
    for a malformed time or t1 after t2 before any Spark job.
    """
    start = check_time(t1, "start of the window")
    end = start if t2 is None else check_time(t2, "end of the window")
    require_order(start, end, ("the window's start", "its end"))
    found = alive_in(reader.intervals("token_intervals"), start, end).collect()
    return sorted((AliveToken.of(r["last"].asDict(), alive_from_ms=r.alive_from) for r in found),
                  key=lambda t: t.token_id)


def alive_in(intervals: DataFrame, start: int, end: int) -> DataFrame:
    """Per token alive in [start, end] (epoch ms): ``alive_from`` and its ``last`` interval alive there
    (a struct of ``TOKEN_FIELDS``).

    ``intervals``: rows shaped like the ``token_intervals`` table.
    """
    rows = intervals.select(
        *token_columns(), "valid_from_offset",
        F.unix_millis("valid_from").alias("from_ms"), F.unix_millis("valid_to").alias("to_ms"),
    ).withColumn("t", F.expr(rules.alive_from(start)))
    alive = rows.where(F.expr(rules.token_alive(start, end)))
    last = F.struct(*TOKEN_FIELDS)
    return (alive.groupBy("token_id")
            .agg(F.min("t").alias("alive_from"), F.max_by(last, "valid_from_offset").alias("last")))


def token_access_at(reader: TableReader, n: int, now_ms: int | None = None) -> list[TokenAccess]:
    """The token accesses live in the state after the first ``n`` events at ``now_ms`` (default: the time of
    that state's last event), as ``store.token_access(at=...)`` answers: the store's fold
    (``token_accesses``) over the token events before ``n`` (the history table starts at offset 0)."""
    wanted = F.col("event_type").isin(*TOKENS.event_names) & (F.col("offset") < F.lit(n))
    if now_ms is None:  # the state's last event too, for its time: one Spark job for both
        wanted = wanted | (F.col("offset") == F.lit(n - 1))
    # the token events are few: sorted here rather than by a Spark sort (a sampling job and a shuffle)
    rows = sorted(reader.history().where(wanted).collect(), key=lambda row: row.offset)
    if now_ms is None:
        if not rows or rows[-1].offset != n - 1:
            return []
        now_ms = rows[-1].timestamp_ms
    entries = (HistoryEntry.of(envelope_from_row(row.asDict())) for row in rows
               if row.event_type in TOKENS.event_names)
    return [a for a in token_accesses(entries) if a.live(n, now_ms)]
