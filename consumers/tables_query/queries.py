"""Point-in-time questions over the compacted tables with Polars: the answers of
``secmeta.consumers.spark.queries``, without a JVM.

    reader = ArrowReader(TABLES)
    acls_at(reader, 120)                                   # -> [AclInForce]
    who_could_at(reader, "READ", "TOPIC", "payments", "2027-01-15T08:00:00Z")   # -> [Grant]
    change_history(reader, principal="User:alice")         # -> [history row + action]
    tokens_alive(reader, t1_ms, t2_ms)                     # -> [AliveToken]

Points, argument checks and messages are ``points``' (shared with Spark); the interval rules are
``rules``' SQL text; the decisions are the store's own code: ``who_could`` over the ACLs that
bear on the resource (``acl_match.covers`` picks them), the history rule
(``core.forensics.scan.matching_entries``) over the history table's events from offset 0, and
``token_accesses`` over its token events.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from secmeta.consumers.spark.rows import column_of, envelope_from_row
from secmeta.consumers.tables_query import rules
from secmeta.consumers.tables_query.answers import AclInForce, AliveToken, acl_binding
from secmeta.consumers.tables_query.points import (
    PointArg,
    check_history,
    check_point,
    check_time,
    offset_of,
    require_order,
    settings,
)
from secmeta.consumers.tables_query.reader import ArrowReader
from secmeta.core.config import StoreConfig
from secmeta.core.forensics.backend import HistoryEntry, HistoryQuery
from secmeta.core.forensics.queries import Grant, resource_question, who_could
from secmeta.core.forensics.scan import matching_entries
from secmeta.core.forensics.token_access import TokenAccess, token_accesses
from secmeta.core.settings import with_values
from secmeta.core.times import Point
from secmeta.events.entities import SETTINGS, TOKENS
from secmeta.events.types import output_name
from secmeta.projections.acl_match import covers
from secmeta.projections.acls import AclsImage
from secmeta.projections.image import SecurityImage
from secmeta.projections.tokens import TOKEN_FIELDS

__all__ = ["acls_at", "acls_in_force", "change_history", "resolve", "tokens_alive", "who_could_at"]


def resolve(reader: ArrowReader, at: PointArg = None) -> int:
    """The offset N of a point: events [0, N) make the state there."""
    return offset_of(reader, check_point(reader, at))


def acls_in_force(reader: ArrowReader, n: int) -> pl.DataFrame:
    """The ACL intervals in force at offset ``n`` (already validated): one row per ACL (as Spark's)."""
    if n == reader.offset or n in {k.offset for k in reader.version.kept}:
        return reader.snapshot("acls", n)
    return reader.intervals("acl_intervals").filter(pl.sql_expr(rules.in_force(n)))


def acls_at(reader: ArrowReader, at: PointArg = None) -> list[AclInForce]:
    """Every ACL in force at the point (default: the tables' version), sorted by ACL id."""
    n = offset_of(reader, check_point(reader, at))
    rows = acls_in_force(reader, n).with_columns(pl.col("valid_from").dt.epoch("ms").alias("created_ms"))
    return sorted((AclInForce(r["acl_id"], acl_binding(r), r["valid_from_offset"], r["created_ms"], r["opened_by"],
                              r["opened_by_host"], r["opened_request_id"]) for r in rows.iter_rows(named=True)),
                  key=lambda a: a.acl_id)


def settings_at(reader: ArrowReader, n: int) -> StoreConfig:
    """The settings in force at offset ``n``: the version record's, with the logged settings open there."""
    name, value = column_of(SETTINGS.key[0]), column_of(SETTINGS.attributes[0])
    rows = reader.intervals(SETTINGS.intervals_table).filter(pl.sql_expr(rules.in_force(n))).select(name, value)
    return with_values(settings(reader), dict(rows.iter_rows()))


def who_could_at(reader: ArrowReader, operation, resource_type, resource_name: str,
                 at: PointArg = None) -> list[Grant]:
    """Every grant by which some principal could perform ``operation`` on the resource at the point: exactly
    ``store.who_could(...)`` and Spark's ``who_could_at``."""
    op, rt, resource_name = resource_question(operation, resource_type, resource_name)
    point = check_point(reader, at)
    n = offset_of(reader, point)
    config = settings_at(reader, n)
    rows = acls_in_force(reader, n).filter(pl.col("resource_type") == output_name(rt))
    pairs = [(r["acl_id"], b) for r in rows.iter_rows(named=True)
             if covers((b := acl_binding(r)).pattern, rt, resource_name)]
    image = SecurityImage(acls=AclsImage.of(pairs), next_offset=n)
    tokens = token_access_at(reader, n, None if point is None else point.timestamp_ms)
    return who_could(image, config, op, rt, resource_name, tokens)


def _envelopes(history: pl.DataFrame):
    """The events of history table rows (``rows.envelope_from_row``; times as epoch ms)."""
    stamps = [c for c, t in history.schema.items() if isinstance(t, pl.Datetime)]
    rows = history.with_columns(pl.col(c).dt.epoch("ms") for c in stamps).iter_rows(named=True)
    return (envelope_from_row(row) for row in rows)


def token_access_at(reader: ArrowReader, n: int, now_ms: int | None = None) -> list[TokenAccess]:
    """The token accesses live after the first ``n`` events at ``now_ms`` (default: the time of that state's last
    event): the store's fold over the history table's token events before ``n``."""
    history = reader.history()
    if now_ms is None:
        last = history.filter(pl.col("offset") == n - 1)["timestamp_ms"]
        if last.is_empty():
            return []
        now_ms = int(last[0])
    tokens = history.filter(pl.col("event_type").is_in(list(TOKENS.event_names)) & (pl.col("offset") < n))
    return [a for a in token_accesses(HistoryEntry.of(e) for e in _envelopes(tokens)) if a.live(n, now_ms)]


def change_history(reader: ArrowReader, principal: str | None = None, user: str | None = None,
                   start: PointArg = None, end: PointArg = None) -> list[dict[str, Any]]:
    """The history rows (the history table's columns, plus ``action``) that pass every filter, by offset:
    the rows of Spark's ``change_history``, chosen by the store's history rule."""
    first, last = check_history(reader, principal, user, start, end)
    lo, hi = 0, reader.offset
    start_ms = end_ms = None
    if first is not None:  # a time start: from the first event stamped at or after it (the store's rule)
        if first.offset is not None:
            lo = first.offset
        else:
            start_ms = first.timestamp_ms
            lo = reader.offset_at_time(start_ms - 1)  # type: ignore[operator]
    if last is not None:
        if last.offset is not None:
            hi = last.offset
        else:
            end_ms = last.timestamp_ms
            hi = reader.offset_at_time(end_ms)  # type: ignore[arg-type]
    query = HistoryQuery(lo, hi, principal, user, None, None, start_ms, end_ms)
    history = reader.history().filter(pl.col("offset") < query.hi)
    chosen = {e.offset: e.action for e in matching_entries(_envelopes(history), query, dict, frozenset)}
    rows = history.filter(pl.col("offset").is_in(list(chosen))).iter_rows(named=True)
    return [{**row, "action": chosen[row["offset"]]} for row in rows]


def tokens_alive(reader: ArrowReader, t1: int | str | Point, t2: int | str | Point | None = None) -> list[AliveToken]:
    """Tokens alive at some moment of [t1, t2] (inclusive; t2 defaults to t1), sorted by token id: ``rules``'
    ``token_alive`` over the token intervals, as Spark's ``tokens_alive``."""
    start = check_time(t1, "start of the window")
    end = start if t2 is None else check_time(t2, "end of the window")
    require_order(start, end, ("the window's start", "its end"))
    stamps = {column_of(f): f for f in TOKEN_FIELDS if column_of(f) != f}
    rows = reader.intervals("token_intervals").with_columns(
        *[pl.col(c).dt.epoch("ms").alias(f) for c, f in stamps.items()],
        pl.col("valid_from").dt.epoch("ms").alias("from_ms"), pl.col("valid_to").dt.epoch("ms").alias("to_ms"),
    ).filter(pl.sql_expr(rules.token_alive(start, end))).with_columns(
        pl.sql_expr(rules.alive_from(start)).alias("t"))
    found: dict[str, tuple[int, int, dict]] = {}
    for r in rows.iter_rows(named=True):
        alive_from, newest, row = found.get(r["token_id"], (r["t"], -1, r))
        found[r["token_id"]] = (min(alive_from, r["t"]), *((r["valid_from_offset"], r)
                                                           if r["valid_from_offset"] > newest else (newest, row)))
    return sorted((AliveToken.of(row, alive_from_ms=alive_from) for alive_from, _, row in found.values()),
                  key=lambda t: t.token_id)
