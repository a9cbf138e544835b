"""The one rule for a gap in the history topic's log offsets, which every reader of the topic applies.

The history topic carries each event with the log offset it has in the store (``secmeta.offset``): read in
order, after duplicates (an offset at or below the last one seen: a publisher's re-send) are dropped, each
event must be the one after the last (``last + 1``; ``-1`` when the history must start at the log's first
event). An event further on means the events between were never read: deleted by Kafka's retention, or
published elsewhere. The follower stops there (``HistoryGapError``), the audit job warns, and the Spark
``secmeta-kafka`` source fails its query unless ``allowGaps`` is set.
"""

from __future__ import annotations

__all__ = ["describe_gap", "missing_offsets"]


def missing_offsets(last: int, found: int) -> range:
    """The log offsets missing between ``last`` (the last event read, -1: none, the history starts at 0) and
    ``found`` (the next event read, above ``last``): empty when ``found`` follows ``last``."""
    return range(last + 1, found)


def describe_gap(topic: str, last: int, found: int, kafka_offset: int) -> str:
    """What the gap is, in the words every reader uses: the topic, both log offsets, the Kafka offset and the
    missing range."""
    missing = missing_offsets(last, found)
    where = (f"starts at log offset {found} (Kafka offset {kafka_offset})" if last < 0 else
             f"jumps from log offset {last} to {found} at Kafka offset {kafka_offset}")
    return (f"history topic {topic} {where}: events {missing.start}..{missing.stop - 1} are missing (deleted by "
            "retention, or published elsewhere)")
