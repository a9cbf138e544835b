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
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from secmeta.consumers.spark.queries.points import check_time, require_order
from secmeta.consumers.spark.table_reader import TableReader
from secmeta.core.forensics.timetravel import Point

__all__ = ["AliveToken", "alive_in", "tokens_alive"]


@dataclass(frozen=True, slots=True)
class AliveToken:
    """A token alive at some moment of the window (no HMAC: the tables never hold one).

    ``alive_from_ms``: the first moment of the window it was alive;
    ``expiry_timestamp_ms``: its expiry as it stood in its last interval alive in the window.
    """

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int
    alive_from_ms: int

    def to_dict(self) -> dict:
        return {"token_id": self.token_id, "owner": self.owner, "requester": self.requester,
                "renewers": list(self.renewers), "issue_timestamp_ms": self.issue_timestamp_ms,
                "expiry_timestamp_ms": self.expiry_timestamp_ms, "max_timestamp_ms": self.max_timestamp_ms,
                "alive_from_ms": self.alive_from_ms}


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
    return sorted((AliveToken(r.token_id, r["last"].owner, r["last"].requester, tuple(r["last"].renewers or ()),
                              r["last"].issue_ms, r["last"].expiry_ms, r["last"].max_ms, r.alive_from)
                   for r in found), key=lambda t: t.token_id)


def alive_in(intervals: DataFrame, start: int, end: int) -> DataFrame:
    """Per token alive in [start, end] (epoch ms): ``alive_from`` and its ``last`` interval alive there.

    ``intervals``: rows shaped like the ``token_intervals`` table.
    """
    rows = intervals.select(
        "token_id", "owner", "requester", "renewers", "valid_from_offset",
        F.unix_millis("valid_from").alias("from_ms"), F.unix_millis("valid_to").alias("to_ms"),
        F.unix_millis("issue_timestamp").alias("issue_ms"), F.unix_millis("expiry_timestamp").alias("expiry_ms"),
        F.unix_millis("max_timestamp").alias("max_ms"),
    ).withColumn("t", F.greatest(F.lit(start), F.col("from_ms")))
    not_expired = F.col("t") <= F.least(F.col("expiry_ms"), F.col("max_ms"))
    alive = rows.where((F.col("t") <= F.lit(end)) & (F.col("to_ms").isNull() | (F.col("to_ms") > F.col("t")))
                       & not_expired)
    last = F.struct("owner", "requester", "renewers", "issue_ms", "expiry_ms", "max_ms")
    return (alive.groupBy("token_id")
            .agg(F.min("t").alias("alive_from"), F.max_by(last, "valid_from_offset").alias("last")))
