"""Time in secmeta: clocks, milliseconds since the epoch, datetimes, ISO-8601 text, and points in time.

A clock is a callable returning seconds since the epoch (``time.time`` is the wall
clock); every timestamp secmeta writes is ``now_ms(clock)`` of the store's clock
(StoreConfig.clock), so a store given a fixed clock stamps everything with its time.
Times are stored and compared as integer milliseconds since the epoch, shown as
ISO-8601 UTC with milliseconds and ``Z`` (``format_ms``), and read from users as
ISO-8601 with a zone or as epoch milliseconds (``parse_time``).

A point is an offset N ("the store after the first N events", events with
offset < N) or a time T ("after every batch stamped <= T").
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, overload

from secmeta.core.errors import PointInTimeError

__all__ = [
    "EPOCH",
    "Clock",
    "Point",
    "as_point",
    "datetime_to_ms",
    "format_datetime",
    "format_ms",
    "ms_to_datetime",
    "now_ms",
    "parse_offset",
    "parse_time",
    "require_point_int",
    "time_field",
    "wall_clock",
    "with_times",
]

Clock = Callable[[], float]

wall_clock: Clock = time.time

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


# -- clocks and conversions ----------------------------------------------------------------


def now_ms(clock: Clock = wall_clock) -> int:
    """The clock's time now, in milliseconds since the epoch."""
    return int(clock() * 1000)


def ms_to_datetime(ms: int) -> datetime:
    """The UTC datetime exactly ``ms`` milliseconds after the epoch (OverflowError outside datetime's years)."""
    return EPOCH + int(ms) * _MS


def datetime_to_ms(moment: datetime) -> int:
    """Milliseconds since the epoch of ``moment`` (a naive datetime is taken as UTC), rounded down."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - EPOCH) // _MS


def format_datetime(moment: datetime) -> str:
    """ISO-8601 UTC with millisecond precision and ``Z`` (a naive datetime is taken as UTC)."""
    if moment.tzinfo is None:  # Spark hands back naive datetimes in the session's zone, which is UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_ms(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC with millisecond precision and ``Z`` ("N ms" outside datetime's years)."""
    try:
        return format_datetime(ms_to_datetime(ms))
    except OverflowError:
        return f"{ms} ms"


# A field holding a time in epoch ms ends in ``_ms`` after one of these words; others ending in ``_ms`` are
# durations (renew_period_ms, max_lifetime_ms, window_ms) and stay as they are.
_TIME_WORDS = ("timestamp", "start", "end", "until", "since", "before", "after")


def time_field(key: str) -> str | None:
    """The name of the ISO-8601 field shown beside the epoch-ms time field ``key``: ``timestamp_ms`` -> ``time``,
    ``issue_timestamp_ms`` -> ``issue_time``, ``start_ms`` -> ``start_time``; None for a key that holds no time."""
    if not key.endswith("_ms") or key[:-3].rsplit("_", 1)[-1] not in _TIME_WORDS:
        return None
    stem = key[:-3]
    return "time" if stem == "timestamp" else stem.removesuffix("_timestamp") + "_time"


@overload
def with_times(value: Mapping[str, Any]) -> dict[str, Any]:
    ...


@overload
def with_times(value: object) -> object:
    ...


def with_times(value: object) -> object:
    """``value`` (mappings and lists of them, to any depth) with an ISO-8601 UTC ``Z`` field (``format_ms``) beside
    every epoch-ms time field (``time_field``), the ms field kept: how every JSON answer, audit line and alert
    shows a time.  A field of that name already there is left as it is; None stays None."""
    if isinstance(value, Mapping):
        out: dict = {}
        for key, item in value.items():
            out[key] = with_times(item)
            shown = time_field(key) if isinstance(key, str) else None
            if shown is not None and shown not in value and (item is None or _is_ms(item)):
                out[shown] = None if item is None else format_ms(item)
        return out
    if isinstance(value, (list, tuple)):
        return [with_times(item) for item in value]
    return value


def _is_ms(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- what users type -------------------------------------------------------------------------


def parse_time(text: str | int) -> int:
    """Epoch milliseconds from ISO-8601 with a zone ("2024-05-01T14:00:00Z", "...+02:00") or epoch ms."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    if not isinstance(text, str):
        raise PointInTimeError(f"a time must be text, not {text!r}")
    raw = text.strip()
    if re.fullmatch(r"[0-9]+", raw):
        return int(raw)
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise PointInTimeError(
            f"malformed time {text!r}: give ISO-8601 with a zone (e.g. 2024-05-01T14:00:00Z) "
            "or epoch milliseconds") from None
    if moment.tzinfo is None:
        raise PointInTimeError(f"time {text!r} has no zone: add one (Z, +02:00, ...) so it means one instant")
    return datetime_to_ms(moment)


def parse_offset(text: str | int) -> int:
    """A log offset (a non-negative integer) from text."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif isinstance(text, str) and re.fullmatch(r"\s*[0-9]+\s*", text):
        value = int(text)
    else:
        raise PointInTimeError(f"malformed offset {text!r}: give a non-negative integer")
    if value < 0:
        raise PointInTimeError(f"offset {value} is negative")
    return value


# -- points ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Point:
    """An offset (the store after its first N events) or a time in epoch ms (after every batch <= T)."""

    offset: int | None = None
    timestamp_ms: int | None = None

    def __post_init__(self):
        if (self.offset is None) == (self.timestamp_ms is None):
            raise PointInTimeError("a point in time needs exactly one of an offset or a timestamp")
        require_point_int("offset", self.offset)
        require_point_int("timestamp", self.timestamp_ms)

    @classmethod
    def at_offset(cls, offset: int) -> Point:
        return cls(offset=offset)

    @classmethod
    def at_time(cls, timestamp_ms: int) -> Point:
        return cls(timestamp_ms=timestamp_ms)

    def __str__(self) -> str:
        return f"offset {self.offset}" if self.timestamp_ms is None else f"time {format_ms(self.timestamp_ms)}"


def as_point(value: object) -> Point:
    """A Point from an int offset, a Point, or a mapping with "offset" or "timestamp_ms"."""
    if isinstance(value, Point):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Point(offset=value)
    if isinstance(value, Mapping):
        unknown = set(value) - {"offset", "timestamp_ms"}
        if unknown:
            raise PointInTimeError(f"a point is given by 'offset' or 'timestamp_ms', not {sorted(unknown)}")
        return Point(offset=value.get("offset"), timestamp_ms=value.get("timestamp_ms"))
    raise PointInTimeError(f"not a point in time: {value!r} (give an offset, Point.at_time(ms) or "
                           "{'timestamp_ms': ms})")


def require_point_int(name: str, value: object) -> None:
    """A point's offset or time, when given, is an int (never a bool): else PointInTimeError naming it."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise PointInTimeError(f"the {name} of a point in time must be an integer, not {value!r}")
