"""``secmeta kafka publish | follow`` and ``secmeta audit run``, added to the CLI by the kafka extra.

Registered through the ``secmeta.commands`` entry-point group (pyproject.toml);
``register`` only builds parsers and the handlers import confluent-kafka's
users, so the CLI starts without the extra and explains what to install.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import signal
import sys
import threading
import time

from secmeta.core.cli.common import add_key_option, add_store_options, keyring, seconds, store_path
from secmeta.core.cli.plugins import Commands
from secmeta.core.cli.progress import Progress

DEFAULT_TIMEOUT = 30.0


def register(commands: argparse._SubParsersAction) -> None:
    kafka = commands.add_parser("kafka", help="mirror the log to Kafka topics and follow them",
                                description="Mirror a store's log to Kafka and follow it into a standby image.")
    sub = kafka.add_subparsers(dest="kafka_command", required=True, metavar="COMMAND")

    pub = sub.add_parser("publish", help="tail the store's log into the history and state topics (until stopped)",
                         description="Produce every logged event (idempotent, acks=all) to the history topic and the "
                                     "compacted state topic; resumes from a durable checkpoint with no gap; shows "
                                     "progress and lag; retries while the broker is unreachable. The checkpoint "
                                     "is bound to the cluster and topic ids; a log behind or diverging from what "
                                     "the history topic holds is refused, naming both offsets.")
    add_store_options(pub)
    _client_options(pub)
    pub.add_argument("--once", action="store_true", help="publish what is logged now, then exit")
    pub.add_argument("--from-beginning", action="store_true",
                     help="publish the whole log, ignoring the checkpoint: needed when the topics are not the ones "
                          "the checkpoint was written for (another cluster, topics deleted and created again)")
    _timeout(pub, "with --once: give up after this many seconds, exit 1 naming what is left unpublished")
    pub.set_defaults(func=publish_cmd)

    fol = sub.add_parser("follow", help="rebuild the store's image from the history topic (until stopped)",
                         description="Consume the history topic into an image identical to the store's, "
                                     "checkpointing so a restart resumes where it stopped; a checkpoint ahead "
                                     "of its topic, or made on another cluster or topic, is refused. With a "
                                     "keyring (--key-file or $SECMETA_KEY_FILE), it also keeps a local log of "
                                     "the events, so the read commands take --store DIR (acls --list, configs "
                                     "--describe, history, who-could, --as-of) beside the running follower.")
    _client_options(fol)
    fol.add_argument("--checkpoint-dir", required=True, metavar="DIR",
                     help="where the follower keeps its checkpoint, dead letters and (with a keyring) its local log")
    add_key_option(fol)
    fol.add_argument("--bootstrap-from-state", action="store_true", help="start from the compacted state topic")
    fol.add_argument("--once", action="store_true", help="catch up to the topic's end, print a summary, exit")
    _timeout(fol, "give up reading the state topic, or catching up with --once, after this many seconds "
                  "(exit 1 naming why)")
    fol.set_defaults(func=follow_cmd)

    audit = commands.add_parser("audit", help="stream audit records and alerts from the history topic",
                                description="Streaming audit of security changes with alert rules.")
    asub = audit.add_subparsers(dest="audit_command", required=True, metavar="COMMAND")
    run = asub.add_parser("run", help="run the audit job (until stopped)",
                          description="Write one redacted JSON line per event and alerts (file and topic); "
                                      "offsets are committed only after both are durable.")
    _client_options(run, state_topic=False)
    run.add_argument("--rules", metavar="FILE", help="rules file (TOML or JSON); default: the built-in rules")
    run.add_argument("--alerts-topic", default="secmeta.alerts", metavar="TOPIC", help="where alerts are produced")
    run.add_argument("--audit-file", default="secmeta-audit.jsonl", metavar="PATH",
                     help="the audit trail, one redacted JSON line per event")
    run.add_argument("--alerts-file", default="secmeta-alerts.jsonl", metavar="PATH",
                     help="alerts, one JSON line each")
    run.add_argument("--group", default="secmeta-audit", metavar="GROUP_ID",
                     help="the consumer group whose committed offsets resume the job")
    run.add_argument("--once", action="store_true", help="process what is on the topic now, then exit")
    _timeout(run, "with --once: give up reaching Kafka, and stop reading the history topic, after this many "
                  "seconds; each Kafka request waits at most this long")
    run.set_defaults(func=audit_cmd)


COMMANDS = Commands(register, extra="kafka")


def _client_options(parser: argparse.ArgumentParser, *, state_topic: bool = True) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                        help="the Kafka cluster to connect to (comma-separated list)")
    parser.add_argument("--history-topic", default="secmeta.history", metavar="TOPIC",
                        help="every logged event, in log order")
    if state_topic:
        parser.add_argument("--state-topic", default="secmeta.state", metavar="TOPIC",
                            help="the compacted topic: the latest event per entity")
    parser.add_argument("--command-config", metavar="FILE", help="extra client settings (key=value lines, as Kafka's tools)")


def _timeout(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS", help=what)


@contextlib.contextmanager
def _settings_named(args: argparse.Namespace):
    """librdkafka refusing a setting when a client is made is a usage error naming the file and the key."""
    from confluent_kafka import KafkaError, KafkaException

    from secmeta.consumers.kafka.client_config import ClientConfigError

    try:
        yield
    except KafkaException as exc:
        error = exc.args[0]
        if not isinstance(error, KafkaError) or error.code() != KafkaError._INVALID_ARG:
            raise
        where = args.command_config or "the client settings"
        reason = re.sub(r'Invalid value "[^"]*"', "Invalid value", error.str())  # never a value: it may be a secret
        raise ClientConfigError(f"{where}: librdkafka refuses it: {reason}") from None


@contextlib.contextmanager
def _quiet_clients():
    """librdkafka's log as one line per problem (ClientProblems); our own warnings as one line each."""
    from secmeta.consumers.kafka.client_log import ClientProblems

    ours = logging.getLogger("secmeta")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("secmeta: %(message)s"))
    handler.setLevel(logging.WARNING)
    ours.addHandler(handler)
    try:
        with ClientProblems() as problems:
            yield problems
    finally:
        ours.removeHandler(handler)


def _client_config(args: argparse.Namespace) -> dict:
    from secmeta.consumers.kafka.client_config import read_client_config

    return read_client_config(args.command_config) if args.command_config else {}


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def publish_cmd(args: argparse.Namespace) -> int:
    from secmeta.consumers.kafka.publisher import Publisher, PublisherError

    with _settings_named(args), _quiet_clients() as problems, Progress("publish", unit="events") as progress:
        trouble = []  # the latest reason the publisher gave for not getting on

        def report(status) -> None:
            if status.stage in ("broker unreachable", "delivery failed"):
                trouble[:] = [status.message]
            progress.update(status.checkpoint, status.log_end)

        publisher = Publisher(store_path(args), keyring(args), args.bootstrap_server,
                              history_topic=args.history_topic, state_topic=args.state_topic,
                              client_config=_client_config(args), progress=report,
                              from_beginning=args.from_beginning)
        try:
            if not args.once:
                publisher.run(_stop_on_signals())
                return 0
            start, end = publisher.checkpoint, publisher.log_end
            count = publisher.publish_available(timeout=args.timeout)
        finally:
            publisher.close(timeout=1.0 if publisher.checkpoint < publisher.log_end else 5.0)
        if publisher.checkpoint < end or not publisher.bound:  # the client's log is in now that close served it
            why = problems.reason() or (trouble[0] if trouble else "the broker did not confirm them")
            raise PublisherError(
                f"published {count} of {end - start} events to {args.history_topic} and {args.state_topic} "
                f"in {args.timeout:g} s, then gave up: {why}. Nothing is lost: the next run resumes at "
                f"log offset {publisher.checkpoint} (raise --timeout to wait longer)")
    print(f"published {count} events to {args.history_topic} and {args.state_topic}")
    return 0


def follow_cmd(args: argparse.Namespace) -> int:
    from secmeta.consumers.kafka.follower import Follower, FollowerError

    with _settings_named(args), _quiet_clients() as problems, Progress("follow", unit="messages") as progress:
        deadline = time.monotonic() + args.timeout
        follower = Follower(args.bootstrap_server, history_topic=args.history_topic, state_topic=args.state_topic,
                            checkpoint_dir=args.checkpoint_dir, client_config=_client_config(args),
                            keyring=_follower_keyring(args))
        try:
            if args.bootstrap_from_state:
                loaded = follower.bootstrap_from_state_topic(timeout=args.timeout)
                progress.note(f"{loaded} entities from {args.state_topic} up to log offset "
                              f"{follower.next_offset} (the next to apply)")
            caught_up = not args.once or follower.catch_up(timeout=max(0.1, deadline - time.monotonic()),
                                                            progress=progress.update)
            if not args.once:
                stop = _stop_on_signals()
                while not stop.is_set():
                    if follower.poll(1.0):
                        progress.update(follower.next_offset)
        finally:
            follower.close()
        if not caught_up:  # the client's log is in now that close has served it
            why = problems.reason() or "the history topic did not reach its end"
            raise FollowerError(
                f"could not catch up with {args.history_topic} in {args.timeout:g} s: {why}. The image "
                f"stays at log offset {follower.next_offset} (the next to apply) (raise --timeout to wait longer)")
    image = follower.image
    # The next offset, as the store's end_offset and `secmeta log head`: the image holds the offsets below it.
    print(f"follower at log offset {follower.next_offset} (the next to apply): {len(image.scram)} users, "
          f"{len(image.acls)} ACLs, {len(image.tokens)} tokens; skipped {follower.skipped} messages that were "
          f"not ours" + (f"; local log in {args.checkpoint_dir} (read it with --store)"
                         if follower.replica is not None else ""))
    return 0


def _follower_keyring(args: argparse.Namespace):
    """The keyring of the follower's local log: --key-file or the environment's; None (no local log) without,
    or with --bootstrap-from-state (the state topic holds no history to log)."""
    from secmeta.events.keyring import Keyring

    return keyring(args) if Keyring.given(args.key_file) and not args.bootstrap_from_state else None


def audit_cmd(args: argparse.Namespace) -> int:
    from secmeta.consumers.kafka.audit import AuditJob

    with _settings_named(args), _quiet_clients():
        deadline = time.monotonic() + args.timeout
        job = AuditJob(args.bootstrap_server, history_topic=args.history_topic, alerts_topic=args.alerts_topic,
                       audit_file=args.audit_file, alerts_file=args.alerts_file, rules=args.rules,
                       group_id=args.group, client_config=_client_config(args), timeout=args.timeout)
        try:
            if not args.once:
                job.run(_stop_on_signals())
                return 0
            count = job.process_available(timeout=max(0.1, deadline - time.monotonic()))
        finally:
            job.close()
    print(f"audited {count} events; audit lines in {args.audit_file}, alerts in {args.alerts_file}")
    return 0
