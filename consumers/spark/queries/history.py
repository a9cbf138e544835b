"""The change history of a principal or SCRAM user, from the history table.

The matching rules are ``secmeta.core.forensics.history.history``'s:

- every row has ``action`` (``EntityKind.action``: created, rotated, altered, updated, deleted), from
  whether its entity was open before it (its previous row by entity key);
- ``principal`` matches an ACL that concerns it (``acl_decision.concerns``: a 'User:*' grant, an
  ACL on the USER resource naming it), an event whose actor is the principal, or that names it
  (the ``principals`` column: its kind's ``principals``, ``secmeta.events.entities``:
  an ACL's principal, a SCRAM user as ``User:<name>``, a token's owner, requester
  or renewer), or a later event of an entity whose opening event named it, for
  kinds that carry their parties (a token's renewal names only the token: a
  semi-join by entity key with the opening events of the history table, which
  always starts at offset 0);
- ``user`` matches the SCRAM credential events (``CREDENTIALS``) of that user;
- ``start`` / ``end`` bound the changes: an offset start N keeps offsets >= N, an
  offset end N keeps offsets < N (the changes that made the state at N); a time
  start T keeps events stamped >= T and a time end T events stamped <= T (both
  inclusive, like ``store.history(start_ms=, end_ms=)`` and ``--since/--until``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from secmeta.consumers.spark.queries.acls import covering
from secmeta.consumers.spark.rows import column_of
from secmeta.consumers.spark.table_reader import TableReader
from secmeta.consumers.tables_query.points import PointArg, check_history, event_date_of
from secmeta.events.entities import ACLS, CREDENTIALS, KINDS
from secmeta.events.types import WILDCARD_PRINCIPAL, ResourceType

__all__ = ["change_history"]

_PARTY_OPENS = tuple(name for kind in KINDS if kind.carries_parties for name in kind.open_names)
_PARTY_LATER = tuple(name for kind in KINDS if kind.carries_parties for name in kind.update_names + kind.close_names)


def change_history(
    reader: TableReader,
    principal: str | None = None,
    user: str | None = None,
    start: PointArg = None,
    end: PointArg = None,
) -> DataFrame:
    """The history rows (redacted: the history table's columns) that pass every filter, by offset.

    Both filters None: every change in the range. Raises QueryError /
    PointInTimeError for bad arguments before any Spark job.
    """
    first, last = check_history(reader, principal, user, start, end)

    history = _with_action(reader.history())
    rows = history
    if first is not None:
        if first.offset is not None:
            rows = rows.where(F.col("offset") >= first.offset)
        else:
            rows = rows.where(F.col("timestamp_ms") >= first.timestamp_ms)
            day = event_date_of(first.timestamp_ms)  # partition pruning: same rows
            if day is not None:
                rows = rows.where(F.col("event_date") >= F.lit(day))
    if last is not None:
        if last.offset is not None:
            rows = rows.where(F.col("offset") < last.offset)
        else:
            rows = rows.where(F.col("timestamp_ms") <= last.timestamp_ms)
            day = event_date_of(last.timestamp_ms)
            if day is not None:
                rows = rows.where(F.col("event_date") <= F.lit(day))
    if user is not None:
        rows = rows.where(F.col("event_type").isin(*CREDENTIALS.event_names) & (F.col("user") == F.lit(user)))
    if principal is not None:
        rows = _involving(history, rows, principal)
    return rows.drop("_replaced_principals").orderBy("offset")


def _involving(history: DataFrame, rows: DataFrame, principal: str) -> DataFrame:
    p = F.lit(principal)
    event = F.col("event_type")
    named = F.coalesce(F.array_contains(F.col("principals"), p), F.lit(False))
    parties = (history.where(event.isin(*_PARTY_OPENS) & named)
               .select(F.col("entity_key").alias("_involved_entity")).distinct())
    later = event.isin(*_PARTY_LATER) & (F.col("entity_key") == F.col("_involved_entity"))
    marked = rows.join(F.broadcast(parties), later, "left")
    # acl_decision.concerns: a 'User:*' grant, or an ACL on the USER resource naming the principal
    concerns = event.isin(*ACLS.event_names) & (
        (F.col(column_of("principal")) == F.lit(WILDCARD_PRINCIPAL)) | covering(ResourceType.USER, principal))
    replaced = F.coalesce(F.array_contains(F.col("_replaced_principals"), p), F.lit(False))
    involved = (F.coalesce(F.col("actor_principal") == p, F.lit(False)) | named | replaced
                | F.col("_involved_entity").isNotNull() | F.coalesce(concerns, F.lit(False)))
    return marked.where(involved).drop("_involved_entity")


def _role() -> Column:
    """EntityKind.role of each row: its event type, and None in a ``closed_when_none`` column closes."""
    role = None
    for kind in KINDS:
        closing = F.col("event_type").isin(*kind.close_names)
        if kind.closed_when_none is not None:
            closing = closing | (F.col("event_type").isin(*(t.__name__ for t in kind.closing_when_none))
                                 & F.col(column_of(kind.closed_when_none)).isNull())
        for name, value in ((None, "close"), ("update", "update"), ("open", "open")):
            test = closing if name is None else F.col("event_type").isin(
                *(kind.update_names if name == "update" else kind.open_names))
            role = F.when(test, value) if role is None else role.when(test, value)
    assert role is not None, "KINDS declares at least one kind"
    return role


def _with_action(history: DataFrame) -> DataFrame:
    """``history`` with ``action``: EntityKind.action of each row's role and whether its entity was open before
    (its previous row, by entity key, did not close it); the rule's words are asked of each kind.

    Built from few Column calls (each is a round trip to the JVM): the role and whether the entity was open are
    columns of their own (one window), their six combinations are shared by every kind's words."""
    by_entity = Window.partitionBy("entity_key").orderBy("offset")
    role, was_open = F.col("_role"), F.col("_was_open")
    cases = {(name, before): (role == F.lit(name)) & (was_open if before else ~was_open)
             for name in ("open", "update", "close") for before in (True, False)}
    action = None
    for kind in KINDS:
        words = None
        for (name, before), test in cases.items():
            word = kind.action(name, before)
            words = F.when(test, word) if words is None else words.when(test, word)
        of_kind = F.col("event_type").isin(*kind.event_names)
        action = F.when(of_kind, words) if action is None else action.when(of_kind, words)
    # entities.Parties: an opening event of a kind that carries its parties also involves those its entity's
    # previous opening event named (a super.users value replaced)
    replaced = F.when(F.col("event_type").isin(*_PARTY_OPENS), F.lag("principals").over(by_entity))
    return (history.withColumn("_role", _role())
            .withColumn("_was_open", F.coalesce(F.lag("_role").over(by_entity) != F.lit("close"), F.lit(False)))
            .withColumn("action", action).withColumn("_replaced_principals", replaced).drop("_role", "_was_open"))
