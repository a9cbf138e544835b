"""The audit job on Spark: the Kafka audit job's alert rules over a store's log, streamed into an alerts table.

    query = run_audit(spark, STORE, KEYS, ALERTS, rules="rules.toml", once=True)
    spark.read.parquet(ALERTS)            # or read_alerts(spark, ALERTS): also when still empty

The rules are ``secmeta.consumers.audit_rules.AuditRules``, the very objects the
Kafka audit job evaluates (``load_rules``: the defaults, or a TOML/JSON rules
file). They work on ``Envelope`` values; the stream rebuilds each event's
envelope from its row (``secmeta.consumers.spark.rows.envelope_from_row``, the inverse
of ``event_row``). Rows never carry a secret, so a rebuilt
``ScramCredentialUpserted`` holds the empty stand-in ``NO_SECRET``: no rule reads
a secret, and the tests check that the alerts equal ``AuditRules.evaluate`` over
the logged envelopes themselves.

Each micro-batch is one Spark job over the log:

* the stateless rules run in the tasks (``mapInArrow``), which return only the
  rows that raised an alert (one per alert) and the rows the stateful rules
  watch (for ``mass_deletion``: the AclDeleted rows), never the whole batch;
* the driver collects that small result, runs the stateful rules over the
  watched rows in offset order, starting from the state the previous batch
  left, and writes the batch's alerts;
* then it saves the stateful rules' state after this batch (exactly, not
  replayed: ``MassDeletion.state``) in the checkpoint, as
  ``CHECKPOINT/secmeta_audit_state/state-<batch id>.json`` (written atomically;
  the two newest are kept).

Spark re-runs the last batch id after a crash, with the same offsets; that run
starts again from the state saved *before* that batch id and overwrites the
batch's file, so a restart from the checkpoint gives the same alerts table as
one uninterrupted run, and a replayed batch id never duplicates an alert.

The alerts table (``ALERTS_SCHEMA``): ``ALERTS/batch-<batch id, 12 digits>.parquet``,
one file per micro-batch that raised alerts (none for one that raised none),
written to a hidden temporary name, fsync'd and renamed over the final name;
a reader (``spark.read.parquet(ALERTS)``) never sees a half-written file, since
Spark skips names starting with ``.`` or ``_``. Rows are ordered by (offset,
rule order). Beside them, ``ALERTS/_secmeta_audit.json`` names the checkpoint
that writes the directory: files are named by batch id, so another checkpoint
(or a deleted and recreated one) would overwrite them; it is refused. The
default checkpoint is ``ALERTS/_checkpoint``.

Limits: the stateful rules' input of one micro-batch (its AclDeleted rows)
and the batch's alerts are collected on the driver; ``maxEventsPerTrigger``
bounds them. One stream at a time per alerts directory (Spark does not lock a
checkpoint across processes). Changing the rules between runs on one
checkpoint changes only the alerts of later batches. Like the Kafka job, the
stream assumes the source delivers the log in offset order across batches.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from secmeta.consumers.audit_rules import Alert, AuditRules, load_rules
from secmeta.consumers.spark.rows import SCHEMA, envelope_from_row, python_rows
from secmeta.core.errors import InvalidValueError, SecmetaError
from secmeta.events.durable import fsync_dir, write_atomically
from secmeta.events.records import AclDeleted

__all__ = [
    "ALERTS_SCHEMA",
    "MARKER",
    "STATE_DIR",
    "AlertsSink",
    "SparkAuditError",
    "audit_stream",
    "read_alerts",
    "run_audit",
]

logger = logging.getLogger("secmeta.spark.audit")

MARKER = "_secmeta_audit.json"
STATE_DIR = "secmeta_audit_state"
DEFAULT_CHECKPOINT = "_checkpoint"
_FORMAT = "secmeta-alerts"
_STATE_FORMAT = "secmeta-audit-state"
_BATCH_FILE = re.compile(r"^batch-(\d+)\.parquet$")
_STATE_FILE = re.compile(r"^state-(\d+)\.json$")

_S, _L = StringType(), LongType()
_ALERT_COLUMNS = [
    ("rule", _S, pa.string()),
    ("severity", _S, pa.string()),
    ("message", _S, pa.string()),
    ("offset", _L, pa.int64()),
    ("timestamp", TimestampType(), pa.timestamp("us", tz="UTC")),
    ("timestamp_ms", _L, pa.int64()),
    ("actor_principal", _S, pa.string()),
    ("actor_host", _S, pa.string()),
    ("request_id", _S, pa.string()),
    ("event_type", _S, pa.string()),
    ("entity_key", _S, pa.string()),
]
#: The alerts table: what an ``Alert`` holds, plus the event's request id and type.
ALERTS_SCHEMA = StructType([StructField(name, dtype, True) for name, dtype, _ in _ALERT_COLUMNS])
_ALERTS_ARROW = pa.schema([pa.field(name, atype) for name, _, atype in _ALERT_COLUMNS])

# What the tasks return: the source row, plus the alert (rule null: a row for the stateful rules).
_EVAL_SCHEMA = StructType(
    [*SCHEMA.fields]
    + [StructField(name, StringType(), True) for name in ("rule", "severity", "message")]
)

#: The event types each stateful rule looks at (a stateful rule not listed here gets every row).
_WATCHED: dict[str, frozenset[str]] = {"mass_deletion": frozenset({AclDeleted.__name__})}


class SparkAuditError(SecmetaError, ValueError):
    """The Spark audit cannot run as asked (a bad source, alerts directory or option)."""


# -- the rules, split ---------------------------------------------------------------------


def _stateful(rule: Any) -> bool:
    return hasattr(rule, "restore_record")


def _split(rules: AuditRules) -> tuple[AuditRules, AuditRules, frozenset[str] | None]:
    """(stateless rules, stateful rules, event types the stateful ones watch; None: all)."""
    stateless = AuditRules([r for r in rules.rules if not _stateful(r)])
    stateful = AuditRules([r for r in rules.rules if _stateful(r)])
    watched: set[str] = set()
    for rule in stateful.rules:
        if not (hasattr(rule, "state") and hasattr(rule, "load_state") and hasattr(rule, "fresh")):
            raise SparkAuditError(
                f"rule {rule.name!r} keeps state the Spark audit cannot save (no state/load_state)"
            )
        if rule.name not in _WATCHED:
            return stateless, stateful, None
        watched |= _WATCHED[rule.name]
    return stateless, stateful, frozenset(watched)


def _evaluator(stateless: AuditRules, watched: frozenset[str] | None, stateful: bool):
    """The ``mapInArrow`` function: alert rows (one per alert) and the rows the stateful rules watch."""

    def evaluate(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            take: list[int] = []
            names: list[str | None] = []
            severities: list[str | None] = []
            messages: list[str | None] = []
            for i, row in enumerate(python_rows(batch)):
                if stateless.rules:
                    for alert in stateless.evaluate(envelope_from_row(row)):
                        take.append(i)
                        names.append(alert.rule)
                        severities.append(alert.severity)
                        messages.append(alert.message)
                if stateful and (watched is None or row["event_type"] in watched):
                    take.append(i)
                    names.append(None)
                    severities.append(None)
                    messages.append(None)
            if not take:
                continue
            picked = batch.take(pa.array(take, pa.int64()))
            extra = [pa.array(v, pa.string()) for v in (names, severities, messages)]
            yield pa.RecordBatch.from_arrays(
                [*picked.columns, *extra], names=[*picked.schema.names, "rule", "severity", "message"]
            )

    return evaluate


# -- the sink -------------------------------------------------------------------------------


_ALERT_FIELDS = tuple(f.name for f in dataclasses.fields(Alert))


def _alert_row(alert: Alert, row: Mapping[str, Any]) -> dict[str, Any]:
    return {**alert.to_dict(), "request_id": row["request_id"], "event_type": row["event_type"]}


def _row_alert(row: Mapping[str, Any]) -> dict[str, Any]:
    """The alert a task returned, in the alerts table's shape (the envelope columns are the alert's)."""
    return {name: row[name] for name in (*_ALERT_FIELDS, "request_id", "event_type")}


def _alerts_table(alerts: list[dict[str, Any]]) -> pa.Table:
    columns = {name: [a[name] for a in alerts] for name in _ALERTS_ARROW.names if name != "timestamp"}
    stamps = pa.array(columns["timestamp_ms"], pa.timestamp("ms", tz="UTC"))
    columns["timestamp"] = stamps.cast(pa.timestamp("us", tz="UTC"))
    return pa.table({name: columns[name] for name in _ALERTS_ARROW.names}, schema=_ALERTS_ARROW)


def _numbered(directory: Path, pattern: re.Pattern) -> dict[int, Path]:
    if not directory.is_dir():
        return {}
    found = {}
    for path in directory.iterdir():
        match = pattern.match(path.name)
        if match:
            found[int(match.group(1))] = path
    return found


class AlertsSink:
    """The ``foreachBatch`` function of the audit stream: evaluates one micro-batch, writes its alerts.

    ``process(batch_df, batch_id)`` is idempotent per batch id (see the module
    docstring); it returns how many alerts the batch raised. ``batch_df`` holds
    at least ``SCHEMA``'s columns.
    """

    def __init__(
        self, alerts_dir: str | os.PathLike, checkpoint_dir: str | os.PathLike, rules: AuditRules
    ) -> None:
        self.alerts_dir = Path(alerts_dir)
        self.state_dir = Path(checkpoint_dir) / STATE_DIR
        self.rules = rules.fresh()
        self.stateless, self.stateful, self.watched = _split(self.rules)
        self._order = {name: i for i, name in enumerate(self.rules.names)}
        self.batches = 0  # batches processed by this sink
        self.alerts = 0  # alerts those batches raised

    def __call__(self, batch_df, batch_id: int) -> None:
        self.process(batch_df, batch_id)

    def process(self, batch_df, batch_id: int) -> int:
        """Evaluate the rules on one micro-batch and write (or replace) its alerts file."""
        evaluator = _evaluator(self.stateless, self.watched, bool(self.stateful.rules))
        selected = batch_df.select(*SCHEMA.fieldNames())
        rows = python_rows(selected.mapInArrow(evaluator, _EVAL_SCHEMA).toArrow())
        alerts = [_row_alert(r) for r in rows if r["rule"] is not None]
        watched = sorted((r for r in rows if r["rule"] is None), key=lambda r: r["offset"])
        rules = None
        if watched:
            rules = self._state_before(batch_id)
            for row in watched:
                alerts.extend(_alert_row(a, row) for a in rules.evaluate(envelope_from_row(row)))
        alerts.sort(key=lambda a: (a["offset"], self._order[a["rule"]]))
        self._write_alerts(batch_id, alerts)
        if rules is not None:
            self._save_state(batch_id, rules)
        self.batches += 1
        self.alerts += len(alerts)
        logger.info("audit batch %d: %d alert(s)", batch_id, len(alerts))
        return len(alerts)

    # -- alerts files ------------------------------------------------------------------

    def batch_file(self, batch_id: int) -> Path:
        return self.alerts_dir / f"batch-{batch_id:012d}.parquet"

    def _write_alerts(self, batch_id: int, alerts: list[dict[str, Any]]) -> None:
        path = self.batch_file(batch_id)
        if not alerts:
            # A replay that raises nothing (the rules changed since the first try) leaves no file.
            if path.exists():
                path.unlink()
                fsync_dir(self.alerts_dir)
            return
        sink = pa.BufferOutputStream()
        pq.write_table(_alerts_table(alerts), sink)
        self.alerts_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(path, sink.getvalue().to_pybytes())

    # -- the stateful rules' state ---------------------------------------------------------

    def _state_before(self, batch_id: int) -> AuditRules:
        """The stateful rules as the batches before ``batch_id`` left them."""
        rules = self.stateful.fresh()
        earlier = {n: p for n, p in _numbered(self.state_dir, _STATE_FILE).items() if n < batch_id}
        if not earlier:
            return rules
        path = earlier[max(earlier)]
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            if saved.get("format") != _STATE_FORMAT or saved.get("version") != 1:
                raise InvalidValueError("not a secmeta audit state file")
            states = saved["rules"]
            for rule in rules.rules:
                rule.load_state(states.get(rule.name, {}))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SparkAuditError(f"cannot read the audit state {path}: {exc}") from None
        return rules

    def _save_state(self, batch_id: int, rules: AuditRules) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        data = {
            "format": _STATE_FORMAT,
            "version": 1,
            "batch_id": batch_id,
            "rules": {rule.name: rule.state() for rule in rules.rules},
        }
        write_atomically(
            self.state_dir / f"state-{batch_id:012d}.json",
            json.dumps(data, separators=(",", ":")).encode(),
        )
        # Keep this batch's state and the one before it (a replay of this batch starts there).
        older = sorted(n for n in _numbered(self.state_dir, _STATE_FILE) if n < batch_id)
        for n in older[:-1]:
            (self.state_dir / f"state-{n:012d}.json").unlink(missing_ok=True)


# -- the stream -------------------------------------------------------------------------------


def _check_source(source_df) -> None:
    if not source_df.isStreaming:
        raise SparkAuditError("the audit source must be a streaming DataFrame (spark.readStream)")
    have = {f.name: f.dataType for f in source_df.schema.fields}
    wrong = [
        f"{f.name} ({f.dataType.simpleString()})"
        for f in SCHEMA.fields
        if have.get(f.name) != f.dataType
    ]
    if wrong:
        raise SparkAuditError(
            "the audit source lacks columns of secmeta.consumers.spark.rows.SCHEMA: " + ", ".join(wrong)
        )


def _checkpoint_name(alerts_dir: Path, checkpoint: Path) -> str:
    """How the marker names the checkpoint: relative when inside the alerts directory."""
    try:
        return str(checkpoint.relative_to(alerts_dir))
    except ValueError:
        return str(checkpoint)


def _prepare_alerts_dir(alerts_dir: Path, checkpoint_dir: Path) -> None:
    """Create the alerts directory or check it belongs to this checkpoint (see the module docstring)."""
    alerts_dir = alerts_dir.absolute()
    checkpoint = checkpoint_dir.absolute()
    if alerts_dir.exists() and not alerts_dir.is_dir():
        raise SparkAuditError(f"alerts directory {alerts_dir} is a file")
    try:
        alerts_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SparkAuditError(f"cannot create the alerts directory {alerts_dir}: {exc}") from None
    marker = alerts_dir / MARKER
    name = _checkpoint_name(alerts_dir, checkpoint)
    if marker.exists():
        try:
            data = json.loads(marker.read_text(encoding="utf-8"))
            recorded = data["checkpoint"] if data.get("format") == _FORMAT else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            recorded = None
        if recorded is None:
            raise SparkAuditError(f"{marker} is not a secmeta alerts marker")
        if recorded != name:
            raise SparkAuditError(
                f"alerts directory {alerts_dir} is written by the stream with checkpoint "
                f"{recorded}, not {name}: use that checkpoint, or another alerts directory"
            )
    else:
        foreign = [p.name for p in alerts_dir.iterdir() if not p.name.startswith((".", "_"))]
        if foreign:
            raise SparkAuditError(
                f"alerts directory {alerts_dir} is not empty and not a secmeta alerts table "
                f"(it holds {', '.join(sorted(foreign)[:3])})"
            )
        write_atomically(
            marker, json.dumps({"format": _FORMAT, "version": 1, "checkpoint": name}).encode()
        )
    offsets = checkpoint / "offsets"
    started = offsets.is_dir() and any(p.name.isdigit() for p in offsets.iterdir())
    if not started and _numbered(alerts_dir, _BATCH_FILE):
        raise SparkAuditError(
            f"alerts directory {alerts_dir} holds alerts, but its checkpoint {checkpoint} is new "
            "(deleted?): a new run would overwrite them; use a new alerts directory"
        )


def audit_stream(
    spark,
    source_df,
    alerts_dir: str | os.PathLike,
    rules: AuditRules | str | os.PathLike | None,
    checkpoint_dir: str | os.PathLike,
    *,
    available_now: bool = False,
    processing_time: str | None = None,
    query_name: str | None = None,
):
    """Start the audit of ``source_df`` into the alerts table ``alerts_dir``; return the StreamingQuery.

    ``source_df`` is a streaming DataFrame with ``secmeta.consumers.spark.rows.SCHEMA``'s
    columns in log order of offsets (the ``secmeta`` source); ``rules`` an
    ``AuditRules``, a rules file or None (the defaults). ``available_now``
    processes what is there now and stops; else micro-batches run until the
    query is stopped (every ``processing_time``, e.g. "10 seconds", if given).
    Raises ``SparkAuditError`` or ``RulesFileError`` before starting anything
    when an argument cannot be used.
    """
    del spark  # the source's session runs the stream; kept for the call's shape
    rules = rules if isinstance(rules, AuditRules) else load_rules(rules)
    _check_source(source_df)
    alerts_path, checkpoint = Path(alerts_dir), Path(checkpoint_dir)
    sink = AlertsSink(alerts_path, checkpoint, rules)
    _prepare_alerts_dir(alerts_path, checkpoint)
    writer = (
        source_df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .queryName(query_name or "secmeta-audit")
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif processing_time:
        writer = writer.trigger(processingTime=processing_time)
    return writer.start()


def run_audit(
    spark,
    store_dir: str | os.PathLike,
    key_file: str | os.PathLike | None,
    alerts_dir: str | os.PathLike,
    rules: AuditRules | str | os.PathLike | None = None,
    once: bool = True,
    checkpoint: str | os.PathLike | None = None,
    max_events_per_trigger: int | None = None,
):
    """Audit a store's log into the alerts table ``alerts_dir`` (``secmeta spark audit``).

    Arguments:

    * ``store_dir``: the store (read only; a writer may run at the same time);
      ``key_file``: its keyring (None: $SECMETA_KEY_FILE, else $SECMETA_KEYS, as
      everywhere);
    * ``alerts_dir``: the alerts table (Parquet, ``ALERTS_SCHEMA``; created if
      missing); read it with ``spark.read.parquet(alerts_dir)`` or
      ``read_alerts`` (which also reads an empty table);
    * ``rules``: a rules file (.toml/.json, the Kafka audit job's format), an
      ``AuditRules``, or None for the default rules;
    * ``checkpoint``: the stream's checkpoint (default ``alerts_dir/_checkpoint``).
      Running again with the same one resumes after the last event audited,
      with the mass-deletion window as it was: the table then holds what one
      uninterrupted run would have written. An alerts directory is tied to
      its checkpoint; another one is refused;
    * ``max_events_per_trigger``: the most log events per micro-batch (None:
      everything available).

    With ``once`` (the default) it audits the events the log holds now,
    waits for that to finish and returns the terminated StreamingQuery
    (``query.recentProgress`` holds each batch's ``numInputRows``); a failure
    of the stream raises ``pyspark.errors.StreamingQueryException``. Without
    ``once`` it returns the running query, which follows the log until
    ``query.stop()``.

    Errors found before anything runs, with a message for the user: the store
    (``secmeta.core.errors.NotAStoreError`` and other ``SecmetaError``), the keyring
    (``secmeta.events.errors.KeyringError``), the rules file
    (``secmeta.consumers.audit_rules.RulesFileError``), the alerts directory or an
    option (``SparkAuditError``); all are ``SecmetaError``, ``EventsError`` or
    ``ValueError``.
    """
    rules = rules if isinstance(rules, AuditRules) else load_rules(rules)
    if max_events_per_trigger is not None and (
        isinstance(max_events_per_trigger, bool)
        or not isinstance(max_events_per_trigger, int)
        or max_events_per_trigger < 1
    ):
        raise SparkAuditError(
            f"max_events_per_trigger must be a whole number > 0, not {max_events_per_trigger!r}"
        )
    from secmeta.consumers.spark.log_source import check_log, log_stream

    check_log(store_dir, key_file)

    source = log_stream(spark, store_dir, key_file, max_events_per_trigger)
    checkpoint = Path(checkpoint) if checkpoint is not None else Path(alerts_dir) / DEFAULT_CHECKPOINT
    query = audit_stream(spark, source, alerts_dir, rules, checkpoint, available_now=once)
    if once:
        query.awaitTermination()
    return query


def read_alerts(spark, alerts_dir: str | os.PathLike):
    """The alerts table as a DataFrame (``ALERTS_SCHEMA``; empty while no alert was written)."""
    return spark.read.schema(ALERTS_SCHEMA).parquet(str(alerts_dir))
