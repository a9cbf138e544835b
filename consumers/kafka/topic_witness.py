"""The history topic as a witness of the store's log: a log behind it, or diverging from it, is refused.

What the publisher once confirmed on the topic stays there, out of reach of
whoever can write the store's directory.  So before publishing, the topic's
newest event (``topic_end``) is looked up in the log: the log must reach that
offset, and hold the same event there in a batch with the same chain link
(``secmeta.link``; messages published before links were are compared by event).
A log that ends before it was rolled back (or restored from an older copy); a
log that differs there was cut and rewritten, or is another store's.

A cut the log itself records (``secmeta log recover``: a LogRecovered event at
the cut) is named as such: the topic holds events past that cut which the log
no longer holds, and Kafka topics are not cut back, so the recovered log goes to
new topics (``LogRecoveredPastTopicError``).  A topic that holds nothing past the
cut agrees with the log and is published on, the LogRecovered event included.
"""

from __future__ import annotations

from collections.abc import Iterator

from secmeta.consumers.kafka.topic_end import TopicEnd, TopicEvent
from secmeta.core.errors import SecmetaError
from secmeta.core.log import Log
from secmeta.core.log.extent import log_extent
from secmeta.events.records import Envelope, LogRecovered

__all__ = ["LogBehindTopicError", "LogDivergesError", "LogRecoveredPastTopicError", "TopicWitnessError",
           "check_log_against_topic", "logged_recoveries", "recovery_before"]


class TopicWitnessError(SecmetaError):
    """The store's log disagrees with what its history topic already holds."""


class LogBehindTopicError(TopicWitnessError):
    """The topic holds log offsets the store's log does not reach."""


class LogDivergesError(TopicWitnessError):
    """The topic's newest event is not the log's event at that offset."""


class LogRecoveredPastTopicError(TopicWitnessError):
    """The topic holds events past a cut the log records (a LogRecovered event): they are not in the log."""


NEW_TOPICS = "--history-topic NEW --state-topic NEW --from-beginning"
_REMEDY = ("Nothing was published. Find out why with `secmeta log verify`; if this store is the one to trust, "
           f"publish it to new topics ({NEW_TOPICS})")


def _short(link: bytes | None) -> str:
    return "none" if link is None else link.hex()[:16]


def check_log_against_topic(log: Log, end: TopicEnd) -> None:
    """Raise LogRecoveredPastTopicError (naming the recovery), LogBehindTopicError or LogDivergesError, naming
    both offsets, unless the log agrees with ``end``."""
    last = end.last
    if last is None or last.log_offset < log.start_offset:  # nothing held, or older than the log keeps
        return
    log_end = log.end_offset
    behind = last.log_offset >= log_end
    link, envelope = None, None
    if not behind:
        for batch in log.batches(last.log_offset, last.log_offset + 1):
            link = batch.link
            envelope = next(e for e in log.decode(batch) if e.offset == last.log_offset)
        if (last.link is None or last.link == link) and (last.envelope is None or last.envelope == envelope):
            return
    if recovered := recovery_before(log, last):
        at, event = recovered
        raise LogRecoveredPastTopicError(
            f"the store's log was cut at offset {event.from_offset} by the recovery {event.recovery_id} logged "
            f"at offset {at} (`secmeta log recover`, reason: {event.reason!r}), but {end.describe()}: the topic "
            f"holds events past the cut that the log no longer holds ({log_extent(log_end)}). Kafka topics are "
            "not cut back, and publishing the recovered log after them would mix two histories. Nothing was "
            f"published. Publish the recovered log to new topics ({NEW_TOPICS}); consumers of the old topics "
            "move to the new ones")
    if behind:
        raise LogBehindTopicError(
            f"the store's log is behind its history topic: {end.describe()}, but {log_extent(log_end)}: the "
            f"store was rolled back or restored from an older copy, or the topic mirrors another store. {_REMEDY}")
    raise LogDivergesError(
        f"the store's log diverges from its history topic at log offset {last.log_offset}: {end.describe()} "
        f"with chain link {_short(last.link)}, but the log's event at offset {last.log_offset} differs "
        f"(chain link {_short(link)}; {log_extent(log_end)}): the log was cut and "
        f"rewritten, or the topic mirrors another store. {_REMEDY}")


def logged_recoveries(log: Log, end: int | None = None) -> Iterator[Envelope]:
    """The LogRecovered events the log holds below ``end`` (default: its end), oldest first (reads them all)."""
    stop = log.end_offset if end is None else min(end, log.end_offset)
    return (e for e in log.read(log.start_offset, stop) if type(e.event) is LogRecovered)


def recovery_before(log: Log, held: TopicEvent) -> tuple[int, LogRecovered] | None:
    """The logged recovery (its offset and event) whose cut removed the event the topic holds as ``held``
    (None: no cut the log records explains it): the newest recovery at or before ``held``'s offset, if
    ``held`` lies in the span it cut.  Reads the log up to ``held``: only asked when the log already
    disagrees with its topic."""
    found: tuple[int, LogRecovered] | None = None
    for envelope in logged_recoveries(log, held.log_offset + 1):
        event = envelope.event
        if isinstance(event, LogRecovered) and event.from_offset <= held.log_offset:
            found = envelope.offset, event
    if found is None or held.log_offset >= found[1].to_offset:
        return None
    return found
