"""``secmeta spark compact | query | audit``: the Spark jobs and point-in-time SQL over their tables.

Local mode (``local[2]``) unless ``--master`` names a cluster; under
``spark-submit`` the master comes from spark-submit. Every argument, the store
and the tables directory are checked before Spark starts, so bad input fails
fast with a clear message. Registered through the ``secmeta.commands``
entry-point group (pyproject.toml); ``register`` only builds parsers and the
handlers import pyspark's users, so the CLI starts without the spark extra and
explains what to install.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import datetime
from pathlib import Path

from secmeta.core.cli.common import (
    DEFAULT_STORE_ENV,
    add_json_option,
    add_key_option,
    emit,
    iso_time,
    seconds,
    store_path,
)
from secmeta.core.cli.forensics_cmd import (
    EVENT_COLUMNS,
    OPERATION_HELP,
    add_point,
    add_window_options,
    as_of_arg,
    print_grants,
)
from secmeta.core.cli.plugins import Commands
from secmeta.core.cli.progress import Progress
from secmeta.core.cli.security import add_resource_options, one_resource, operation
from secmeta.core.errors import SecmetaError
from secmeta.core.times import format_datetime, parse_time

_SPARK_HELP = ("Local Spark (local[2]) by default; --master URL runs on a cluster. Under spark-submit, "
               "the master comes from spark-submit.")


def register(commands: argparse._SubParsersAction) -> None:
    spark = commands.add_parser(
        "spark", help="Spark jobs: compaction into history/snapshot/interval tables, queries, audit",
        description="Compact a store's log into Delta Lake tables with Spark Structured Streaming, and answer "
                    "point-in-time questions over them. " + _SPARK_HELP)
    sub = spark.add_subparsers(dest="spark_command", required=True, metavar="COMMAND")

    compact = sub.add_parser(
        "compact", help="stream the log into the tables directory (until stopped, or --once)",
        description="Maintain under --tables Delta Lake tables (any Delta reader can open them): a history "
                    "table of every event (by event date), snapshot tables of ACLs, SCRAM users and tokens, "
                    "and validity-interval tables; each micro-batch is one Delta commit per table, and the "
                    "history table's names the version of every table. Resumes from its checkpoint; never "
                    "writes secrets.")
    _store_and_tables(compact)
    compact.add_argument("--once", action="store_true", help="compact what is logged now, then exit")
    compact.add_argument("--max-events-per-trigger", type=_positive, metavar="N",
                         help="at most N events per micro-batch (default: all available)")
    compact.add_argument("--retain-versions", type=_positive, default=10, metavar="N",
                         help="versions kept queryable; Delta vacuum deletes the files only older ones read "
                              "(default: 10)")
    compact.add_argument("--retain-hours", type=_hours, default=1, metavar="H",
                         help="vacuum deletes a file only H hours after it was removed, so readers of an older "
                              "version keep theirs (default: 1)")
    compact.add_argument("--checkpoint", metavar="DIR", type=path_arg,
                         help="streaming checkpoint (default: TABLES/_checkpoint)")
    compact.add_argument("--trigger-seconds", type=seconds, default=5.0, metavar="S",
                         help="how often a running job looks for new events (default: 5)")
    compact.set_defaults(func=compact_cmd)

    versions = sub.add_parser(
        "versions", help="the tables' versions: per log offset, each table's Delta version (newest first)",
        description="List the versions of a tables directory, like Delta's DESCRIBE HISTORY: per compacted log "
                    "offset N (the state after the first N events), the Delta version of every table that "
                    "makes it (read each table at its version for one consistent state), the events it added, "
                    "when it was committed and whether it is kept (queryable with its snapshot tables). "
                    "No Spark is started.")
    _tables_dir(versions)
    versions.add_argument("--limit", type=_positive, default=100, metavar="N", help="list at most N (default 100)")
    add_json_option(versions)
    versions.set_defaults(func=versions_cmd)

    audit = sub.add_parser(
        "audit", help="stream the log through the audit rules into an alerts table (until stopped, or --once)",
        description="Evaluate the Kafka audit job's alert rules (the defaults, or --rules FILE in TOML or "
                    "JSON) over the store's log, writing alerts as Parquet files under --alerts; resumes from its "
                    "checkpoint with the same results as one uninterrupted run.")
    _store(audit)
    audit.add_argument("--alerts", metavar="DIR", type=path_arg, required=True, help="the alerts table directory")
    audit.add_argument("--rules", metavar="FILE", type=path_arg,
                       help="rules file (TOML or JSON); default: the built-in rules")
    audit.add_argument("--once", action="store_true", help="audit what is logged now, then exit")
    audit.add_argument("--max-events-per-trigger", type=_positive, metavar="N",
                       help="at most N events per micro-batch (default: all available)")
    audit.add_argument("--checkpoint", metavar="DIR", type=path_arg,
                       help="streaming checkpoint (default: ALERTS/_checkpoint)")
    _master(audit)
    audit.set_defaults(func=audit_cmd)

    query = sub.add_parser(
        "query", help="point-in-time questions over the tables (ACLs at T, who could, history, tokens, SQL)",
        description="Answer forensic questions from a tables directory written by `secmeta spark compact`; "
                    "answers equal the embedded store's as_of / who-could / history. By default Polars reads "
                    "the Delta tables in this process (no JVM); --engine spark asks Spark. Times are ISO-8601 "
                    "with a zone, or epoch ms; --at-offset N means after the first N events.")
    qsub = query.add_subparsers(dest="query_command", required=True, metavar="QUERY")

    acls = qsub.add_parser("acls", help="the ACLs in force at a point, and who created each",
                           description="The ACLs in force at a time or offset (default: the tables' version).")
    _tables(acls)
    add_point(acls)
    acls.set_defaults(func=query_acls_cmd)

    who = qsub.add_parser("who-could", help="every principal allowed an operation on a resource at a point",
                          description="Who could do OPERATION on the resource at a point, from which hosts, "
                                      "and the ACLs or super-user rule that allowed it (the authorizer's rules).")
    _tables(who)
    who.add_argument("--operation", required=True, metavar="OP", help=OPERATION_HELP)
    add_resource_options(who, many=False)
    add_point(who)
    who.set_defaults(func=query_who_could_cmd)

    hist = qsub.add_parser("history", help="the change history of a principal or a SCRAM user",
                           description="Logged changes made by or about a principal (actor or subject) or to a "
                                       "user's credentials, redacted, in offset order.")
    _tables(hist)
    hist.add_argument("--principal", metavar="PRINCIPAL", help="changes made by, or about, this principal")
    hist.add_argument("--user", metavar="NAME", help="changes to this SCRAM user's credentials")
    add_window_options(hist)
    hist.add_argument("--limit", type=_positive, default=1000, metavar="N", help="print at most N")
    hist.set_defaults(func=query_history_cmd)

    tokens = qsub.add_parser("tokens", help="delegation tokens alive at some moment between two times",
                             description="Tokens issued, not yet removed and not past their expiry at some "
                                         "moment in [--from, --to].")
    _tables(tokens)
    tokens.add_argument("--from", dest="t1", required=True, metavar="TIME", help="the window's start")
    tokens.add_argument("--to", dest="t2", metavar="TIME", help="the window's end (default: --from)")
    tokens.set_defaults(func=query_tokens_cmd)

    sql = qsub.add_parser("sql", help="any SQL over the tables' views (secmeta_history, secmeta_acl_intervals, ...)",
                          description="Run SQL over temporary views of one version: secmeta_history, secmeta_acls, "
                                      "secmeta_scram_users, secmeta_tokens, secmeta_acl_intervals, "
                                      "secmeta_credential_intervals, secmeta_token_intervals.")
    _tables(sql)
    sql.add_argument("statement", metavar="SQL", help="the query, e.g. 'SELECT * FROM secmeta_acls'")
    sql.add_argument("--limit", type=_positive, default=1000, metavar="N", help="print at most N rows")
    sql.set_defaults(func=query_sql_cmd)


COMMANDS = Commands(register, extra="spark")


def _hours(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of hours: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more hours, not {value}")
    return value


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


def path_arg(text: str) -> str:
    """A path option's value made absolute against the working directory, once, when the options are read:
    every later use (a file URI for Spark, a Delta table, a child process) then means the same file."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    return str(Path(text).expanduser().absolute())


def _store(parser: argparse.ArgumentParser) -> None:
    """--store DIR (default $SECMETA_STORE, as every command's) and --key-file."""
    parser.add_argument("--store", metavar="DIR", type=path_arg, default=os.environ.get(DEFAULT_STORE_ENV) or None,
                        help=f"the store directory to read (default: ${DEFAULT_STORE_ENV})")
    add_key_option(parser)


def _tables_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tables", metavar="DIR", type=path_arg, required=True, help="the tables directory")


def _store_and_tables(parser: argparse.ArgumentParser) -> None:
    _store(parser)
    _tables_dir(parser)
    _master(parser)


ENGINES = ("polars", "spark")


def _tables(parser: argparse.ArgumentParser) -> None:
    _tables_dir(parser)
    add_json_option(parser)
    parser.add_argument("--engine", choices=ENGINES, default=ENGINES[0],
                        help="polars (default): read the Delta tables in this process, no JVM, about a second; "
                             "spark: start Spark (for tables too large for one machine); the answers are equal")
    _master(parser)


def _session(args: argparse.Namespace, progress: Progress):
    """The Spark session, saying so on stderr when this command starts Spark (which takes a while)."""
    from pyspark.sql import SparkSession

    from secmeta.consumers.spark import register
    from secmeta.consumers.spark.jvm_stderr import startup_lines_dropped
    from secmeta.consumers.spark.session import DEFAULT_MASTER, session

    if SparkSession.getActiveSession() is None:
        progress.note(f"starting Spark ({args.master or DEFAULT_MASTER})...")
    with startup_lines_dropped():
        spark = session(app=f"secmeta-{args.spark_command}", master=args.master)
    register(spark)
    return spark


def compact_cmd(args: argparse.Namespace) -> int:
    from secmeta.consumers.spark.compaction import compaction_stream, open_tables, wait

    store = store_path(args)
    open_tables(store, args.tables, args.key_file)  # checks store, keyring and tables before Spark starts
    shown = Progress("spark compact", unit="events")
    spark = _session(args, shown)
    started = time.monotonic()

    def progress(version) -> None:
        when = "" if version.timestamp_ms is None else f", last event {iso_time(version.timestamp_ms)}"
        shown.note(f"log offset {version.offset}: +{version.events} events (history Delta version "
                   f"{version.delta_version}{when}), {time.monotonic() - started:.1f} s")

    query = compaction_stream(
        spark, store, args.tables, key_file=args.key_file, checkpoint=args.checkpoint, once=args.once,
        max_events_per_trigger=args.max_events_per_trigger, retain_versions=args.retain_versions,
        retain_hours=args.retain_hours, trigger_seconds=args.trigger_seconds, progress=progress)
    if not args.once:
        shown.note(f"compacting {store} into {args.tables} (Ctrl-C to stop)")
    try:
        wait(query)
    except KeyboardInterrupt:
        query.stop()
        raise
    from secmeta.consumers.spark.tables import Tables

    current = Tables(args.tables).current()
    print(f"tables in {args.tables} at {delta_versions_line(current)} ({len(current.kept)} versions kept)")
    return 0


def delta_versions_line(version) -> str:
    """A version as one line naming its log offset and every table's Delta version."""
    return (f"log offset {version.offset}: "
            + ", ".join(f"{name} Delta version {v}" for name, v in version.tables.items()))


def versions_cmd(args: argparse.Namespace) -> int:
    from secmeta.consumers.spark.tables import Tables

    tables = Tables(args.tables)
    kept = {k.delta_version for k in tables.check().kept}
    versions = list(reversed(tables.versions()))[:args.limit]
    if args.json:
        emit(({"log_offset": v.offset, "first_offset": v.first_offset, "events": v.events,
               "delta_versions": dict(v.tables), "committed": iso_time(v.committed_ms), "committed_ms": v.committed_ms,
               "last_event": None if v.timestamp_ms is None else iso_time(v.timestamp_ms),
               "last_event_ms": v.timestamp_ms, "kept": v.delta_version in kept} for v in versions), [], json=True)
        return 0
    for v in versions:
        last = "" if v.timestamp_ms is None else f", last event {iso_time(v.timestamp_ms)}"
        print(f"{delta_versions_line(v)} (+{v.events} events from log offset {v.first_offset}{last}; committed "
              f"{iso_time(v.committed_ms)}; {'kept' if v.delta_version in kept else 'not kept'})")
    return 0


def audit_cmd(args: argparse.Namespace) -> int:
    from pyspark.errors import StreamingQueryException

    from secmeta.consumers.audit_rules import load_rules
    from secmeta.consumers.spark.audit import read_alerts, run_audit
    from secmeta.consumers.spark.log_source import check_log

    rules = load_rules(args.rules)  # a bad rules file, store or keyring fails before Spark starts
    check_log(store_path(args), args.key_file)
    shown = Progress("spark audit", unit="events")
    spark = _session(args, shown)
    try:
        query = run_audit(spark, store_path(args), args.key_file, args.alerts, rules=rules, once=args.once,
                          checkpoint=args.checkpoint, max_events_per_trigger=args.max_events_per_trigger)
        if not args.once:
            shown.note(f"auditing {args.store} into {args.alerts} (Ctrl-C to stop)")
            try:
                query.awaitTermination()
            except KeyboardInterrupt:
                query.stop()
                raise
    except StreamingQueryException as exc:
        raise SecmetaError(f"the audit stream failed (alerts already written stay): {str(exc).splitlines()[0]}") \
            from None
    alerts = read_alerts(spark, args.alerts)
    counts = {r.rule: r["count"] for r in alerts.groupBy("rule").count().collect()}
    events = sum(p.get("numInputRows", 0) for p in query.recentProgress)
    print(f"audited {events} events; the alerts table {args.alerts} holds {sum(counts.values())} alerts")
    for rule, n in sorted(counts.items()):
        print(f"  {rule}: {n}")
    return 0


# -- queries: arguments are checked, and the tables' version read, before Spark starts ----------


def _engine(args: argparse.Namespace):
    """The reader of the tables' current version and the queries module of ``--engine``."""
    if args.engine == "spark":
        from secmeta.consumers.spark.tables import Tables

        Tables(args.tables).check()  # not a tables directory / newer format or protocol: fail before Spark starts
        from secmeta.consumers.spark import queries
        from secmeta.consumers.spark.table_reader import TableReader

        return TableReader(_session(args, Progress("spark query")), args.tables), queries
    from secmeta.consumers.tables_query import queries as embedded
    from secmeta.consumers.tables_query.reader import ArrowReader

    return ArrowReader(args.tables), embedded


def query_acls_cmd(args: argparse.Namespace) -> int:
    at = as_of_arg(args)
    reader, queries = _engine(args)
    found = queries.acls_at(reader, at)
    emit((a.to_dict() if args.json else
          {**a.to_dict(), "resource": f"{a.binding.restype.name}:{a.binding.name}",
           "created": f"{a.created_by} @{a.created_offset} {iso_time(a.created_ms)}"} for a in found),
         {"acl_id": "ACL ID", "resource": "RESOURCE", "pattern_type": "PATTERN", "principal": "PRINCIPAL",
          "host": "HOST", "operation": "OPERATION", "permission_type": "PERMISSION", "created": "CREATED BY"},
         json=args.json)
    if not args.json:
        print(f"{len(found)} ACLs in force at {at or 'the tables version'}")
    return 0


def query_who_could_cmd(args: argparse.Namespace) -> int:
    rtype, name = one_resource(args)
    op = operation(args.operation)
    at = as_of_arg(args)
    reader, queries = _engine(args)
    grants = queries.who_could_at(reader, op, rtype, name, at)
    print_grants(grants, op, rtype, name, as_json=args.json)
    return 0


def query_history_cmd(args: argparse.Namespace) -> int:
    from secmeta.events.records import Operator

    start = None if args.start is None else parse_time(args.start)
    end = None if args.end is None else parse_time(args.end)
    reader, queries = _engine(args)
    rows = queries.change_history(reader, principal=args.principal, user=args.user,
                                  start=None if start is None else {"timestamp_ms": start},
                                  end=None if end is None else {"timestamp_ms": end})
    if isinstance(rows, list):
        found = rows[:args.limit + 1]
    else:  # a Spark DataFrame
        found = [r.asDict() for r in rows.limit(args.limit + 1).collect()]
    shown = found[:args.limit]
    envelope = ("offset", "timestamp", "timestamp_ms", "actor_principal", "actor_host", "request_id",
                "actor_asserted", "operator_user", "operator_host", "operator_pid", "operator_program",
                "event_type", "entity_key", "event_date")
    if args.json:
        emit(({k: v for k, v in r.items() if v is not None and k != "event_date"} for r in shown), [], json=True)
        return 0
    emit(({**r, "time": iso_time(r["timestamp_ms"]),
           "asserted": "authenticated" if r["actor_asserted"] is False else "asserted",
           "operator": str(Operator(r["operator_user"] or "", r["operator_host"] or "", r["operator_pid"] or 0,
                                    r["operator_program"] or "")),
           "details": " ".join(f"{k}={_cell(v)}" for k, v in r.items() if k not in envelope and v is not None)}
          for r in shown), EVENT_COLUMNS)
    print(f"{len(shown)} changes" + (" (more not shown: raise --limit)" if len(found) > args.limit else ""))
    return 0


def query_tokens_cmd(args: argparse.Namespace) -> int:
    t1 = parse_time(args.t1)
    t2 = t1 if args.t2 is None else parse_time(args.t2)
    reader, queries = _engine(args)
    alive = queries.tokens_alive(reader, t1, t2)
    emit((t.to_dict() if args.json else
          {**t.to_dict(), "issued": iso_time(t.issue_timestamp_ms), "expires": iso_time(t.expiry_timestamp_ms),
           "alive_from": iso_time(t.alive_from_ms)} for t in alive),
         {"token_id": "TOKEN ID", "owner": "OWNER", "requester": "REQUESTER", "renewers": "RENEWERS",
          "issued": "ISSUED", "expires": "EXPIRES", "alive_from": "ALIVE FROM"}, json=args.json)
    if args.json:
        return 0
    print(f"{len(alive)} tokens alive between {iso_time(t1)} and {iso_time(t2)}")
    return 0


def query_sql_cmd(args: argparse.Namespace) -> int:
    reader, _ = _engine(args)
    if args.engine == "spark":
        reader.register_views()
        df = reader.spark.sql(args.statement)
        columns, rows = df.columns, [r.asDict(recursive=True) for r in df.limit(args.limit + 1).collect()]
    else:
        from secmeta.consumers.tables_query.sql import run_sql

        columns, rows = run_sql(reader, args.statement, args.limit + 1)
    _print_rows(columns, rows, args)
    return 0


def _print_rows(columns: list[str], rows: list[dict], args: argparse.Namespace) -> None:
    shown = rows[:args.limit]
    emit((r if args.json else _shown(r) for r in shown), {c: c for c in columns}, json=args.json)
    if args.json:
        return
    more = " (more not shown: raise --limit)" if len(rows) > args.limit else ""
    print(f"{len(shown)} rows{more}")


def _cell(value) -> str:
    if isinstance(value, list):
        return ",".join(map(_cell, value))
    if isinstance(value, datetime):
        return format_datetime(value)
    return "" if value is None else str(value)


def _shown(row: dict) -> dict:
    """A row for a table: its times as ISO-8601 UTC with Z (as JSON shows them)."""
    return {k: _cell(v) if isinstance(v, datetime) else v for k, v in row.items()}
