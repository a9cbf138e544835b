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
        self._at_end = False  # the end was reached and nothing came since
        self._next = start  # the Kafka offset after the last record applied (where reading began, until one is)
        self._progressed = False       # the last step applied a record


    def read_to_end(self, apply: Apply, stop: threading.Event | None = None) -> None:
        """Apply every committed record up to the topic's end as it was when the read began (a topic a writer
        keeps writing is not chased: whoever reads on follows the rest); ReplicationUnavailableError when that end
        is not reached within the timeout of a silent broker (a long topic that keeps coming is read to its end);
        ReadStopped as soon as ``stop`` is set."""
        deadline = time.monotonic() + self._timeout
        if self._at_end:  # librdkafka reports the end once: seeking where we are asks for it again
            # (to the offset after the last record applied: the consumer's own position may have moved on
            # while nothing was consumed, e.g. while this node was the writer or its process was stopped)
            self._consumer.seek(TopicPartition(self.topic, 0, self._next))
        end: int | None = None
        while not self._step(apply, 0.2):
            end = self._end_now() if end is None else end
            if end is not None and self._next >= end:
                return
            if stop is not None and stop.is_set():
                raise ReadStopped(f"reading the log topic {self.topic} to its end was stopped")
            if self._progressed:
                deadline = time.monotonic() + self._timeout
            elif time.monotonic() > deadline:
                raise ReplicationUnavailableError(f"the end of the log topic {self.topic} was not reached within "
                                                  f"{self._timeout:g} s: Kafka did not answer")

    def _end_now(self) -> int | None:
        """The partition's high watermark now, None if Kafka does not say at once (a read asks again after its next
        step; meanwhile only the consumer's end-of-partition event ends it). Every record below it is committed or
        aborted by the time a record at or past it is read (read_committed), so a read that applied the record
        before it, or any later one, holds everything committed below it."""
        try:
            return self._consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=0.5, cached=False)[1]
        except KafkaException:
            return None

    def follow(self, apply: Apply, stop: threading.Event, poll_s: float = 0.1) -> None:
        """Apply records as they are committed until ``stop`` is set."""
        while not stop.is_set():
            self._step(apply, poll_s)

    def _step(self, apply: Apply, timeout: float) -> bool:
        """Apply what one consume brings; True when it ended at the end of the partition."""
        at_end = False
        self._progressed = False
        for msg in self._consumer.consume(BURST, timeout):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end = self._at_end = True
                    continue
                if err.fatal() or not err.retriable():
                    raise ReplicationUnavailableError(f"reading the log topic {self.topic} failed: {err.str()}")
                continue
            at_end = self._at_end = False
            offset = msg.offset()
            kafka_offset = -1 if offset is None else offset
            apply(parse_record(msg.value(), msg.headers(), kafka_offset), kafka_offset)
            self._next = kafka_offset + 1
            self._progressed = True
        return at_end

    def close(self) -> None:
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError):
            pass
