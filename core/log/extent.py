"""The one wording of where a log ends: offsets are counted as Kafka counts them.

A log's end (``end_offset``, a high-water mark, a witness's or checkpoint's offset) is
the NEXT offset, the first one it does not hold.  Saying "the log ends at offset N" for
it reads as "N is its last offset", one off; every message names it through
``log_extent`` instead.
"""

from __future__ import annotations

__all__ = ["log_extent"]


def log_extent(end: int, start: int | None = None, *, what: str = "the log") -> str:
    """How ``what`` ending before offset ``end`` reads ("the log holds offsets [0, 25)", or "the log
    holds offsets below 25" when its start is not known or said); ``start``: its first offset."""
    if end <= 0 or (start is not None and end <= start):
        return f"{what} holds no offsets (it ends before offset {end})"
    if start is None:
        return f"{what} holds offsets below {end} (its last is {end - 1})"
    return f"{what} holds offsets [{start}, {end})"
