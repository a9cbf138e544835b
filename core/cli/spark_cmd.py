"""``secmeta spark compact | query | audit``: the Spark jobs and point-in-time SQL over their tables.

Local mode (``local[2]``) unless ``--master`` names a cluster; under
``spark-submit`` the master comes from spark-submit. Every argument, the store
and the tables directory are checked before Spark starts, so bad input fails
fast with a clear message. The ``consumers`` package is imported inside the
handlers so ``core`` never depends on it.
"""

from __future__ import annotations

import argparse
import sys
import time

from core.cli.common import add_key_option, iso_time, store_path
from core.errors import SecmetaError

_SPARK_HELP = ("Local Spark (local[2]) by default; --master URL runs on a cluster. Under spark-submit, "
               "the master comes from spark-submit.")


def register(commands: argparse._SubParsersAction) -> None:
    spark = commands.add_parser(
        "spark", help="Spark jobs: compaction into history/snapshot/interval tables, queries, audit",
        description="Compact a store's log into Parquet tables with Spark Structured Streaming, and answer "
                    "point-in-time questions over them. " + _SPARK_HELP)
    sub = spark.add_subparsers(dest="spark_command", required=True, metavar="COMMAND")

    compact = sub.add_parser(
        "compact", help="stream the log into the tables directory (until stopped, or --once)",
        description="Maintain under --tables: a history table of every event (Parquet by event date), "
                    "snapshot tables of ACLs, SCRAM users and tokens versioned by log offset (published "
                    "atomically through a manifest), and validity-interval tables. Resumes from its "
                    "checkpoint; never writes secrets.")
    _store_and_tables(compact)
    compact.add_argument("--once", action="store_true", help="compact what is logged now, then exit")
    compact.add_argument("--max-events-per-trigger", type=_positive, metavar="N",
                         help="at most N events per micro-batch (default: all available)")
    compact.add_argument("--retain-versions", type=_positive, default=10, metavar="N",
                         help="snapshot versions kept queryable (default: 10)")
    compact.add_argument("--checkpoint", metavar="DIR", help="streaming checkpoint (default: TABLES/_checkpoint)")
    compact.add_argument("--trigger-seconds", type=float, default=5.0, metavar="S",
                         help="how often a running job looks for new events (default: 5)")
    compact.set_defaults(func=compact_cmd)

    audit = sub.add_parser(
        "audit", help="stream the log through the audit rules into an alerts table (until stopped, or --once)",
        description="Evaluate the Kafka audit job's alert rules (the defaults, or --rules FILE in TOML or "
                    "JSON) over the store's log, writing alerts as Parquet under --alerts; resumes from its "
                    "checkpoint with the same results as one uninterrupted run.")
    audit.add_argument("--store", metavar="DIR", required=True, help="the store directory to read")
    add_key_option(audit)
    audit.add_argument("--alerts", metavar="DIR", required=True, help="the alerts table directory")
    audit.add_argument("--rules", metavar="FILE", help="rules file (TOML or JSON); default: the built-in rules")
    audit.add_argument("--once", action="store_true", help="audit what is logged now, then exit")
    audit.add_argument("--max-events-per-trigger", type=_positive, metavar="N",
                       help="at most N events per micro-batch (default: all available)")
    audit.add_argument("--checkpoint", metavar="DIR", help="streaming checkpoint (default: ALERTS/_checkpoint)")
    _master(audit)
    audit.set_defaults(func=audit_cmd)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _master(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", metavar="URL", help="Spark master (default: local[2], or spark-submit's)")


def _store_and_tables(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="DIR", required=True, help="the store directory to read")
    add_key_option(parser)
    parser.add_argument("--tables", metavar="DIR", required=True, help="the tables directory")
    _master(parser)


def _session(args: argparse.Namespace):
    from consumers.spark import register
    from consumers.spark.session import session

    spark = session(app=f"secmeta-{args.spark_command}", master=args.master)
    register(spark)
    return spark


def compact_cmd(args: argparse.Namespace) -> int:
    from consumers.spark.compaction import compaction_stream, open_tables

    store = store_path(args)
    open_tables(store, args.tables)  # checks the store and the tables directory before Spark starts
    spark = _session(args)
    started = time.monotonic()

    def progress(version) -> None:
        when = "" if version.timestamp_ms is None else f", last event {iso_time(version.timestamp_ms)}"
        print(f"version {version.offset}: +{version.events} events (commit {version.commit}{when}), "
              f"{time.monotonic() - started:.1f} s", flush=True)

    query = compaction_stream(
        spark, store, args.tables, key_file=args.key_file, checkpoint=args.checkpoint, once=args.once,
        max_events_per_trigger=args.max_events_per_trigger, retain_versions=args.retain_versions,
        trigger_seconds=args.trigger_seconds, progress=progress)
    if not args.once:
        print(f"compacting {store} into {args.tables} (Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
        raise
    if query.exception() is not None:
        raise SecmetaError(f"the compaction stream failed; the tables keep their last version: "
                           f"{query.exception()}")
    from consumers.spark.tables import Tables

    manifest = Tables(args.tables).manifest()
    print(f"tables at version {manifest.offset} ({manifest.commits} commits, "
          f"{len(manifest.versions)} versions kept) in {args.tables}")
    return 0



def audit_cmd(args: argparse.Namespace) -> int:
    from consumers.kafka.audit_rules import load_rules
    from consumers.spark.audit import read_alerts, run_audit

    rules = load_rules(args.rules)  # a bad rules file fails before Spark starts
    spark = _session(args)
    query = run_audit(spark, store_path(args), args.key_file, args.alerts, rules=rules, once=args.once,
                      checkpoint=args.checkpoint, max_events_per_trigger=args.max_events_per_trigger)
    if not args.once:
        print(f"auditing {args.store} into {args.alerts} (Ctrl-C to stop)", file=sys.stderr, flush=True)
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
            raise
    alerts = read_alerts(spark, args.alerts)
    counts = {r.rule: r["count"] for r in alerts.groupBy("rule").count().collect()}
    events = sum(p.get("numInputRows", 0) for p in query.recentProgress)
    print(f"audited {events} events; the alerts table {args.alerts} holds {sum(counts.values())} alerts")
    for rule, n in sorted(counts.items()):
        print(f"  {rule}: {n}")
    return 0
