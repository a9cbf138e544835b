"""Kafka mirror throughput against librdkafka's mock cluster: publish, follow, bootstrap.

    python -m scripts.bench.kafka [--events 100000] [--round 5000] [--state-entities 8000]

Writes a store log of N events (ACL creations in requests of 1000, every
tenth request ending with a deletion, so the state topic gets removals and
tombstones), then measures in one run:

* the ceiling: reading and decoding the same events from the log;
* the wire codec alone: encode_message and decode_message per event;
* the publisher and the follower, as a live standby runs: the log is published
  in rounds of ``--round`` events (Publisher.publish_available: history and
  state topics, idempotent producer, acks=all, confirmed and checkpointed),
  and after each round Follower.catch_up applies it; each side's time is
  summed over all N events, and the follower's image must equal the one
  replayed from the log;
* bootstrap_from_state_topic on a separate store of ``--state-entities`` ACLs.

The mock cluster keeps only about 5 MB per partition (older messages are
deleted as on a retention limit), which is why the follower keeps up round by
round and the bootstrap store is small; it runs in this process on its own
threads, so on two cores broker and clients share the CPU: the numbers are
a floor for a real cluster.  Nothing here is asserted; see bench-results/kafka.json.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from consumers.kafka.follower import Follower
from consumers.kafka.publisher import Publisher
from consumers.kafka.wire import decode_message, encode_message
from core.log import Log
from core.state import load_state
from events.keyring import Keyring
from events.records import AclCreated, AclDeleted, Envelope
from projections.image import SecurityProjection
from projections.image_snapshot import SecurityImageSnapshot
from scripts.bench import authz_core
from scripts.bench.report import print_table, rate, write_json

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


def log_ceiling(path: Path, keyring: Keyring) -> tuple[int, float]:
    with Log.open(path, keyring=keyring, read_only=True) as log:
        start = time.perf_counter()
        count = sum(len(log.decode(batch)) for batch in log.batches())
        return count, time.perf_counter() - start


def wire_rates(path: Path, keyring: Keyring) -> tuple[int, float, float]:
    with Log.open(path, keyring=keyring, read_only=True) as log:
        envelopes = list(log.read())
        codec = log.codec
        start = time.perf_counter()
        messages = [encode_message(codec, env) for env in envelopes]
        encode_s = time.perf_counter() - start
        start = time.perf_counter()
        for key, value, headers in messages:
            decode_message(codec, key, value, headers)
        decode_s = time.perf_counter() - start
    return len(envelopes), encode_s, decode_s


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
    results: dict[str, object] = {"events": n, "round": step, "state_entities": args.state_entities}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        Keyring.generate_file(tmp / "keys.json")
        keyring = Keyring.from_file(tmp / "keys.json")
        store = tmp / "store"
        print(f"writing {n:,} events ...", flush=True)
        write_log(store, keyring, n)

        count, took = log_ceiling(store, keyring)
        rows.append(["log read + decode (ceiling)", count, took, rate(count, took)])
        results["log_read_decode_per_s"] = rate(count, took)

        count, encode_s, decode_s = wire_rates(store, keyring)
        rows.append(["wire encode_message", count, encode_s, rate(count, encode_s)])
        rows.append(["wire decode_message", count, decode_s, rate(count, decode_s)])
        results["wire_encode_per_s"] = rate(count, encode_s)
        results["wire_decode_per_s"] = rate(count, decode_s)

        published, follow_s, publish_s, checkpoint_s = mirror_in_rounds(store, keyring, bootstrap, tmp, n, step)
        rows.append(["publish (history + state, confirmed)", published, publish_s, rate(published, publish_s)])
        rows.append(["follower catch-up (history)", published, follow_s, rate(published, follow_s)])
        rows.append(["follower checkpoint (snapshot)", n, checkpoint_s, rate(n, checkpoint_s)])
        results.update(publish_per_s=rate(published, publish_s), follow_per_s=rate(published, follow_s),
                       checkpoint_s=checkpoint_s, follower_same_image=mirror_in_rounds.same)

        entities, took, same = bootstrap_rate(tmp, keyring, bootstrap, args.state_entities)
        rows.append(["bootstrap from state topic", entities, took, rate(entities, took)])
        results.update(bootstrap_entities_per_s=rate(entities, took), bootstrap_same_image=same)
    print_table(f"Kafka mirror of {n:,} events (librdkafka mock cluster, in process; rounds of {step:,})",
                ["measure", "events", "seconds", "events/s"], rows)
    print(f"follower image equals the log's: {results['follower_same_image']}; "
          f"bootstrapped image equals the log's: {results['bootstrap_same_image']}")
    print(f"wrote {write_json('kafka', results)}")
    del creator
    return 0


def replayed(path: Path, keyring: Keyring):
    with Log.open(path, keyring=keyring, read_only=True) as log:
        return load_state(log, SecurityProjection(), SecurityImageSnapshot()).state


def mirror_in_rounds(store: Path, keyring: Keyring, bootstrap: str, tmp: Path, n: int, step: int):
    """Publish ``step`` events, let the follower catch up, repeat; the time each side spent."""
    history, state = f"bench-history-{uuid.uuid4().hex[:8]}", f"bench-state-{uuid.uuid4().hex[:8]}"
    publish_s = follow_s = 0.0
    published = 0
    with Publisher(store, keyring, bootstrap, history_topic=history, state_topic=state, chunk_size=step) as publisher:
        follower = Follower(bootstrap, history_topic=history, state_topic=state, checkpoint_dir=tmp / "follower",
                            checkpoint_every=10 * n)
        for end in range(step, n + step, step):
            start = time.perf_counter()
            published += publisher.publish_available(max_events=min(end, n) - publisher.checkpoint)
            publish_s += time.perf_counter() - start
            start = time.perf_counter()
            if not follower.catch_up(timeout=600):
                raise SystemExit("the follower did not catch up")
            follow_s += time.perf_counter() - start
    start = time.perf_counter()
    follower.close()
    checkpoint_s = time.perf_counter() - start
    expected = replayed(store, keyring)
    same = dict(iter(follower.image.acls)) == dict(iter(expected.acls)) and follower.image.next_offset == n
    mirror_in_rounds.same = same  # type: ignore[attr-defined]
    return published, follow_s, publish_s, checkpoint_s


def bootstrap_rate(tmp: Path, keyring: Keyring, bootstrap: str, n: int) -> tuple[int, float, bool]:
    """Publish a store of n events, then time a follower's bootstrap from the state topic."""
    store = tmp / "small"
    write_log(store, keyring, n)
    history, state = f"boot-history-{uuid.uuid4().hex[:8]}", f"boot-state-{uuid.uuid4().hex[:8]}"
    with Publisher(store, keyring, bootstrap, history_topic=history, state_topic=state) as publisher:
        publisher.publish_available()
    follower = Follower(bootstrap, history_topic=history, state_topic=state, checkpoint_dir=tmp / "boot")
    start = time.perf_counter()
    entities = follower.bootstrap_from_state_topic(timeout=600)
    took = time.perf_counter() - start
    follower.close()
    expected = replayed(store, keyring)
    same = dict(iter(follower.image.acls)) == dict(iter(expected.acls)) and follower.image.next_offset == n
    return entities, took, same


if __name__ == "__main__":
    raise SystemExit(main())
