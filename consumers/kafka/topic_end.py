"""What a topic already holds: its newest secmeta event (partition 0), read backwards from the end.

The publisher compares it with the store's log (a log behind or diverging from
its topic is refused), and with its checkpoint (a topic that lacks what the
checkpoint says was published is another topic); the follower compares it with
what its checkpoint applied.  Messages that are not ours (another writer's) are
passed over; a tombstone counts by its ``secmeta.offset`` header.  The chain link is the history message's
(``wire.message_link``; None on the state topic).  Where the format marker (``wire.format_marker``) is when it is
the topic's newest message bar tombstones and other writers' (``TopicEnd.marker``; None: it is not, so a publisher
writes one before its next format 3 message, as retention may have deleted any older one).

A publisher sending a chunk again reads the state topic's newest message per key since its checkpoint
(``read_newest_per_key``), so as never to send a key's older value after a newer one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from secmeta.consumers.kafka.wire import (
    NotOurMessage,
    is_format_marker,
    message_link,
    message_offset,
)
from secmeta.core.errors import SecmetaError
from secmeta.events.records import Envelope

__all__ = ["TopicEnd", "TopicEvent", "TopicReadError", "read_message", "read_newest_per_key", "read_topic_end"]

PARTITION = 0
_FIRST_WINDOW = 16
_LAST_WINDOW = 65_536  # read_newest_per_key's largest window, each given the whole timeout


class TopicReadError(SecmetaError):
    """A topic's end could not be read in time: nothing can be compared with it."""


@dataclass(frozen=True, slots=True)
class TopicEvent:
    """One secmeta event on a topic: its log offset, where it lies, its batch's chain link (None on
    messages published before links were), and the event (None for a tombstone)."""

    log_offset: int
    kafka_offset: int
    link: bytes | None = field(repr=False)
    envelope: Envelope | None = field(repr=False)


@dataclass(frozen=True, slots=True)
class TopicEnd:
    """Partition 0's watermarks, its newest secmeta event (None: it holds none), and the Kafka offset of the format
    marker when the topic's newest message that is the marker or an event with a value is the marker (None: it is
    not, so a format 3 writer must write one first: no marker is known to be held)."""

    topic: str
    low: int
    high: int
    last: TopicEvent | None
    marker: int | None = None

    @property
    def last_offset(self) -> int:
        """The newest log offset the topic holds (-1: none)."""
        return -1 if self.last is None else self.last.log_offset

    def describe(self) -> str:
        if self.last is None:
            return f"topic {self.topic} holds no secmeta event (Kafka offsets {self.low}..{self.high})"
        return (f"topic {self.topic} holds log offsets through {self.last.log_offset} "
                f"(at Kafka offset {self.last.kafka_offset})")


Decoder = Callable[[bytes | None, bytes | None, list | None], Envelope]


def _event(msg, decode: Decoder) -> TopicEvent | None:
    value, headers = msg.value(), msg.headers()
    try:
        offset = message_offset(value, headers)
        envelope = None if value is None else decode(msg.key(), value, headers)
        link = message_link(value, headers)
    except NotOurMessage:
        return None
    return TopicEvent(offset, msg.offset(), link, envelope)


def _read_range(consumer: Consumer, topic: str, start: int, stop: int, deadline: float) -> list:
    """The messages at Kafka offsets [start, stop) of partition 0."""
    consumer.assign([TopicPartition(topic, PARTITION, start)])
    out, position = [], start
    while position < stop:
        if time.monotonic() >= deadline:
            raise TopicReadError(f"reading topic {topic} timed out at Kafka offset {position} of {stop}")
        for msg in consumer.consume(num_messages=min(500, stop - position), timeout=0.5):
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    raise TopicReadError(f"reading topic {topic}: {err.str()}")
                continue
            at = msg.offset() or 0  # a message without an error has an offset (never None)
            position = at + 1
            if at < stop:
                out.append(msg)
    return out


def _watermarks(consumer: Consumer, topic: str, timeout: float) -> tuple[int, int]:
    """Partition 0's low and high watermarks; (0, 0) if the cluster has no such topic (it holds nothing)."""
    try:
        if topic not in consumer.list_topics(timeout=timeout).topics:  # all topics: asking for one may create it
            return 0, 0
        return consumer.get_watermark_offsets(TopicPartition(topic, PARTITION), timeout=timeout, cached=False)
    except KafkaException as exc:
        raise TopicReadError(f"cannot read the end of topic {topic}: {exc.args[0].str()}") from None


def read_topic_end(consumer: Consumer, topic: str, decode: Decoder, timeout: float = 30.0) -> TopicEnd:
    """The newest secmeta event on ``topic`` (searching back over other writers' messages)."""
    deadline = time.monotonic() + timeout
    low, high = _watermarks(consumer, topic, timeout)
    stop, window = high, _FIRST_WINDOW
    last: TopicEvent | None = None
    marker: int | None = None
    decided = False  # by the newest marker or event with a value
    while stop > low:
        start = max(low, stop - window)
        for msg in reversed(_read_range(consumer, topic, start, stop, deadline)):
            value = msg.value()
            if is_format_marker(msg.key(), value, msg.headers()):
                if not decided:
                    marker, decided = msg.offset(), True
                continue
            found = _event(msg, decode)
            if found is None:
                continue
            last = found if last is None else last
            decided = decided or value is not None
            if decided:
                return TopicEnd(topic, low, high, last, marker)
        stop, window = start, window * 4
    return TopicEnd(topic, low, high, last, marker)


def read_newest_per_key(consumer: Consumer, topic: str, decode: Decoder, since: int,
                        timeout: float = 30.0) -> dict[bytes, int]:
    """Per key, the newest secmeta message ``topic`` holds at log offset ``since`` or later, as a rank: twice its log
    offset, plus one for a tombstone (which follows its event's value). Read backwards from the end until a secmeta
    message below ``since`` (what a publisher sent before the checkpoint ``since``: every message after it is of
    log offset ``since`` or later), or the partition's start; others' messages and the format marker are passed over.
    That holds while the checkpoint only moves forward: one put back to an older copy after a chunk was sent again
    could stop the reading early. The topic is read in windows of at most ``_LAST_WINDOW`` messages, each within
    ``timeout`` seconds (from the beginning, the whole topic is read).
    """
    low, high = _watermarks(consumer, topic, timeout)
    held: dict[bytes, int] = {}
    stop, window = high, _FIRST_WINDOW
    while stop > low:
        start = max(low, stop - window)
        below = False
        for msg in _read_range(consumer, topic, start, stop, time.monotonic() + timeout):
            if is_format_marker(msg.key(), msg.value(), msg.headers()):
                continue
            found = _event(msg, decode)
            if found is None:
                continue
            if found.log_offset < since:
                below = True
                continue
            key, rank = bytes(msg.key() or b""), 2 * found.log_offset + (found.envelope is None)
            if rank > held.get(key, -1):
                held[key] = rank
        if below:
            break
        stop, window = start, min(window * 4, _LAST_WINDOW)
    return held


def read_message(consumer: Consumer, topic: str, kafka_offset: int, decode: Decoder,
                 timeout: float = 30.0) -> TopicEvent | None:
    """The secmeta event at ``kafka_offset`` (None if that message is not ours or no longer held)."""
    deadline = time.monotonic() + timeout
    low, high = _watermarks(consumer, topic, timeout)
    if not low <= kafka_offset < high:
        return None
    messages = _read_range(consumer, topic, kafka_offset, kafka_offset + 1, deadline)
    return _event(messages[0], decode) if messages else None
