"""Reading the log topic: committed records only (read_committed), from the start, to its end or on and on."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from secmeta.consumers.kafka.client_config import client_settings
from secmeta.consumers.kafka.client_log import side_client_logger
from secmeta.consumers.kafka.replication.records import TopicRecord, parse_record
from secmeta.consumers.kafka.replication.settings import ReplicationSettings
from secmeta.consumers.kafka.replication.topic import ReplicationUnavailableError
from secmeta.events.errors import SecmetaError

__all__ = ["Apply", "ReadStopped", "TopicReader"]

Apply = Callable[[TopicRecord, int], None]
BURST = 500


class ReadStopped(SecmetaError):
    """``read_to_end`` was told to stop before it reached the end (the node is changing its role)."""


class TopicReader:
    """One consumer of the log topic's single partition, from its first record (or Kafka offset ``start``),
    committed records only."""

    def __init__(self, settings: ReplicationSettings, topic: str, start: int = OFFSET_BEGINNING):
        self.topic = topic
        self._timeout = settings.timeout_s
        self._consumer = Consumer(client_settings(settings.bootstrap, settings.client, defaults={
            "group.id": f"secmeta-replica-{uuid.uuid4().hex}",  # assigned, never subscribed: no group state
            "fetch.wait.max.ms": 50,  # a standby's staleness, and how soon the end is known
        }, enforced={
            "isolation.level": "read_committed", "enable.auto.commit": False, "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "logger": side_client_logger(),
        }))
        self._consumer.assign([TopicPartition(topic, 0, start)])
        self._next = start  # the Kafka offset after the last record applied (where reading began, until one is)
        self._progressed = False       # the last step applied a record

    def read_to_end(self, apply: Apply, stop: threading.Event | None = None) -> int:
        """Apply every committed record up to the topic's end as it was when the read began (a topic a writer
        keeps writing is not chased: whoever reads on follows the rest); returns the Kafka offset read to.
        ReplicationUnavailableError when that end is not reached (or cannot be learnt) within the timeout of a
        silent broker (a long topic that keeps coming is read to its end); ReadStopped as soon as ``stop`` is set.

        What the consumer fetched before the call is dropped first (a seek to the offset after the last record
        applied): librdkafka fetches in the background from the moment the partition is assigned, also while
        nobody consumes (while this node was the writer, or after its follower stopped mid-burst), and an
        end-of-partition event it queued then may lie before batches committed since. The read then ends only at
        an end-of-partition event at or past the end Kafka gives after the seek (``end_now``)."""
        deadline = time.monotonic() + self._timeout
        self._seek(self._next)
        end = self._end_now()
        while True:
            reached = self._step(apply, 0.2)
            end = self._end_now() if end is None else end
            held = self._next if reached is None else max(self._next, reached)  # everything committed below it
            if end is not None and held >= end:
                return held
            if stop is not None and stop.is_set():
                raise ReadStopped(f"reading the log topic {self.topic} to its end was stopped")
            if self._progressed:
                deadline = time.monotonic() + self._timeout
            elif time.monotonic() > deadline:
                raise ReplicationUnavailableError(f"the end of the log topic {self.topic} was not reached within "
                                                  f"{self._timeout:g} s: Kafka did not answer")

    def end_now(self, timeout: float | None = None) -> int:
        """The Kafka offset the partition ends at now; ReplicationUnavailableError when Kafka does not say within
        ``timeout`` (default: the settings'). For this read_committed consumer Kafka answers with the last stable
        offset: every record below it is committed or aborted, so a read that applied the record before it, or
        reached the end at or past it, holds everything committed below it."""
        try:
            return self._consumer.get_watermark_offsets(TopicPartition(self.topic, 0), cached=False,
                                                        timeout=self._timeout if timeout is None else timeout)[1]
        except KafkaException as exc:
            raise ReplicationUnavailableError(f"the end of the log topic {self.topic} could not be learnt: "
                                              f"{exc.args[0].str()}") from None

    def _end_now(self) -> int | None:
        """``end_now``, None if Kafka does not say at once (a read asks again after its next step)."""
        try:
            return self.end_now(0.5)
        except ReplicationUnavailableError:
            return None

    def read_first(self, apply: Apply) -> bool:
        """Apply the topic's first committed record (its store record) and nothing more; False when the topic
        ends before one (empty). ReplicationUnavailableError when neither comes within the timeout of a silent
        broker. Read from Kafka offset 0, not OFFSET_BEGINNING, whose lookup costs a fresh consumer about 0.5 s
        more (Tansu): the log topic keeps every record (check_durability), and were offset 0 gone,
        auto.offset.reset=earliest would read from the earliest."""
        deadline = time.monotonic() + self._timeout
        self._seek(0)
        while True:
            reached = self._step(apply, 0.2, 1)
            if self._progressed:
                return True
            if reached is not None:
                return False
            if time.monotonic() > deadline:
                raise ReplicationUnavailableError(f"the first record of the log topic {self.topic} was not read "
                                                  f"within {self._timeout:g} s: Kafka did not answer")

    def skip_to(self, kafka_offset: int) -> None:
        """Read on from ``kafka_offset`` (a resume point: the local log holds every batch before it)."""
        self._next = kafka_offset

    def follow(self, apply: Apply, stop: threading.Event, poll_s: float = 0.1) -> None:
        """Apply records as they are committed until ``stop`` is set."""
        while not stop.is_set():
            self._step(apply, poll_s)

    def _seek(self, kafka_offset: int) -> None:
        try:
            self._consumer.seek(TopicPartition(self.topic, 0, kafka_offset))
        except KafkaException as exc:
            raise ReplicationUnavailableError(f"reading the log topic {self.topic} failed: {exc.args[0].str()}") \
                from None

    def _step(self, apply: Apply, timeout: float, most: int = BURST) -> int | None:
        """Apply what one consume brings (at most ``most`` messages); the Kafka offset of the end-of-partition
        event it ended at, if it did.

        A record below the offset after the last record applied is never applied again: librdkafka moves the
        consumer's position back on its own (an offset query for OFFSET_BEGINNING answered after a later seek
        re-arms its retry timer, whose answer sets the position to the topic's start, even after a seek to a
        concrete offset; auto.offset.reset after a fetch error). The consumer is put back where reading stood
        and the rest of that consume, fetched from the old position, is dropped."""
        reached = None
        self._progressed = False
        for msg in self._consumer.consume(most, timeout):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    reached = msg.offset()
                    continue
                if err.fatal() or not err.retriable():
                    raise ReplicationUnavailableError(f"reading the log topic {self.topic} failed: {err.str()}")
                continue
            reached = None
            offset = msg.offset()
            kafka_offset = -1 if offset is None else offset
            if 0 <= kafka_offset < self._next:
                self._seek(self._next)
                return None
            apply(parse_record(msg.value(), msg.headers(), kafka_offset), kafka_offset)
            self._next = kafka_offset + 1
            self._progressed = True
        return reached

    def close(self) -> None:
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError):
            pass
