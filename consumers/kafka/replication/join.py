"""``secmeta init --join``: a node's store made from the log topic, verified link by link.

The topic's store record carries the store's identity (id, creation time, the checks of the keys it was
written with) and its saved settings: the new directory becomes a replica of that store (the keyring
given must hold its keys), then every batch is appended byte for byte, each checked to extend the chain
before it. A snapshot of the result is written, so the node opens fast. A topic whose log starts after a
retention anchor is refused (joining would need the snapshot at the anchor, which the topic does not carry).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from secmeta.consumers.kafka.replication.reader import TopicReader
from secmeta.consumers.kafka.replication.records import StoreRecord, TopicFormatError
from secmeta.consumers.kafka.replication.replica import TopicReplica
from secmeta.consumers.kafka.replication.settings import TOPIC_PREFIX, ReplicationSettings
from secmeta.consumers.kafka.replication.topic import ReplicationUnavailableError, admin_client
from secmeta.core.config import CONFIG_FILE, StoreConfig
from secmeta.core.errors import StoreError
from secmeta.core.store.facade import SecurityStore
from secmeta.core.store.replica import create_replica
from secmeta.events.durable import write_atomically
from secmeta.events.keyring import Keyring

__all__ = ["find_log_topic", "join"]


def find_log_topic(settings: ReplicationSettings) -> str:
    """The topic to join: the one given, else the cluster's only secmeta log topic."""
    if settings.topic:
        return settings.topic
    topics = sorted(t for t in admin_client(settings).list_topics(timeout=settings.timeout_s).topics
                    if t.startswith(TOPIC_PREFIX))
    if len(topics) != 1:
        raise ReplicationUnavailableError(
            f"Kafka at {settings.bootstrap} holds {len(topics)} secmeta log topics"
            + (f" ({', '.join(topics)})" if topics else "") + ": name the one to join with --replication-topic")
    return topics[0]


class _Joiner:
    """Applies the topic's records to a new replica it makes from the store record."""

    def __init__(self, root: Path, topic: str, keyring: Keyring):
        self.root, self.topic, self.keyring = root, topic, keyring
        self.replica: TopicReplica | None = None

    def __call__(self, record, kafka_offset: int) -> None:
        if self.replica is None:
            if not isinstance(record, StoreRecord):
                raise TopicFormatError(f"the log topic {self.topic}'s first record (Kafka offset {kafka_offset}) is "
                                       "not its store record: it is not a secmeta log topic")
            self.replica = TopicReplica(self._make(record), self.topic)
        self.replica.apply(record, kafka_offset)

    def _make(self, identity: StoreRecord) -> SecurityStore:
        if identity.start_offset:
            raise TopicFormatError(f"the log topic {self.topic} starts at log offset {identity.start_offset}, after "
                                   "a retention anchor: a joiner would need the snapshot there, which the topic does "
                                   "not carry. Seed the topic from a store whose log starts at offset 0")
        create_replica(self.root, identity.store_id, identity.created_ms, self.keyring, identity.key_checks)
        if identity.config:
            write_atomically(self.root / CONFIG_FILE, (json.dumps(identity.config, indent=2) + "\n").encode())
        return SecurityStore.open(self.root, StoreConfig.load(self.root), keyring=self.keyring, create=False)


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
        store = joiner.replica.store
        joiner.replica.check_not_ahead()
        store.snapshot()
        return store
    except BaseException:
        if joiner.replica is not None:
            joiner.replica.store.close()
        shutil.rmtree(root, ignore_errors=True)
        raise
    finally:
        reader.close()
