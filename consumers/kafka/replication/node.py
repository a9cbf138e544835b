"""A node in replicated mode: its store, the log topic, and whether it writes or follows.

``become_writer`` fences every older writer (the shared transactional id), catches up with the topic's
end (seeding an empty topic with the local log), checks the local log holds nothing the topic does not,
then gives the store its Kafka commit gate. ``follow`` keeps a standby's local log and image a replica of
the topic in a background thread; a divergence stops it and is reported to ``on_failure``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

from secmeta.consumers.kafka.replication.gate import KafkaCommitGate
from secmeta.consumers.kafka.replication.reader import ReadStopped, TopicReader
from secmeta.consumers.kafka.replication.records import (
    BatchRecord,
    Record,
    StoreRecord,
    batch_headers,
    saved_config,
    schema_record,
    seal_store_record,
    seeded_record,
    snapshot_records,
    store_record,
)
from secmeta.consumers.kafka.replication.replica import ResumeMismatch, TopicReplica
from secmeta.consumers.kafka.replication.resume import (
    ResumePoint,
    read_resume_point,
    write_resume_point,
)
from secmeta.consumers.kafka.replication.settings import ReplicationSettings
from secmeta.consumers.kafka.replication.topic import ReplicationUnavailableError, ensure_topic
from secmeta.core.errors import SecmetaError
from secmeta.core.log import Log
from secmeta.core.log.anchor import ANCHOR_FILE
from secmeta.core.store.commit_gate import CommitGateError
from secmeta.core.store.facade import SecurityStore
from secmeta.projections.snapshot import list_snapshots, read_snapshot_info

__all__ = ["ReplicatedNode", "seed_records"]

logger = logging.getLogger("secmeta.replication")


def seed_records(store: SecurityStore, topic: str, node_id: int, part_bytes: int,
                 resume_at: int | None = None) -> Iterator[Record]:
    """What an empty log topic (``topic``) is seeded with: the store record (sealed for ``topic``), every writer
    schema, then every batch, then the seeded record; a log that starts after a retention anchor also sends the anchor (in the store record)
    and the newest snapshot at or after its start (in parts of ``part_bytes``), which a joiner loads the
    deleted history from. ``resume_at``: the end of an interrupted seed's batches (the topic holds the rest
    up to there): the writer schemas and the batches from there on, then the seeded record."""
    log = store.log
    if resume_at is not None:
        yield from (schema_record(text) for text in log.writer_schemas())
        yield from _batches_then_seeded(log, resume_at, node_id)
        return
    config = saved_config(log.store.path)
    anchor, snapshot = None, []
    if log.start_offset > 0:
        anchor = (log.store.log_dir / ANCHOR_FILE).read_bytes()
        covering = [p for p in list_snapshots(log.store.snapshot_dir)
                    if log.start_offset <= read_snapshot_info(p).next_offset <= log.end_offset]
        if not covering:
            raise SecmetaError(f"the log starts at offset {log.start_offset} after a retention anchor and no snapshot "
                               "covers the deleted history: a joiner could not rebuild it; take one "
                               "(`secmeta snapshot`) and start again")
        info = read_snapshot_info(covering[-1])
        snapshot = snapshot_records(covering[-1].read_bytes(), info.next_offset, part_bytes)
    identity = StoreRecord(log.store.store_id, log.store.created_ms, dict(log.store.key_checks), config,
                           log.start_offset, log.state.start_link, anchor)
    yield store_record(seal_store_record(identity, log.keyring, topic))
    yield from (schema_record(text) for text in log.writer_schemas())
    yield from snapshot
    yield from _batches_then_seeded(log, log.start_offset, node_id)


def _batches_then_seeded(log: Log, start: int, node_id: int) -> Iterator[Record]:
    end, link = log.end_offset, log.last_link  # the writer holds the store: nothing is appended meanwhile
    yield from ((b.frame(), batch_headers(node_id, b.base_offset, b.link)) for b in log.batches(start, end))
    yield seeded_record(end, link)


def _check_can_complete_seed(topic: str, held: int, end: tuple[int, bytes] | None, start: int) -> None:
    """Only the log the seed was begun from may complete it: one that held more than the interrupted seed's
    batches before reading them (a seed's last transaction holds its seeded record and its last batch, so the
    seeder's log always extends past what an interrupted seed left). A node holding only that prefix would
    complete the seed with part of the history and refute the seeder's acknowledged rest."""
    topic_end = start if end is None else end[0]
    if topic_end > start and held <= topic_end:
        raise CommitGateError(f"the log topic {topic}'s seed was interrupted at offset {topic_end} and this node's log "
                              f"held only up to offset {held}: only the node that began the seed can complete it; "
                              "start that node")


class ReplicatedNode:
    """The replication of one open store through its log topic."""

    def __init__(self, store: SecurityStore, settings: ReplicationSettings):
        self.store = store
        self.settings = settings
        self.topic = settings.topic_for(store.log.store.store_id)
        ensure_topic(settings, self.topic)
        self.replica = TopicReplica(store.log, store.append_replicated, self.topic)
        self._reader = TopicReader(settings, self.topic)
        try:
            self._resume(read_resume_point(store.log, self.topic))
        except BaseException:
            self._reader.close()
            raise
        self.gate: KafkaCommitGate | None = None
        self._stop = threading.Event()
        self._follower: threading.Thread | None = None

    def _resume(self, point: ResumePoint | None) -> None:
        """With a resume point, read the topic's store record (its first record, one fetch) and check it as a
        reader from the start does (``TopicReplica.apply``: the seal, the store, the settings that decide access
        against config.json; refused with the same error), then read on from the point. An empty topic holds no
        batch the point could name: read from the start."""
        if point is not None and self._reader.read_first(self.replica.apply):
            self.replica.resume(point.next_offset, point.link, point.seeded)
            self._reader.skip_to(point.kafka_offset)

    @property
    def writing(self) -> bool:
        return self.gate is not None and self.gate.failed is None

    def become_writer(self) -> None:
        """Fence older writers, catch up with (or seed) the topic, then commit every write through it."""
        self._stop_following()
        log = self.store.log
        gate = KafkaCommitGate(self.settings, log.store.store_id, self.topic, log.codec.writer_schema_json)
        try:
            held = log.end_offset
            self._require_end(self._read_to_end())
            replica = self.replica
            if replica.identity is not None and not replica.seeded:
                _check_can_complete_seed(self.topic, held, replica.end, log.start_offset)
            if replica.identity is None or not replica.seeded:
                # an empty topic, or one a seed was interrupted on: its batches are a prefix of this log (checked)
                resume_at = None if replica.identity is None else replica.end[0] if replica.end else None
                gate.seed(seed_records(self.store, self.topic, self.settings.node_id, gate.max_bytes, resume_at))
                logger.info("seeded the log topic %s with offsets %s to %s", self.topic,
                            log.start_offset if resume_at is None else resume_at, log.end_offset)
                replica.seeded = True
            else:
                replica.check_not_ahead()
            gate.expect(log.end_offset, log.last_link)
        except BaseException:
            gate.close()
            raise
        self.gate = gate
        self.store.set_commit_gate(gate)
        self._note_resume_point()
        logger.info("node %s writes the log topic %s from offset %s", self.settings.node_id, self.topic,
                    log.end_offset)

    def catch_up(self, stop: threading.Event | None = None) -> None:
        """Apply the topic up to its end now, and refuse a local log ahead of it (a topic not seeded yet, empty
        or holding an interrupted seed, witnesses nothing beyond what it holds: the first node elected seeds it,
        or completes the seed, and its followers then check their logs). ReadStopped once ``stop`` is set."""
        self._read_to_end(stop)
        if self.replica.seeded:
            self.replica.check_not_ahead()
        self._note_resume_point()

    def _read_to_end(self, stop: threading.Event | None = None) -> int:
        """Read the topic to its end, from the resume point if it holds (resume.py), else from the start; the
        Kafka offset read to (every committed record below it applied)."""
        try:
            read_to = self._reader.read_to_end(self.replica.apply, stop)
            if self.replica.identity is not None:
                self.replica.check_resumed()
            return read_to
        except ResumeMismatch as exc:
            logger.info("reading the log topic %s from its first record: %s", self.topic, exc)
            self._reader.close()
            self.replica = TopicReplica(self.store.log, self.store.append_replicated, self.topic)
            self._reader = TopicReader(self.settings, self.topic)
            return self._reader.read_to_end(self.replica.apply, stop)

    def _require_end(self, read_to: int) -> None:
        """A writer writes only after every batch an older writer committed: the topic's end, asked after the fence
        (no older writer's transaction is open then, none can commit), must not lie past what was read; refused
        when it does or when Kafka does not say (ReplicationUnavailableError), before anything is written."""
        end = self._reader.end_now()
        if end > read_to:
            raise CommitGateError(f"the log topic {self.topic} ends at Kafka offset {end}, but this node read it only "
                                  f"to {read_to} after fencing the older writers: writing now would commit over "
                                  "batches they committed; this node does not become the writer")

    def _note_resume_point(self) -> None:
        last = self.replica.last_batch
        if last is not None:
            write_resume_point(self.store.log, ResumePoint(self.topic, *last, seeded=self.replica.seeded))

    def follow(self, on_failure: Callable[[BaseException], None],
               on_applied: Callable[[int], None] | None = None, *, patient: bool = False) -> None:
        """Catch up, then keep following the topic in the background until ``close`` (a follower already running
        is stopped first: one at a time); a failure (divergence, Kafka unreachable past the timeout while
        catching up) stops following and goes to ``on_failure``; ``on_applied`` gets the log's end after each
        batch appended. ``patient``: catch up in the background too, trying again while Kafka cannot be reached
        (a node that stepped down because it was cut off from Kafka follows again once the cut heals)."""
        self._stop_following()
        if not patient:
            self.catch_up()
        log = self.store.log

        def apply(record, kafka_offset: int) -> None:
            self.replica.apply(record, kafka_offset)
            if on_applied is not None and isinstance(record, BatchRecord):
                on_applied(log.end_offset)

        def run() -> None:
            try:
                while patient and not self._stop.is_set():
                    try:
                        self.catch_up(self._stop)
                        break
                    except ReadStopped:
                        return                      # _stop_following: become_writer need not wait the timeout out
                    except ReplicationUnavailableError as exc:
                        logger.warning("the log topic %s cannot be read yet (%s): trying again", self.topic, exc)
                        self._stop.wait(1.0)
                self._reader.follow(apply, self._stop)
            except BaseException as exc:  # noqa: BLE001 - reported, and the node stops serving
                logger.error("following the log topic %s stopped: %s", self.topic, exc)
                on_failure(exc)

        self._follower = threading.Thread(target=run, name="secmeta-replica", daemon=True)
        self._follower.start()

    def _stop_following(self) -> None:
        follower, self._follower = self._follower, None
        if follower is not None:
            self._stop.set()
            follower.join()
            self._stop.clear()

    def __enter__(self) -> ReplicatedNode:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._stop_following()
        self._note_resume_point()
        self._reader.close()
        if self.gate is not None:
            self.gate.close()
