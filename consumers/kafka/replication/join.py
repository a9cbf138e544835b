"""``secmeta init --join``: a node's store made from the log topic, verified link by link.

The topic's store record carries the store's identity (id, creation time, the checks of the keys it was
written with) and its saved settings, sealed under the store's keys (taken only once the seal verifies):
the new directory becomes a replica of that store (the keyring
given must hold its keys), then every batch is appended byte for byte, each checked to extend the chain
before it (into the bare log; the store is opened once, at the end). A topic seeded from a log that starts
after a retention anchor carries the anchor (sealed: it must be this store's) and a snapshot at or after it,
which the new store loads the deleted history from (checked against the log's links when it opens). A
snapshot of the result is written, so the node opens fast.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from confluent_kafka import KafkaException

from secmeta.consumers.kafka.replication.reader import TopicReader
from secmeta.consumers.kafka.replication.records import (
    StoreRecord,
    TopicFormatError,
    check_store_record,
)
from secmeta.consumers.kafka.replication.replica import TopicReplica
from secmeta.consumers.kafka.replication.settings import TOPIC_PREFIX, ReplicationSettings
from secmeta.consumers.kafka.replication.topic import ReplicationUnavailableError, admin_client
from secmeta.core.config import CONFIG_FILE, StoreConfig
from secmeta.core.errors import StoreError
from secmeta.core.log import Log
from secmeta.core.store.facade import SecurityStore
from secmeta.core.store.replica import create_replica
from secmeta.events.durable import write_atomically
from secmeta.events.keyring import Keyring
from secmeta.projections.snapshot import snapshot_path

__all__ = ["find_log_topic", "join"]


def find_log_topic(settings: ReplicationSettings) -> str:
    """The topic to join: the one given (which must exist), else the cluster's only secmeta log topic.
    (Every topic is listed: asking for one by name may create it.)"""
    try:
        listed = admin_client(settings).list_topics(timeout=settings.timeout_s).topics
    except KafkaException as exc:
        raise ReplicationUnavailableError(f"Kafka at {settings.bootstrap} did not answer: {exc.args[0]}") from None
    if settings.topic:
        if settings.topic not in listed:
            raise ReplicationUnavailableError(f"Kafka at {settings.bootstrap} has no topic {settings.topic}: the "
                                              "first node's `secmeta serve --replication-bootstrap-server` makes it")
        return settings.topic
    topics = sorted(t for t in listed if t.startswith(TOPIC_PREFIX))
    if len(topics) != 1:
        raise ReplicationUnavailableError(
            f"Kafka at {settings.bootstrap} holds {len(topics)} secmeta log topics"
            + (f" ({', '.join(topics)})" if topics else "") + ": name the one to join with --replication-topic")
    return topics[0]


class _Joiner:
    """Applies the topic's records to a new replica's bare log, made from the store record."""

    def __init__(self, root: Path, topic: str, keyring: Keyring):
        self.root, self.topic, self.keyring = root, topic, keyring
        self.replica: TopicReplica | None = None

    def __call__(self, record, kafka_offset: int) -> None:
        if self.replica is None:
            if not isinstance(record, StoreRecord):
                raise TopicFormatError(f"the log topic {self.topic}'s first record (Kafka offset {kafka_offset}) is "
                                       "not its store record: it is not a secmeta log topic")
            log = self._make(record)
            self.replica = TopicReplica(log, log.append_frame, self.topic, keep_snapshot=True)
        self.replica.apply(record, kafka_offset)

    def _make(self, identity: StoreRecord) -> Log:
        if identity.start_offset and identity.anchor is None:
            raise TopicFormatError(f"the log topic {self.topic} starts at log offset {identity.start_offset} but "
                                   "carries no retention anchor: a joiner cannot check where its log starts")
        anchor = create_replica(self.root, identity.store_id, identity.created_ms, self.keyring, identity.key_checks,
                                anchor=identity.anchor)
        check_store_record(identity, self.keyring, self.topic)  # its keys checked (create_replica): now its seal
        if anchor is not None and (anchor.next_offset, anchor.link) != (identity.start_offset, identity.start_link):
            raise TopicFormatError(f"the log topic {self.topic}'s retention anchor is at offset {anchor.next_offset}, "
                                   f"but its store record says the log starts at {identity.start_offset}")
        if identity.config:
            write_atomically(self.root / CONFIG_FILE, (json.dumps(identity.config, indent=2) + "\n").encode())
        return Log.open(self.root, keyring=self.keyring, create=False, retention=anchor is not None or None)

    def finish(self) -> SecurityStore:
        """After the topic's end: the snapshot it carried in place, the log closed, the store opened (which
        checks the snapshot against the log) with a snapshot of its own."""
        replica = self.replica
        assert replica is not None
        replica.check_not_ahead()
        log = replica.log
        if replica.snapshot is not None:
            offset, data = replica.snapshot
            write_atomically(snapshot_path(log.store.snapshot_dir, offset), data)
        elif log.start_offset:
            raise TopicFormatError(f"the log topic {self.topic} starts at log offset {log.start_offset} after a "
                                   "retention anchor but carries no snapshot of the history before it")
        log.close()
        store = SecurityStore.open(self.root, StoreConfig.load(self.root), keyring=self.keyring, create=False)
        try:
            store.snapshot()
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        if self.replica is not None:
            self.replica.log.close()


def join(path: str | os.PathLike, settings: ReplicationSettings, keyring: Keyring) -> SecurityStore:
    """Make the store at ``path`` (new or empty) a replica of the log topic's store, caught up with the topic;
    returns it open (the caller closes it). Nothing is left at ``path`` when joining fails."""
    root = Path(path)
    if root.exists() and any(root.iterdir()):
        raise StoreError(f"{root} is not empty: a node joins into a new or empty directory")
    topic = find_log_topic(settings)
    reader = TopicReader(settings, topic)
    joiner = _Joiner(root, topic, keyring)
    try:
        reader.read_to_end(joiner)
        if joiner.replica is None:
            raise ReplicationUnavailableError(f"the log topic {topic} is empty: start the first node with "
                                              "`secmeta serve --replication-bootstrap-server` to seed it")
        if not joiner.replica.seeded:
            raise ReplicationUnavailableError(f"the log topic {topic} is not seeded yet (its first node's seed is "
                                              "incomplete, or was interrupted): wait for the first node to finish "
                                              "seeding it, then join")
        return joiner.finish()
    except BaseException:
        joiner.close()
        shutil.rmtree(root, ignore_errors=True)
        raise
    finally:
        reader.close()
