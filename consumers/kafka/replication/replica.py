"""A node's local log as a verified replica of the log topic, which is the witness of the newest link.

Each batch record is checked against the local log: one the local log already holds must carry the local
link at its end (else the two histories differ there); the next one is appended byte for byte once it
extends the local chain (``SecurityStore.append_replicated``); anything else refuses. At the topic's end,
a local log that holds more than the topic (rolled back or forged, item 7 of issue 25) refuses to serve.
The store record must carry a seal that verifies under the node's keyring and the node's own saved
settings (config.json); a node that resumes mid-topic reads and checks it first too (``resume``). Every refusal is a DivergedError naming the offset and both links, or a
TopicFormatError naming the topic; nothing is appended then.
"""

from __future__ import annotations

from collections.abc import Callable

from secmeta.consumers.kafka.replication.records import (
    BatchRecord,
    SchemaRecord,
    SeededRecord,
    SnapshotPart,
    StoreRecord,
    TopicFormatError,
    TopicRecord,
    check_store_record,
    saved_config,
)
from secmeta.core.log import DivergedError, Log
from secmeta.core.settings import access_settings_saved

__all__ = ["ResumeMismatch", "TopicReplica"]


class ResumeMismatch(TopicFormatError):
    """The record a resume point names is not there: read the topic from its first record instead."""


def _short(link: bytes | None) -> str:
    return "none" if link is None else link.hex()[:16]


class TopicReplica:
    """Applies the log topic's records, in order, to ``log``: a batch it does not hold yet goes to ``append``
    (a store's ``append_replicated``, which publishes its image too, or the bare log's ``append_frame``).
    With ``keep_snapshot`` the snapshot the topic carries (a log that starts after a retention anchor) is
    kept in ``snapshot`` (offset, bytes) for a joiner."""

    def __init__(self, log: Log, append: Callable[[bytes], object], topic: str, *, keep_snapshot: bool = False):
        self.log = log
        self._append = append
        self.topic = topic
        self.identity: StoreRecord | None = None
        self.end: tuple[int, bytes] | None = None  # where the topic's batches end so far: (offset, link)
        self._keep_snapshot = keep_snapshot
        self._parts: list[bytes] = []
        self.snapshot: tuple[int, bytes] | None = None
        self.last_batch: tuple[int, int, bytes] | None = None  # (Kafka offset, end offset, link) of the last batch
        self.seeded = False  # the topic's seed is complete (its seeded record was read)
        self._resuming: tuple[int, bytes] | None = None

    def resume(self, next_offset: int, link: bytes, seeded: bool) -> None:
        """Read on from a batch record in mid-topic (resume.py), once the topic's store record was applied and
        checked as every reader checks it (``apply``: its seal, and the settings that decide access against this
        node's config.json): the next record must be the batch ending at ``next_offset`` with ``link``
        (ResumeMismatch otherwise), which the local log holds."""
        if self.identity is None:
            raise TopicFormatError(f"the log topic {self.topic}'s store record must be read before resuming")
        self._resuming = (next_offset, link)
        self.seeded = seeded

    def apply(self, record: TopicRecord, kafka_offset: int) -> None:
        if self._resuming is not None and not isinstance(record, BatchRecord):
            raise ResumeMismatch(f"the log topic {self.topic}'s record at Kafka offset {kafka_offset} is not the "
                                 "batch the resume point names")
        if isinstance(record, StoreRecord):
            self._identify(record, kafka_offset)
        elif self.identity is None:
            raise TopicFormatError(f"the log topic {self.topic} does not start with its store record (Kafka offset "
                                   f"{kafka_offset} comes first): it is not a secmeta log topic")
        elif isinstance(record, SchemaRecord):
            self.log.add_writer_schema(record.schema_json)
        elif isinstance(record, SnapshotPart):
            self._snapshot_part(record, kafka_offset)
        elif isinstance(record, SeededRecord):
            if self.end != (record.next_offset, record.link):
                raise TopicFormatError(f"the log topic {self.topic}'s seeded record at Kafka offset {kafka_offset} "
                                       f"names offset {record.next_offset}, but its batches end at "
                                       f"{self.end[0] if self.end else None} (or with another link)")
            self.seeded = True
        else:
            self._batch(record, kafka_offset)

    def _snapshot_part(self, part: SnapshotPart, kafka_offset: int) -> None:
        if not self._keep_snapshot:
            return
        if part.index != len(self._parts) or part.total < 1:
            raise TopicFormatError(f"the log topic {self.topic}'s snapshot part at Kafka offset {kafka_offset} is part "
                                   f"{part.index} of {part.total} where part {len(self._parts)} was expected")
        self._parts.append(part.data)
        if len(self._parts) == part.total:
            self.snapshot, self._parts = (part.next_offset, b"".join(self._parts)), []

    def _identify(self, record: StoreRecord, kafka_offset: int) -> None:
        own = self.log.store.store_id
        if self.identity is not None:
            raise TopicFormatError(f"the log topic {self.topic} holds a second store record at Kafka offset "
                                   f"{kafka_offset}: it is not one store's log")
        if record.store_id != own:
            raise TopicFormatError(f"the log topic {self.topic} holds the log of store {record.store_id}, not of this "
                                   f"store ({own}): give the topic of this store, or join that store with "
                                   "`secmeta init --join` in a new directory")
        check_store_record(record, self.log.keyring, self.topic)
        theirs, ours = access_settings_saved(record.config), access_settings_saved(saved_config(self.log.store.path))
        if theirs != ours:
            differ = "; ".join(f"{name} is {_shown(theirs[name])} there, {_shown(ours[name])} here"
                               for name in sorted(ours) if theirs[name] != ours[name])
            raise TopicFormatError(f"the log topic {self.topic}'s store record holds other settings that decide access "
                                   f"than this store's config.json ({differ}): the nodes of one store decide access "
                                   "with the same settings; make this node's config.json match, or replicate to a new "
                                   "topic")
        self.identity = record
        self.end = (record.start_offset, record.start_link)

    def _batch(self, record: BatchRecord, kafka_offset: int) -> None:
        batch, log = record.batch, self.log
        if self._resuming is not None:
            if (batch.next_offset, batch.link) != self._resuming:
                raise ResumeMismatch(f"the log topic {self.topic}'s record at Kafka offset {kafka_offset} is not the "
                                     "batch the resume point names")
            self._resuming, self.end = None, (batch.base_offset, b"")
        assert self.end is not None
        if batch.base_offset != self.end[0]:
            raise TopicFormatError(f"the log topic {self.topic}'s batch at Kafka offset {kafka_offset} starts at log "
                                   f"offset {batch.base_offset}, but the topic's batches before it end at "
                                   f"{self.end[0]}: the topic is not one log")
        local_end = log.end_offset
        if batch.next_offset <= local_end:
            if batch.next_offset >= log.start_offset:
                local = log.link_at(batch.next_offset)
                if local != batch.link:
                    raise DivergedError(
                        f"the local log and the log topic {self.topic} differ at the batch ending at offset "
                        f"{batch.next_offset}: the local log's link there is {_short(local)}, the topic's is "
                        f"{_short(batch.link)} (written by node {record.node_id}). The local log was rewritten or "
                        "forged; this node does not serve. Rebuild it from the topic (`secmeta init --join` in a "
                        "new directory)", offset=batch.base_offset)
        elif batch.base_offset == local_end:
            self._append(record.frame)
        else:
            raise DivergedError(
                f"the log topic {self.topic}'s batch [{batch.base_offset}, {batch.next_offset}) straddles the local "
                f"log's end at offset {local_end}: the two logs cut their batches differently and are not copies "
                "of one log; this node does not serve", offset=local_end)
        self.end = (batch.next_offset, batch.link)
        self.last_batch = (kafka_offset, batch.next_offset, batch.link)

    def check_resumed(self) -> None:
        """After reading to the end from a resume point: the batch it names must have been read."""
        if self._resuming is not None:
            raise ResumeMismatch(f"the log topic {self.topic} ended before the batch the resume point names")

    def check_not_ahead(self) -> None:
        """At the topic's end: a local log holding offsets the topic does not is refused (the topic witnesses
        the newest link)."""
        self.check_resumed()
        end = self.end[0] if self.end is not None else 0
        log = self.log
        if log.end_offset > end:
            raise DivergedError(
                f"the local log holds offsets {end} to {log.end_offset} (last link {_short(log.last_link)}) that the "
                f"log topic {self.topic} does not (it ends at offset {end} with link "
                f"{_short(self.end[1] if self.end else None)}): nothing past the topic was ever committed, so "
                "the local log was forged or the topic rolled back; this node does not serve", offset=end)


def _shown(value: object) -> str:
    return repr(sorted(value)) if isinstance(value, frozenset) else repr(value)
