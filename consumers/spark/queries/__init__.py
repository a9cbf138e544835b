"""Point-in-time questions over the compacted Spark tables, answered as the store answers them.

    reader = TableReader(spark, TABLES)                       # one consistent version
    acls_at(reader, 120)                                      # ACLs after the first 120 events
    acls_at(reader, "2027-01-15T08:00:00Z")                   # ... or at a time
    who_could_at(reader, "READ", "TOPIC", "payments", at=Point.at_time(ms))   # -> [Grant]
    change_history(reader, principal="User:alice", start="2027-01-01T00:00:00Z")  # -> DataFrame
    tokens_alive(reader, t1_ms, t2_ms)                        # -> [AliveToken]
    resolve(reader, at)                                       # -> offset N

A point (``at``, ``start``, ``end``) is an int offset, ``secmeta.core.forensics.timetravel.Point``,
``{"offset": n}`` / ``{"timestamp_ms": ms}``, ISO-8601/epoch-ms text (a time), or
None (the tables' version); see ``points``. Every function checks its arguments
before any Spark job and raises ``secmeta.core.forensics.timetravel.QueryError`` (or its subclass
``PointInTimeError``) with the CLI's messages; the version record's settings
(super users, allow.everyone.if.no.acl.found) shape ``who_could_at``.

Modules: ``points`` (point arguments, ``resolve``), ``acls`` (``acls_at``,
``who_could_at``), ``history`` (``change_history``), ``tokens`` (``tokens_alive``).
"""

from __future__ import annotations

from secmeta.consumers.spark.queries.acls import AclInForce, acls_at, acls_in_force, who_could_at
from secmeta.consumers.spark.queries.history import change_history
from secmeta.consumers.spark.queries.tokens import AliveToken, tokens_alive
from secmeta.consumers.tables_query.points import PointArg, check_point, resolve

__all__ = [
    "AclInForce",
    "AliveToken",
    "PointArg",
    "acls_at",
    "acls_in_force",
    "change_history",
    "check_point",
    "resolve",
    "tokens_alive",
    "who_could_at",
]
