"""The publisher: mirrors a store's log to a history topic and a compacted state topic.

It opens the log read-only beside the running writer and tails it from its
checkpoint, the next log offset to publish.  Events go out in chunks:

1. every event of the chunk to the history topic; wait until the idempotent
   producer (``acks=all``) confirmed them all, noting their Kafka offsets;
2. the state form of every event to the state topic (its value's frame holding
   the history message's Kafka offset: ``wire``), a tombstone after each removal;
   wait for those confirmations too;
3. only then write the checkpoint (atomically).

A crash anywhere re-sends from the checkpoint: no gap, and every duplicate
carries the log offset it had the first time (in its frame), which our
readers skip.  On the state topic a re-sent message could be older than one it
already holds of the same key (an ACL's creation after its deletion's tombstone),
and once the log cleaner keeps only the newest message per key no reader could
tell: so whenever a chunk is sent again (after a restart, a failed or stopped
state delivery, or ``from_beginning`` onto topics holding the events) the
publisher first reads the state topic's newest message per key since the
checkpoint (``topic_end.read_newest_per_key``) and sends only what is newer, per
key: a key's newest value never goes backwards.  Per key, not "after the topic's
newest log offset": librdkafka's idempotent producer may leave gaps (messages
timed out, then later ones delivered), so a newer message on the topic does not
prove the older ones before it are.  The history topic needs no such rule: its
readers skip a log offset they applied, whatever its order, and a history gap
would fail them (``HistoryGapError``) where a duplicate does not.

The checkpoint is bound to the cluster and the topics it was written for
(``topic_identity``: the cluster id and both topic ids).  On first reaching the
cluster the publisher checks, before sending anything:

- the store's log against the history topic's newest event (``topic_witness``):
  a log behind the topic or diverging from it is refused, naming both offsets,
  and a topic holding events past a cut the log records (``secmeta log
  recover``) is refused naming the recovery: the recovered log goes to new
  topics.  A topic holding nothing past the cut is published on, the
  LogRecovered event included;
- the checkpoint against the topics: another cluster, a topic deleted and
  created again, or a topic lacking events the checkpoint says it confirmed is
  refused (``TopicChangedError``) unless ``from_beginning`` (the CLI's
  ``--from-beginning``), which publishes the whole log to them.  Never
  "published 0 events" to topics that lack them.  One history topic lacking
  them is the same topic still: the checkpoint records the Kafka offset past its
  last confirmed history message, and a history topic of the recorded cluster
  and id that holds no secmeta event and whose earliest offset has moved past
  that one was emptied by retention (the publisher was stopped longer than the
  retention period): the publisher resumes from its checkpoint, with a warning.
  Anything short of that proof is refused, naming the earliest and latest
  Kafka offsets seen and the one expected.  Both topics are written to partition 0 only, so each holds
the events in log order whatever its partition count.

Before its first format 3 message on a topic, and again wherever a reader could
otherwise start without meeting one (after retention deleted the last), it writes
the format marker (``wire.format_marker``; ``_mark``).

An unreachable broker is reported (progress callback, ``logging``) and
retried with backoff, never raised; a missing topic is created, or a
``TopicError`` says why it cannot be.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from secmeta.consumers.kafka.client_config import client_settings
from secmeta.consumers.kafka.client_log import LIBRDKAFKA_LOGGER, side_client_logger
from secmeta.consumers.kafka.state_form import StateForm
from secmeta.consumers.kafka.topic_end import (
    TopicEnd,
    TopicReadError,
    read_newest_per_key,
    read_topic_end,
)
from secmeta.consumers.kafka.topic_identity import TopicIdentity, read_identity
from secmeta.consumers.kafka.topic_witness import check_log_against_topic, logged_recoveries
from secmeta.consumers.kafka.wire import (
    HEADER_HISTORY_OFFSET,
    KIND_HISTORY,
    KIND_STATE,
    encode_tombstone,
    format_marker,
    message_decoder,
    message_encoder,
    message_pair_encoder,
    row_types,
    state_value,
)
from secmeta.core.errors import InvalidValueError, SecmetaError
from secmeta.core.log import Log
from secmeta.core.log.extent import log_extent
from secmeta.core.times import Clock, now_ms, wall_clock
from secmeta.events.durable import write_atomically
from secmeta.events.entities import KINDS
from secmeta.events.keyring import Keyring
from secmeta.events.records import Event, LogRecovered
from secmeta.projections.entity_events import opening_events
from secmeta.projections.gc_pause import paused_gc

__all__ = [
    "CHECKPOINT_FILE",
    "Publisher",
    "PublisherError",
    "PublisherStatus",
    "TopicChangedError",
    "TopicError",
    "ensure_topics",
]

CHECKPOINT_FILE = "kafka-publisher.json"
PARTITION = 0
STAGES = (
    "connecting",
    "broker unreachable",
    "publishing",
    "history delivered",
    "state delivered",
    "checkpointed",
    "delivery failed",
    "idle",
    "stopped",
)

logger = logging.getLogger("secmeta.kafka.publisher")
_UNREACHABLE = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                KafkaError._RESOLVE}


class PublisherError(SecmetaError):
    """The publisher cannot go on as configured (the message says why and what to do)."""


class TopicError(PublisherError):
    """A topic is missing and cannot be created (or creation is disabled)."""


class TopicChangedError(PublisherError):
    """The topics are not shown to be the ones the checkpoint was written for (another cluster, recreated,
    emptied by other means than retention past the publisher's messages)."""


@dataclass(frozen=True, slots=True)
class PublisherStatus:
    """Where the publisher stands, as reported to the progress callback.

    ``stage`` is one of STAGES; ``checkpoint`` the next log offset to
    publish (everything before it is confirmed on both topics); ``lag`` how
    many logged events are not yet confirmed.
    """

    stage: str
    checkpoint: int
    log_end: int
    published: int
    message: str = ""

    @property
    def lag(self) -> int:
        return max(0, self.log_end - self.checkpoint)

    def __str__(self) -> str:
        text = f"{self.stage}: checkpoint {self.checkpoint}, log end {self.log_end}, lag {self.lag}"
        return f"{text} ({self.message})" if self.message else text


def ensure_topics(
    client: Producer,
    admin_config: Mapping[str, object],
    topics: Mapping[str, Mapping[str, str]],
    *,
    create: bool = True,
    timeout: float = 10.0,
) -> list[str]:
    """Make sure every topic (name -> topic configs) exists; return the ones created.

    Missing topics are created with the AdminClient (1 partition).  A cluster
    whose metadata names no reachable controller (librdkafka's mock cluster)
    cannot create topics through the admin API: there the broker is asked to
    auto-create them instead, with a warning that their configs (compaction)
    are the broker's defaults.  Raises TopicError if a topic stays missing,
    and KafkaException if the cluster cannot be reached.
    """
    metadata = client.list_topics(timeout=timeout)
    missing = [name for name in topics if _absent(metadata, name)]
    if not missing:
        return []
    if not create:
        raise TopicError(
            f"topic(s) {', '.join(missing)} do not exist and topic creation is disabled: "
            "create them (the state topic with cleanup.policy=compact) or allow creation"
        )
    if metadata.controller_id in metadata.brokers:
        _create_with_admin(admin_config, {name: topics[name] for name in missing}, timeout)
    else:
        logger.warning(
            "the cluster names no reachable controller (controller id %s), so topics cannot be "
            "created through the admin API; asking the broker to auto-create %s with its default "
            "configs (cleanup.policy=compact is not set)", metadata.controller_id, ", ".join(missing))
        for name in missing:
            client.list_topics(topic=name, timeout=timeout)
    metadata = client.list_topics(timeout=timeout)
    still = [name for name in missing if _absent(metadata, name)]
    if still:
        raise TopicError(
            f"topic(s) {', '.join(still)} do not exist and could not be created "
            "(the broker neither accepted CreateTopics nor auto-created them)"
        )
    return missing


def _kafka_offset(value: object) -> int | None:
    """A checkpoint's recorded Kafka offset (None: not recorded); ValueError unless None or a non-negative int."""
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise ValueError(f"history_kafka_end is not a Kafka offset: {value!r}")
    return value


def _absent(metadata, name: str) -> bool:
    topic = metadata.topics.get(name)
    return topic is None or topic.error is not None or not topic.partitions


def _create_with_admin(admin_config: Mapping[str, object], topics: Mapping[str, Mapping[str, str]],
                       timeout: float) -> None:
    admin = AdminClient(dict(admin_config))
    new = [NewTopic(name, num_partitions=1, replication_factor=-1, config=dict(cfg))
           for name, cfg in topics.items()]
    futures = admin.create_topics(new, request_timeout=timeout, operation_timeout=timeout)
    for name, future in futures.items():
        try:
            future.result(timeout=timeout + 5)
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            raise TopicError(f"topic {name} does not exist and creating it failed: {err.str()}") from None
        except Exception as exc:  # noqa: BLE001 - a future that never completes, etc.
            raise TopicError(f"topic {name} does not exist and creating it failed: {exc!r}") from None
        logger.info("created topic %s (%s)", name, dict(topics[name]) or "default configs")


class _Chunk:
    """Delivery bookkeeping for one chunk of events: the history topic's Kafka offsets, and errors.

    One bound callback serves every message (no closure per message).  Delivery
    reports carry no position in the chunk, but they need none: the idempotent
    producer appends one partition's messages in the order they were produced
    (librdkafka's ``enable.idempotence``: "exactly once and in the original
    produce order"), so the chunk's history offsets, sorted, are its events'
    offsets in log order.
    """

    __slots__ = ("delivered", "outstanding", "errors", "_state_reports", "state_callback")

    def __init__(self):
        self.delivered: list[int] = []
        self.outstanding = 0
        self.errors: list[str] = []
        # The state messages' delivery reports: the first message per error (None: delivered). The callback is a
        # C-level method, so a report costs no Python call (the chunk waits on the producer's queue instead).
        self._state_reports: dict = {}
        self.state_callback = self._state_reports.setdefault

    def history_callback(self, err, msg) -> None:
        self.outstanding -= 1
        if err is not None:
            self.errors.append(err.str())
        else:
            self.delivered.append(msg.offset())

    def history_offsets(self) -> list[int]:
        """The Kafka offset of each event's history message, in log order (once all are delivered)."""
        return sorted(self.delivered)

    def state_errors(self) -> list[str]:
        """Why state messages failed (once every report is served)."""
        return [err.str() for err in self._state_reports if err is not None]


class Publisher:
    """Tails a store's log and produces every event to the history and state topics."""

    def __init__(
        self,
        store_dir: str | os.PathLike,
        keyring: Keyring,
        bootstrap: str,
        *,
        history_topic: str = "secmeta.history",
        state_topic: str = "secmeta.state",
        client_config: Mapping[str, object] | None = None,
        checkpoint_path: str | os.PathLike | None = None,
        chunk_size: int = 10_000,
        create_topics: bool = True,
        metadata_timeout: float = 2.0,
        max_backoff: float = 5.0,
        progress: Callable[[PublisherStatus], None] | None = None,
        clock: Clock = wall_clock,
        from_beginning: bool = False,
        check_timeout: float = 30.0,
        marker_check_interval: float = 30.0,
    ):
        if history_topic == state_topic:
            raise PublisherError(f"the history and state topics must differ (both are {history_topic!r})")
        if chunk_size < 1:
            raise InvalidValueError(f"chunk_size must be positive, not {chunk_size}")
        self.history_topic = history_topic
        self.state_topic = state_topic
        self.chunk_size = chunk_size
        self.create_topics = create_topics
        self.metadata_timeout = metadata_timeout
        self.max_backoff = max_backoff
        self.progress = progress
        self.from_beginning = from_beginning
        self.check_timeout = check_timeout
        self.marker_check_interval = marker_check_interval
        self._settings = client_settings(
            bootstrap, client_config,
            # Every chunk ends in a flush, which sends at once whatever linger.ms would wait for, so the
            # linger only decides how a chunk is cut into requests while it is produced: a long one
            # sends few full batches (batch.size) instead of many small ones.
            defaults={"linger.ms": 100, "logger": logging.getLogger(LIBRDKAFKA_LOGGER)},
            enforced={"enable.idempotence": True, "acks": "all"},
        )
        self._admin_settings = {k: v for k, v in self._settings.items()
                                if k not in ("enable.idempotence", "acks", "linger.ms")}
        self._log = Log.open(store_dir, keyring=keyring, read_only=True, clock=clock)
        self._encode = message_encoder(self._log.codec)
        self._encode_pair = message_pair_encoder(self._log.codec)
        self._decoders = (message_decoder(self._log.codec, KIND_HISTORY), message_decoder(self._log.codec, KIND_STATE))
        self._identity: TopicIdentity | None = None  # what the checkpoint was written against (None: unknown)
        # the history topic's Kafka offset past the last confirmed history message (None: unknown)
        self._history_end: int | None = None
        self._bound = False  # the topics were checked against the checkpoint and the log
        self._markers: dict[str, int] = {}  # each topic's newest format marker's Kafka offset (once bound)
        self._markers_checked = 0.0  # when (time.monotonic) the topics were last seen to hold them
        self._watch: Consumer | None = None  # reads the topics' earliest offsets (``_keep_marked``)
        # per key, the rank (``read_newest_per_key``) of the state topic's newest message at or past the checkpoint:
        # what a chunk sent again must not go behind (None: unknown, read before the next chunk; empty: none)
        self._held: dict[bytes, int] | None = None
        self._held_top = -1  # the highest rank in it: past the checkpoint's, it is needed no more
        try:
            self.checkpoint_path = Path(checkpoint_path) if checkpoint_path else Path(store_dir) / CHECKPOINT_FILE
            self._checkpoint = self._log.start_offset if from_beginning else self._read_checkpoint()
        except BaseException:
            self._log.close()
            raise
        self.published = 0
        self._producer: Producer | None = None
        self._topics_ready = False
        self._broker_down: str | None = None
        self._fatal: str | None = None
        self._backoff = 0.0
        self._last_stage = ""
        self._state_form = StateForm(self._opened_at_checkpoint)
        # The log is read with ACL creations left as rows (EventCodec.decode_batch_rows: no binding built) when every
        # type read so goes out to the state topic as itself with no tombstone, by its type alone; else read whole.
        self._rows = all(self._state_form.of_type(cls) is False for cls in row_types(self._log.codec).values())
        self._closed = False

    # -- checkpoint ----------------------------------------------------------------------

    @property
    def checkpoint(self) -> int:
        """The next log offset to publish: every event before it is confirmed on both topics."""
        return self._checkpoint

    @property
    def bound(self) -> bool:
        """Whether the topics were checked against the log and the checkpoint (done on first reaching them)."""
        return self._bound

    @property
    def log_end(self) -> int:
        self._log.refresh()
        return self._log.end_offset

    @property
    def lag(self) -> int:
        """Logged events not yet confirmed on the topics."""
        return max(0, self.log_end - self._checkpoint)

    def status(self, stage: str = "", message: str = "") -> PublisherStatus:
        return PublisherStatus(stage or self._last_stage or "idle", self._checkpoint, self.log_end,
                               self.published, message)

    def _read_checkpoint(self) -> int:
        path = self.checkpoint_path
        if not path.exists():
            start = 0
        else:
            try:
                data = json.loads(path.read_text())
                start = int(data["next_offset"])
                topics = (data.get("history_topic"), data.get("state_topic"))
                self._identity = TopicIdentity.from_json(data.get("identity"))
                self._history_end = _kafka_offset(data.get("history_kafka_end"))
            except (ValueError, KeyError, TypeError, OSError) as exc:
                raise PublisherError(f"publisher checkpoint {path} is unreadable: {exc!r}") from None
            if topics != (self.history_topic, self.state_topic):
                raise PublisherError(
                    f"publisher checkpoint {path} belongs to topics {topics[0]}/{topics[1]}, not "
                    f"{self.history_topic}/{self.state_topic}: give another checkpoint path, or publish the whole "
                    "log to these topics from the beginning (--from-beginning)"
                )
            if start < 0:
                raise PublisherError(f"publisher checkpoint {path} holds a negative offset {start}")
        if start < self._log.start_offset:
            raise PublisherError(
                f"the log starts at offset {self._log.start_offset} but the publisher must resume at "
                f"{start}: events [{start}, {self._log.start_offset}) were deleted before being published"
            )
        if start > self._log.end_offset and not any(
                isinstance(e.event, LogRecovered) and e.event.from_offset < start
                for e in logged_recoveries(self._log)):
            raise PublisherError(
                f"publisher checkpoint {path} is at offset {start}, but {log_extent(self._log.end_offset)} and "
                "records no recovery that cut it: the checkpoint belongs to another store"
            )
        return start  # past a logged cut: the topics tell (``_bind``) whether they hold events the cut removed

    def _write_checkpoint(self, next_offset: int) -> None:
        data = {
            "next_offset": next_offset,
            "history_topic": self.history_topic,
            "state_topic": self.state_topic,
            "identity": None if self._identity is None else self._identity.to_json(),
            "history_kafka_end": self._history_end,
            "timestamp_ms": now_ms(self._log.clock),
        }
        write_atomically(self.checkpoint_path, json.dumps(data).encode())
        self._checkpoint = next_offset

    # -- reporting -----------------------------------------------------------------------

    def _report(self, stage: str, message: str = "") -> None:
        self._last_stage = stage
        if self.progress is not None:
            self.progress(self.status(stage, message))

    # -- the producer --------------------------------------------------------------------

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = err.str()
            logger.error("producer failed fatally: %s; it will be recreated", err.str())
        elif err.code() in _UNREACHABLE:
            self._broker_down = err.str()

    def _producer_ready(self) -> Producer:
        if self._producer is None or self._fatal is not None:
            self._drop_producer()
            self._fatal = None
            self._producer = Producer({**self._settings, "error_cb": self._on_error})
        return self._producer

    def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.purge()
                producer.flush(0)
            except Exception:  # noqa: BLE001 - a failed producer is dropped either way
                pass

    def _wait(self, stop: threading.Event | None, seconds: float) -> bool:
        """Sleep (serving producer callbacks); True if asked to stop."""
        if stop is not None:
            return stop.wait(seconds)
        time.sleep(seconds)
        return False

    def _retry_later(self, stop: threading.Event | None, deadline: float | None) -> None:
        self._backoff = min(self.max_backoff, max(0.2, self._backoff * 2))
        pause = self._backoff if deadline is None else max(0.0, min(self._backoff, deadline - time.monotonic()))
        self._wait(stop, pause)

    def _connect(self, stop: threading.Event | None, deadline: float | None) -> bool:
        """Reach the cluster and make sure the topics exist; report and back off if unreachable."""
        if self._topics_ready and self._producer is not None and self._fatal is None:
            return True
        producer = self._producer_ready()
        if self._last_stage not in ("connecting", "broker unreachable"):
            self._report("connecting", str(self._settings["bootstrap.servers"]))
        try:
            timeout = self.metadata_timeout
            if deadline is not None:
                timeout = max(0.1, min(timeout, deadline - time.monotonic()))
            created = ensure_topics(
                producer, self._admin_settings,
                {self.history_topic: {}, self.state_topic: {"cleanup.policy": "compact"}},
                create=self.create_topics, timeout=timeout,
            )
        except KafkaException as exc:
            err = exc.args[0]
            reason = err.str() if isinstance(err, KafkaError) else str(exc)
            level = logging.DEBUG if self._last_stage == "broker unreachable" else logging.WARNING
            logger.log(level, "broker unreachable at %s: %s; retrying", self._settings["bootstrap.servers"], reason)
            self._report("broker unreachable", reason)
            self._retry_later(stop, deadline)
            return False
        for name in created:
            logger.info("topic %s was missing and has been created", name)
        if not self._bound:
            try:
                self._bind(producer)
            except (KafkaException, TopicReadError) as exc:
                return self._unreachable("cannot check the topics against the checkpoint", exc, stop, deadline)
        self._topics_ready = True
        self._broker_down = None
        self._backoff = 0.0
        return True

    def _bind(self, producer: Producer) -> None:
        """Check the topics against the log and the checkpoint; record their identity in the checkpoint."""
        identity = read_identity(producer, self._admin_settings, (self.history_topic, self.state_topic),
                                 self.metadata_timeout)
        consumer = Consumer({**self._admin_settings, "group.id": "secmeta-publisher-check",
                             "enable.auto.commit": False, "logger": side_client_logger()})
        try:
            ends = [read_topic_end(consumer, topic, decode, self.check_timeout)
                    for topic, decode in zip((self.history_topic, self.state_topic), self._decoders)]
            held = read_newest_per_key(consumer, self.state_topic, self._decoders[1], self._checkpoint,
                                       self.check_timeout)
        finally:
            consumer.close()
        check_log_against_topic(self._log, ends[0])
        if self.from_beginning:
            self._history_end = None  # nothing of these topics' is recorded yet
        else:
            self._check_checkpoint_binding(identity, ends)
        self._markers.update((end.topic, end.marker) for end in ends if end.marker is not None)
        self._mark(producer, [end.topic for end in ends if end.marker is None])
        self._markers_checked = time.monotonic()
        self._identity = identity
        self._hold(held)
        self._write_checkpoint(self._checkpoint)
        self._bound = True

    def _check_checkpoint_binding(self, identity: TopicIdentity, ends: list[TopicEnd]) -> None:
        """TopicChangedError unless the topics are the checkpoint's and hold what it says was confirmed, or the
        history topic is shown to be the checkpoint's, emptied by retention (``_aged_out``)."""
        changes = self._identity.changes(identity) if self._identity is not None else []
        confirmed = self._checkpoint - 1
        lacking = [end for end in ends if end.last_offset < confirmed]
        if not changes and not lacking:
            return
        if not changes and [end.topic for end in lacking] == [self.history_topic] and self._aged_out(
                identity, lacking[0]):
            end = lacking[0]
            logger.warning(
                "topic %s holds none of the events published to it (Kafka offsets %d..%d; the last one published "
                "was before Kafka offset %d): retention deleted them; resuming at log offset %d",
                end.topic, end.low, end.high, self._history_end, self._checkpoint)
            return
        seen = [self._lacking(end) for end in lacking]
        raise TopicChangedError(
            f"publisher checkpoint {self.checkpoint_path} says log offsets through {confirmed} were published "
            f"to {self.history_topic} and {self.state_topic}, but {'; '.join(changes + seen)}: these are not "
            "shown to be the topics it published to (another cluster, or topics deleted and created again; a "
            "topic emptied by retention is resumed on only when it is the recorded cluster's and its earliest "
            "offset is past the last message published to it). Nothing was published. Run with --from-beginning "
            f"to publish the whole log to them (from log offset {self._log.start_offset})")

    def _aged_out(self, identity: TopicIdentity, end: TopicEnd) -> bool:
        """Whether the history topic ``end`` is the one the checkpoint recorded, its confirmed events deleted by
        retention: the recorded cluster (its id known and unchanged), no recorded topic id that differs, no
        secmeta event held, and the earliest Kafka offset at or past the one after the last confirmed message."""
        recorded = self._identity
        return (recorded is not None and recorded.cluster_id is not None
                and recorded.cluster_id == identity.cluster_id and not recorded.changes(identity)
                and end.last is None and self._history_end is not None and end.low >= self._history_end)

    def _lacking(self, end: TopicEnd) -> str:
        """What a topic lacking the confirmed events holds: its Kafka offsets, and what was expected."""
        expected = ""
        if end.topic == self.history_topic:
            expected = ("; the last message published to it was before Kafka offset "
                        f"{'(not recorded)' if self._history_end is None else self._history_end}")
        held = "" if end.last is None else f" (Kafka offsets {end.low}..{end.high})"  # else describe() says them
        return f"{end.describe()}{held}{expected}"

    def _mark(self, producer: Producer, topics: list[str]) -> None:
        """Write the format marker (``wire.format_marker``) on each of ``topics``, before its next format 3 message,
        and note where it lies: a secmeta from before format 3, which would skip format 3's values as another
        writer's (and keep the older values of their keys), stops on it instead. KafkaException if it is not
        delivered.

        Written where a reader could otherwise start without meeting one: on binding, on a topic whose newest message
        (bar tombstones and other writers') is not the marker (``TopicEnd.marker``: retention may have deleted the
        one before), and while publishing, on a topic whose earliest offset has passed its newest (``_keep_marked``).
        """
        if not topics:
            return
        failed: list = []
        delivered: dict[str, int] = {}

        def report(err, msg) -> None:
            if err is not None:
                failed.append(err)
            else:
                delivered[msg.topic()] = msg.offset()

        key, value, headers = format_marker()
        for topic in topics:
            producer.produce(topic, value, key, PARTITION, report, headers=headers)
        if producer.flush(self.check_timeout) > 0:
            raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, "the format marker was not delivered"))
        if failed:
            raise KafkaException(failed[0])
        self._markers.update(delivered)
        logger.info("wrote the message format marker on %s", ", ".join(topics))

    def _keep_marked(self, stop: threading.Event | None, deadline: float | None) -> bool:
        """Write the format marker again on each topic whose earliest offset has passed its newest one (time or size
        retention, or DeleteRecords, deleted it), so a reader from before format 3 starting at the earliest offset
        still meets one; asked at most every ``marker_check_interval`` seconds. False (reported, backed off) if the
        cluster could not tell or the marker was not delivered."""
        if time.monotonic() - self._markers_checked < self.marker_check_interval:
            return True
        try:
            if self._watch is None:
                self._watch = Consumer({**self._admin_settings, "group.id": "secmeta-publisher-check",
                                        "enable.auto.commit": False, "logger": side_client_logger()})
            aged = []
            for topic in (self.history_topic, self.state_topic):
                low, _ = self._watch.get_watermark_offsets(TopicPartition(topic, PARTITION),
                                                           timeout=self.metadata_timeout, cached=False)
                if low > self._markers.get(topic, -1):
                    aged.append(topic)
            self._mark(self._producer_ready(), aged)
        except KafkaException as exc:
            return self._unreachable("cannot check that the topics hold the format marker", exc, stop, deadline)
        self._markers_checked = time.monotonic()
        return True

    @staticmethod
    def _produce_all(producer: Producer, topic: str, messages: Iterable[tuple[bytes, bytes | None, list | None]],
                     callback: Callable) -> int:
        """Produce every (key, value, headers) to the topic's partition (headers None: none, as format 3's values
        have); wait out a full queue; how many.

        librdkafka copies the headers as it takes a message, so a caller may change a list once produced.
        """
        produce, count = producer.produce, 0
        for key, value, headers in messages:
            count += 1
            try:
                if headers is None:
                    produce(topic, value, key, PARTITION, callback)
                else:
                    produce(topic, value, key, PARTITION, callback, headers=headers)
            except BufferError:  # the local queue is full: serve delivery reports until it drains
                while True:
                    producer.poll(0.05)
                    try:
                        produce(topic, value, key, PARTITION, callback, headers=headers)
                        break
                    except BufferError:
                        pass
        return count

    def _await(self, chunk: _Chunk, producer: Producer, stop: threading.Event | None,
               deadline: float | None) -> bool:
        """Serve delivery reports until the chunk is confirmed (every report served: the producer holds nothing);
        False on failure, stop or deadline."""
        while chunk.outstanding > 0 or len(producer) > 0:
            if self._fatal is not None:
                chunk.errors.append(f"fatal producer error: {self._fatal}")
                return False
            if (stop is not None and stop.is_set()) or (deadline is not None and time.monotonic() >= deadline):
                return False
            producer.flush(0.2)
            if (chunk.outstanding > 0 or len(producer) > 0) and self._broker_down is not None:
                if self._last_stage != "broker unreachable":
                    logger.warning("broker unreachable while delivering: %s; still retrying", self._broker_down)
                self._report("broker unreachable", self._broker_down)
                self._broker_down = None
        chunk.errors.extend(chunk.state_errors())
        return not chunk.errors

    # -- publishing ----------------------------------------------------------------------

    def publish_available(self, timeout: float | None = None, stop_event: threading.Event | None = None,
                          max_events: int | None = None) -> int:
        """Publish every event logged so far (at most ``max_events``); return how many were confirmed.

        Blocks until they are all confirmed and checkpointed, or until
        ``timeout`` seconds pass or ``stop_event`` is set (then it returns what
        was confirmed so far; the rest is published by a later call).
        """
        if self._closed:
            raise PublisherError("the publisher is closed")
        deadline = None if timeout is None else time.monotonic() + timeout
        end = self.log_end
        if max_events is not None:
            end = min(end, self._checkpoint + max_events)
        done = 0
        while self._checkpoint < end or not self._bound:  # even with nothing to send: are the topics ours?
            if (stop_event is not None and stop_event.is_set()) or (
                deadline is not None and time.monotonic() >= deadline
            ):
                break
            if (not self._connect(stop_event, deadline) or self._checkpoint >= end
                    or not self._keep_marked(stop_event, deadline)):
                continue
            # A chunk's events and messages are garbage once it is published: the collector, were it
            # on, would rescan them all (and the heap) many times over while they are built.
            with paused_gc():
                done += self._publish_chunk(min(end, self._checkpoint + self.chunk_size), stop_event, deadline)
        return done

    def _publish_chunk(self, end: int, stop: threading.Event | None, deadline: float | None) -> int:
        """Publish the events from the checkpoint to ``end``; how many were confirmed (all, or 0)."""
        if self._held is None and not self._read_held(stop, deadline):
            return 0
        envelopes, bodies, links = self._read_linked(self._checkpoint, end)
        producer = self._producer_ready()
        chunk = _Chunk()
        encoded = list(map(self._encode_pair, envelopes, bodies, links))
        self._report("publishing", f"offsets {envelopes[0].offset}..{envelopes[-1].offset}")
        produced = self._produce_all(producer, self.history_topic, ((key, value, None) for key, value, _, _ in encoded),
                                     chunk.history_callback)
        chunk.outstanding += produced  # after: delivery reports served while producing have counted down
        if not self._await(chunk, producer, stop, deadline):
            return self._failed(chunk, "history")
        self._report("history delivered", f"through offset {envelopes[-1].offset}")

        form = self._state_form
        self._produce_all(producer, self.state_topic, self._state_messages(
            envelopes, encoded, chunk.history_offsets()), chunk.state_callback)
        if not self._await(chunk, producer, stop, deadline):
            form.discard()
            return self._failed(chunk, "state")
        self._report("state delivered", f"through offset {envelopes[-1].offset}")

        self._history_end = chunk.history_offsets()[-1] + 1
        self._write_checkpoint(envelopes[-1].offset + 1)
        if self._held and self._held_top < 2 * self._checkpoint:
            self._held = {}  # the state topic holds nothing past the checkpoint: nothing to look up
        form.commit()
        self.published += len(envelopes)
        self._backoff = 0.0
        self._report("checkpointed")
        return len(envelopes)

    def _state_messages(self, envelopes: list, encoded: list,
                        positions: list[int]) -> Iterator[tuple[bytes, bytes | None, list | None]]:
        """The state topic's messages of a chunk whose history messages are ``encoded`` (``message_pair_encoder``)
        at Kafka offsets ``positions``: each event's state form, a tombstone after a removal. A state message carries
        the history message's Kafka offset instead of the link; a tombstone carries it as a header. Every event is
        folded (``StateForm``), but a message the state topic holds already, or holds a newer one of its key
        (``_held``), is not sent again."""
        form, held = self._state_form, self._held or None
        for env, (key, _, head, tail), position in zip(envelopes, encoded, positions):
            # a row (_read_linked) goes out as itself, no tombstone: its type's form (checked at open: _rows)
            whole, closes = (env, False) if env.event.__class__ is tuple else form.of(env)
            send_value = True
            if held is not None:
                newer = held.get(key, -1) - 2 * env.offset  # 0: the topic holds its value; 1 or more: all of it
                if newer >= closes:
                    continue
                send_value = newer < 0
            if send_value:
                if whole is not env:
                    key, value, _ = self._encode(whole, history_offset=position)
                else:
                    value = state_value(head, position, tail)
                yield key, value, None
            if closes:
                key, tombstone, headers = encode_tombstone(env)
                headers.append((HEADER_HISTORY_OFFSET, b"%d" % position))
                yield key, tombstone, headers

    def _read_linked(self, start: int, end: int) -> tuple[list, list[bytes | None], list[bytes]]:
        """The events in [start, end), each one's body as its batch holds it (None: encode it afresh;
        ``EventCodec.decode_batch_bodies``) and the chain link of the log batch that holds it. An event of a type
        that declares a row is that row in its envelope (``EventCodec.decode_batch_rows``), when ``_rows``."""
        envelopes: list = []
        bodies: list[bytes | None] = []
        links: list[bytes] = []
        codec = self._log.codec
        decode, rows = codec.decode_batch_bodies, codec.decode_batch_rows if self._rows else None
        for batch in self._log.batches(start, end):
            read = None if rows is None else rows(batch.payload, batch.schema_fp, batch.base_offset)
            events, logged = decode(batch.payload, batch.schema_fp, batch.base_offset) if read is None else read
            held: list[bytes | None] = [None] * len(events) if logged is None else logged  # type: ignore[assignment]
            if batch.base_offset < start or batch.next_offset > end:  # a batch the range cuts
                first = max(start - batch.base_offset, 0)
                last = min(end, batch.next_offset) - batch.base_offset
                events, held = events[first:last], held[first:last]
            envelopes.extend(events)
            bodies.extend(held)
            links.extend([bytes(batch.link)] * len(events))
        return envelopes, bodies, links

    def _failed(self, chunk: _Chunk, topic: str) -> int:
        """Nothing of the chunk counts as published: report why (if it failed rather than stopped). After a state
        delivery, failed or stopped, the producer is dropped (what it still holds must not land after the state topic
        is read again) and the state topic is read again before the next chunk (``_held``): some of its messages may be
        there, even ones reported failed (a timed out request the broker wrote)."""
        if topic == "state":
            self._held = None
            if not chunk.errors:
                self._drop_producer()
                self._topics_ready = False
        if chunk.errors:
            reason = "; ".join(chunk.errors[:3]) + (f" (+{len(chunk.errors) - 3} more)" if len(chunk.errors) > 3 else "")
            logger.warning("delivery to the %s topic failed: %s; re-sending from offset %d",
                           topic, reason, self._checkpoint)
            self._report("delivery failed", reason)
            self._drop_producer()  # a fresh idempotent producer re-sends from the checkpoint
            self._topics_ready = False
        return 0

    def _unreachable(self, what: str, exc: Exception, stop: threading.Event | None, deadline: float | None
                     ) -> bool:
        """Log and report a broker that could not be read (``what`` failed, for ``exc``), back off; False."""
        reason = exc.args[0].str() if isinstance(exc.args[0], KafkaError) else str(exc)
        logger.warning("%s: %s; retrying", what, reason)
        self._report("broker unreachable", reason)
        self._retry_later(stop, deadline)
        return False

    def _hold(self, held: dict[bytes, int]) -> None:
        """What the state topic holds per key at or past the checkpoint, as read (``read_newest_per_key``): kept until
        the checkpoint passes all of it (from_beginning onto topics holding the events: the whole log)."""
        self._held, self._held_top = held, max(held.values(), default=-1)

    def _read_held(self, stop: threading.Event | None, deadline: float | None) -> bool:
        """Read the state topic's newest message per key since the checkpoint into ``_held``; False (reported, backed
        off) if it cannot be read: no state message goes out unless it is known not to be older than one held."""
        consumer = None
        try:
            consumer = Consumer({**self._admin_settings, "group.id": "secmeta-publisher-check",
                                 "enable.auto.commit": False, "logger": side_client_logger()})
            self._hold(read_newest_per_key(consumer, self.state_topic, self._decoders[1], self._checkpoint,
                                           self.check_timeout))
        except (KafkaException, TopicReadError) as exc:
            return self._unreachable("cannot read what the state topic holds since the checkpoint", exc, stop,
                                     deadline)
        finally:
            if consumer is not None:
                consumer.close()
        return True

    def _opened_at_checkpoint(self) -> Iterator[Event]:
        """The entities of kinds with update events open at the checkpoint (the image there, loaded once)."""
        if self._checkpoint == 0:
            return iter(())
        # imported only when resuming with updates to fold
        from secmeta.core.forensics.timetravel import TimeTravel

        image = TimeTravel(self._log, memory_bytes=0).image_at(self._checkpoint)
        return opening_events(image, [kind for kind in KINDS if kind.updates])

    def run(self, stop_event: threading.Event | None = None,
            progress: Callable[[PublisherStatus], None] | None = None, *, poll_interval: float = 0.5) -> None:
        """Publish until ``stop_event`` is set: new events as they are logged, retrying through outages."""
        if progress is not None:
            self.progress = progress
        stop = stop_event or threading.Event()
        while not stop.is_set():
            if not self._connect(stop, None):  # report an unreachable cluster even with nothing to send
                continue
            self.publish_available(stop_event=stop)
            if stop.is_set():
                break
            if self._checkpoint >= self.log_end and self._keep_marked(stop, None):
                if self._last_stage != "idle":
                    self._report("idle")
                if self._producer is not None:
                    self._producer.poll(0)
                self._log.wait_for(self._checkpoint, timeout=poll_interval)
        self._report("stopped")

    # -- lifecycle -----------------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is in flight (briefly; the checkpoint covers the rest) and close the log."""
        if self._closed:
            return
        self._closed = True
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(timeout)
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.close()
        self._log.close()

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
