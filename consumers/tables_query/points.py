"""Points in time over the compacted tables: what a point argument may be, and its offset N.

Shared by both engines (Spark's ``TableReader``, the embedded ``ArrowReader``): a reader here is
anything with ``offset``, ``version``, ``tables`` and ``offset_at_time(ms)``.

A point is given as

- an ``int``: an offset N, "the state after the first N events" (0 <= N <= the
  tables' version, ``reader.offset``);
- ``secmeta.core.forensics.timetravel.Point`` (``Point.at_offset(n)`` or ``Point.at_time(ms)``), or
  a mapping ``{"offset": n}`` / ``{"timestamp_ms": ms}`` (``secmeta.core.forensics.timetravel.as_point``);
- a ``str``: a time, ISO-8601 with a zone or epoch milliseconds
  (``secmeta.core.forensics.timetravel.parse_time``, the CLI's rule and messages);
- ``None``: the tables' current version.

A time T means the store's rule: after every batch stamped <= T, i.e. N is the
first offset stamped later than T (``TableReader.offset_at_time``). A time
after the newest compacted event gives the tables' version (the tables cannot
know of events the compaction job has not read yet); a time before the first
event gives 0 (the empty state; the store itself refuses times before its
creation, which the tables do not record).

``check_point`` validates without any Spark job; ``resolve`` may run one (a
time needs a scan of the history table).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Protocol

from secmeta.consumers.spark.tables import Tables, TablesError, Version
from secmeta.core.config import StoreConfig
from secmeta.core.errors import PointInTimeError, QueryError
from secmeta.core.times import Point, as_point, ms_to_datetime, parse_time

__all__ = ["PointArg", "check_history", "check_point", "check_time", "event_date_of", "offset_of", "require_order", "resolve", "settings"]

PointArg = int | str | Point | Mapping | None


class TableReader(Protocol):
    """One version of a tables directory, read by some engine."""

    tables: Tables
    version: Version

    @property
    def offset(self) -> int: ...

    def offset_at_time(self, timestamp_ms: int) -> int: ...



def check_point(reader: TableReader, at: PointArg) -> Point | None:
    """The point ``at`` names, validated against the tables' version (no Spark job); None: current.

    Raises PointInTimeError for a malformed point, a negative offset or an
    offset past the tables' version.
    """
    if at is None:
        return None
    if isinstance(at, str):
        return Point.at_time(parse_time(at))
    point = as_point(at)
    if point.offset is not None:
        n = point.offset
        if n < 0:
            raise PointInTimeError(f"offset {n} is negative")
        if n > reader.offset:
            raise PointInTimeError(
                f"offset {n} is past the tables' version: {reader.tables.path} holds events "
                f"[0, {reader.offset}); run `secmeta spark compact` to catch up")
    return point


def check_history(reader: TableReader, principal: str | None, user: str | None, start: PointArg,
                  end: PointArg) -> tuple[Point | None, Point | None]:
    """The history query's arguments checked (no engine job): the start and end points.

    Raises QueryError for a principal or user that is not a string and a start after the end
    (an offset and a time are not comparable without reading the tables: such a range may just be empty).
    """
    for name, value in (("principal", principal), ("user", user)):
        if value is not None and not isinstance(value, str):
            raise QueryError(f"{name} must be a string, not {value!r}")
    first, last = check_point(reader, start), check_point(reader, end)
    if first is not None and last is not None and (first.offset is None) == (last.offset is None):
        if (first.offset, first.timestamp_ms) > (last.offset, last.timestamp_ms):
            raise QueryError(f"the start ({first}) is after the end ({last})")
    return first, last


def check_time(value: int | str | Point, what: str = "time") -> int:
    """Epoch ms from an int, ISO-8601/epoch-ms text or ``Point.at_time`` (no Spark job)."""
    if isinstance(value, Point):
        if value.timestamp_ms is None:
            raise PointInTimeError(f"the {what} must be a time, not {value}")
        return value.timestamp_ms
    return parse_time(value)


def resolve(reader: TableReader, at: PointArg = None) -> int:
    """The offset N of a point: events [0, N) make the state there (a time costs one Spark job)."""
    point = check_point(reader, at)
    return offset_of(reader, point)


def offset_of(reader: TableReader, point: Point | None) -> int:
    if point is None:
        return reader.offset
    if point.offset is not None:
        return point.offset
    return reader.offset_at_time(point.timestamp_ms)  # type: ignore[arg-type]


def settings(reader: TableReader) -> StoreConfig:
    """The store settings the authorizer needs (super users, allow-if-no-ACL), from the version record."""
    config = reader.version.settings
    missing = [k for k in ("super_users", "allow_everyone_if_no_acl_found") if k not in config]
    if missing:
        raise TablesError(
            f"version {reader.version.delta_version} of {reader.tables.path} does not record the store's "
            f"{' and '.join(missing)}; run `secmeta spark compact` once more to record them")
    try:
        return StoreConfig(super_users=config["super_users"],  # checked strictly: "false" is no bool
                           allow_everyone_if_no_acl_found=config["allow_everyone_if_no_acl_found"])
    except (TypeError, ValueError) as exc:
        raise TablesError(f"version {reader.version.delta_version} of {reader.tables.path} has unusable "
                          f"settings: {exc}") from None


def event_date_of(timestamp_ms: int) -> date | None:
    """The ``event_date`` partition of a time (None when outside the dates Python can show)."""
    try:
        return ms_to_datetime(timestamp_ms).date()
    except OverflowError:
        return None


def require_order(first: int, second: int, names: tuple[str, str]) -> None:
    if first > second:
        raise QueryError(f"{names[0]} {first} is after {names[1]} {second}")
