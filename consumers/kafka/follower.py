"""The follower: a standby that rebuilds the store's image from the history topic.

It reads partition 0 of the history topic (explicit assignment, no group
rebalancing) and replays the events with ``SecurityProjection`` (one
``SecurityDelta`` per batch), exactly as the store does, so its image is the
store's.  A message whose ``secmeta.offset`` it has already applied is a
duplicate (a publisher re-sent it after a crash) and is skipped; a jump past
the next offset (history deleted by retention) raises ``HistoryGapError``
rather than diverge.  A message that is not ours goes to ``dead-letter.jsonl``
in the checkpoint directory (reason, topic, partition, Kafka offset and the
raw bytes) and is counted in ``skipped``: the follower never stops on it.

Every ``checkpoint_every`` events and on ``close`` it writes a checkpoint:
the image as a snapshot plus ``follower.json`` naming it, the log offset it
reflects and the Kafka position to resume from.  While following, a forked child writes the snapshot
(``BackgroundSnapshot``) and the follower goes on applying, as Kafka's brokers keep applying while their
SnapshotGenerator writes; ``follower.json`` names the snapshot only once the child has written it whole
(signed and fsync'd), at the first batch after, so a crash at any step leaves the last recorded checkpoint in
force; a child that fails is logged and the checkpoint retried after the next batch, never recorded.  The one
written at ``close`` (and ``checkpoint()``) is written in this process, after the one under way (waited for if
it is of the same image, killed if older).  A checkpoint writes the whole
image, so once the image holds more than a ``CHECKPOINT_SPACING``-th of ``checkpoint_every``
entities the next one waits for ``CHECKPOINT_SPACING`` times as many events as it held: writing
checkpoints then costs at most about a quarter of an entity's snapshot per event applied, however
large the image grows (catching up a 1M-ACL history writes 2 snapshots, of 50k and 250k ACLs: with
one event per entity held it wrote 5, of 1.55M ACLs in all, about as much CPU as applying the
events), and a restart re-reads at most that many events, plus those applied while the last one's child was
writing (catching up 1M events on a loaded 2-core machine: 0.2 and 0.55 events per entity that image held, so
at most about an eighth more).  ``bootstrap_from_state_topic``
rebuilds the image from the compacted state topic instead of the whole
history, then follows the history from the position the state recorded.

The checkpoint also records the cluster and topic it was made on (cluster id,
topic id: ``topic_identity``) and the Kafka offset and chain link of the last
event applied.  Before following on from it, the follower checks the topic: one
that ends before what the checkpoint applied (another cluster, a topic deleted
and created again or emptied) raises ``FollowerAheadError`` naming both offsets;
another cluster or topic id, or another event where the checkpoint's last one
was, raises ``FollowerError``: the image is not of that topic.

Given a keyring, the follower also keeps a local log of the events it applies
(``secmeta.consumers.kafka.replica``): the checkpoint directory then reads as a
store (``secmeta acls --list --store DIR``, history, ``--as-of``), and at start
the image is the local log's when the checkpoint is not at its end (after a crash: the local log is appended at
every poll, the checkpoint less often); the topic is then checked as from a checkpoint, from what the local log
records of its last event (``replica_end``: cluster, topic, Kafka offset and link).  That record is not synced:
when a power loss leaves it recording no end of the local log, the follower resumes from its checkpoint instead and
checks each event it reads again against the local log up to its end (``_rejoin``); a checkpoint past the local
log's end is refused.  It then signs the checkpoint's snapshot
with that keyring and loads only a snapshot it signed (a forged one, CRC-valid, is logged as not trusted and the
follower starts over); without a keyring only the CRC vouches, so the snapshot's ACL section is checked whole
(review 26, 1.1).
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from secmeta.consumers.kafka.client_config import client_settings
from secmeta.consumers.kafka.client_log import LIBRDKAFKA_LOGGER, side_client_logger
from secmeta.consumers.kafka.history_gap import describe_gap
from secmeta.consumers.kafka.replica import LocalReplica, ReplicaError
from secmeta.consumers.kafka.replica_end import END_FILE
from secmeta.consumers.kafka.topic_end import TopicReadError, read_message, read_topic_end
from secmeta.consumers.kafka.topic_identity import TopicIdentity, read_identity
from secmeta.consumers.kafka.wire import (
    HEADER_HISTORY_OFFSET,
    KIND_HISTORY,
    FormatMarker,
    NotOurMessage,
    UnknownFormat,
    batch_link,
    dead_letter_reason,
    event_reader,
    history_position,
    is_removal,
    linked_decoder,
    message_decoder,
    message_offset,
    positioned_decoder,
)
from secmeta.core.config import StoreConfig
from secmeta.core.errors import InvalidValueError, SecmetaError
from secmeta.core.snapshots.background_snapshot import BackgroundSnapshot
from secmeta.core.store.view import StoreView
from secmeta.core.times import Clock, now_ms, wall_clock
from secmeta.events.codec import EventCodec
from secmeta.events.durable import write_atomically
from secmeta.events.keyring import Keyring
from secmeta.events.records import Envelope
from secmeta.projections.gc_pause import FREEZE_AFTER, paused_gc
from secmeta.projections.image import SecurityDelta, SecurityImage, SecurityProjection
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import (
    SnapshotError,
    SnapshotInfo,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)

__all__ = [
    "CHECKPOINT_FILE",
    "CHECKPOINT_SPACING",
    "DEAD_LETTER_FILE",
    "Follower",
    "FollowerAheadError",
    "FollowerError",
    "HistoryGapError",
    "StateGapError",
]

CHECKPOINT_FILE = "follower.json"
DEAD_LETTER_FILE = "dead-letter.jsonl"
SNAPSHOT_DIR = "snapshots"
PARTITION = 0
#: A checkpoint waits for this many events per entity the last one's image held (at least ``checkpoint_every``).
CHECKPOINT_SPACING = 4

logger = logging.getLogger("secmeta.kafka.follower")
_PROJECTION = SecurityProjection()


class FollowerError(SecmetaError):
    """The follower cannot start or go on as configured (the message says why)."""


class FollowerAheadError(FollowerError):
    """The checkpoint applied log offsets (or Kafka positions) its topic does not hold."""


class StateGapError(FollowerError):
    """The state topic cannot give the whole image: records were deleted, or it names no history position."""


class HistoryGapError(FollowerError):
    """The history skips log offsets: applying on would give a wrong image.

    ``last`` is the last applied log offset, ``found`` the next one present,
    ``kafka_offset`` where it is; the follower's image and position stay
    before the gap.
    """

    def __init__(self, message: str, *, last: int, found: int, kafka_offset: int):
        super().__init__(message)
        self.last, self.found, self.kafka_offset = last, found, kafka_offset


class Follower:
    """Keeps a SecurityImage identical to the store's by replaying the history topic."""

    def __init__(
        self,
        bootstrap: str,
        *,
        history_topic: str = "secmeta.history",
        state_topic: str = "secmeta.state",
        group_id: str | None = None,
        checkpoint_dir: str | os.PathLike,
        client_config: Mapping[str, object] | None = None,
        checkpoint_every: int = 50_000,
        max_batch: int = 5_000,
        codec: EventCodec | None = None,
        clock: Clock = wall_clock,
        keyring: Keyring | None = None,
    ):
        if checkpoint_every < 1:
            raise InvalidValueError(f"checkpoint_every must be positive, not {checkpoint_every}")
        self.history_topic = history_topic
        self.state_topic = state_topic
        self.group_id = group_id
        self.checkpoint_dir = Path(checkpoint_dir)
        self.checkpoint_every = checkpoint_every
        self.max_batch = max_batch
        self.codec = codec or EventCodec.fresh()
        self.clock = clock  # stamps the checkpoint snapshots
        self._decode = message_decoder(self.codec, KIND_HISTORY)
        self._decode_linked = linked_decoder(self.codec)  # the envelope and its batch's link: for the local log
        self._decode_state = positioned_decoder(self.codec)  # the envelope and its history position
        self._read = event_reader(self.codec, KIND_HISTORY)
        self.dead_letter_path = self.checkpoint_dir / DEAD_LETTER_FILE
        self._settings = client_settings(
            bootstrap, client_config,
            defaults={
                "group.id": group_id or f"secmeta-follower-{uuid.uuid4().hex}",
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 100,  # a standby wants new events soon, not in 500 ms batches
                "logger": logging.getLogger(LIBRDKAFKA_LOGGER),
            },
            enforced={"enable.auto.commit": False, "enable.auto.offset.store": False},
        )
        self.image: SecurityImage = SecurityImage.EMPTY
        self.position: int | None = None  # next Kafka offset to read in the history partition
        self.applied = 0  # events applied since this follower started
        self.duplicates = 0
        self.skipped = 0  # messages that were not ours (in the dead-letter file)
        self.gaps = 0
        self.resumed_from: int | None = None  # log offset of the checkpoint (or local log) the image was loaded at
        self._since_checkpoint = 0
        self._checkpointed_entities = 0  # how many entities the last checkpoint's image held
        self._checkpointed: tuple[int, int | None] | None = None
        self._writing: _Writing | None = None  # a checkpoint being written in the background
        self._retry_checkpoint = False  # the last one written in the background failed
        self._last_error: str | None = None
        self._identity: TopicIdentity | None = None  # the cluster and topic the image was read from
        self._applied_at: int | None = None  # Kafka offset of the last applied event (None: unknown)
        self._applied_link: bytes | None = None  # its batch's chain link (None: unknown)
        self._checked = False  # the topic was checked against the checkpoint
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        self.keyring = keyring  # signs the checkpoint snapshots and checks them at open
        self.replica = None if keyring is None else LocalReplica(self.checkpoint_dir, keyring, self.codec)
        try:
            self._load_checkpoint()
            self._take_replica()
        except BaseException:
            if self.replica is not None:
                self.replica.close()
            raise
        self._consumer = Consumer(dict(self._settings))
        self._assign(None)  # without asking: _check_topic assigns again, asking, before anything is consumed

    # -- state ---------------------------------------------------------------------------

    @property
    def applied_offset(self) -> int:
        """The log offset of the last event in the image (-1 before any)."""
        return self.image.next_offset - 1

    @property
    def next_offset(self) -> int:
        """The log offset of the next event to apply: the image holds those below it (as a store's end_offset)."""
        return self.image.next_offset

    def view(self, config: StoreConfig | None = None) -> StoreView:
        """describe / authorize / authorized_operations over the current image."""
        return StoreView(self.image, config or StoreConfig())

    def stats(self) -> dict[str, int | None]:
        return {
            "applied_offset": self.applied_offset,
            "position": self.position,
            "applied": self.applied,
            "duplicates": self.duplicates,
            "skipped": self.skipped,
            "gaps": self.gaps,
        }

    def _assign(self, timeout: float | None) -> None:
        """Assign the history partition at ``position``; when that is unknown, at the partition's start as the
        cluster says within ``timeout`` seconds (BEGINNING if it does not, or without asking given None)."""
        start = self.position
        if start is None and timeout is not None:
            # An explicit offset spares librdkafka's timed (500 ms) offset query for BEGINNING.
            try:
                start, _ = self._consumer.get_watermark_offsets(
                    TopicPartition(self.history_topic, PARTITION), timeout=timeout, cached=False)
            except KafkaException:
                start = OFFSET_BEGINNING
        elif start is None:
            start = OFFSET_BEGINNING
        self._consumer.assign([TopicPartition(self.history_topic, PARTITION, start)])

    # -- following -----------------------------------------------------------------------

    def poll(self, timeout: float = 1.0) -> int:
        """Apply what arrives within ``timeout`` seconds (one batch); return how many events were applied.

        The local log then holds every event applied, so its readers are as current as the image (a store batch
        that arrives in two polls is logged as two batches, at the same offsets)."""
        if not self._check_topic(timeout):
            return 0
        applied = self._apply_consumed(lambda: _consume(self._consumer, self.max_batch, timeout))
        if self.replica is not None:
            self.replica.flush()
        return applied

    def _consume_to(self, high: int, timeout: float) -> list:
        """A batch for catch_up: up to ``max_batch`` messages, gathered across fetches until Kafka offset ``high``.

        Gathering stops at an error message (its offset may be None); ``_decode_and_replay`` reports it.
        """
        deadline = time.monotonic() + timeout
        messages = _consume(self._consumer, self.max_batch, timeout)
        while (messages and len(messages) < self.max_batch and messages[-1].error() is None
               and messages[-1].offset() + 1 < high):
            more = _consume(self._consumer, self.max_batch - len(messages), max(0.0, deadline - time.monotonic()))
            if not more:
                break
            messages.extend(more)
        return messages

    def _apply_consumed(self, consume: Callable[[], list]) -> int:
        """Apply the batch ``consume()`` returns; checkpoint when one is due (``_checkpoint_due``).

        The collector stays paused from the fetch on: a batch's messages are thousands of new objects, and a
        collection they trigger mid-batch would rescan the whole image (with it running, taking a batch cost more
        than decoding it). The events built here join the image, so a large batch is frozen after.
        """
        with paused_gc() as pause:
            messages = consume()
            pause.freeze = len(messages) >= FREEZE_AFTER
            applied = self._decode_and_replay(messages) if messages else 0
        if self._writing is not None and self._writing.snapshot.done():
            self._record_written()
        if messages and self._writing is None and self._checkpoint_due():
            self._start_checkpoint()
        return applied

    def _decode_and_replay(self, messages) -> int:
        """Decode and apply a batch of messages. Without a local log an event is read as a replay takes it (an ACL's
        creation as its row: ``event_reader``); with one, as its envelope, which the local log keeps."""
        replica = self.replica
        read = self._read if replica is None else self._read_envelope
        last = self.image.next_offset - 1
        events: list = []
        envelopes: list[Envelope] = []
        links: list[bytes | None] = []  # each event's store batch (the local log keeps the batches)
        positions: list[int] = []  # each event's Kafka offset (the local log records where it ends)
        applied_msg = None
        event: Any
        for msg in messages:
            err = msg.error()
            if err is not None:
                self._kafka_error(err)
                continue
            self.position = msg.offset() + 1
            try:
                offset, event = read(msg.key(), msg.value(), msg.headers())
            except FormatMarker:
                continue
            except NotOurMessage as exc:
                self._dead_letter(msg, exc.reason)
                continue
            if offset <= last:
                self.duplicates += 1
                continue
            if offset != last + 1:  # history_gap.missing_offsets(last, offset), inline: it runs for every event
                self._replay(events, envelopes, applied_msg, links, positions)
                self._stop_at_gap(last, offset, msg.offset())
            if replica is not None:
                event, link = event
                envelopes.append(event)
                links.append(link)
                positions.append(msg.offset())
                event = event.event
            events.append(event)
            applied_msg = msg
            last = offset
        self._replay(events, envelopes, applied_msg, links, positions)
        return len(events)

    def _read_envelope(self, key: bytes | None, value: bytes | None,
                       headers) -> tuple[int, tuple[Envelope, bytes | None]]:
        """The log offset, the envelope and its batch's link (read from the one frame: ``linked_decoder``)."""
        envelope, link = self._decode_linked(key, value, headers)
        return envelope.offset, (envelope, link)

    def _replay(self, events: list, envelopes: Sequence[Envelope] = (), last_msg=None,
                links: Sequence[bytes | None] = (), positions: Sequence[int] = ()) -> None:
        """Apply a run of events that follows the image (one delta, as the store applies a batch), and log their
        envelopes (with their links and Kafka offsets), when the follower keeps a local log."""
        if events:
            if self.replica is not None:
                try:
                    for envelope, link, position in zip(envelopes, links, positions, strict=True):
                        self.replica.add(envelope, link, position)
                except ReplicaError:
                    self.position = positions[0]  # none of these is applied: a checkpoint must not skip them
                    raise
            self.image = _PROJECTION.apply_events(self.image, events)  # under a paused collector
            self.applied += len(events)
            self._since_checkpoint += len(events)
            if last_msg is not None:  # the message of the last event: where it was and its link (read with it)
                self._applied_at, self._applied_link = last_msg.offset(), links[-1] if links else _link(last_msg)

    def _stop_at_gap(self, last: int, found: int, kafka_offset: int) -> None:
        """Leave the position on a gap (what came before is applied) and raise HistoryGapError."""
        self.gaps += 1
        self.position = kafka_offset
        self._consumer.assign([TopicPartition(self.history_topic, PARTITION, kafka_offset)])
        message = (
            f"{describe_gap(self.history_topic, last, found, kafka_offset)}; the image stays at offset "
            f"{last}: rebuild it from the state topic with `secmeta kafka follow --bootstrap-from-state`"
        )
        logger.error("%s", message)
        raise HistoryGapError(message, last=last, found=found, kafka_offset=kafka_offset)

    def _kafka_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._PARTITION_EOF:
            return
        text = err.str()
        if text != self._last_error:
            logger.warning("reading %s: %s", self.history_topic, text)
        self._last_error = text

    def high_watermark(self, timeout: float = 5.0) -> int:
        """The history partition's high watermark (next Kafka offset to be written)."""
        _, high = self._consumer.get_watermark_offsets(
            TopicPartition(self.history_topic, PARTITION), timeout=timeout, cached=False)
        return high

    def caught_up_to(self, high: int) -> bool:
        if self.position is not None:
            return self.position >= high
        low, _ = self._consumer.get_watermark_offsets(TopicPartition(self.history_topic, PARTITION),
                                                      timeout=5.0, cached=False)
        return high <= low

    def catch_up(self, timeout: float = 30.0, progress: Callable[[int, int], None] | None = None) -> bool:
        """Apply everything up to the history topic's current high watermark; False if ``timeout`` ran out.

        ``progress(position, high)`` is called after each batch with the Kafka offsets.
        """
        deadline = time.monotonic() + timeout
        while not self._check_topic(max(0.1, min(5.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        high = None
        while high is None:
            try:
                high = self.high_watermark(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
            except KafkaException as exc:
                self._kafka_error(exc.args[0])
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.1)
        while not self.caught_up_to(high):
            wait = min(0.5, deadline - time.monotonic())
            if wait <= 0:
                return False
            self._apply_consumed(functools.partial(self._consume_to, high, wait))
            if progress is not None and self.position is not None:
                progress(self.position, high)
        return True

    # -- is the topic the checkpoint's? ----------------------------------------------------

    def _check_topic(self, timeout: float) -> bool:
        """Once, before following: the topic must be the checkpoint's and hold what it applied.

        False if the cluster could not be asked (try again); FollowerError if the topic is not the one.
        """
        if self._checked:
            return True
        try:
            identity = read_identity(self._consumer, self._admin_settings(), [self.history_topic], timeout)
            if self.resumed_from is not None:
                self._compare_with_topic(identity, timeout)
        except (KafkaException, TopicReadError) as exc:
            text = exc.args[0].str() if isinstance(exc.args[0], KafkaError) else str(exc)
            if text != self._last_error:
                logger.warning("checking %s against the checkpoint: %s", self.history_topic, text)
            self._last_error = text
            return False
        finally:
            self._assign(timeout)
        self._identity = identity
        if self.replica is not None:
            self.replica.identity = identity  # recorded with the local log's end
        self._checked = True
        return True

    def _compare_with_topic(self, identity: TopicIdentity, timeout: float) -> None:
        path = self.checkpoint_dir / CHECKPOINT_FILE
        changes = self._identity.changes(identity) if self._identity is not None else []
        end = read_topic_end(self._consumer, self.history_topic, self._decode, max(timeout, 10.0))
        applied, position = self.applied_offset, self.position
        if end.last_offset < applied or (position is not None and position > end.high):
            raise FollowerAheadError(
                f"follower checkpoint {path} is ahead of its topic: it applied log offsets through {applied} "
                f"(Kafka position {position}), but {end.describe()} and ends at Kafka offset {end.high}"
                f"{''.join('; ' + change for change in changes)}. The topic was deleted and created again, "
                "emptied, or is on another cluster than the checkpoint's: follow it with another "
                "--checkpoint-dir (or remove this one) to rebuild the image from what it holds")
        if changes:
            raise FollowerError(
                f"follower checkpoint {path} was made on another topic: {'; '.join(changes)}. Its image and "
                "position do not belong to this topic: follow it with another --checkpoint-dir (or remove "
                "this one)")
        if self._applied_at is None:
            return
        found = read_message(self._consumer, self.history_topic, self._applied_at, self._decode, max(timeout, 10.0))
        if found is not None and (found.log_offset != applied or (
                None not in (found.link, self._applied_link) and found.link != self._applied_link)):
            raise FollowerError(
                f"follower checkpoint {path} diverges from its topic: it applied log offset {applied} from Kafka "
                f"offset {self._applied_at}, but the topic holds log offset {found.log_offset} there"
                f"{'' if found.log_offset != applied else ' with another chain link'}: the topic was "
                "rewritten, or belongs to another store. Follow it with another --checkpoint-dir (or remove "
                "this one)")

    def _admin_settings(self) -> dict:
        consumer_only = ("group.id", "auto.offset.reset", "fetch.wait.max.ms", "enable.auto.commit",
                         "enable.auto.offset.store")
        return {**{k: v for k, v in self._settings.items() if k not in consumer_only}, "logger": side_client_logger()}

    # -- dead letters --------------------------------------------------------------------

    def _dead_letter(self, msg, reason: str, topic: str | None = None) -> None:
        self.skipped += 1
        topic = topic or msg.topic()
        reason = dead_letter_reason(topic, msg.partition(), msg.offset(), reason)
        logger.warning("skipping a message that is not ours: %s (see %s)", reason, self.dead_letter_path)
        record = {
            "reason": reason,
            "topic": topic,
            "partition": msg.partition(),
            "kafka_offset": msg.offset(),
            "timestamp_ms": msg.timestamp()[1],
            "key_b64": _b64(msg.key()),
            "value_b64": _b64(msg.value()),
            "headers": [[name, _b64(value)] for name, value in (msg.headers() or [])],
        }
        with open(self.dead_letter_path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())

    # -- checkpoints ---------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the image as a snapshot and the position it belongs to, now (skipped if unchanged); the local log
        first holds every event applied.  A checkpoint being written in the background is waited for when it is
        of this image and position, else killed (it is older): either way this one is the newest recorded."""
        self._since_checkpoint = 0
        if self.replica is not None:
            self.replica.flush()
        mark = (self.image.next_offset, self.position)
        if self._writing is not None:
            if self._writing.mark == mark:
                self._record_written()
            else:
                self._writing.snapshot.abort()
                self._writing = None
        if mark == self._checkpointed:
            return
        record = self._checkpoint_record()
        info = write_snapshot(self.checkpoint_dir / SNAPSHOT_DIR, SecurityImageSnapshot(), self.image,
                              next_offset=self.image.next_offset, link=b"", timestamp_ms=now_ms(self.clock),
                              keyring=self.keyring)
        self._checkpointed_entities = _entities(self.image)
        self._record(info, record, mark)

    def wait_for_checkpoint(self) -> None:
        """Wait for the checkpoint being written in the background, if any, and record it (a failed one is logged
        and retried after the next batch applied, never recorded)."""
        if self._writing is not None:
            self._record_written()

    def _start_checkpoint(self) -> None:
        """Start writing the image's checkpoint in the background: a forked child writes its snapshot
        (``BackgroundSnapshot``) while the follower goes on applying, and ``follower.json`` names it only once the
        child has written it whole (``_record_written``), so a crash at any step leaves the last recorded checkpoint
        in force, its snapshot complete."""
        self._since_checkpoint, self._retry_checkpoint = 0, False
        if self.replica is not None:
            self.replica.flush()
        mark = (self.image.next_offset, self.position)
        if mark == self._checkpointed:
            return
        self._checkpointed_entities = _entities(self.image)  # the cadence counts from the image being written
        snapshot = BackgroundSnapshot(self.checkpoint_dir / SNAPSHOT_DIR, SecurityImageSnapshot(), self.image,
                                      next_offset=self.image.next_offset, link=b"", timestamp_ms=now_ms(self.clock),
                                      keyring=self.keyring)
        self._writing = _Writing(snapshot, self._checkpoint_record(), mark)

    def _record_written(self) -> None:
        """Wait for the checkpoint being written in the background and record it; a failed one is logged and left
        unrecorded (the checkpoint before it stays in force), and the next batch applied tries again."""
        writing, self._writing = self._writing, None
        assert writing is not None
        try:
            info = writing.snapshot.result()
        except Exception as exc:  # noqa: BLE001 - a failed snapshot is reported and retried, never recorded
            self._retry_checkpoint = True
            logger.warning("follower checkpoint at log offset %d was not written (%s): %s; retrying after the next "
                           "batch", writing.mark[0], exc, "there is no checkpoint yet" if self._checkpointed is None
                           else f"the checkpoint stays at log offset {self._checkpointed[0]}")
            return
        self._record(info, writing.record, writing.mark)

    def _checkpoint_record(self) -> dict:
        """What ``follower.json`` records of the image now (all but its snapshot's name)."""
        return {
            "history_topic": self.history_topic,
            "partition": PARTITION,
            "position": self.position,
            "next_offset": self.image.next_offset,
            "identity": None if self._identity is None else self._identity.to_json(),
            "applied_at": self._applied_at,
            "applied_link": None if self._applied_link is None else self._applied_link.hex(),
        }

    def _record(self, info: SnapshotInfo, record: dict, mark: tuple[int, int | None]) -> None:
        """Name the snapshot written (complete, fsync'd) in ``follower.json``, then delete the others and commit
        the position to the group, if any."""
        write_atomically(self.checkpoint_dir / CHECKPOINT_FILE, json.dumps({**record, "snapshot": info.path.name}).encode())
        for path in list_snapshots(self.checkpoint_dir / SNAPSHOT_DIR):
            if path.name != info.path.name:
                path.unlink(missing_ok=True)
        self._checkpointed, self._retry_checkpoint = mark, False
        position = mark[1]
        if self.group_id and position is not None:
            try:
                self._consumer.commit(offsets=[TopicPartition(self.history_topic, PARTITION, position)],
                                      asynchronous=False)
            except KafkaException as exc:
                logger.warning("could not commit the position to group %s: %s", self.group_id, exc)

    def _checkpoint_due(self) -> bool:
        """``checkpoint_every`` events applied since the last checkpoint, and ``CHECKPOINT_SPACING`` times as many as
        its image held entities."""
        return self._retry_checkpoint or (
            self._since_checkpoint >= max(self.checkpoint_every, CHECKPOINT_SPACING * self._checkpointed_entities))

    def _load_checkpoint(self) -> None:
        path = self.checkpoint_dir / CHECKPOINT_FILE
        if not path.exists():
            return
        try:
            data = json.loads(path.read_text())
            topic, position = data["history_topic"], data["position"]
            next_offset, name = int(data["next_offset"]), str(data["snapshot"])
            identity = TopicIdentity.from_json(data.get("identity"))
            applied_at = data.get("applied_at")
            applied_at = None if applied_at is None else int(applied_at)
            applied_link = _hex_link(data.get("applied_link"))
        except (ValueError, KeyError, TypeError, OSError) as exc:
            logger.warning("follower checkpoint %s is unreadable (%r): starting from the beginning", path, exc)
            return
        if topic != self.history_topic:
            raise FollowerError(
                f"follower checkpoint {path} follows topic {topic!r}, not {self.history_topic!r}: "
                "give another checkpoint directory"
            )
        try:
            # Given a keyring, only a snapshot it signed loads; without one, only a CRC vouches for it (anyone can
            # compute one), so read_snapshot has its section checked whole (review 26, 1.1).
            with paused_gc(freeze=True):  # as the store loads its snapshot
                info, image = read_snapshot(self.checkpoint_dir / SNAPSHOT_DIR / name, SecurityImageSnapshot(),
                                            self.keyring)
        except (SnapshotError, OSError) as exc:
            logger.warning("follower snapshot %s cannot be loaded (%s): not trusted, starting over from the beginning "
                           "(of the local log, if any, then of the topic)", name, exc)
            return
        if info.next_offset != next_offset or image.next_offset != next_offset:
            logger.warning("follower snapshot %s is at offset %d, not %d: starting from the beginning",
                           name, info.next_offset, next_offset)
            return
        self.image = image
        self.position = None if position is None else int(position)
        self.resumed_from = next_offset
        self._checkpointed = (next_offset, self.position)
        self._checkpointed_entities = _entities(image)
        self._identity, self._applied_at, self._applied_link = identity, applied_at, applied_link

    def _take_replica(self) -> None:
        """At open: a checkpoint that is not at the local log's end gives way to the local log, whose events
        are replayed into the image; the topic is then read on from the local log's last event, once checked as a
        checkpoint's is (``_check_topic``) from what the local log records of it (``ReplicaEnd``): its cluster and
        topic, its Kafka offset and link. When that is not recorded (a power loss), ``_rejoin``."""
        replica = self.replica
        if replica is None or replica.next_offset == self.image.next_offset:
            return
        end = replica.end
        if end is None:
            self._rejoin(replica)
            return
        image = SecurityImage.EMPTY
        with paused_gc(freeze=True):
            for batch in replica.read(0):
                image = _PROJECTION.apply(image, batch)
        logger.warning("follower checkpoint in %s is at log offset %d, its local log at %d: following on from "
                       "the local log", self.checkpoint_dir, self.image.next_offset, image.next_offset)
        self.image, self.position, self.resumed_from = image, end.kafka_offset + 1, image.next_offset
        self._checkpointed, self._checkpointed_entities = None, 0
        self._identity = replica.identity or self._identity
        self._applied_at, self._applied_link = end.kafka_offset, end.link

    def _rejoin(self, replica: LocalReplica) -> None:
        """At open, a local log ahead of the checkpoint whose end is not recorded (``replica_end`` is written without
        a sync: a power loss can leave it behind, ahead or missing): the follower resumes from its checkpoint (its
        image, position, cluster and topic, checked against the topic as always), and the events it reads again up
        to the local log's end are checked against those logged (``LocalReplica.rejoin``), not appended. A
        checkpoint past the local log's end does not fit it: FollowerError."""
        if self.image.next_offset > replica.next_offset:
            raise FollowerError(
                f"follower checkpoint {self.checkpoint_dir / CHECKPOINT_FILE} is at log offset "
                f"{self.image.next_offset}, past its local log's end {replica.next_offset} ({replica.log.store.path}): "
                "the checkpoint does not fit the log. Follow with another --checkpoint-dir (or remove this one) to "
                "rebuild the image from the topic")
        replica.rejoin(self.image.next_offset)
        logger.warning("follower checkpoint in %s is at log offset %d, its local log at %d, whose place on %s is not "
                       "recorded (%s, written without a sync, is behind, ahead or missing after a power loss): "
                       "following on from the checkpoint, checking the events read again against the local log",
                       self.checkpoint_dir, self.image.next_offset, replica.log.end_offset, self.history_topic,
                       self.checkpoint_dir / END_FILE)

    # -- bootstrap from the state topic --------------------------------------------------

    def bootstrap_from_state_topic(self, timeout: float = 60.0) -> int:
        """Rebuild the image from the compacted state topic, then follow history from there.

        Reads the state topic to its high watermark, keeps the newest value
        per key (a tombstone removes the key), replays those values in log
        order, and resumes the history at the Kafka offset the newest state
        message recorded.  Returns the number of live entities loaded.  A follower that keeps a local log
        refuses: the state topic holds no history to log.
        """
        if self.replica is not None:
            raise FollowerError(
                "a follower that keeps a local log (given a keyring) follows the whole history: the state "
                "topic holds only the newest event of each entity, which is no log; follow without "
                "--bootstrap-from-state, or without a key file")
        consumer = Consumer({**self._settings, "group.id": f"secmeta-state-{uuid.uuid4().hex}"})
        try:
            with paused_gc():  # one envelope per entity, all alive until replayed
                latest, newest, history_at = self._read_state(consumer, timeout)
        finally:
            consumer.close()
        live = sorted((env for env in latest.values() if env is not None and not is_removal(env)),
                      key=lambda env: env.offset)
        with paused_gc(freeze=True):
            delta = SecurityDelta(SecurityImage.EMPTY)
            delta.replay_all(live)
            self.image = delta.apply(newest + 1)
        if history_at is None and newest >= 0:
            raise StateGapError(
                f"the state topic {self.state_topic} holds events up to log offset {newest} but records no "
                f"position in {self.history_topic} (a state frame's history offset, or the {HEADER_HISTORY_OFFSET} "
                "header of format 2), so the follower cannot tell where the history continues: it was not written "
                "by `secmeta kafka publish`; follow the whole history instead (without --bootstrap-from-state)")
        self.position = history_at
        self._applied_at = self._applied_link = None  # the image came from the state topic
        self._assign(5.0)
        self.checkpoint()
        logger.info("bootstrapped %d entities from %s at log offset %d", len(live), self.state_topic, newest)
        return len(live)

    def _read_state(self, consumer: Consumer, timeout: float):
        """Newest envelope (None: removed) per key, the newest log offset, and its history position."""
        deadline = time.monotonic() + timeout
        tp = TopicPartition(self.state_topic, PARTITION)
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
        except KafkaException as exc:
            raise FollowerError(f"cannot read the state topic {self.state_topic}: {exc.args[0].str()}") from None
        if low > 0:
            # Compaction never moves a partition's log start offset; retention and DeleteRecords do
            # (Kafka's storage/.../internals/log/LogStartOffsetIncrementReason.java: SegmentDeletion,
            # ClientRecordDeletion), and the records they drop may be the only ones left for some entities.
            raise StateGapError(
                f"the state topic {self.state_topic} starts at Kafka offset {low}, not 0: records before it "
                "were deleted (retention or DeleteRecords), so entities whose newest change was among them "
                "would be missing; the state topic must be cleanup.policy=compact only. Follow the whole "
                "history instead (without --bootstrap-from-state) if it is complete")
        latest: dict[bytes, Envelope | None] = {}
        offsets: dict[bytes, int] = {}
        newest, history_at = -1, None
        if high <= low:
            return latest, newest, history_at
        consumer.assign([TopicPartition(self.state_topic, PARTITION, low)])
        position = low
        while position < high:
            if time.monotonic() >= deadline:
                raise FollowerError(
                    f"reading the state topic {self.state_topic} timed out at Kafka offset {position} of {high}")
            for msg in _consume(consumer, self.max_batch, 0.5):
                err = msg.error()
                if err is not None:
                    self._kafka_error(err)
                    continue
                position = msg.offset() + 1
                value, headers = msg.value(), msg.headers()
                try:
                    if value is None:
                        offset, envelope = message_offset(value, headers), None
                        at = history_position(value, headers)
                    else:  # the envelope and its history position, from one read of the frame
                        envelope, at = self._decode_state(msg.key(), value, headers)
                        offset = envelope.offset
                except FormatMarker:
                    continue
                except UnknownFormat as exc:    # skipping it could let an older value of its key win
                    raise FollowerError(
                        f"the state topic {self.state_topic} holds a message this secmeta cannot read at Kafka "
                        f"offset {msg.offset()} ({exc.reason}); the bootstrap stops rather than let an older value "
                        "of its key stand: upgrade secmeta, or follow the history instead") from None
                except NotOurMessage as exc:
                    self._dead_letter(msg, exc.reason)
                    continue
                key = bytes(msg.key() or b"")
                if offset >= offsets.get(key, -1):  # a re-sent older value must not win
                    latest[key], offsets[key] = envelope, offset
                if offset > newest:
                    newest, history_at = offset, at
                elif offset == newest and at is not None and (history_at is None or at < history_at):
                    history_at = at
        return latest, newest, None if history_at is None else history_at + 1

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Checkpoint and leave."""
        if self._consumer is None:
            return
        try:
            self.checkpoint()
        finally:
            if self._writing is not None:  # checkpoint() raised before it saw to the one under way
                self._writing.snapshot.abort()
                self._writing = None
            consumer, self._consumer = self._consumer, None
            consumer.close()
            if self.replica is not None:
                self.replica.close()

    def __enter__(self) -> Follower:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Writing(NamedTuple):
    """A checkpoint being written in the background: its snapshot under way, what ``follower.json`` will record
    with it, and its (next log offset, Kafka position)."""

    snapshot: BackgroundSnapshot
    record: dict
    mark: tuple[int, int | None]


def _consume(consumer: Consumer, limit: int, timeout: float) -> list:
    """Up to ``limit`` messages: what is fetched already, else wait up to ``timeout`` for the first."""
    messages = consumer.consume(num_messages=limit, timeout=0)
    if not messages:
        messages = consumer.consume(num_messages=1, timeout=timeout)
        if messages and limit > 1:
            messages.extend(consumer.consume(num_messages=limit - 1, timeout=0))
    return messages


def _entities(image: SecurityImage) -> int:
    """How many credentials, ACLs and tokens the image holds (what its snapshot's size grows with)."""
    return len(image.acls) + len(image.scram) + len(image.tokens)


def _link(msg) -> bytes | None:
    """The chain link of the store batch a history message's event was logged in (None: unknown, or not hex)."""
    return batch_link(msg.value(), msg.headers())


def _hex_link(raw: bytes | str | None) -> bytes | None:
    """A chain link given as hex (a header or the checkpoint); None if absent or not hex."""
    try:
        return None if raw is None else bytes.fromhex(raw.decode("ascii") if isinstance(raw, bytes) else raw)
    except ValueError:
        return None


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(bytes(data)).decode("ascii")
