"""The audit on Spark: the Kafka audit job's alert rules over a store's log, streamed into an alerts table."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from secmeta.consumers.audit_rules import AuditRules, MassDeletion, RulesFileError, load_rules
from secmeta.consumers.spark.audit import (
    ALERTS_SCHEMA,
    MARKER,
    STATE_DIR,
    AlertsSink,
    SparkAuditError,
    audit_stream,
    read_alerts,
    run_audit,
)
from secmeta.consumers.spark.rows import (
    NO_SECRET,
    SCHEMA,
    envelope_from_row,
    event_row,
    python_rows,
)
from secmeta.core import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    RequestContext,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    SecurityStore,
    StoreConfig,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from secmeta.core.errors import NotAStoreError
from secmeta.core.log import Log, LogConfig
from secmeta.events.keyring import Keyring
from secmeta.events.records import (
    DelegationTokenRemoved,
    ScramCredentialUpserted,
    TokenRemovalReason,
)
from tests.logkit import Clock
from tests.storekit import ADMIN

OPS = RequestContext("User:ops", "10.0.0.7")  # a super user of the store, not a trusted actor of the rules
SALT = b"salt-that-must-never-leak-0123456789"
PASSWORD = b"pw-that-must-never-leak"
HOUR = 3600
RULES_TOML = """
[outside_allowed_hours]
allowed_hours = "08-18"

[mass_deletion]
threshold = 5
window_seconds = 60
"""
# Events per micro-batch: two batches per run (24, 16 and 40 events), the fewest that cross a batch boundary;
# the second run's last batch is the admin burst's 6th deletion alone (the 5 before it in the batch before).
FIRST_RUN_MAX, SECOND_RUN_MAX, FRESH_RUN_MAX = 12, 15, 20


def _acl(resource, name, principal, operation, pattern=PatternType.LITERAL):
    return AclBinding.of(resource, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def _topic(name, principal="User:dave"):
    return _acl(ResourceType.TOPIC, name, principal, AclOperation.READ)


def _delete_one(store, name, context):
    result = store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, name)], context=context)
    assert len(result[0].acls) == 1


def _upsert(store, user):
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    errors = store.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, PASSWORD, salt=SALT)], context=ADMIN)
    assert all(e.is_success for e in errors.values())


def _before_first_run(store: SecurityStore, clock: Clock) -> None:
    """Every stateless rule fires once or more; then the first four deletions of a burst (08:00 UTC on)."""
    def tick(seconds=1):
        clock.t += seconds

    cluster = ResourceType.CLUSTER
    store.create_acls([_acl(cluster, "kafka-cluster", "User:ops", AclOperation.ALTER)],
                      context=ADMIN)                                    # cluster_admin_grant
    tick()
    store.create_acls([_acl(ResourceType.TOPIC, "*", "User:bob", AclOperation.WRITE),       # wildcard
                       _acl(ResourceType.TOPIC, "orders", "User:*", AclOperation.WRITE),    # wildcard
                       _acl(ResourceType.TOPIC, "pay-", "User:carol", AclOperation.READ,
                            PatternType.PREFIXED)], context=ADMIN)      # (READ: nothing)
    tick()
    store.create_acls([_acl(cluster, "kafka-cluster", "User:carol", AclOperation.DESCRIBE)],
                      context=OPS)                                      # super_user_change
    tick()
    store.alter_settings({"super.users": "User:admin;User:ops"}, context=OPS)   # access_setting_change (and
    tick()                                                              # the first token pins the secret: again)
    _upsert(store, "admin")                                             # protected_credential_change
    _upsert(store, "alice")
    tick()
    token = store.create_delegation_token(context=ADMIN, owner="User:alice",
                                          renewers=("User:admin",))     # token_for_other_owner
    tick(15 * HOUR)                                                     # 23:00 UTC
    store.renew_delegation_token(token.hmac, context=ADMIN)             # outside_allowed_hours
    tick(2 * 24 * HOUR)
    assert store.sweep_expired_tokens() == 1                            # a sweep: never outside hours
    tick(10 * HOUR)                                                     # 09:00 UTC
    store.create_acls([_topic(f"del-{i}") for i in range(8)], context=ADMIN)
    for i in range(4):                                                  # a burst, 1 s apart ...
        tick()
        _delete_one(store, f"del-{i}", OPS)


def _after_first_run(store: SecurityStore, clock: Clock) -> None:
    """The burst goes on (its 6th deletion is past the threshold), and a second one in one request."""
    for i in range(4, 7):                                               # ... straddling the restart
        clock.t += 1
        _delete_one(store, f"del-{i}", OPS)
    clock.t += 1
    store.alter_user_scram_credentials(
        [UserScramCredentialDeletion("admin", ScramMechanism.SCRAM_SHA_256)], context=ADMIN)
    clock.t += 1
    store.create_acls([_topic(f"bulk-{i}") for i in range(6)], context=ADMIN)
    clock.t += 1
    result = store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, f"bulk-{i}") for i in range(6)],
                               context=ADMIN)
    assert sum(len(r.acls) for r in result) == 6


def _envelopes(store_dir, keyring):
    with Log.open(store_dir, keyring=keyring, read_only=True) as log:
        return list(log.read())


def _expected(envelopes, rules: AuditRules) -> list[dict]:
    """What the Kafka audit job's rules raise over the logged envelopes, as alerts-table rows."""
    rules = rules.fresh()
    return [{**a.to_dict(), "request_id": e.request_id, "event_type": e.event_type}
            for e in envelopes for a in rules.evaluate(e)]


def _table(spark, alerts_dir) -> list[dict]:
    """The alerts table as dicts, sorted; ``timestamp`` checked against ``timestamp_ms`` and dropped."""
    rows = [r.asDict() for r in read_alerts(spark, alerts_dir).collect()]
    for row in rows:
        stamp = row.pop("timestamp")
        assert stamp == datetime.fromtimestamp(row["timestamp_ms"] / 1000, UTC).replace(tzinfo=None)
    return sorted(rows, key=lambda r: (r["offset"], r["rule"]))


def _sorted(rows):
    return sorted(rows, key=lambda r: (r["offset"], r["rule"]))


def _input_rows(query) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    """A store audited twice on one checkpoint (events appended in between), and once fresh."""
    root = tmp_path_factory.mktemp("spark-audit")
    key_file = root / "keys.json"
    Keyring.generate_file(key_file)
    keyring = Keyring.from_file(key_file)
    clock = Clock()
    cfg = StoreConfig(token_secret=b"token-secret-for-tests, 32 bytes or more", clock=clock,
                      super_users=frozenset({"User:admin", "User:ops"}),
                      log=LogConfig(segment_bytes=2048))
    store_dir, rules_file = root / "store", root / "rules.toml"
    rules_file.write_text(RULES_TOML)
    with SecurityStore.open(store_dir, cfg, keyring=keyring) as store:
        _before_first_run(store, clock)
    first_end = len(_envelopes(store_dir, keyring))

    alerts = root / "alerts"
    first = run_audit(spark, store_dir, key_file, alerts, rules=rules_file,
                      max_events_per_trigger=FIRST_RUN_MAX)
    after_first = _table(spark, alerts)
    with SecurityStore.open(store_dir, cfg, keyring=keyring) as store:
        _after_first_run(store, clock)
    second = run_audit(spark, store_dir, key_file, alerts, rules=rules_file,
                       max_events_per_trigger=SECOND_RUN_MAX)
    fresh_alerts = root / "fresh-alerts"
    fresh = run_audit(spark, store_dir, key_file, fresh_alerts, rules=rules_file,
                      checkpoint=root / "fresh-checkpoint", max_events_per_trigger=FRESH_RUN_MAX)
    return SimpleNamespace(
        root=root, key_file=key_file, keyring=keyring, store_dir=store_dir, rules_file=rules_file,
        rules=load_rules(rules_file), first_end=first_end, alerts=alerts, fresh_alerts=fresh_alerts,
        first=first, second=second, fresh=fresh, after_first=after_first,
    )


def test_rows_rebuild_the_logged_envelopes(spark, audited):
    """A row, from event_row or from Spark's Arrow, gives back its envelope, the secret aside."""
    envelopes = _envelopes(audited.store_dir, audited.keyring)
    assert {e.event_type for e in envelopes} == {
        "AclCreated", "AclDeleted", "ScramCredentialUpserted", "ScramCredentialDeleted",
        "DelegationTokenIssued", "DelegationTokenRenewed", "DelegationTokenRemoved", "SecuritySettingAltered"}

    def without_secret(e):
        if isinstance(e.event, ScramCredentialUpserted):
            e = dataclasses.replace(e, event=dataclasses.replace(e.event, secret=NO_SECRET))
        return dataclasses.replace(e, fingerprint=b"")

    wanted = [without_secret(e) for e in envelopes]
    assert [envelope_from_row(dict(zip(SCHEMA.fieldNames(), event_row(e)))) for e in envelopes] == wanted
    table = (spark.read.format("secmeta").option("path", str(audited.store_dir))
             .option("keyFile", str(audited.key_file)).load().orderBy("offset").toArrow())
    assert [envelope_from_row(r) for r in python_rows(table)] == wanted


def test_every_rule_fires_as_the_kafka_jobs_rules_do(spark, audited):
    """The alerts table holds exactly what AuditRules.evaluate raises over Log.read(), every rule included."""
    expected = _expected(_envelopes(audited.store_dir, audited.keyring), audited.rules)
    assert {a["rule"] for a in expected} == set(AuditRules.defaults().names)
    assert len({(a["offset"], a["rule"]) for a in expected}) == len(expected)
    assert _table(spark, audited.fresh_alerts) == _sorted(expected)
    assert len(_input_rows(audited.fresh)) > 1, "the fresh run should take several micro-batches"
    assert spark.read.parquet(str(audited.fresh_alerts)).schema == ALERTS_SCHEMA


def test_sweep_removal_is_not_outside_hours(audited):
    """The sweep's token removal (23:00, two days on) raises nothing, the renewal at 23:00 does."""
    envelopes = _envelopes(audited.store_dir, audited.keyring)
    sweep = [e for e in envelopes if isinstance(e.event, DelegationTokenRemoved)]
    assert [e.event.reason for e in sweep] == [TokenRemovalReason.EXPIRED_BY_SWEEP]
    outside = [a for a in _expected(envelopes, audited.rules) if a["rule"] == "outside_allowed_hours"]
    assert [a["event_type"] for a in outside] == ["DelegationTokenRenewed"]


def test_restart_from_the_checkpoint_equals_one_run(spark, audited):
    """Stopped mid-way, restarted after more events: the same table as one fresh run, with the straddling burst."""
    assert len(_input_rows(audited.first)) > 1 and len(_input_rows(audited.second)) > 1
    assert sum(_input_rows(audited.first)) == audited.first_end
    restarted = _table(spark, audited.alerts)
    assert restarted == _table(spark, audited.fresh_alerts)
    mass = [a for a in restarted if a["rule"] == "mass_deletion"]
    assert [a["actor_principal"] for a in mass] == ["User:ops", "User:admin"]
    # The ops burst: 4 deletions before the first run stopped, its alert (the 6th) after the restart.
    envelopes = _envelopes(audited.store_dir, audited.keyring)
    ops_deletions = [e.offset for e in envelopes
                     if e.event_type == "AclDeleted" and e.actor_principal == "User:ops"]
    assert len([o for o in ops_deletions if o < audited.first_end]) == 4
    assert mass[0]["offset"] == ops_deletions[5] >= audited.first_end
    assert not [a for a in audited.after_first if a["rule"] == "mass_deletion"]
    assert audited.after_first == [a for a in restarted if a["offset"] < audited.first_end]
    saved = os.listdir(audited.alerts / "_checkpoint" / STATE_DIR)
    assert 1 <= len(saved) <= 2


def test_replayed_batch_id_does_not_duplicate(spark, audited):
    """Spark re-running the last batch (its commit lost in a crash) rewrites that batch's file, no duplicates."""
    before = _table(spark, audited.alerts)
    files = sorted(p.name for p in audited.alerts.iterdir() if p.suffix == ".parquet")
    commits = audited.alerts / "_checkpoint" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    last_file = audited.alerts / f"batch-{last:012d}.parquet"
    assert last_file.exists(), "the workload ends with an alert in the last batch"
    inode = last_file.stat().st_ino
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)

    query = run_audit(spark, audited.store_dir, audited.key_file, audited.alerts,
                      rules=audited.rules_file, max_events_per_trigger=SECOND_RUN_MAX)
    replayed = [p for p in query.recentProgress if p["numInputRows"]]
    assert [p["batchId"] for p in replayed] == [last]
    # Its alert is the admin burst's 6th deletion, the 5 before it in earlier batches: the saved window.
    assert replayed[0]["numInputRows"] < 6
    assert [(a["rule"], a["actor_principal"]) for a in before if a["offset"] == before[-1]["offset"]] == [
        ("mass_deletion", "User:admin")]
    assert last_file.stat().st_ino != inode, "the batch was written again"
    assert _table(spark, audited.alerts) == before
    assert sorted(p.name for p in audited.alerts.iterdir() if p.suffix == ".parquet") == files


def test_sink_replay_of_one_batch_id_overwrites(spark, audited, tmp_path):
    """Processing the same batch id twice leaves one file with the alerts once."""
    batch = (spark.read.format("secmeta").option("path", str(audited.store_dir))
             .option("keyFile", str(audited.key_file)).load())
    sink = AlertsSink(tmp_path / "alerts", tmp_path / "ckpt", audited.rules)
    expected = _sorted(_expected(_envelopes(audited.store_dir, audited.keyring), audited.rules))
    assert sink.process(batch, 3) == len(expected)
    assert sink.process(batch, 3) == len(expected)
    assert sorted(os.listdir(tmp_path / "alerts")) == ["batch-000000000003.parquet"]
    assert _table(spark, tmp_path / "alerts") == expected


def test_no_secret_in_the_alerts_table(spark, audited):
    """Neither sealed bytes, salt nor password appear in any file of the alerts directory or its rows."""
    envelopes = _envelopes(audited.store_dir, audited.keyring)
    needles = [SALT, PASSWORD]
    for e in envelopes:
        if isinstance(e.event, ScramCredentialUpserted):
            needles += [e.event.secret.ciphertext, e.event.secret.nonce]
    forms = set()
    for n in needles:
        forms |= {n, n.hex().encode(), base64.b64encode(n)}
    for directory in (audited.alerts, audited.fresh_alerts):
        files = [path for path in directory.rglob("*") if path.is_file()]
        assert any(path.suffix == ".parquet" for path in files)
        for path in files:  # the table, the marker, the checkpoint and the saved window state
            data = path.read_bytes()
            for form in forms:
                assert form not in data, path
        text = repr(read_alerts(spark, directory).collect()).encode()
        for form in forms:
            assert form not in text


def test_bad_input_fails_before_anything_runs(spark, audited, tmp_path):
    """Not a store, a bad rules file, a bad option or alerts path: a clear error, no query, no files."""
    args = (audited.store_dir, audited.key_file)
    alerts = tmp_path / "alerts"
    with pytest.raises(NotAStoreError, match="not a secmeta store"):
        run_audit(spark, tmp_path, audited.key_file, alerts)
    with pytest.raises(RulesFileError, match="does not exist"):
        run_audit(spark, *args, alerts, rules=tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[mass_deletion]\nthreshold = -3\n")
    with pytest.raises(RulesFileError, match=r"\[mass_deletion\] threshold"):
        run_audit(spark, *args, alerts, rules=bad)
    bad.write_text("[no_such_rule]\n")
    with pytest.raises(RulesFileError, match="unknown rule 'no_such_rule'"):
        run_audit(spark, *args, alerts, rules=bad)
    with pytest.raises(SparkAuditError, match="max_events_per_trigger"):
        run_audit(spark, *args, alerts, max_events_per_trigger=0)
    assert not alerts.exists()
    with pytest.raises(SparkAuditError, match="is a file"):
        run_audit(spark, *args, bad)
    with pytest.raises(SparkAuditError, match="streaming DataFrame"):
        audit_stream(spark, spark.range(1), alerts, None, tmp_path / "ckpt")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "data.csv").write_text("x")
    with pytest.raises(SparkAuditError, match="not a secmeta alerts table"):
        run_audit(spark, *args, tmp_path / "other")
    assert spark.streams.active == []


def test_alerts_directory_keeps_its_checkpoint(spark, audited, tmp_path):
    """Another checkpoint, or a new one after the old was deleted, would overwrite alerts: refused."""
    args = (audited.store_dir, audited.key_file)
    assert json.loads((audited.alerts / MARKER).read_text())["checkpoint"] == "_checkpoint"
    with pytest.raises(SparkAuditError, match="written by the stream with checkpoint _checkpoint"):
        run_audit(spark, *args, audited.alerts, checkpoint=tmp_path / "other-ckpt")
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in os.listdir(audited.alerts):
        if name.endswith(".parquet") or name == MARKER:
            (copy / name).write_bytes((audited.alerts / name).read_bytes())
    with pytest.raises(SparkAuditError, match="checkpoint .* is new"):
        run_audit(spark, *args, copy)
    assert spark.streams.active == []


def test_mass_deletion_state_round_trips():
    """MassDeletion.state / load_state carry the window exactly, times out of order included."""
    rule = MassDeletion(threshold=2, window_seconds=10)
    for actor, t in [("a", 5_000), ("a", 1_000), ("b", 3_000)]:
        rule.observe(actor, t)
    copy = rule.fresh()
    copy.load_state(json.loads(json.dumps(rule.state())))
    assert copy.state() == rule.state() == {"a": [5_000, 1_000], "b": [3_000]}
    for actor, t in [("a", 12_000), ("a", 14_000), ("b", 4_000)]:
        assert copy.observe(actor, t) == rule.observe(actor, t)

