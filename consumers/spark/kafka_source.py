"""The ``secmeta-kafka`` Spark data source: the history topic as rows, in batch and streaming reads.

    spark.dataSource.register(SecmetaKafkaDataSource)
    spark.read.format("secmeta-kafka").option("kafka.bootstrap.servers", "broker:9092")
        .option("topic", "secmeta.history").load()
    spark.readStream.format("secmeta-kafka").option("kafka.bootstrap.servers", "broker:9092")
        .option("topic", "secmeta.history").option("maxEventsPerTrigger", 10000).load()

It reads the history topic the publisher (``secmeta.consumers.kafka.publisher``) writes,
through confluent-kafka, by explicit partition offsets: every task assigns its
partition at its start offset (assign + seek) with a fresh consumer whose
``group.id`` is unique and never joined, and nothing is ever committed to
Kafka; a streaming query's progress lives in its Spark checkpoint only.

Rows have ``secmeta.consumers.spark.rows.SCHEMA``, the same as the ``secmeta`` log
source, and the same values: each message is decoded to its ``Envelope``
(``secmeta.consumers.kafka.wire.decode_message``) and handed to Spark as Arrow batches.
The ``offset`` column is the *log* offset the message carries
(``secmeta.offset``), not its Kafka offset.  No key is needed: values hold
secrets only sealed, and rows never carry a secret, sealed or not.

Options
    ``kafka.bootstrap.servers`` (or ``bootstrap.servers``), required.
    ``topic``, required: the history topic.
    ``startingOffsets``: ``earliest`` (default), ``latest``, or JSON giving the
        first Kafka offset per partition, ``{"0": 12}`` (also Spark's Kafka form
        ``{"TOPIC": {"0": 12}}``; -2 means earliest, -1 latest).  A partition the
        JSON leaves out starts at its earliest offset.  In a streaming query it
        applies to the first run only (later runs resume from the checkpoint).
    ``endingOffsets`` (batch only): ``latest`` (default) or JSON as above (-1
        latest); a partition left out ends at its latest offset.
    ``maxEventsPerTrigger`` (streaming): at most this many Kafka messages per
        micro-batch, shared fairly between partitions with a backlog.
    ``maxEventsPerPartition``: Kafka messages per Spark task at most (default
        100,000); a longer range is split.
    ``duplicateLookback``: Kafka messages a task reads before its range to know
        which events were already seen (default 10,000; 0: none), see below.
    ``notOurMessages``: ``skip`` (default) or ``fail``.
    ``allowGaps``: ``false`` (default) or ``true``. A gap in the log offsets (events
        missing from the topic, e.g. deleted by retention) fails the query, naming the
        missing range; ``true`` reads on past it (each gap logged on the executor).
    ``pollTimeoutMs`` (default 120,000): a task that gets no message for this
        long fails, naming the topic, partition, range and position.
    ``metadataTimeoutMs`` (default 10,000): for metadata and watermark requests.
    ``groupIdPrefix`` (default ``secmeta-spark``): the prefix of the unused group
        ids (librdkafka requires one for a consumer; ACLs may restrict them).
    ``kafka.*``: passed to the client without the prefix
        (``kafka.security.protocol``, ``kafka.sasl.mechanism``, ...), except the
        settings this source must control: ``group.id``, ``group.instance.id``,
        ``enable.auto.commit``, ``enable.auto.offset.store``,
        ``auto.offset.reset``, ``enable.partition.eof``.
    ``keyFile`` is accepted (so options shared with the ``secmeta`` source
        work) and ignored: decoding needs no key.

Bad options, an unreachable cluster (``metadataTimeoutMs``) and a missing topic
raise ``SecmetaKafkaSourceError`` when the DataFrame is defined, before any
Spark job; so does an unknown or invalid ``kafka.*`` client setting (librdkafka's
message names it).  ``endingOffsets`` on a streaming read fails when the query
starts.

Streaming offsets are ``{"PARTITION": NEXT_KAFKA_OFFSET}``, e.g. ``{"0": 120}``,
for every partition of the topic (the publisher writes partition 0 only; the
others stay empty but are read all the same).  Partitions that appear later
start at their earliest offset.  ``Trigger.availableNow`` reads up to the high
watermarks as they stood when the query started.

What a task skips, and why
    * Messages that are not ours (``NotOurMessage``: no secmeta headers, a
      foreign value, an unknown schema fingerprint, ...) are skipped and
      logged on the executor, since the history topic is an ordinary topic that
      anybody with write access may pollute; ``notOurMessages=fail`` makes such a
      message fail the query instead (an event written by a newer schema the
      reader does not know is also "not ours", so choose ``fail`` where losing
      such rows silently is worse than stopping).  The format marker a publisher
      writes before its first format 3 message (``wire.format_marker``) is no
      event and is skipped silently.  Tombstones cannot occur on
      the history topic (only the state topic has them); one would be skipped
      as not ours.
    * Duplicates: a publisher that crashed between delivering and
      checkpointing re-sends events, which therefore appear twice, each time
      with the log offset it had (see the publisher).  A task drops every event
      whose log offset is not above the highest log offset of an event before
      it in the partition, like the follower and the audit job do.  To know
      what came before its range, a task first reads up to
      ``duplicateLookback`` messages before its start (their headers; it
      decodes only the newest event among them, to check it is one).  A
      re-send reaches back at most one publisher chunk (10,000 events by
      default) per failed attempt, so the default covers one failure with the
      default chunk size; a longer lookback covers more, 0 turns it off (then
      a duplicate whose first copy lies before the task's range is kept).
      Within one task the rule is exact.
    * Gaps in the log offsets: after duplicates are dropped, each event must be the
      one after the last (``consumers.kafka.history_gap``, the follower's rule). A task
      knows the last event before its range from its lookback, or, when the lookback
      reaches the partition's earliest offset, that there is none (the first event must
      then be log offset 0); with neither (``duplicateLookback`` 0 mid-topic) it checks
      from its first event on. A gap fails the query (``SecmetaKafkaSourceError``
      naming the topic, both log offsets and the missing range) unless ``allowGaps`` is
      ``true``; so does a streaming query whose position was deleted by retention before
      it read it (named in Kafka offsets: the log offsets there are gone).
    * Kafka offsets can have gaps (compaction, transaction markers): a task
      reads until its position reaches the range's end or the partition's end
      (the consumer's end-of-partition event), whichever comes first; Kafka
      offsets before the partition's earliest one (deleted by retention) are
      read from the earliest one.
"""

from __future__ import annotations

import functools
import json
import logging
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from secmeta.consumers.spark.options import SecmetaSourceError, int_option, option
from secmeta.consumers.spark.rows import SCHEMA, arrow_batches

__all__ = [
    "EARLIEST",
    "LATEST",
    "KafkaRange",
    "SecmetaKafkaDataSource",
    "SecmetaKafkaSourceError",
    "allot",
    "parse_offsets",
    "plan_kafka_ranges",
]

logger = logging.getLogger("secmeta.spark.kafka")

DEFAULT_EVENTS_PER_PARTITION = 100_000
DEFAULT_DUPLICATE_LOOKBACK = 10_000
DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_METADATA_TIMEOUT_MS = 10_000
_FETCH_BATCH = 2000

#: Offsets in an offsets option that mean "the partition's earliest / latest offset" (Spark's Kafka values).
EARLIEST = -2
LATEST = -1

# Client settings this source decides; a kafka.* option for one of them is refused.
_CONTROLLED = ("group.id", "group.instance.id", "enable.auto.commit", "enable.auto.offset.store",
               "auto.offset.reset", "enable.partition.eof")


class SecmetaKafkaSourceError(SecmetaSourceError):
    """The secmeta-kafka source cannot read as configured (bad option, no cluster, no topic, timeout)."""


@dataclass(frozen=True)
class KafkaRange(InputPartition):
    """The Kafka offsets [start, end) of one partition that one Spark task reads."""

    partition: int
    start: int
    end: int


def plan_kafka_ranges(partition: int, start: int, end: int,
                      max_messages: int = DEFAULT_EVENTS_PER_PARTITION) -> list[KafkaRange]:
    """[start, end) of ``partition`` in pieces of at most ``max_messages`` Kafka offsets."""
    bounds = [*range(start, end, max_messages), end]
    return [KafkaRange(partition, a, b) for a, b in zip(bounds, bounds[1:]) if a < b]


def allot(budget: int, backlog: Mapping[int, int]) -> dict[int, int]:
    """Share ``budget`` messages between partitions with ``backlog`` messages each, fairly.

    Every partition with a backlog gets an equal share (at least one message
    while the budget lasts, lowest partitions first), capped by its backlog;
    what a partition cannot use goes to the others.
    """
    given = {p: 0 for p in backlog}
    left = max(0, budget)
    while left > 0:
        hungry = sorted(p for p, n in backlog.items() if given[p] < n)
        if not hungry:
            break
        share = max(1, left // len(hungry))
        for p in hungry:
            take = min(share, backlog[p] - given[p], left)
            given[p] += take
            left -= take
            if left == 0:
                break
    return given


def parse_offsets(text: str | None, option: str, topic: str, *, default: int,
                  allow_earliest: bool = True) -> int | dict[int, int]:
    """An offsets option: EARLIEST / LATEST for the words, else {partition: offset} from JSON."""
    if text is None or not str(text).strip():
        return default
    text = str(text).strip()
    words = {"earliest": EARLIEST, "latest": LATEST} if allow_earliest else {"latest": LATEST}
    if text.lower() in words:
        return words[text.lower()]
    allowed = " / ".join(words)
    try:
        data = json.loads(text)
    except ValueError:
        raise SecmetaKafkaSourceError(
            f"option {option} must be {allowed} or JSON like {{\"0\": 12}}, not {text!r}") from None
    if not isinstance(data, dict):
        raise SecmetaKafkaSourceError(f"option {option} must be a JSON object like {{\"0\": 12}}, not {text!r}")
    if data and all(isinstance(v, dict) for v in data.values()):  # Spark's {"topic": {"0": 12}}
        others = sorted(set(data) - {topic})
        if others:
            raise SecmetaKafkaSourceError(f"option {option} names topic(s) {', '.join(others)}, "
                                          f"but this source reads {topic!r} only")
        data = data.get(topic, {})
    out: dict[int, int] = {}
    lowest = EARLIEST if allow_earliest else LATEST
    for key, value in data.items():
        try:
            partition = int(key)
        except (TypeError, ValueError):
            partition = -1
        if partition < 0 or str(partition) != str(key).strip():
            raise SecmetaKafkaSourceError(f"option {option}: {key!r} is not a partition number")
        if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
            raise SecmetaKafkaSourceError(
                f"option {option}: the offset of partition {partition} must be an integer >= 0"
                f"{' (or -2 earliest, -1 latest)' if allow_earliest else ' (or -1 latest)'}, not {value!r}")
        out[partition] = value
    return out


def _resolve(spec: int | dict[int, int], partition: int, low: int, high: int, absent: int) -> int:
    """The Kafka offset ``spec`` means for a partition whose offsets are [low, high)."""
    value = spec if isinstance(spec, int) else spec.get(partition, absent)
    if value == EARLIEST:
        return low
    if value == LATEST:
        return high
    return value


def _kafka():
    """confluent_kafka, imported when first needed (registering the source does not need it)."""
    try:
        import confluent_kafka
    except ImportError:
        raise SecmetaKafkaSourceError(
            "the secmeta-kafka data source needs confluent-kafka: install secmeta[kafka]") from None
    return confluent_kafka


@functools.cache
def _permanent_errors() -> frozenset[int]:
    """Consumer errors no retry cures: the read fails at once instead of at its timeout."""
    KafkaError = _kafka().KafkaError
    return frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION,
                      KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError._AUTHENTICATION,
                      KafkaError.SASL_AUTHENTICATION_FAILED})


@functools.cache
def _codec():
    from secmeta.events.codec import EventCodec

    return EventCodec()


def _kafka_error(exc: Exception) -> str:
    err = exc.args[0] if exc.args else exc
    return err.str() if hasattr(err, "str") else str(err)


# -- access to the topic (driver and workers) ------------------------------------------


@dataclass(frozen=True)
class _Topic:
    """Where the topic is and how to read it; picklable, holds no client."""

    topic: str
    settings: dict[str, str] = field(hash=False, repr=False)  # may hold sasl.password
    metadata_timeout: float = DEFAULT_METADATA_TIMEOUT_MS / 1000
    poll_timeout: float = DEFAULT_POLL_TIMEOUT_MS / 1000
    per_partition: int = DEFAULT_EVENTS_PER_PARTITION
    lookback: int = DEFAULT_DUPLICATE_LOOKBACK
    fail_on_foreign: bool = False
    group_prefix: str = "secmeta-spark"
    allow_gaps: bool = False

    @property
    def where(self) -> str:
        return f"the Kafka cluster at {self.settings.get('bootstrap.servers')}"

    def consumer(self):
        """A fresh consumer: unique unused group id, no commits, end-of-partition events on."""
        kafka = _kafka()
        config = {
            "client.id": "secmeta-spark-kafka",
            **self.settings,
            "group.id": f"{self.group_prefix}-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "logger": logging.getLogger("secmeta.spark.kafka.librdkafka"),
        }
        try:
            return kafka.Consumer(config)
        except kafka.KafkaException as exc:
            raise SecmetaKafkaSourceError(
                f"the Kafka client refused the kafka.* options: {_kafka_error(exc)}") from None

    def partitions(self) -> list[int]:
        """The topic's partitions; a clear error if the cluster or the topic is not there."""
        consumer = self.consumer()
        try:
            return self._partitions(consumer)
        finally:
            consumer.close()

    def _partitions(self, consumer) -> list[int]:
        try:
            # All topics: asking for one by name could make a broker auto-create it.
            metadata = consumer.list_topics(timeout=self.metadata_timeout)
        except _kafka().KafkaException as exc:
            raise SecmetaKafkaSourceError(
                f"cannot reach {self.where} (option kafka.bootstrap.servers) within "
                f"{self.metadata_timeout:g} s (option metadataTimeoutMs): {_kafka_error(exc)}") from None
        found = metadata.topics.get(self.topic)
        if found is None:
            raise SecmetaKafkaSourceError(
                f"topic {self.topic!r} (option topic) does not exist on {self.where}: "
                "give the publisher's history topic")
        if found.error is not None:
            raise SecmetaKafkaSourceError(
                f"topic {self.topic!r} (option topic) cannot be read on {self.where}: {found.error.str()}")
        if not found.partitions:
            raise SecmetaKafkaSourceError(f"topic {self.topic!r} on {self.where} has no partitions")
        return sorted(found.partitions)

    def watermarks(self) -> dict[int, tuple[int, int]]:
        """(earliest, next) Kafka offset of every partition now."""
        kafka = _kafka()
        consumer = self.consumer()
        try:
            out = {}
            for p in self._partitions(consumer):
                try:
                    out[p] = consumer.get_watermark_offsets(
                        kafka.TopicPartition(self.topic, p), timeout=self.metadata_timeout, cached=False)
                except kafka.KafkaException as exc:
                    raise SecmetaKafkaSourceError(
                        f"cannot get the offsets of {self.topic}[{p}] from {self.where} within "
                        f"{self.metadata_timeout:g} s: {_kafka_error(exc)}") from None
            return out
        finally:
            consumer.close()

    def ranges(self, partition: int, start: int, end: int) -> list[KafkaRange]:
        return plan_kafka_ranges(partition, start, end, self.per_partition)

    def batches(self, part: KafkaRange) -> Iterator:
        """The rows of [part.start, part.end) of one partition as pyarrow RecordBatches."""
        if part.start >= part.end:
            return
        yield from _PartitionRead(self, part).batches()


class _PartitionRead:
    """One task's read of a Kafka range: seed the duplicate filter, then decode, filter, batch."""

    def __init__(self, topic: _Topic, part: KafkaRange) -> None:
        self.topic = topic
        self.part = part
        self.seed_from = max(0, part.start - topic.lookback)
        self.last_log_offset = -1  # the highest log offset of an event seen in this partition so far
        self.known = False          # last_log_offset is the event right before the next one (gaps are checked)
        self._consumer: Any = None  # the read's consumer, while it reads
        self.duplicates = 0
        self.foreign = 0
        self.gaps = 0

    def _fail(self, what: str, position: int) -> SecmetaKafkaSourceError:
        part = self.part
        return SecmetaKafkaSourceError(
            f"{self.topic.topic}[{part.partition}], reading Kafka offsets [{part.start}, {part.end}) "
            f"at offset {position}: {what}")

    def batches(self) -> Iterator:
        """Arrow batches of the range's new events, in Kafka order."""
        yield from arrow_batches(self._envelopes())
        if self.duplicates or self.foreign or self.gaps:
            part = self.part
            logger.info("%s[%d] [%d, %d): skipped %d duplicate(s) and %d message(s) not ours; read past %d gap(s)",
                        self.topic.topic, part.partition, part.start, part.end, self.duplicates, self.foreign,
                        self.gaps)

    def _envelopes(self) -> Iterator:
        """The range's new events (duplicates and messages not ours dropped), in Kafka order."""
        from secmeta.consumers.kafka.wire import NotOurMessage, message_offset

        part = self.part
        seed: list | None = []  # (log offset, message) before the range, to seed the duplicate filter
        for msg in self._messages():
            offset = msg.offset()
            if offset < part.start:
                try:
                    seed.append((message_offset(msg.value(), msg.headers()), msg))
                except NotOurMessage:
                    pass
                continue
            if seed is not None:
                self._seed(seed)
                seed = None
            envelope = self._take(msg, offset)
            if envelope is not None:
                yield envelope

    def _seed(self, seed: list) -> None:
        """The highest log offset of an event before the range: the newest that decodes, highest first.

        The same rule as inside the range (only events count), at the cost of
        decoding one message in the usual case rather than the whole lookback.
        """
        from secmeta.consumers.kafka.wire import KIND_HISTORY, NotOurMessage, decode_message

        codec = _codec()
        for log_offset, msg in sorted(seed, key=lambda item: item[0], reverse=True):
            try:
                decode_message(codec, msg.key(), msg.value(), msg.headers(), KIND_HISTORY)
            except NotOurMessage:
                continue
            self.last_log_offset, self.known = log_offset, True
            return
        self.known = self._lookback_reaches_beginning()   # then no event before the range: the first must be 0

    def _lookback_reaches_beginning(self) -> bool:
        """Whether the lookback read from the partition's earliest offset on (asked once its first message came)."""
        kafka, topic = _kafka(), self.topic
        try:
            low, _high = self._consumer.get_watermark_offsets(
                kafka.TopicPartition(topic.topic, self.part.partition), timeout=topic.metadata_timeout, cached=False)
        except kafka.KafkaException as exc:
            raise self._fail(f"cannot get the partition's earliest offset within {topic.metadata_timeout:g} s "
                             f"(option metadataTimeoutMs): {_kafka_error(exc)}", self.part.start) from None
        return self.seed_from <= low

    def _take(self, msg, offset: int):
        """The envelope of a message inside the range if it is a new event, else None (counted)."""
        from secmeta.consumers.kafka.history_gap import describe_gap, missing_offsets
        from secmeta.consumers.kafka.wire import (
            KIND_HISTORY,
            FormatMarker,
            NotOurMessage,
            decode_message,
        )

        try:
            envelope = decode_message(_codec(), msg.key(), msg.value(), msg.headers(), KIND_HISTORY)
        except FormatMarker:
            return None
        except NotOurMessage as exc:
            self._not_ours(offset, exc.reason)
            return None
        if envelope.offset <= self.last_log_offset:
            self.duplicates += 1
            return None
        if self.known and missing_offsets(self.last_log_offset, envelope.offset):
            gap = describe_gap(self.topic.topic, self.last_log_offset, envelope.offset, offset)
            if not self.topic.allow_gaps:
                raise self._fail(f"{gap}; option allowGaps=true reads on past a gap", offset)
            self.gaps += 1
            logger.warning("%s (option allowGaps=true: reading on)", gap)
        self.last_log_offset, self.known = envelope.offset, True
        return envelope

    def _messages(self) -> Iterator:
        """The messages of [seed_from, end) in order, through a fresh consumer closed at the end.

        Stops at the end of the range or where the partition ends; fails
        after pollTimeoutMs without a message or end-of-partition event.
        """
        kafka = _kafka()
        KafkaError = kafka.KafkaError
        topic, part = self.topic, self.part
        consumer = topic.consumer()
        try:
            self._consumer = consumer
            consumer.assign([kafka.TopicPartition(topic.topic, part.partition, self.seed_from)])
            position = self.seed_from
            progress = time.monotonic()
            while position < part.end:
                messages = consumer.consume(_FETCH_BATCH, 0) or consumer.consume(1, 0.2)
                for msg in messages:
                    err = msg.error()
                    if err is None:
                        progress = time.monotonic()
                        offset = msg.offset()
                        if offset >= part.end:
                            position = offset
                            break
                        position = offset + 1
                        if offset >= self.seed_from:  # else: reset to the earliest, our start was out of range
                            yield msg
                            if position >= part.end:
                                break
                    elif err.code() == KafkaError._PARTITION_EOF:
                        progress = time.monotonic()
                        if msg.offset() >= part.end or self._ends_before(consumer, msg.offset()):
                            position = part.end
                            break
                    elif err.fatal() or err.code() in _permanent_errors():
                        raise self._fail(f"the consumer failed: {err.str()}", position)
                    else:
                        logger.warning("%s[%d]: %s; retrying", topic.topic, part.partition, err.str())
                if position < part.end and time.monotonic() - progress > topic.poll_timeout:
                    raise self._fail(
                        f"no message for {topic.poll_timeout:g} s (option pollTimeoutMs) from {topic.where}",
                        position)
        finally:
            self._consumer = None
            consumer.close()

    def _ends_before(self, consumer, eof_offset: int) -> bool:
        """At an end-of-partition event before the range's end: does the partition really end there?

        True when the high watermark is there too (the range reached past the
        partition's end: its last offsets were gaps, or the topic was
        truncated); False while messages are still to come (an open
        transaction, a lagging fetch): then the read goes on.
        """
        kafka = _kafka()
        try:
            _low, high = consumer.get_watermark_offsets(
                kafka.TopicPartition(self.topic.topic, self.part.partition), timeout=self.topic.metadata_timeout,
                cached=False)
        except kafka.KafkaException:
            return False
        if eof_offset >= high:
            logger.info("%s[%d] ends at %d, before the planned end %d", self.topic.topic,
                        self.part.partition, eof_offset, self.part.end)
            return True
        return False

    def _not_ours(self, offset: int, reason: str) -> None:
        if self.topic.fail_on_foreign:
            raise self._fail(f"a message that is not a secmeta event (option notOurMessages=fail): {reason}",
                             offset)
        self.foreign += 1
        if self.foreign <= 5:
            logger.warning("%s[%d]@%d: skipping a message that is not ours: %s",
                           self.topic.topic, self.part.partition, offset, reason)


# -- options ---------------------------------------------------------------------------


def _int_option(options: Mapping[str, str], name: str, *, minimum: int = 1) -> int | None:
    return int_option(options, name, minimum=minimum, error=SecmetaKafkaSourceError)


def _client_settings(options: Mapping[str, str]) -> dict[str, str]:
    """bootstrap.servers and the kafka.* pass-through settings."""
    prefixed = option(options, "kafka.bootstrap.servers")
    plain = option(options, "bootstrap.servers")
    if prefixed and plain and prefixed.strip() != plain.strip():
        raise SecmetaKafkaSourceError(
            f"options kafka.bootstrap.servers ({prefixed!r}) and bootstrap.servers ({plain!r}) disagree: give one")
    bootstrap = (prefixed or plain or "").strip()
    if not bootstrap:
        raise SecmetaKafkaSourceError(
            'the secmeta-kafka data source needs .option("kafka.bootstrap.servers", "HOST:PORT")')
    settings = {"bootstrap.servers": bootstrap}
    for key, value in options.items():
        name = key.lower()
        if not name.startswith("kafka.") or name == "kafka.bootstrap.servers":
            continue
        setting = name[len("kafka."):]
        if not setting:
            raise SecmetaKafkaSourceError("option 'kafka.' names no client setting")
        if setting in _CONTROLLED:
            hint = " (use groupIdPrefix to choose the prefix of the unused group ids)" \
                if setting == "group.id" else ""
            raise SecmetaKafkaSourceError(
                f"option {key} is not allowed: the secmeta-kafka source sets {setting} itself{hint}")
        settings[setting] = str(value)
    return settings


class SecmetaKafkaDataSource(DataSource):
    """``format("secmeta-kafka")``: the events of a history topic; see the module docstring."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        settings = _client_settings(options)
        topic = (option(options, "topic") or "").strip()
        if not topic:
            raise SecmetaKafkaSourceError(
                'the secmeta-kafka data source needs .option("topic", HISTORY_TOPIC)')
        self.starting = parse_offsets(option(options, "startingOffsets"), "startingOffsets", topic,
                                      default=EARLIEST)
        self.ending = parse_offsets(option(options, "endingOffsets"), "endingOffsets", topic,
                                    default=LATEST, allow_earliest=False)
        self.has_ending = option(options, "endingOffsets") is not None
        self.max_events = _int_option(options, "maxEventsPerTrigger")
        per_partition = _int_option(options, "maxEventsPerPartition") or DEFAULT_EVENTS_PER_PARTITION
        lookback = _int_option(options, "duplicateLookback", minimum=0)
        poll_ms = _int_option(options, "pollTimeoutMs") or DEFAULT_POLL_TIMEOUT_MS
        metadata_ms = _int_option(options, "metadataTimeoutMs") or DEFAULT_METADATA_TIMEOUT_MS
        policy = (option(options, "notOurMessages") or "skip").strip().lower()
        if policy not in ("skip", "fail"):
            raise SecmetaKafkaSourceError(f"option notOurMessages must be skip or fail, not {policy!r}")
        gaps = (option(options, "allowGaps") or "false").strip().lower()
        if gaps not in ("true", "false"):
            raise SecmetaKafkaSourceError(f"option allowGaps must be true or false, not {gaps!r}")
        prefix = (option(options, "groupIdPrefix") or "secmeta-spark").strip()
        if not prefix:
            raise SecmetaKafkaSourceError("option groupIdPrefix must not be empty")
        self.source = _Topic(
            topic, settings, metadata_timeout=metadata_ms / 1000, poll_timeout=poll_ms / 1000,
            per_partition=per_partition,
            lookback=DEFAULT_DUPLICATE_LOOKBACK if lookback is None else lookback,
            fail_on_foreign=policy == "fail", group_prefix=prefix, allow_gaps=gaps == "true",
        )
        # Fail here, on the driver, before any Spark job: bad client settings, no cluster, no topic.
        partitions = self.source.partitions()
        for name, spec in (("startingOffsets", self.starting), ("endingOffsets", self.ending)):
            if isinstance(spec, dict) and (unknown := sorted(set(spec) - set(partitions))):
                raise SecmetaKafkaSourceError(
                    f"option {name} names partition(s) {', '.join(map(str, unknown))} that topic "
                    f"{topic!r} does not have (it has {', '.join(map(str, partitions))})")

    @classmethod
    def name(cls) -> str:
        return "secmeta-kafka"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _BatchReader(self.source, self.starting, self.ending)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if self.has_ending:
            raise SecmetaKafkaSourceError("option endingOffsets is for batch reads only; "
                                          "a streaming read ends where the topic ends")
        return _StreamReader(self.source, self.starting, self.max_events)


class _BatchReader(DataSourceReader):
    def __init__(self, source: _Topic, starting, ending) -> None:
        self.source = source
        self.bounds: dict[int, tuple[int, int]] = {}
        for p, (low, high) in source.watermarks().items():
            start = max(low, _resolve(starting, p, low, high, EARLIEST))
            end = min(high, _resolve(ending, p, low, high, LATEST))
            self.bounds[p] = (min(start, end), end)

    def partitions(self) -> Sequence[InputPartition]:
        ranges = [r for p, (start, end) in sorted(self.bounds.items())
                  for r in self.source.ranges(p, start, end)]
        # Spark expects at least one partition for a batch scan: nothing to read reads one empty range.
        return ranges or [KafkaRange(min(self.bounds), 0, 0)]

    def read(self, partition: InputPartition) -> Iterator:
        assert isinstance(partition, KafkaRange)
        return self.source.batches(partition)


def _offsets(positions: Mapping[int, int]) -> dict:
    return {str(p): int(o) for p, o in sorted(positions.items())}


def _positions(offsets: Mapping) -> dict[int, int]:
    return {int(p): int(o) for p, o in offsets.items()}


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over Kafka offsets per partition; admission control by maxEventsPerTrigger."""

    def __init__(self, source: _Topic, starting, max_events: int | None) -> None:
        self.source = source
        self.starting = starting
        self.max_events = max_events
        self.target: dict[int, int] | None = None  # the ends fixed by Trigger.AvailableNow

    def initialOffset(self) -> dict:
        return _offsets({p: _resolve(self.starting, p, low, high, EARLIEST)
                         for p, (low, high) in self.source.watermarks().items()})

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable() if self.max_events is None else ReadMaxRows(self.max_events)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {p: high for p, (_low, high) in self.source.watermarks().items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begun = _positions(start)
        marks = self.source.watermarks()
        begin, end = {}, {}
        for p, (low, high) in marks.items():
            # A partition new since the last batch starts at its earliest offset;
            # offsets deleted by retention are skipped.
            first = begun.get(p, low)
            stop = high if self.target is None else min(high, self.target.get(p, first))
            begin[p] = max(first, low)
            end[p] = max(first, stop)
        if isinstance(limit, ReadMaxRows):
            given = allot(limit.max_rows, {p: max(0, end[p] - begin[p]) for p in marks})
            end = {p: max(begun.get(p, begin[p]), begin[p] + given[p]) for p in marks}
        # A partition that vanished keeps its position.
        return _offsets({**begun, **end})

    def reportLatestOffset(self) -> dict | None:
        return _offsets({p: high for p, (_low, high) in self.source.watermarks().items()})

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begun = _positions(start)
        marks = self.source.watermarks()
        ranges = []
        for p, stop in sorted(_positions(end).items()):
            low = marks.get(p, (0, 0))[0]
            if begun.get(p, low) < low and not self.source.allow_gaps:
                raise SecmetaKafkaSourceError(
                    f"{self.source.topic}[{p}]: Kafka offsets [{begun[p]}, {low}) were deleted (retention) before "
                    "this query read them: the events there are missing; option allowGaps=true reads on from "
                    f"offset {low}")
            ranges += self.source.ranges(p, max(begun.get(p, low), low), stop)
        return ranges

    def read(self, partition: InputPartition) -> Iterator:
        assert isinstance(partition, KafkaRange)
        return self.source.batches(partition)

    def commit(self, end: dict) -> None:
        pass  # nothing is committed to Kafka: the Spark checkpoint holds the position
