"""The history topic as a witness of the store's log: a log behind it, or diverging from it, is refused.

What the publisher once confirmed on the topic stays there, out of reach of
whoever can write the store's directory.  So before publishing, the topic's
newest event (``topic_end``) is looked up in the log: the log must reach that
offset, and hold the same event there in a batch with the same chain link
(``secmeta.link``; messages published before links were are compared by event).
A log that ends before it was rolled back (or restored from an older copy); a
log that differs there was cut and rewritten, or is another store's.
"""

from __future__ import annotations

from secmeta.consumers.kafka.topic_end import TopicEnd
from secmeta.core.errors import SecmetaError
from secmeta.core.log import Log
from secmeta.core.log.extent import log_extent

__all__ = ["LogBehindTopicError", "LogDivergesError", "TopicWitnessError", "check_log_against_topic"]


class TopicWitnessError(SecmetaError):
    """The store's log disagrees with what its history topic already holds."""


class LogBehindTopicError(TopicWitnessError):
    """The topic holds log offsets the store's log does not reach."""


class LogDivergesError(TopicWitnessError):
    """The topic's newest event is not the log's event at that offset."""


_REMEDY = ("Nothing was published. Find out why with `secmeta log verify`; if this store is the one to trust "
           "(a recorded `secmeta log recover`), publish it to new topics (--history-topic, --state-topic)")


def _short(link: bytes | None) -> str:
    return "none" if link is None else link.hex()[:16]


def check_log_against_topic(log: Log, end: TopicEnd) -> None:
    """Raise LogBehindTopicError or LogDivergesError, naming both offsets, unless the log agrees with ``end``."""
    last = end.last
    if last is None or last.log_offset < log.start_offset:  # nothing held, or older than the log keeps
        return
    log_end = log.end_offset
    if last.log_offset >= log_end:
        raise LogBehindTopicError(
            f"the store's log is behind its history topic: {end.describe()}, but {log_extent(log_end)}: the store was rolled back or restored from an older copy, or the topic mirrors "
            f"another store. {_REMEDY}")
    link, envelope = None, None
    for batch in log.batches(last.log_offset, last.log_offset + 1):
        link = batch.link
        envelope = next(e for e in log.decode(batch) if e.offset == last.log_offset)
    if (last.link is not None and last.link != link) or (last.envelope is not None and last.envelope != envelope):
        raise LogDivergesError(
            f"the store's log diverges from its history topic at log offset {last.log_offset}: {end.describe()} "
            f"with chain link {_short(last.link)}, but the log's event at offset {last.log_offset} differs "
            f"(chain link {_short(link)}; {log_extent(log_end)}): the log was cut and "
            f"rewritten, or the topic mirrors another store. {_REMEDY}")
