"""Kafka fixtures: librdkafka's built-in mock cluster over real TCP, and unique topic names.

``kafka_bootstrap`` (session-scoped, in tests/conftest.py) starts a one-broker
mock cluster and yields its bootstrap address ("127.0.0.1:PORT"); every client
of the tests connects to it like to a real cluster.  The mock cannot create topics
through the admin API (it names no controller), but auto-creates a topic
(4 partitions) the first time a producer asks for its metadata; our
publisher and ``make_topics`` rely on that, and write partition 0 only.
Topic names must be unique per test (``unique_topic``) since the cluster is shared.
"""

from __future__ import annotations

import itertools
import logging
import socket
import time

import pytest
from confluent_kafka import Producer

_counter = itertools.count()


def unique_topic(prefix: str = "t") -> str:
    """A topic name no other test of this session uses."""
    return f"{prefix}-{next(_counter)}"


def make_topics(bootstrap: str, *names: str) -> None:
    """Create topics on the mock cluster (by asking a producer for their metadata)."""
    producer = Producer({"bootstrap.servers": bootstrap, "logger": logging.getLogger("tests.kafka")})
    for name in names:
        metadata = producer.list_topics(topic=name, timeout=10)
        if metadata.topics[name].error is not None:
            raise RuntimeError(f"the mock cluster did not create {name}: {metadata.topics[name].error}")


def unused_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (bound then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def topics():
    """A factory of unique topic names: ``topics("history")``."""
    return unique_topic


@pytest.fixture
def other_kafka_cluster():
    """The bootstrap address of a second, empty mock cluster (its own cluster id), for this test only."""
    creator = Producer({"test.mock.num.brokers": 1, "logger": logging.getLogger("tests.kafka.mock")})
    yield creator.list_topics(timeout=10).orig_broker_name.split("/")[0]
    creator.flush(1)
    del creator


@pytest.fixture(scope="session")
def tansu_bootstrap(tmp_path_factory):
    """The address of a Tansu broker (in memory) for the session: a real Kafka-compatible broker with topic
    ids, a controller, DeleteTopics, consumer groups and transactions that fence (tests/chaoskit.tansu),
    which librdkafka's mock cluster lacks."""
    from tests.chaoskit import tansu

    with tansu(tmp_path_factory.mktemp("tansu")) as bootstrap:
        yield bootstrap


# -- stores and workloads ----------------------------------------------------------------

from secmeta.core import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    SecurityStore,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from tests.logkit import Clock  # noqa: E402
from tests.storekit import ADMIN  # noqa: E402

_USERS = [f"user{i}" for i in range(6)]
_TOPICS = [f"topic-{i}" for i in range(8)]
_MECHS = [ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512]


def random_workload(store: SecurityStore, seed: int, steps: int = 40, clock: Clock | None = None) -> None:
    """A seeded mix of every kind of change: ACLs, SCRAM credentials, tokens (renew, expire, sweep)."""
    import random

    rng = random.Random(seed)
    tokens = []
    for _ in range(steps):
        kind = rng.random()
        if kind < 0.4:
            bindings = [
                AclBinding.of(
                    rng.choice([ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER]),
                    "kafka-cluster" if rng.random() < 0.1 else rng.choice(_TOPICS),
                    rng.choice([PatternType.LITERAL, PatternType.PREFIXED]),
                    f"User:{rng.choice(_USERS)}", rng.choice(["*", "10.0.0.2"]),
                    rng.choice([AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALL]),
                    rng.choice([AclPermissionType.ALLOW, AclPermissionType.DENY]),
                )
                for _ in range(rng.randint(1, 4))
            ]
            bindings = [b for b in bindings if not (b.pattern.resource_type == ResourceType.CLUSTER
                                                    and b.pattern.pattern_type == PatternType.PREFIXED)]
            store.create_acls(bindings, context=ADMIN)
        elif kind < 0.55:
            store.delete_acls([AclBindingFilter.of(ResourceType.ANY, rng.choice(_TOPICS))], context=ADMIN)
        elif kind < 0.7:
            mech = rng.choice(_MECHS)
            store.alter_user_scram_credentials(
                [UserScramCredentialUpsertion(rng.choice(_USERS), ScramCredentialInfo(mech, rng.choice([4096, 8192])),
                                              b"pw")], context=ADMIN)
        elif kind < 0.78:
            store.alter_user_scram_credentials(
                [UserScramCredentialDeletion(rng.choice(_USERS), rng.choice(_MECHS))], context=ADMIN)
        elif kind < 0.88:
            tokens.append(store.create_delegation_token(
                context=ADMIN, owner=f"User:{rng.choice(_USERS)}", renewers=["User:admin"]))
        elif tokens:
            token = rng.choice(tokens)
            try:
                if kind < 0.94:
                    store.renew_delegation_token(token.hmac, rng.choice([-1, 60_000, 3_600_000]), context=ADMIN)
                elif kind < 0.97:
                    store.expire_delegation_token(token.hmac, rng.choice([-1, 120_000]), context=ADMIN)
                else:
                    if clock is not None:
                        clock.t += 7200
                    store.sweep_expired_tokens()
            except Exception:  # noqa: BLE001 - a token already removed: Kafka's error, nothing logged
                pass


def image_state(image) -> tuple:
    """An image as plain comparable values: SCRAM (with sealed secrets), ACLs by id, tokens."""
    scram = {(user, mech): (entry.iterations, entry.secret)
             for user in image.scram.users() for mech, entry in image.scram.mechanisms(user).items()}
    acls = dict(iter(image.acls))
    tokens = {t.token_id: t for t in image.tokens}
    return scram, acls, tokens, image.next_offset


def described(view) -> tuple:
    """What describe answers through a view (store or follower): ACLs, SCRAM users, tokens."""
    acls = sorted(map(repr, view.describe_acls(AclBindingFilter.any(), context=ADMIN)))
    scram = {user: repr(desc) for user, desc in view.describe_user_scram_credentials(context=ADMIN).items()}
    tokens = sorted(map(repr, view.describe_delegation_tokens(context=ADMIN)))
    return acls, scram, tokens


def read_topic(bootstrap: str, topic: str, timeout: float = 30.0,
               markers: bool = False) -> list[tuple[int, bytes | None, bytes | None, list]]:
    """Every message of partition 0 up to the high watermark: (kafka offset, key, value, headers); the format marker
    (``wire.format_marker``) only with ``markers``."""
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    from secmeta.consumers.kafka.wire import is_format_marker

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "logger": logging.getLogger("tests.kafka")})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout, cached=False)
        consumer.assign([TopicPartition(topic, 0, low)])
        out, position, deadline = [], low, time.monotonic() + timeout
        while position < high and time.monotonic() < deadline:
            batch = consumer.consume(1000, 0) or consumer.consume(1, 0.5)
            for msg in batch:
                if msg.error() is None:
                    if markers or not is_format_marker(msg.key(), msg.value(), msg.headers()):
                        out.append((msg.offset(), msg.key(), msg.value(), msg.headers() or []))
                    position = msg.offset() + 1
        if position < high:
            raise RuntimeError(f"read {topic} only to {position} of {high}")
        return out
    finally:
        consumer.close()


def produce_raw(bootstrap: str, topic: str, messages: list[tuple[bytes | None, bytes | None, list]]) -> None:
    """Produce (key, value, headers) messages to partition 0 as they are, and wait for them."""
    producer = Producer({"bootstrap.servers": bootstrap, "logger": logging.getLogger("tests.kafka")})
    for key, value, headers in messages:
        producer.produce(topic, key=key, value=value, headers=headers, partition=0)
    if producer.flush(30):
        raise RuntimeError(f"could not deliver to {topic}")


def live_keys(image) -> set[bytes]:
    """The entity keys of everything the image holds (what the state topic must end with)."""
    keys = {f"acl:{acl_id}" for acl_id, _ in image.acls}
    keys |= {f"scram:{user}:{mech.mechanism_name}" for user in image.scram.users()
             for mech in image.scram.mechanisms(user)}
    keys |= {f"token:{t.token_id}" for t in image.tokens}
    return {k.encode() for k in keys}


def format2_message(codec, envelope, link: bytes | None = None) -> tuple[bytes, bytes, list]:
    """The (key, value, headers) the publisher wrote before message format 3, byte for byte: the value the event's
    single-object encoding alone, the log offset and the request's JSON as headers (``link``: the history topic's
    secmeta.link value, hex)."""
    import json

    request = json.dumps(
        {"format": 2, "timestamp_ms": envelope.timestamp_ms, "actor_principal": envelope.actor_principal,
         "actor_host": envelope.actor_host, "request_id": envelope.request_id,
         "actor_asserted": envelope.actor_asserted,
         "operator": [envelope.operator_user, envelope.operator_host, envelope.operator_pid,
                      envelope.operator_program]}, separators=(",", ":"), ensure_ascii=False).encode()
    headers = [("secmeta.offset", b"%d" % envelope.offset), ("secmeta.request", request)]
    if link is not None:
        headers.append(("secmeta.link", link))
    return envelope.entity_key.encode(), codec.to_single_object(envelope.event), headers


def format2_reader_verdict(codec, key: bytes | None, value: bytes | None, headers: list) -> str:
    """How a secmeta from before message format 3 takes a message: "event", or the refusal it raises by class and
    reason ("UnknownFormat: ..." stops a bootstrap; "NotOurMessage: ..." is dead-lettered and skipped). A copy of
    that reader's rule (its careful path, which decides every refusal), in the order it checks, up to the request's
    format (reading the rest of the request changes no verdict here)."""
    from secmeta.events.errors import EventsError, UnknownSchemaError

    found = {name: raw for name, raw in headers if raw is not None}
    missing = [name for name in ("secmeta.offset", "secmeta.request") if name not in found]
    if missing:
        return f"NotOurMessage: missing headers: {', '.join(missing)}"
    if value is None:
        return "NotOurMessage: tombstone (no value): not an event"
    if len(value) < 10:
        return f"NotOurMessage: truncated: {len(value)} bytes, the single-object header alone needs 10"
    if value[:2] != b"\xc3\x01":
        return f"NotOurMessage: wrong marker {value[:2].hex()}: not Avro single-object encoding (c301)"
    try:
        event = codec.from_single_object(value)
    except UnknownSchemaError:
        return f"UnknownFormat: unknown schema fingerprint {value[2:10].hex()}"
    except EventsError as exc:
        return f"NotOurMessage: body does not decode (truncated or corrupt): {exc}"
    if key is not None and key != event.entity_key.encode():
        return f"NotOurMessage: key {key!r} is not the event's entity key {event.entity_key!r}"
    offset = found["secmeta.offset"].decode("ascii", "replace")
    if not offset.isascii() or not offset.lstrip("-").isdigit():
        return f"NotOurMessage: header secmeta.offset is not a decimal integer: {found['secmeta.offset']!r}"
    return format2_request_verdict(found["secmeta.request"])


def format2_request_verdict(raw: bytes) -> str:
    """How a secmeta from before message format 3 takes a ``secmeta.request`` header's format (a copy of its rule):
    "event" for its own format 2, else the refusal by class and reason."""
    import json

    version = json.loads(raw).get("format")
    if version == 2 and version.__class__ is int:
        return "event"
    newer = version.__class__ is int and version > 2
    return (f"{'UnknownFormat' if newer else 'NotOurMessage'}: header secmeta.request is message format "
            f"{version!r}: " + ("newer than this secmeta reads (up to 2); upgrade it" if newer else "expected 2"))


def format1_message(codec, envelope, link: bytes | None = None) -> tuple[bytes, bytes, list]:
    """The (key, value, headers) the publisher wrote before message format 2, byte for byte: one header per
    envelope field (``link``: the history topic's secmeta.link value, hex)."""
    import json

    operator = json.dumps([envelope.operator_user, envelope.operator_host, envelope.operator_pid,
                           envelope.operator_program], separators=(",", ":")).encode()
    headers = [
        ("secmeta.offset", str(envelope.offset).encode()),
        ("secmeta.event_type", envelope.event_type.encode()),
        ("secmeta.fingerprint", codec.event_fingerprint(envelope.event_type).hex().encode()),
        ("secmeta.timestamp_ms", str(envelope.timestamp_ms).encode()),
        ("secmeta.actor_principal", envelope.actor_principal.encode()),
        ("secmeta.actor_host", envelope.actor_host.encode()),
        ("secmeta.request_id", envelope.request_id.encode()),
        ("secmeta.actor_asserted", b"true" if envelope.actor_asserted else b"false"),
        ("secmeta.operator", operator),
    ]
    if link is not None:
        headers.append(("secmeta.link", link))
    return envelope.entity_key.encode(), codec.to_single_object(envelope.event), headers
