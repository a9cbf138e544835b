"""The streaming audit job: history topic -> audit file, alerts file and alerts topic.

For every event of the history topic the job writes one redacted JSON line to
the audit file (its ``time`` in ISO-8601 UTC with ``Z`` beside ``timestamp_ms``, as
every alert has too: ``secmeta.core.times.with_times``) and evaluates the alert rules (``secmeta.consumers.audit_rules``); alerts go, as
JSON lines, to the alerts file and, as JSON values keyed by rule name, to the
alerts topic. Messages that are not secmeta events are counted and written to
a dead-letter file, never raised.

A batch of messages is settled in this order, and the consumer group's offset
moves only at the end:

1. dead letters, alerts, audit lines appended to their files, each flushed
   and fsync'd (alerts before the audit lines);
2. alerts produced (idempotent producer, ``acks=all``) and confirmed;
3. offsets committed, with metadata: the last log offset settled and the
   alerts topic's end offsets after our alerts.

Restarting (a new job with the same files and group, or after a broker or
delivery failure) resumes from the committed offset and rebuilds what it
needs from the files' tails and the alerts topic, so nothing is lost or
repeated:

* events whose log offset (``secmeta.offset``) is at most the committed one
  are duplicates (the publisher's re-sends, too) and are skipped;
* events the audit file already holds (written before a crash, not
  committed) get no new audit line; their alerts are taken from the alerts
  file, not re-evaluated;
* alerts already in the alerts file (a crash between the alerts and the audit
  write) are not written again;
* alerts already in the alerts topic (a crash after producing, before the
  commit) are not produced again: the topic is read from the end offsets
  recorded at the last commit, keeping our own alerts (header
  ``secmeta.audit_group``);
* the mass-deletion window is replayed from the audit file's tail (the
  records within the window before the last one).

``after_step(name)``, if given, is called after each step of a batch:
"alerts written" (dead letters and alerts in their files), "audited" (the
audit lines too), "published" (alerts confirmed, before the commit); tests
inject crashes and failures there, as the Spark compaction's ``after_step``.

A torn last line (a crash mid-write) is cut when a file is opened. The
dead-letter file defaults to ``<audit file stem>.dead-letter.jsonl`` beside
the audit file; ``AuditJob.stats`` counts what was done and skipped.

The job assigns itself every partition of the history topic (no group
rebalancing: one job per group and set of files). It assumes the history
topic carries the log in order on partition 0, as the publisher writes it,
and that commit times do not go backwards (the mass-deletion window is in
event time).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from secmeta.consumers.audit_rules import Alert, AuditRules, load_rules
from secmeta.consumers.kafka.client_config import client_settings
from secmeta.consumers.kafka.history_gap import describe_gap, missing_offsets
from secmeta.consumers.kafka.publisher import TopicError, ensure_topics
from secmeta.consumers.kafka.wire import (
    HEADER_OFFSET,
    KIND_HISTORY,
    FormatMarker,
    NotOurMessage,
    dead_letter_reason,
    decode_message,
    header_map,
)
from secmeta.core.errors import InvalidValueError, SecmetaError
from secmeta.core.times import with_times
from secmeta.events.codec import EventCodec
from secmeta.events.durable import fsync_dir
from secmeta.events.errors import EventsError
from secmeta.events.redact import redacted

__all__ = [
    "HEADER_AUDIT_GROUP",
    "AuditError",
    "AuditInterrupted",
    "AuditJob",
    "AuditStats",
    "JsonLines",
]

logger = logging.getLogger("secmeta.kafka.audit")

HEADER_AUDIT_GROUP = "secmeta.audit_group"
_FATAL_DELIVERY = {
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.MSG_SIZE_TOO_LARGE,
}


class AuditError(SecmetaError):
    """The audit job cannot go on as configured; the message says why."""


class AuditInterrupted(AuditError):
    """A passing failure (broker unreachable, delivery or commit failed); nothing was committed.

    The job restarts from its committed offset and its files on the next call.
    """


@dataclass
class AuditStats:
    """What the job did since it was created."""

    events: int = 0  # audit lines written
    alerts: int = 0  # alerts written to the alerts file
    published: int = 0  # alerts produced to the alerts topic
    duplicates: int = 0  # events skipped as already settled
    dead_letters: int = 0  # messages that are not ours, written to the dead-letter file
    gaps: int = 0  # jumps in the log offsets (events missing from the topic)


# -- JSON-lines files ----------------------------------------------------------------------


class JsonLines:
    """An append-only JSON-lines file: batches are fsync'd; a torn last line is cut on open.

    ``read_chunk``: how many bytes a backwards read (tail repair, ``newest_first``) takes at a time.
    """

    def __init__(self, path: str | os.PathLike, *, read_chunk: int = 1 << 16) -> None:
        if read_chunk < 1:
            raise InvalidValueError(f"read_chunk must be positive, not {read_chunk}")
        self.path = Path(path)
        self.read_chunk = read_chunk
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            created = not self.path.exists()
            self._file = open(self.path, "a+b")  # noqa: SIM115 - held open for the job's life
            if created:
                fsync_dir(self.path.parent)
        except OSError as exc:
            raise AuditError(f"cannot open {self.path}: {exc}") from None
        self.repair()

    def repair(self) -> int:
        """Cut a torn last line (one without its newline); return how many bytes were cut."""
        cut = self._cut_torn_tail()
        if cut:
            logger.warning("%s: cut a torn last line (%d bytes) left by a crash", self.path, cut)
        return cut

    def _cut_torn_tail(self) -> int:
        fd = self._file.fileno()
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return 0
        keep = 0
        pos = size
        while pos > 0:
            start = max(0, pos - self.read_chunk)
            found = os.pread(fd, pos - start, start).rfind(b"\n")
            if found >= 0:
                keep = start + found + 1
                break
            pos = start
        self._file.truncate(keep)
        os.fsync(fd)
        return size - keep

    def append(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Append one line per record, then flush and fsync."""
        if not records:
            return
        data = b"".join(
            json.dumps(r, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
            for r in records
        )
        try:
            self._file.write(data)
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise AuditError(f"cannot write {self.path}: {exc}") from None

    def newest_first(self) -> Iterator[dict[str, Any]]:
        """The records from the last line backwards (read lazily from the end)."""
        fd = self._file.fileno()
        pos = os.fstat(fd).st_size
        rest = b""
        while pos > 0:
            start = max(0, pos - self.read_chunk)
            lines = (os.pread(fd, pos - start, start) + rest).split(b"\n")
            pos = start
            rest = lines[0]
            for line in reversed(lines[1:]):
                if line:
                    yield self._parse(line)
        if rest:
            yield self._parse(rest)

    def _parse(self, line: bytes) -> dict[str, Any]:
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            raise AuditError(f"{self.path}: a line is not a JSON object: {line[:80]!r}")
        return record

    def close(self) -> None:
        self._file.close()


# -- the job -------------------------------------------------------------------------------


class AuditJob:
    """Consumes the history topic; writes audit lines and alerts; commits after they are durable."""

    def __init__(
        self,
        bootstrap: str,
        *,
        history_topic: str,
        alerts_topic: str = "secmeta.alerts",
        audit_file: str | os.PathLike,
        alerts_file: str | os.PathLike,
        rules: AuditRules | str | os.PathLike | None = None,
        group_id: str = "secmeta-audit",
        client_config: Mapping[str, object] | None = None,
        dead_letter_file: str | os.PathLike | None = None,
        codec: EventCodec | None = None,
        batch_size: int = 500,
        timeout: float = 10.0,
        max_backoff: float = 5.0,
        after_step: Callable[[str], None] | None = None,
    ) -> None:
        if history_topic == alerts_topic:
            raise AuditError(
                f"the history and alerts topics must differ (both are {history_topic!r})"
            )
        if batch_size < 1:
            raise InvalidValueError(f"batch_size must be positive, not {batch_size}")
        self.bootstrap = bootstrap
        self.history_topic = history_topic
        self.alerts_topic = alerts_topic
        self.group_id = group_id
        self.batch_size = batch_size
        self.timeout = timeout
        self.max_backoff = max_backoff
        self.after_step = after_step
        self.rules = rules if isinstance(rules, AuditRules) else load_rules(rules)
        self.stats = AuditStats()
        self._codec = codec or EventCodec.default()
        librdkafka_log = logging.getLogger("secmeta.kafka.librdkafka")
        self._consumer_settings = client_settings(
            bootstrap,
            client_config,
            defaults={
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "logger": librdkafka_log,
            },
            enforced={"group.id": group_id, "enable.auto.commit": False},
        )
        self._producer_settings = client_settings(
            bootstrap,
            {k: v for k, v in (client_config or {}).items() if k != "group.id"},
            defaults={"linger.ms": 5, "logger": librdkafka_log},
            enforced={"enable.idempotence": True, "acks": "all"},
        )
        audit_path = Path(audit_file)
        dead_path = dead_letter_file or audit_path.with_name(audit_path.stem + ".dead-letter.jsonl")
        opened: list[JsonLines] = []
        try:
            for path in (audit_path, alerts_file, dead_path):
                opened.append(JsonLines(path))
        except AuditError:
            for file in opened:
                file.close()
            raise
        self._audit, self._alerts, self._dead = opened
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._closed = False
        self._reset_state()

    @property
    def dead_letter_file(self) -> Path:
        return self._dead.path

    def _reset_state(self) -> None:
        self._started = False
        self._active_rules = self.rules.fresh()
        self._settled = -1  # last log offset whose audit line, alerts and commit are done
        self._audited = -1  # last log offset in the audit file
        self._file_alerts: dict[int, list[Alert]] = {}  # alerts file, offsets > settled
        self._in_topic: set[tuple[int, str]] = set()  # ours in the topic, offsets > settled
        self._dead_seen: set[tuple[str, int, int]] = set()
        self._alert_ends: dict[int, int] = {}
        self._start_positions: dict[int, int] = {}
        self._delivery_errors: list[KafkaError] = []

    # -- starting: committed offset, files, alerts topic ----------------------------------

    def _start(self) -> None:
        self._consumer = Consumer(dict(self._consumer_settings))
        partitions = self._history_partitions()
        committed = self._committed(partitions)
        self._start_positions = {tp.partition: tp.offset for tp in committed}
        marks = [m for m in (_read_mark(tp.metadata) for tp in committed) if m is not None]
        mark = max(marks, key=lambda m: m["log"], default={"log": -1, "alerts": {}})
        self._settled = mark["log"]
        self._recover_files()
        self._producer = Producer(dict(self._producer_settings))
        self._ensure_alerts_topic()
        self._scan_alerts_topic({int(p): n for p, n in mark["alerts"].items()})
        self._consumer.assign([TopicPartition(self.history_topic, p) for p in partitions])
        self._started = True
        logger.info(
            "audit job started: %s settled to log offset %d, audit file at %d",
            self.history_topic,
            self._settled,
            self._audited,
        )

    def _history_partitions(self) -> list[int]:
        try:
            metadata = self._consumer.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise AuditInterrupted(
                f"cannot reach Kafka at {self.bootstrap}: {_describe(exc)}"
            ) from None
        topic = metadata.topics.get(self.history_topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise AuditError(
                f"history topic {self.history_topic!r} does not exist on {self.bootstrap}: "
                "start the publisher first, or check the topic name"
            )
        return sorted(topic.partitions)

    def _committed(self, partitions: list[int]) -> list[TopicPartition]:
        wanted = [TopicPartition(self.history_topic, p) for p in partitions]
        try:
            return self._consumer.committed(wanted, timeout=self.timeout)
        except KafkaException as exc:
            raise AuditInterrupted(
                f"cannot read the committed offsets of group {self.group_id!r}: {_describe(exc)}"
            ) from None

    def _recover_files(self) -> None:
        for file in (self._audit, self._alerts, self._dead):
            file.repair()
        records = self._audit.newest_first()
        last = next(records, None)
        if last is not None:
            self._audited = last["offset"]
            horizon = self._active_rules.horizon_ms
            if horizon:
                cutoff = last["timestamp_ms"] - horizon
                window = [last]
                for record in records:
                    if record["timestamp_ms"] <= cutoff:
                        break
                    window.append(record)
                self._active_rules.restore(reversed(window))
        for record in self._alerts.newest_first():
            if record["offset"] <= self._settled:
                break
            alert = Alert.from_dict(record)
            self._file_alerts.setdefault(alert.offset, []).insert(0, alert)
        for record in self._dead.newest_first():
            key = (record["topic"], record["partition"], record["kafka_offset"])
            if key[0] == self.history_topic and key[2] < self._start_positions.get(key[1], -1):
                break
            self._dead_seen.add(key)

    def _ensure_alerts_topic(self) -> None:
        admin = {
            k: v
            for k, v in self._producer_settings.items()
            if k not in ("enable.idempotence", "acks", "linger.ms")
        }
        try:
            ensure_topics(self._producer, admin, {self.alerts_topic: {}}, timeout=self.timeout)
        except TopicError as exc:
            raise AuditError(f"alerts topic: {exc}") from None
        except KafkaException as exc:
            raise AuditInterrupted(
                f"cannot reach Kafka at {self.bootstrap}: {_describe(exc)}"
            ) from None

    def _scan_alerts_topic(self, recorded_ends: dict[int, int]) -> None:
        """Find our alerts produced after the last commit (from the ends it recorded)."""
        settings = dict(self._consumer_settings, **{"group.id": f"{self.group_id}.alerts-scan"})
        scanner = Consumer(settings)
        try:
            metadata = scanner.list_topics(timeout=self.timeout)
            topic = metadata.topics.get(self.alerts_topic)
            partitions = sorted(topic.partitions) if topic is not None else []
            todo: dict[int, int] = {}
            start: list[TopicPartition] = []
            for p in partitions:
                low, high = scanner.get_watermark_offsets(
                    TopicPartition(self.alerts_topic, p), timeout=self.timeout, cached=False
                )
                self._alert_ends[p] = high
                first = max(low, recorded_ends.get(p, low))
                if first < high:
                    todo[p] = high
                    start.append(TopicPartition(self.alerts_topic, p, first))
            if start:
                scanner.assign(start)
                self._read_our_alerts(scanner, todo)
        except KafkaException as exc:
            raise AuditInterrupted(
                f"cannot read the alerts topic {self.alerts_topic!r}: {_describe(exc)}"
            ) from None
        finally:
            scanner.close()

    def _read_our_alerts(self, scanner: Consumer, todo: dict[int, int]) -> None:
        deadline = time.monotonic() + self.timeout
        ours = self.group_id.encode()
        while todo:
            for msg in _take(scanner, 500, 0.2):
                if msg.error() is not None:
                    continue
                if msg.offset() + 1 >= todo.get(msg.partition(), 0):
                    todo.pop(msg.partition(), None)
                if header_map(msg.headers()).get(HEADER_AUDIT_GROUP) != ours:
                    continue
                try:
                    value = json.loads(msg.value())
                    identity = (int(value["offset"]), str(value["rule"]))
                except (TypeError, ValueError, KeyError):
                    continue
                if identity[0] > self._settled:
                    self._in_topic.add(identity)
            for tp in scanner.position([TopicPartition(self.alerts_topic, p) for p in todo]):
                if tp.offset >= todo[tp.partition]:
                    todo.pop(tp.partition)
            if todo and time.monotonic() > deadline:
                raise AuditInterrupted(
                    f"could not read the alerts topic {self.alerts_topic!r} to its end "
                    f"within {self.timeout:g} s"
                )

    # -- processing ------------------------------------------------------------------------------

    def process_available(
        self,
        timeout: float = 1.0,
        *,
        max_messages: int | None = None,
        stop_event: threading.Event | None = None,
    ) -> int:
        """Settle what the history topic holds now (waiting up to ``timeout`` s for it).

        Returns how many events got a new audit line. Stops early once caught
        up with the topic's end, after ``max_messages`` messages, or when
        ``stop_event`` is set. Raises AuditInterrupted after a passing failure,
        AuditError when the job cannot go on as configured; either way nothing
        uncommitted is kept, and a next call restarts from the committed
        offset and the files.
        """
        if self._closed:
            raise AuditError("the audit job is closed")
        try:
            if not self._started:
                self._start()
            return self._consume(timeout, max_messages, stop_event)
        except AuditError:
            self._drop_clients()  # whatever was not committed is redone by the next call
            raise

    def _consume(
        self, timeout: float, max_messages: int | None, stop: threading.Event | None
    ) -> int:
        deadline = time.monotonic() + timeout
        limit = max_messages if max_messages is not None else float("inf")
        consumed = audited = 0
        while consumed < limit and not (stop is not None and stop.is_set()):
            want = int(min(self.batch_size, limit - consumed))
            wait = max(0.0, min(0.2, deadline - time.monotonic()))
            try:
                messages = _take(self._consumer, want, wait)
            except KafkaException as exc:
                raise self._kafka_failure("consuming", exc) from None
            if messages:
                consumed += len(messages)
                audited += self._settle(messages)
            elif self._caught_up():
                break
            if time.monotonic() >= deadline:
                break
        return audited

    def _caught_up(self) -> bool:
        """Whether every assigned partition was read to the high watermark the fetcher last saw."""
        for tp in self._consumer.position(self._consumer.assignment()):
            low, high = self._consumer.get_watermark_offsets(tp, cached=True)
            if high < 0:
                return False  # not fetched yet
            position = tp.offset
            if position < 0:
                position = self._start_positions.get(tp.partition, -1)
            if position < 0:
                position = max(low, 0)
            if position < high:
                return False
        return True

    def _settle(self, messages: list) -> int:
        audit_lines: list[dict[str, Any]] = []
        new_alerts: list[Alert] = []
        to_produce: list[Alert] = []
        dead: list[dict[str, Any]] = []
        commit: dict[int, int] = {}
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.fatal():
                    raise AuditError(f"consumer failed: {err.str()}")
                logger.warning("consumer: %s", err.str())
                continue
            commit[msg.partition()] = msg.offset() + 1
            try:
                envelope = decode_message(self._codec, msg.key(), msg.value(), msg.headers(), KIND_HISTORY)
            except FormatMarker:
                continue
            except (NotOurMessage, EventsError) as exc:
                self._dead_letter(msg, str(exc), dead)
                continue
            offset = envelope.offset
            if offset <= self._settled:
                self.stats.duplicates += 1
                continue
            if self._settled >= 0 and missing_offsets(self._settled, offset):
                self.stats.gaps += 1
                logger.warning("%s", describe_gap(self.history_topic, self._settled, offset, msg.offset()))
            if offset <= self._audited:
                alerts = self._file_alerts.get(offset, [])
            else:
                alerts = self._active_rules.evaluate(envelope)
                written = {a.identity for a in self._file_alerts.get(offset, [])}
                new_alerts.extend(a for a in alerts if a.identity not in written)
                audit_lines.append(with_times(redacted(envelope)))  # "time" (ISO-8601 Z) beside timestamp_ms
                self._audited = offset
            to_produce.extend(a for a in alerts if a.identity not in self._in_topic)
            self._settled = offset
        self._dead.append(dead)
        self._alerts.append([with_times(a.to_dict()) for a in new_alerts])
        self._step("alerts written")
        self._audit.append(audit_lines)
        self.stats.dead_letters += len(dead)
        self.stats.alerts += len(new_alerts)
        self.stats.events += len(audit_lines)
        self._step("audited")
        self._publish(to_produce)
        self._step("published")
        self._commit(commit)
        return len(audit_lines)

    def _step(self, name: str) -> None:
        if self.after_step is not None:
            self.after_step(name)

    def _dead_letter(self, msg, reason: str, dead: list[dict[str, Any]]) -> None:
        key = (msg.topic(), msg.partition(), msg.offset())
        if key in self._dead_seen:
            return
        self._dead_seen.add(key)
        value = msg.value()
        logger.warning(
            "%s[%d]@%d is not a secmeta event (%s): written to %s",
            *key,
            reason,
            self._dead.path,
        )
        dead.append(
            {
                "topic": key[0],
                "partition": key[1],
                "kafka_offset": key[2],
                "reason": dead_letter_reason(*key, reason),
                "key": _text(msg.key()),
                "value_bytes": None if value is None else len(value),
                "value_head_hex": None if value is None else bytes(value[:32]).hex(),
                "headers": {name: _text(v) for name, v in header_map(msg.headers()).items()},
            }
        )

    def _publish(self, alerts: list[Alert]) -> None:
        if not alerts:
            return
        headers_base = [(HEADER_AUDIT_GROUP, self.group_id.encode())]
        self._delivery_errors = []
        for alert in alerts:
            value = json.dumps(with_times(alert.to_dict()), separators=(",", ":")).encode()
            headers = headers_base + [(HEADER_OFFSET, str(alert.offset).encode())]
            while True:
                try:
                    self._producer.produce(
                        self.alerts_topic,
                        key=alert.rule.encode(),
                        value=value,
                        headers=headers,
                        on_delivery=self._delivered,
                    )
                    break
                except BufferError:
                    self._producer.poll(0.1)
        left = self._producer.flush(self.timeout)
        if self._delivery_errors:
            err = self._delivery_errors[0]
            text = f"alerts not delivered to {self.alerts_topic!r}: {err.str()}"
            if err.code() in _FATAL_DELIVERY or err.fatal():
                raise AuditError(text)
            raise AuditInterrupted(text)
        if left:
            raise AuditInterrupted(
                f"{left} alert(s) not confirmed by {self.alerts_topic!r} within {self.timeout:g} s"
            )
        self._in_topic.update(a.identity for a in alerts)
        self.stats.published += len(alerts)

    def _delivered(self, err: KafkaError | None, msg) -> None:
        if err is not None:
            self._delivery_errors.append(err)
            return
        partition = msg.partition()
        self._alert_ends[partition] = max(self._alert_ends.get(partition, 0), msg.offset() + 1)

    def _commit(self, positions: dict[int, int]) -> None:
        if not positions:
            return
        mark = json.dumps(
            {
                "v": 1,
                "log": self._settled,
                "alerts": {str(p): n for p, n in self._alert_ends.items()},
            },
            separators=(",", ":"),
        )
        offsets = [TopicPartition(self.history_topic, p, n, mark) for p, n in positions.items()]
        try:
            self._consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            raise self._kafka_failure("committing offsets", exc) from None
        self._file_alerts = {o: a for o, a in self._file_alerts.items() if o > self._settled}
        self._in_topic = {i for i in self._in_topic if i[0] > self._settled}
        self._dead_seen.clear()

    def _kafka_failure(self, doing: str, exc: KafkaException) -> AuditError:
        err = exc.args[0] if exc.args else None
        text = f"{doing} failed: {_describe(exc)}"
        if isinstance(err, KafkaError) and err.fatal():
            return AuditError(text)
        return AuditInterrupted(text)

    # -- running ---------------------------------------------------------------------------------

    def run(self, stop_event: threading.Event, poll_timeout: float = 1.0) -> None:
        """Audit until ``stop_event`` is set; passing failures are logged and retried with backoff."""
        backoff = 0.1
        while not stop_event.is_set():
            try:
                self.process_available(poll_timeout, stop_event=stop_event)
                backoff = 0.1
            except AuditInterrupted as exc:
                logger.warning(
                    "audit job interrupted (%s); resuming from the committed offset in %.1f s",
                    exc,
                    backoff,
                )
                if stop_event.wait(backoff):
                    break
                backoff = min(backoff * 2, self.max_backoff)

    def _drop_clients(self) -> None:
        consumer, producer = self._consumer, self._producer
        self._consumer = self._producer = None
        if consumer is not None:
            try:
                consumer.close()
            except (KafkaException, RuntimeError):
                pass
        if producer is not None:
            producer.purge()
            producer.flush(0)
        self._reset_state()

    def close(self) -> None:
        """Stop consuming (nothing is committed here) and close the files."""
        if self._closed:
            return
        self._closed = True
        self._drop_clients()
        for file in (self._audit, self._alerts, self._dead):
            file.close()

    def __enter__(self) -> AuditJob:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _take(consumer: Consumer, most: int, timeout: float) -> list:
    """Up to ``most`` messages: wait at most ``timeout`` s for the first, then take what is queued.

    (``Consumer.consume`` alone waits out its whole timeout unless the batch fills.)
    """
    first = consumer.poll(timeout)
    if first is None:
        return []
    return [first, *consumer.consume(most - 1, 0)] if most > 1 else [first]


def _read_mark(metadata: str | None) -> dict[str, Any] | None:
    """The job's commit metadata ({"v", "log", "alerts"}), or None if absent or foreign."""
    if not metadata:
        return None
    try:
        mark = json.loads(metadata)
        if mark.get("v") == 1 and isinstance(mark.get("log"), int):
            mark["alerts"] = {int(p): int(n) for p, n in dict(mark.get("alerts", {})).items()}
            return mark
    except (ValueError, TypeError, AttributeError):
        pass
    logger.warning("ignoring commit metadata not written by the audit job: %r", metadata[:80])
    return None


def _describe(exc: KafkaException) -> str:
    err = exc.args[0] if exc.args else None
    return err.str() if isinstance(err, KafkaError) else str(exc)


def _text(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    return bytes(raw).decode("utf-8", "backslashreplace")
