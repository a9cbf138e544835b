"""Kafka mirror throughput against librdkafka's mock cluster: publish, follow, bootstrap.

    python -m scripts.bench.kafka [--events 100000] [--round 5000] [--state-entities 8000]

Writes a store log of N events (ACL creations in requests of 1000, every
tenth request ending with a deletion, so the state topic gets removals and
tombstones), then measures in one run:

* the ceiling: reading and decoding the same events from the log;
* the wire codec alone: encode_message and decode_message per event (with the
  collector paused, as the publisher and the follower run them);
* the publisher and the follower, as a live standby runs: the log is published
  in rounds of ``--round`` events (Publisher.publish_available: history and
  state topics, idempotent producer, acks=all, confirmed and checkpointed),
  and after each round Follower.catch_up applies it; each side's time is
  summed over all N events, and the follower's image must equal the one
  replayed from the log;
* bootstrap_from_state_topic on a separate store of ``--state-entities`` ACLs.

Each row gives wall and CPU seconds (time.process_time: the whole process,
librdkafka's threads and the in-process mock broker's included) and both
rates; publish and catch-up carry issue 15's target (>= 100k events/s each).
On a shared machine the wall figures are noise; CPU seconds are the measure.

The mock cluster keeps only about 5 MB per partition (older messages are
deleted as on a retention limit), which is why the follower keeps up round by
round and the bootstrap store is small; it runs in this process on its own
threads, so on two cores broker and clients share the CPU: the numbers are
a floor for a real cluster.  Nothing here is asserted; see bench-results/kafka.json.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from scripts.bench import authz_core
from scripts.bench.report import print_table, rate, write_json
from secmeta.consumers.kafka.follower import Follower
from secmeta.consumers.kafka.publisher import Publisher
from secmeta.consumers.kafka.wire import decode_message, encode_message
from secmeta.core.log import Log
from secmeta.core.store.state import load_state
from secmeta.events.keyring import Keyring
from secmeta.events.records import AclCreated, AclDeleted, Envelope
from secmeta.projections.gc_pause import paused_gc
from secmeta.projections.image import SecurityProjection
from secmeta.projections.image_snapshot import SecurityImageSnapshot

REQUEST = 1000


def write_log(path: Path, keyring: Keyring, n: int) -> None:
    """n events: requests of ACL creations, every 10th request ending with one deletion."""
    pairs = authz_core.bindings(n)
    written = 0
    with Log.open(path, keyring=keyring) as log:
        request = 0
        while written < n:
            ts = 1_700_000_000_000 + written
            size = min(REQUEST, n - written)
            chunk = pairs[written:written + size]
            events = [AclCreated(acl_id, binding) for acl_id, binding in chunk]
            if request % 10 == 9 and size > 1:
                acl_id, binding = chunk[0]
                events[-1] = AclDeleted(acl_id, binding)
            log.append([Envelope(-1, ts, "User:admin", "10.0.0.1", f"r{request}", e) for e in events])
            written += size
            request += 1


TARGET_PER_S = 100_000  # issue 15: publish and follower catch-up, each
# A Kafka broker answers a waiting fetch as soon as records are appended (DelayedFetch); the mock
# cluster always holds an empty fetch for the whole fetch.wait.max.ms (librdkafka's
# rdkafka_mock_handlers.c, rd_kafka_mock_handle_Fetch: "we should cut the wait short ... if a
# producer writes to the partitions, but that is too much of a hassle"), and the follower's
# high-watermark query queues behind it on the same connection.  A short wait stands in for the
# broker's wake-up, so the follower's rate is its own and not 20 rounds of the mock's timer.
MOCK_FOLLOWER_CONFIG = {"fetch.wait.max.ms": 5}


def log_ceiling(path: Path, keyring: Keyring) -> tuple[int, list[float]]:
    spent = [0.0, 0.0]
    with Log.open(path, keyring=keyring, read_only=True) as log, _timing(spent):
        count = sum(len(log.decode(batch)) for batch in log.batches())
    return count, spent


def wire_rates(path: Path, keyring: Keyring) -> tuple[int, list[float], list[float]]:
    encode, decode = [0.0, 0.0], [0.0, 0.0]
    with Log.open(path, keyring=keyring, read_only=True) as log:
        envelopes = list(log.read())
        codec = log.codec
        with paused_gc(), _timing(encode):
            messages = [encode_message(codec, env) for env in envelopes]
        with paused_gc(), _timing(decode):
            for key, value, headers in messages:
                decode_message(codec, key, value, headers)
    return len(envelopes), encode, decode


def _row(measure: str, count: int, spent: list[float], target: str = "") -> list:
    wall, cpu = spent
    return [measure, count, wall, cpu, rate(count, wall), rate(count, cpu), target]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--round", type=int, default=5_000, help="events published, then followed, per round")
    parser.add_argument("--state-entities", type=int, default=8_000, help="ACLs in the bootstrap store")
    args = parser.parse_args(argv)
    n, step = args.events, args.round
    logging.basicConfig(level=logging.ERROR)
    creator = Producer({"test.mock.num.brokers": 1, "logger": logging.getLogger("bench.mock")})
    bootstrap = creator.list_topics(timeout=10).orig_broker_name.split("/")[0]
    rows = []
    results: dict[str, object] = {"events": n, "round": step, "state_entities": args.state_entities,
                                  "target_per_s": TARGET_PER_S}
    target = f">= {TARGET_PER_S:,}/s"

    def record(name: str, count: int, spent: list[float]) -> None:
        results[name] = {"events": count, "wall_s": spent[0], "cpu_s": spent[1],
                         "per_s": rate(count, spent[0]), "per_cpu_s": rate(count, spent[1])}

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        Keyring.generate_file(tmp / "keys.json")
        keyring = Keyring.from_file(tmp / "keys.json")
        store = tmp / "store"
        print(f"writing {n:,} events ...", flush=True)
        write_log(store, keyring, n)

        count, spent = log_ceiling(store, keyring)
        rows.append(_row("log read + decode (the ceiling)", count, spent))
        record("log_read_decode", count, spent)

        count, encode, decode = wire_rates(store, keyring)
        rows.append(_row("wire encode_message", count, encode))
        rows.append(_row("wire decode_message", count, decode))
        record("wire_encode", count, encode)
        record("wire_decode", count, decode)

        mirror = mirror_in_rounds(store, keyring, bootstrap, tmp, n, step)
        published = mirror["published"]
        rows.append(_row("publish (history + state, confirmed)", published, mirror["publish"], target))
        rows.append(_row("follower catch-up (history)", published, mirror["follow"], target))
        rows.append(_row("follower checkpoint (snapshot)", n, mirror["checkpoint"]))
        record("publish", published, mirror["publish"])
        record("follow", published, mirror["follow"])
        record("follower_checkpoint", n, mirror["checkpoint"])
        results["follower_same_image"] = mirror["same"]

        entities, spent, same = bootstrap_rate(tmp, keyring, bootstrap, args.state_entities)
        rows.append(_row("bootstrap from state topic", entities, spent))
        record("bootstrap", entities, spent)
        results["bootstrap_same_image"] = same
    print_table(f"Kafka mirror of {n:,} events (librdkafka mock cluster, in process; rounds of {step:,}; "
                "CPU s: the whole process, broker threads included)",
                ["measure", "events", "wall s", "CPU s", "events/s", "events/CPU s", "target"], rows)
    print(f"follower image equals the log's: {results['follower_same_image']}; "
          f"bootstrapped image equals the log's: {results['bootstrap_same_image']}")
    print(f"wrote {write_json('kafka', results)}")
    del creator
    return 0


def replayed(path: Path, keyring: Keyring):
    with Log.open(path, keyring=keyring, read_only=True) as log:
        return load_state(log, SecurityProjection(), SecurityImageSnapshot()).state


def mirror_in_rounds(store: Path, keyring: Keyring, bootstrap: str, tmp: Path, n: int, step: int) -> dict:
    """Publish ``step`` events, let the follower catch up, repeat; the wall and CPU time each side spent.

    CPU seconds are the process's (time.process_time): librdkafka's threads and
    the in-process mock broker's included.
    """
    history, state = f"bench-history-{uuid.uuid4().hex[:8]}", f"bench-state-{uuid.uuid4().hex[:8]}"
    spent = {"publish": [0.0, 0.0], "follow": [0.0, 0.0], "checkpoint": [0.0, 0.0]}
    published = 0
    with Publisher(store, keyring, bootstrap, history_topic=history, state_topic=state, chunk_size=step) as publisher:
        follower = Follower(bootstrap, history_topic=history, state_topic=state, checkpoint_dir=tmp / "follower",
                            checkpoint_every=10 * n, client_config=MOCK_FOLLOWER_CONFIG)
        for end in range(step, n + step, step):
            with _timing(spent["publish"]):
                published += publisher.publish_available(max_events=min(end, n) - publisher.checkpoint)
            with _timing(spent["follow"]):
                if not follower.catch_up(timeout=600):
                    raise SystemExit("the follower did not catch up")
    with _timing(spent["checkpoint"]):
        follower.close()
    expected = replayed(store, keyring)
    same = dict(iter(follower.image.acls)) == dict(iter(expected.acls)) and follower.image.next_offset == n
    return {"published": published, "same": same, **spent}


@contextlib.contextmanager
def _timing(into: list[float]):
    """Add the block's wall and CPU seconds to ``into`` ([wall, cpu])."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        into[0] += time.perf_counter() - wall
        into[1] += time.process_time() - cpu


def bootstrap_rate(tmp: Path, keyring: Keyring, bootstrap: str, n: int) -> tuple[int, list[float], bool]:
    """Publish a store of n events, then time a follower's bootstrap from the state topic."""
    store = tmp / "small"
    write_log(store, keyring, n)
    history, state = f"boot-history-{uuid.uuid4().hex[:8]}", f"boot-state-{uuid.uuid4().hex[:8]}"
    with Publisher(store, keyring, bootstrap, history_topic=history, state_topic=state) as publisher:
        publisher.publish_available()
    follower = Follower(bootstrap, history_topic=history, state_topic=state, checkpoint_dir=tmp / "boot")
    spent = [0.0, 0.0]
    with _timing(spent):
        entities = follower.bootstrap_from_state_topic(timeout=600)
    follower.close()
    expected = replayed(store, keyring)
    same = dict(iter(follower.image.acls)) == dict(iter(expected.acls)) and follower.image.next_offset == n
    return entities, spent, same


if __name__ == "__main__":
    raise SystemExit(main())
