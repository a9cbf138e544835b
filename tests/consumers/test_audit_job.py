"""The audit job against librdkafka's mock cluster: audit lines, alerts, restarts, dead letters."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import datetime

import pytest
from confluent_kafka import Consumer, TopicPartition

from secmeta.consumers.audit_rules import parse_rules
from secmeta.consumers.kafka.audit import AuditError, AuditInterrupted, AuditJob, JsonLines
from secmeta.consumers.kafka.wire import encode_message
from secmeta.events.codec import EventCodec
from secmeta.events.keyring import SealedSecret
from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    DelegationTokenIssued,
    Envelope,
    ScramCredentialUpserted,
)
from secmeta.events.types import (
    AclOperation,
    ResourceType,
    ScramMechanism,
)
from tests.consumers.conftest import make_topics, produce_raw, unused_port
from tests.storekit import acl

CODEC = EventCodec.default()
T0 = 1_800_000_000_000 + 2 * 3_600_000  # 10:00 UTC
RULES = parse_rules(
    {
        "outside_allowed_hours": {"allowed_hours": "08-18"},
        "mass_deletion": {"threshold": 5, "window_seconds": 60},
    }
)


class Crash(BaseException):
    """Stands for the process dying at a chosen point."""


def scenario() -> list[Envelope]:
    """Fifteen events; the comment names the alert each raises."""
    topic_read = acl("orders", "User:alice", AclOperation.READ)
    events = [
        # 0 cluster_admin_grant
        (
            "User:admin",
            AclCreated(
                "a0", acl("kafka-cluster", "User:ops", AclOperation.ALL, rtype=ResourceType.CLUSTER)
            ),
        ),
        # 1 nothing
        ("User:admin", AclCreated("a1", topic_read)),
        # 2 wildcard_principal_grant
        (
            "User:admin",
            AclCreated("a2", acl("orders", "User:*", AclOperation.WRITE)),
        ),
        # 3 protected_credential_change
        (
            "User:admin",
            ScramCredentialUpserted(
                "admin",
                ScramMechanism.SCRAM_SHA_256,
                4096,
                SealedSecret("k1", b"n" * 12, b"SECRETBYTES"),
            ),
        ),
        # 4 token_for_other_owner
        (
            "User:bob",
            DelegationTokenIssued("tok-1", "User:alice", "User:bob", (), T0, T0 + 1, T0 + 2),
        ),
        # 5 super_user_change
        (
            "User:bob",
            AclCreated(
                "a5", acl("kafka-cluster", "User:bob", AclOperation.DESCRIBE, rtype=ResourceType.CLUSTER)
            ),
        ),
    ]
    # 6..12 seven deletions within 7 s: the 6th (offset 11) is above threshold 5
    events += [("User:admin", AclDeleted(f"d{i}", topic_read)) for i in range(7)]
    # 13 nothing (10:00); 14 outside_allowed_hours (23:00)
    events += [
        ("User:admin", AclCreated("a13", topic_read)),
        ("User:admin", AclCreated("a14", topic_read)),
    ]
    out = []
    for offset, (actor, event) in enumerate(events):
        ts = T0 + offset * 1000 if offset < 14 else T0 + 13 * 3_600_000
        out.append(Envelope(offset, ts, actor, "10.0.0.9", f"req-{offset}", event))
    return out


EXPECTED = {
    (0, "cluster_admin_grant"),
    (2, "wildcard_principal_grant"),
    (3, "protected_credential_change"),
    (4, "token_for_other_owner"),
    (5, "super_user_change"),
    (11, "mass_deletion"),
    (14, "outside_allowed_hours"),
}


def messages(envelopes):
    return [encode_message(CODEC, env) for env in envelopes]


FOREIGN = (b"k", b'{"not": "ours"}', [])


@pytest.fixture
def setup(kafka_bootstrap, topics, tmp_path):
    """Topics and file paths of one job; ``job()`` opens an AuditJob on them."""
    history, alerts = topics("audit-history"), topics("audit-alerts")
    make_topics(kafka_bootstrap, history)
    group = f"audit-{uuid.uuid4().hex}"

    class Setup:
        bootstrap = kafka_bootstrap
        history_topic = history
        alerts_topic = alerts
        audit_file = tmp_path / "audit.jsonl"
        alerts_file = tmp_path / "alerts.jsonl"
        dead_file = tmp_path / "audit.dead-letter.jsonl"

        def job(self, **kwargs):
            return AuditJob(
                kafka_bootstrap,
                history_topic=history,
                alerts_topic=alerts,
                audit_file=self.audit_file,
                alerts_file=self.alerts_file,
                rules=RULES,
                group_id=group,
                **kwargs,
            )

        def produce(self, items):
            produce_raw(kafka_bootstrap, history, items)

    return Setup()


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def file_alerts(path):
    return [(a["offset"], a["rule"]) for a in lines(path)]


def topic_alerts(bootstrap, topic):
    """(offset, rule) of every alert on every partition of the alerts topic, keys checked."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ranges = [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            for p in partitions
        ]
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in zip(partitions, ranges)])
        out = []
        for _ in range(sum(high - low for low, high in ranges)):
            msg = consumer.poll(10.0)
            assert msg is not None and msg.error() is None
            value = json.loads(msg.value())
            assert msg.key() == value["rule"].encode()
            out.append((value["offset"], value["rule"]))
        return out
    finally:
        consumer.close()


def settle(job):
    """Process everything the history topic holds now."""
    return job.process_available(timeout=20)


# -- one run ------------------------------------------------------------------------------


def test_scenario_raises_exactly_the_expected_alerts(setup):
    """The scripted scenario puts exactly the expected alerts in the file and on the topic."""
    setup.produce(messages(scenario()))
    with setup.job() as job:
        settle(job)
    assert sorted(file_alerts(setup.alerts_file)) == sorted(EXPECTED)
    assert sorted(topic_alerts(setup.bootstrap, setup.alerts_topic)) == sorted(EXPECTED)


def test_audit_file_has_one_redacted_line_per_event(setup):
    """Every event gets one audit line, in log order, with secrets sealed."""
    setup.produce(messages(scenario()))
    with setup.job() as job:
        assert settle(job) == 15
    records = lines(setup.audit_file)
    assert [r["offset"] for r in records] == list(range(15))
    assert records[3]["payload"]["secret"] == "<sealed:k1>"
    assert "SECRETBYTES" not in setup.audit_file.read_text()


def test_audit_lines_and_alerts_show_their_time_in_iso_8601_beside_epoch_ms(setup):
    """Issue 23: audit lines and alerts carried epoch milliseconds only; each now has ``time`` in ISO-8601 UTC
    with Z beside ``timestamp_ms``, and a SCRAM mechanism by Kafka's name (they said SCRAM_SHA_256)."""
    setup.produce(messages(scenario()))
    with setup.job() as job:
        settle(job)
    for record in lines(setup.audit_file) + lines(setup.alerts_file):
        shown = datetime.fromisoformat(record["time"].replace("Z", "+00:00"))
        assert record["time"].endswith("Z") and shown.timestamp() * 1000 == record["timestamp_ms"]
    mechanisms = {r["payload"]["mechanism"] for r in lines(setup.audit_file) if "mechanism" in r["payload"]}
    assert mechanisms == {"SCRAM-SHA-256"}


def test_publisher_duplicates_are_skipped(setup):
    """An event re-sent with the same log offset gets no second audit line or alert."""
    envs = scenario()[:4]
    setup.produce(messages(envs) + messages(envs[2:4]))
    with setup.job() as job:
        settle(job)
        assert job.stats.duplicates == 2
    assert [r["offset"] for r in lines(setup.audit_file)] == [0, 1, 2, 3]
    assert sorted(file_alerts(setup.alerts_file)) == [
        (0, "cluster_admin_grant"),
        (2, "wildcard_principal_grant"),
        (3, "protected_credential_change"),
    ]


def test_not_our_message_goes_to_the_dead_letter_file(setup):
    """A message that is not a secmeta event is counted and dead-lettered; the events around it are audited."""
    envs = scenario()[:3]
    setup.produce(messages(envs[:1]) + [FOREIGN] + messages(envs[1:]))
    with setup.job() as job:
        settle(job)
        assert job.stats.dead_letters == 1
    (dead,) = lines(setup.dead_file)
    assert (dead["topic"], dead["kafka_offset"], dead["key"]) == (setup.history_topic, 1, "k")
    assert "missing headers" in dead["reason"]
    assert [r["offset"] for r in lines(setup.audit_file)] == [0, 1, 2]


def test_offsets_are_committed_after_settling(setup):
    """After a batch is settled the group's committed offset is the topic's end."""
    setup.produce(messages(scenario()[:5]))
    with setup.job() as job:
        settle(job)
    consumer = Consumer({"bootstrap.servers": setup.bootstrap, "group.id": job.group_id})
    try:
        (tp,) = consumer.committed([TopicPartition(setup.history_topic, 0)], timeout=10)
    finally:
        consumer.close()
    assert tp.offset == 5 and json.loads(tp.metadata)["log"] == 4


# -- restarts -------------------------------------------------------------------------------


def test_restart_mid_stream_neither_loses_nor_repeats(setup):
    """Stopping inside the deletion burst and restarting yields each alert and audit line once."""
    setup.produce(messages(scenario()[:8]) + [FOREIGN] + messages(scenario()[8:]))
    with setup.job() as first:
        first.process_available(timeout=20, max_messages=10)  # events 0..8, the foreign message
    assert len(lines(setup.audit_file)) == 9
    with setup.job() as second:
        settle(second)
        assert second.stats.dead_letters == 0
    assert [r["offset"] for r in lines(setup.audit_file)] == list(range(15))
    assert sorted(file_alerts(setup.alerts_file)) == sorted(EXPECTED)
    assert sorted(topic_alerts(setup.bootstrap, setup.alerts_topic)) == sorted(EXPECTED)
    assert len(lines(setup.dead_file)) == 1


def test_restart_after_new_events_continues_the_stream(setup):
    """Events published after a job stopped are audited by the next job, once."""
    envs = scenario()
    setup.produce(messages(envs[:9]))
    with setup.job() as job:
        settle(job)
    setup.produce(messages(envs[9:]))
    with setup.job() as job:
        assert settle(job) == 6
    assert [r["offset"] for r in lines(setup.audit_file)] == list(range(15))
    assert sorted(topic_alerts(setup.bootstrap, setup.alerts_topic)) == sorted(EXPECTED)


def crash_after(setup, step, **kwargs):
    """Run a job that dies right after the batch step ``step`` (its after_step hook); return the offsets
    audited before it died."""

    def crash(name):
        if name == step:
            raise Crash

    job = setup.job(after_step=crash, **kwargs)
    with pytest.raises(Crash):
        settle(job)
    job.close()
    return [r["offset"] for r in lines(setup.audit_file)]


def test_crash_before_commit_repeats_nothing(setup):
    """Dying after files and topic are written, before the commit, leaves no duplicate."""
    setup.produce(messages(scenario()))
    audited = crash_after(setup, "published", batch_size=8)
    assert audited and sorted(topic_alerts(setup.bootstrap, setup.alerts_topic)) == sorted(
        a for a in EXPECTED if a[0] in audited
    )
    with setup.job() as job:
        settle(job)
        assert job.stats.events == 15 - len(audited)
    assert [r["offset"] for r in lines(setup.audit_file)] == list(range(15))
    assert sorted(file_alerts(setup.alerts_file)) == sorted(EXPECTED)
    assert sorted(topic_alerts(setup.bootstrap, setup.alerts_topic)) == sorted(EXPECTED)


def test_crash_between_alerts_and_audit_write_repeats_nothing(setup):
    """Dying after the alerts are written but before the audit lines leaves no duplicate."""
    setup.produce(messages(scenario()))
    assert crash_after(setup, "alerts written") == []
    assert file_alerts(setup.alerts_file)
    with setup.job() as job:
        settle(job)
    assert [r["offset"] for r in lines(setup.audit_file)] == list(range(15))
    assert sorted(file_alerts(setup.alerts_file)) == sorted(EXPECTED)
    assert sorted(topic_alerts(setup.bootstrap, setup.alerts_topic)) == sorted(EXPECTED)


def test_crash_before_producing_publishes_alerts_from_the_file(setup):
    """Alerts written to the file but never produced reach the topic after a restart."""
    setup.produce(messages(scenario()))
    audited = crash_after(setup, "audited")
    assert audited
    with setup.job() as job:
        settle(job)
        assert job.stats.events == 15 - len(audited)
    assert sorted(file_alerts(setup.alerts_file)) == sorted(EXPECTED)
    assert sorted(topic_alerts(setup.bootstrap, setup.alerts_topic)) == sorted(EXPECTED)


def test_dead_letter_is_not_repeated_after_a_crash(setup):
    """A message dead-lettered before a crash is not dead-lettered again on restart."""
    setup.produce([FOREIGN] + messages(scenario()[:3]))
    crash_after(setup, "published")
    with setup.job() as job:
        settle(job)
        assert job.stats.dead_letters == 0
    assert len(lines(setup.dead_file)) == 1


def test_passing_failure_is_redone_by_the_same_job(setup):
    """After AuditInterrupted (before the alerts were produced) the next call resumes from the commit,
    losing and repeating nothing."""
    setup.produce(messages(scenario()))
    calls = []

    def fail_once(step):
        if step == "audited" and not calls:
            calls.append(step)
            raise AuditInterrupted("delivery timed out (test)")

    job = setup.job(after_step=fail_once)
    with job:
        with pytest.raises(AuditInterrupted):
            settle(job)
        settle(job)
    assert calls and [r["offset"] for r in lines(setup.audit_file)] == list(range(15))
    assert sorted(file_alerts(setup.alerts_file)) == sorted(EXPECTED)
    assert sorted(topic_alerts(setup.bootstrap, setup.alerts_topic)) == sorted(EXPECTED)


def test_torn_audit_line_is_cut_and_its_event_redone(setup):
    """A half-written last audit line (crash before the commit) is cut and its event audited once."""
    setup.produce(messages(scenario()[:5]))
    audited = crash_after(setup, "published")
    text = setup.audit_file.read_text()
    setup.audit_file.write_text(text[: text.rstrip("\n").rfind("\n") + 12])
    with setup.job() as job:
        settle(job)
    assert [r["offset"] for r in lines(setup.audit_file)] == list(range(5))
    assert sorted(file_alerts(setup.alerts_file)) == sorted(a for a in EXPECTED if a[0] < 5)
    assert audited


# -- running and bad input --------------------------------------------------------------------


def test_run_audits_until_stopped(setup):
    """run(stop_event) audits the stream and returns once the event is set."""
    setup.produce(messages(scenario()))
    stop = threading.Event()
    watchdog = threading.Timer(30, stop.set)
    with setup.job() as job:
        process = job.process_available

        def process_then_maybe_stop(*args, **kwargs):
            done = process(*args, **kwargs)
            if job.stats.events >= 15:
                stop.set()
            return done

        job.process_available = process_then_maybe_stop
        watchdog.start()
        try:
            job.run(stop, poll_timeout=1.0)
        finally:
            watchdog.cancel()
        assert job.stats.events == 15


def test_missing_history_topic_is_a_clear_error(setup):
    """A history topic that does not exist raises AuditError naming it."""
    job = AuditJob(
        setup.bootstrap,
        history_topic="no-such-topic-for-audit",
        alerts_topic=setup.alerts_topic,
        audit_file=setup.audit_file,
        alerts_file=setup.alerts_file,
    )
    with job, pytest.raises(AuditError, match="'no-such-topic-for-audit' does not exist"):
        job.process_available(timeout=1)


def test_unreachable_broker_interrupts_with_a_clear_error(setup):
    """An unreachable broker raises AuditInterrupted naming the address."""
    address = f"127.0.0.1:{unused_port()}"
    job = AuditJob(
        address,
        history_topic=setup.history_topic,
        audit_file=setup.audit_file,
        alerts_file=setup.alerts_file,
        timeout=1.0,
    )
    with job, pytest.raises(AuditInterrupted, match=f"cannot reach Kafka at {address}"):
        job.process_available(timeout=1)


def test_same_history_and_alerts_topic_is_refused(setup):
    """Writing alerts into the history topic is refused up front."""
    with pytest.raises(AuditError, match="must differ"):
        AuditJob(
            setup.bootstrap,
            history_topic="t",
            alerts_topic="t",
            audit_file=setup.audit_file,
            alerts_file=setup.alerts_file,
        )


# -- JSON-lines files -------------------------------------------------------------------------


def test_json_lines_reads_newest_first_across_chunks(tmp_path):
    """newest_first yields every record backwards, whatever the read chunk size."""
    file = JsonLines(tmp_path / "f.jsonl", read_chunk=7)
    file.append([{"i": i, "pad": "x" * i} for i in range(20)])
    assert [r["i"] for r in file.newest_first()] == list(range(19, -1, -1))
    file.close()


def test_json_lines_cuts_a_torn_tail_on_open(tmp_path):
    """Opening a file whose last line lacks its newline cuts that line."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"i":0}\n{"i":1}\n{"i":')
    JsonLines(path).close()
    assert path.read_bytes() == b'{"i":0}\n{"i":1}\n'


def test_json_lines_refuses_a_read_chunk_below_one(tmp_path):
    """read_chunk=0 is refused with the setting named, before the file is created."""
    from secmeta.core.errors import InvalidValueError

    with pytest.raises(InvalidValueError, match="read_chunk must be positive, not 0"):
        JsonLines(tmp_path / "f.jsonl", read_chunk=0)
    assert not (tmp_path / "f.jsonl").exists()
