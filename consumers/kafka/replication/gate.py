"""The commit gate of replicated mode: a batch is committed when a Kafka transaction holding it commits.

One transactional producer per writer (acks=all, idempotent) with the transactional.id every node of the
store shares: ``init_transactions`` by a newer writer fences this one, whose next commit then fails. Each
batch is one transaction (its writer schema's record goes with the first). Whatever goes wrong (fenced,
a timeout, an abortable error) the batch is reported not committed and this gate commits nothing more:
the store stops acknowledging writes, and a writer that was merely cut off may be elected again with a
new gate.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence

from confluent_kafka import KafkaException, Producer

from secmeta.consumers.kafka.client_config import client_settings
from secmeta.consumers.kafka.client_log import side_client_logger
from secmeta.consumers.kafka.replication.records import KIND, Record, batch_headers, schema_record
from secmeta.consumers.kafka.replication.settings import ReplicationSettings, transactional_id
from secmeta.core.errors import InvalidValueError
from secmeta.core.store.commit_gate import CommitGateError, GroupingGate, PendingBatch

__all__ = ["FencedError", "KafkaCommitGate"]

DEFAULT_MESSAGE_MAX_BYTES = 1_000_000  # librdkafka's message.max.bytes; a broker's default limit is about the same
RECORD_OVERHEAD = 1024  # a record's headers and framing, generously
SEED_TRANSACTION_BYTES = 4 * 1024 * 1024  # a seed's records per transaction (well within transaction.timeout.ms)
GROUP_BATCHES = 500                       # a write group's batches per transaction (GroupingGate)

logger = logging.getLogger("secmeta.replication")


class FencedError(CommitGateError):
    """A newer writer of the store initialised the shared transactional id: this one may never write again."""


class KafkaCommitGate(GroupingGate):
    """Commits batches to the log topic in transactions; construct = fence every older writer."""

    max_group_batches = GROUP_BATCHES
    max_group_bytes = SEED_TRANSACTION_BYTES

    def __init__(self, settings: ReplicationSettings, store_id: str, topic: str, schema_json: str):
        self.topic = topic
        self._settings = settings
        self._schema = schema_record(schema_json)
        self._schema_sent = False
        self._failed: BaseException | None = None
        self._expected: tuple[int, bytes] | None = None  # where the topic ends: (offset, link)
        self.max_bytes = int(settings.client.get("message.max.bytes", DEFAULT_MESSAGE_MAX_BYTES)) - RECORD_OVERHEAD
        self._lock = threading.Lock()
        self._producer = Producer(client_settings(settings.bootstrap, settings.client, defaults={
            "transaction.timeout.ms": 10_000, "linger.ms": 0,
        }, enforced={
            "transactional.id": transactional_id(store_id), "enable.idempotence": True, "acks": "all",
            "logger": side_client_logger(),
        }))
        try:
            self._producer.init_transactions(settings.timeout_s)
        except KafkaException as exc:
            raise CommitGateError(f"could not become the writer of the log topic {topic}: {exc.args[0].str()}") from None

    def expect(self, next_offset: int, link: bytes) -> None:
        """Where the topic ends now (after catching up with it): the next batch must extend exactly that."""
        self._expected = (next_offset, link)

    def seed(self, records: Iterable[Record]) -> None:
        """Commit the records of a seed (seed_records: they hold every writer schema and end with the seeded
        record) in transactions of at most SEED_TRANSACTION_BYTES: an interrupted seed leaves a prefix the next
        writer completes. The seeded record goes in the transaction of the record before it, so a topic whose seed
        was interrupted lacks at least one of the seeder's batches (when it has any): a node holding only what the
        topic holds can tell it cannot complete the seed (ReplicatedNode.become_writer)."""
        self._schema_sent = True
        chunk: list[Record] = []
        size = 0
        for record in records:
            if chunk and size + len(record[0]) > SEED_TRANSACTION_BYTES and (KIND, b"seeded") not in record[1]:
                self.commit_records(chunk, "seeding the log topic")
                chunk, size = [], 0
            chunk.append(record)
            size += len(record[0])
        if chunk:
            self.commit_records(chunk, "seeding the log topic")

    def check(self, batch: PendingBatch) -> None:
        """A batch over the topic's record limit is refused alone, before anything is sent: the writer goes on."""
        if len(batch.frame) > self.max_bytes:
            raise InvalidValueError(f"a batch of {len(batch.frame):,} bytes exceeds the log topic's record limit "
                                    f"({self.max_bytes:,} bytes: message.max.bytes less the headers); split the "
                                    "request")

    def commit_group(self, batches: Sequence[PendingBatch]) -> None:
        """Commit consecutive batches (each checked) in one transaction: writes that queued up while the last
        transaction committed share the next one."""
        first, last = batches[0], batches[-1]
        what = (f"the batch at offset {first.base_offset}" if len(batches) == 1 else   # one subject: "was"
                f"the group of {len(batches)} batches at offsets {first.base_offset} to {last.next_offset}")
        if self._expected is None or self._expected != (first.base_offset, first.prev_link):
            end = "unknown" if self._expected is None else f"offset {self._expected[0]}"
            self._failed = error = CommitGateError(
                f"{what} was not committed: it does not extend the log topic {self.topic}, which ends at {end}; "
                "this node acknowledges no more writes")
            raise error
        records = [(b.frame, batch_headers(self._settings.node_id, b.base_offset, b.link)) for b in batches]
        self.commit_records(records if self._schema_sent else [self._schema, *records], what)
        self._expected = (last.next_offset, last.link)

    def commit_records(self, records: list[Record], what: str) -> None:
        """Produce ``records`` in one transaction and commit it; CommitGateError (FencedError) when not committed."""
        with self._lock:
            if self._failed is not None:
                raise CommitGateError(f"{what} was not committed: this writer failed earlier ({self._failed})")
            producer = self._producer
            try:
                producer.begin_transaction()
                for value, headers in records:
                    while True:
                        try:
                            producer.produce(self.topic, value=value, headers=headers)
                            break
                        except BufferError:  # librdkafka's queue is full: let it send
                            producer.poll(0.05)
                producer.commit_transaction(self._settings.timeout_s)
            except KafkaException as exc:
                self._failed = error = _gate_error(exc, what, self.topic)
                _abort(producer, self._settings.timeout_s)
                raise error from None
            self._schema_sent = True

    def append_failed(self, batch: PendingBatch, error: BaseException) -> None:
        """The local append of a batch this gate committed failed: commit nothing more."""
        with self._lock:
            self._failed = CommitGateError(f"the batch at offset {batch.base_offset} was committed to the log topic "
                                           f"{self.topic} but not appended to the local log ({error})")

    @property
    def failed(self) -> BaseException | None:
        return self._failed

    def close(self) -> None:
        with self._lock:
            if self._failed is None:
                self._failed = CommitGateError("the writer was closed")
            self._producer.flush(0)


def _gate_error(exc: KafkaException, what: str, topic: str) -> CommitGateError:
    err = exc.args[0]
    if err.fatal() or "fenced" in err.str().lower():
        return FencedError(f"{what} was not committed: a newer writer took over the log topic {topic} "
                           f"({err.str()}); this node acknowledges no more writes")
    return CommitGateError(f"{what} was not committed to the log topic {topic} ({err.str()}); whether Kafka "
                           "has it is not known, so this node acknowledges no more writes")


def _abort(producer: Producer, timeout: float) -> None:
    try:
        producer.abort_transaction(timeout)
    except KafkaException as exc:
        logger.debug("abort after a failed commit: %s", exc.args[0])
