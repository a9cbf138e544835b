"""The follower's local log: the events it applies, in a store directory the store's read commands open.

``secmeta kafka follow --checkpoint-dir DIR`` with a keyring keeps ``DIR/store``, a store whose log holds
the history topic's events at their log offsets, batch by batch as the store logged them (the events of one
store batch carry one ``secmeta.link`` header; a batch is appended when the next one starts or the follower
checkpoints). ``DIR/secmeta-local-store`` names it, so ``secmeta acls --list --store DIR`` (and history,
who-could, ``--as-of``...) read it as they read the store; opening DIR as a writer is refused. The log is the
follower's own (its own store id and hash chain, under the keyring it was given), written with the store's
log code, so ``secmeta log verify --store DIR`` checks it as any store's.

Before each append, ``DIR/local-log-end`` records where the local log's new end lies on the history topic
(``replica_end``): a follower restarting from the local log checks the topic from there.  That record is written
without a sync, so after a power loss it may record no end of the durable log; the follower then resumes from its
checkpoint and reads the topic again from there (``rejoin``): each event the local log already holds is checked
against the one logged at its offset, not appended, and the log's end is recorded again once reached.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from secmeta.consumers.kafka.replica_end import END_FILE, EndRecord, ReplicaEnd
from secmeta.consumers.kafka.topic_identity import TopicIdentity
from secmeta.core.errors import SecmetaError
from secmeta.core.log import Log
from secmeta.core.store.storedir import LOCAL_STORE_FILE
from secmeta.events.codec import EventCodec
from secmeta.events.durable import write_atomically
from secmeta.events.keyring import Keyring
from secmeta.events.records import Envelope

__all__ = ["STORE_DIR", "LocalReplica", "ReplicaError"]

STORE_DIR = "store"


class ReplicaError(SecmetaError):
    """The local log and the events applied disagree (the message names both offsets)."""


class LocalReplica:
    """Appends the events the follower applies to the local log under ``directory`` (``directory/store``)."""

    def __init__(self, directory: str | os.PathLike, keyring: Keyring, codec: EventCodec):
        root = Path(directory)
        self.log = Log.open(root / STORE_DIR, keyring=keyring, codec=codec, create=True)
        write_atomically(root / LOCAL_STORE_FILE, (STORE_DIR + "\n").encode())
        try:
            self._record = EndRecord(root / END_FILE)
        except BaseException:
            self.log.close()
            raise
        #: where the logged events end on the topic (None: nothing logged, or not recorded for this end)
        self.end: ReplicaEnd | None = self._record.read(self.log.end_offset)
        #: the cluster and topic the events are read from (recorded with each append; the follower sets it)
        self.identity: TopicIdentity | None = None if self.end is None else self.end.identity
        self._pending: list[Envelope] = []
        self._pending_link: bytes | None = None
        self._pending_at = -1  # the Kafka offset of the last event waiting
        self._held: Iterator[Envelope] | None = None  # the logged events still to check (``rejoin``), in order
        self._held_next = -1  # the offset of the next of them

    @property
    def next_offset(self) -> int:
        """The offset after the last event added (appended or waiting for the rest of its batch)."""
        if self._held is not None:
            return self._held_next
        return self._pending[-1].offset + 1 if self._pending else self.log.end_offset

    def rejoin(self, start: int) -> None:
        """Take events again from log offset ``start`` (before the log's end: a checkpoint's, after a power loss
        left the end unrecorded): until the log's end, each event added is checked against the one logged at its
        offset (ReplicaError if they differ) instead of appended, and reaching the end records it again."""
        end = self.log.end_offset
        if not self.log.start_offset <= start < end:
            raise ReplicaError(f"the local log {self.log.store.path} holds log offsets {self.log.start_offset} to "
                               f"{end - 1}: it cannot be checked again from log offset {start}")
        self._held, self._held_next = self.log.read(start), start

    def read(self, start: int):
        """The logged events from ``start`` on, a batch at a time (to rebuild the image at open)."""
        return self.log.read_batches(start)

    def add(self, envelope: Envelope, link: bytes | None, kafka_offset: int) -> None:
        """One applied event, the link of the store batch that holds it (None: not known) and the Kafka offset of
        its message."""
        if envelope.offset != self.next_offset:
            raise ReplicaError(f"the local log {self.log.store.path} is at log offset {self.next_offset}, but the "
                               f"follower applies log offset {envelope.offset}: it belongs to another image")
        if self._held is not None:
            self._check_held(envelope, link, kafka_offset)
            return
        if self._pending and (link is None or link != self._pending_link):
            self.flush()
        self._pending.append(envelope)
        self._pending_link, self._pending_at = link, kafka_offset

    def _check_held(self, envelope: Envelope, link: bytes | None, kafka_offset: int) -> None:
        """``add`` while rejoining: the event must be the one logged at its offset; the log's last one records
        where the log ends on the topic again."""
        assert self._held is not None
        logged = next(self._held, None)
        # the fingerprint is not stored but derived from the decoding schema: compared are the event and its envelope
        if logged is None or replace(logged, fingerprint=envelope.fingerprint) != envelope:
            self._held = None
            raise ReplicaError(
                f"the local log {self.log.store.path} holds another event at log offset {envelope.offset} than the "
                f"topic gives there (Kafka offset {kafka_offset}): the topic was rewritten or belongs to another "
                "store. Follow it with another --checkpoint-dir (or remove this one)")
        self._held_next += 1
        if self._held_next == self.log.end_offset:
            self._held = None
            self.end = ReplicaEnd(self._held_next, kafka_offset, link, self.identity)
            self._record.write(self.end)
            self._record.keep_written()

    def flush(self) -> None:
        """Append the events waiting for the rest of their batch, as one batch; first record where they end
        on the topic (``replica_end``: whichever end a crash leaves, it is recorded)."""
        if self._pending:
            pending, self._pending = self._pending, []
            end = ReplicaEnd(pending[-1].offset + 1, self._pending_at, self._pending_link, self.identity)
            self._record.write(end)
            self.log.append(pending)
            self._record.keep_written()
            self.end = end

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._record.close()
            self.log.close()
