"""The ``secmeta`` Spark data source: batch and streaming reads of a store's log."""

from __future__ import annotations

import base64
from dataclasses import astuple
from datetime import UTC, datetime

import pytest

from secmeta.consumers.spark.log_source import LogRange, plan_ranges
from secmeta.consumers.spark.rows import SCHEMA, event_row
from secmeta.core import SecurityStore, StoreConfig
from secmeta.core.log import Log, LogConfig
from secmeta.events.keyring import Keyring
from secmeta.events.records import ScramCredentialUpserted
from secmeta.events.redact import redacted
from tests.consumers.spark.sparkkit import ADMIN, SALT, topic_acl, write_small_workload
from tests.logkit import Clock


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark-src")
    key_file = root / "keys.json"
    Keyring.generate_file(key_file)
    keyring = Keyring.from_file(key_file)
    cfg = StoreConfig(token_secret=b"token-secret-for-tests, 32 bytes or more", clock=Clock(),
                      log=LogConfig(segment_bytes=2048))
    store_dir = root / "store"
    with SecurityStore.open(store_dir, cfg, keyring=keyring) as store:
        write_small_workload(store)
    return store_dir, key_file, keyring, cfg


def _log_envelopes(store_dir, keyring):
    with Log.open(store_dir, keyring=keyring, read_only=True) as log:
        return list(log.read()), [s.base_offset for s in log.segments()]


def _naive(row: tuple) -> tuple:
    """A row as collect() returns it: timestamps as naive datetimes in the session time zone (UTC)."""
    return tuple(v.replace(tzinfo=None) if isinstance(v, datetime) else v for v in row)


def _reader(spark, store_dir, key_file):
    return spark.read.format("secmeta").option("path", str(store_dir)).option("keyFile", str(key_file))


def test_plan_ranges_splits_at_segment_bases():
    """A range is cut at every segment base inside it and nowhere else."""
    assert plan_ranges([0, 10, 20], 5, 25) == [LogRange(5, 10), LogRange(10, 20), LogRange(20, 25)]
    assert plan_ranges([0, 10], 10, 12) == [LogRange(10, 12)]
    assert plan_ranges([0, 10], 7, 7) == []


def test_batch_read_equals_the_log(spark, workspace):
    """A batch read returns exactly the log's events, in offset order, with their envelope fields."""
    store_dir, key_file, keyring, _ = workspace
    envelopes, bases = _log_envelopes(store_dir, keyring)
    assert len(bases) > 1, "the workload should span several segments"
    df = _reader(spark, store_dir, key_file).load()
    assert df.schema == SCHEMA
    assert df.rdd.getNumPartitions() == len(bases)
    rows = df.orderBy("offset").collect()
    assert [r.offset for r in rows] == [e.offset for e in envelopes]
    assert [r.event_type for r in rows] == [e.event_type for e in envelopes]
    assert [r.entity_key for r in rows] == [e.entity_key for e in envelopes]
    assert [(r.actor_principal, r.actor_host, r.request_id) for r in rows] == [
        (e.actor_principal, e.actor_host, e.request_id) for e in envelopes]
    assert [(r.actor_asserted, r.operator_user, r.operator_host, r.operator_pid, r.operator_program)
            for r in rows] == [(e.actor_asserted, *astuple(e.operator)) for e in envelopes]
    assert rows[0].operator_pid > 0  # the workload's writes name the process that made them
    assert [tuple(r) for r in rows] == [_naive(event_row(e)) for e in envelopes]
    for r in rows:
        assert r.timestamp == datetime.fromtimestamp(r.timestamp_ms / 1000, UTC).replace(tzinfo=None)


def test_batch_read_flattens_payloads(spark, workspace):
    """ACL, credential and token rows carry their payload in named columns."""
    store_dir, key_file, *_ = workspace
    df = _reader(spark, store_dir, key_file).load()
    acl = df.where("event_type = 'AclCreated' AND resource_name = 'pay'").collect()
    assert len(acl) == 1
    assert (acl[0].resource_type, acl[0].pattern_type, acl[0].principal, acl[0].host,
            acl[0].operation, acl[0].permission_type) == (
        "TOPIC", "PREFIXED", "User:alice", "*", "READ", "ALLOW")
    assert acl[0].entity_key == f"acl:{acl[0].acl_id}"
    cred = df.where("event_type = 'ScramCredentialUpserted'").collect()
    # Kafka's mechanism name, as every other output (issue 23: the tables said SCRAM_SHA_512)
    assert [(c.user, c.mechanism, c.iterations) for c in cred] == [("alice", "SCRAM-SHA-512", 8192)]
    tok = df.where("event_type = 'DelegationTokenIssued'").collect()
    assert len(tok) == 1
    assert (tok[0].owner, tok[0].requester, tok[0].renewers) == ("User:alice", "User:admin", ["User:bob", "User:admin"])
    assert tok[0].issue_timestamp < tok[0].expiry_timestamp <= tok[0].max_timestamp
    assert tok[0].user is None and tok[0].acl_id is None
    gone = df.where("event_type = 'AclDeleted'").collect()
    assert [(g.resource_name, g.entity_key) for g in gone] == [("orders", f"acl:{gone[0].acl_id}")]


def test_batch_read_of_an_offset_range(spark, workspace):
    """startOffset / endOffset bound a batch read to [start, end)."""
    store_dir, key_file, *_ = workspace
    df = _reader(spark, store_dir, key_file).option("startOffset", 3).option("endOffset", 9).load()
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(3, 9))


def test_bad_option_is_refused(spark, workspace):
    """A non-numeric maxEventsPerTrigger is refused when the stream is defined."""
    store_dir, key_file, *_ = workspace
    with pytest.raises(Exception, match="maxEventsPerTrigger must be an integer"):
        (spark.readStream.format("secmeta").option("path", str(store_dir))
         .option("keyFile", str(key_file)).option("maxEventsPerTrigger", "many").load())


def test_batch_read_carries_no_secret(spark, workspace):
    """Neither the sealed ciphertext nor the salt appears in any row, in any encoding."""
    store_dir, key_file, keyring, _ = workspace
    envelopes, _ = _log_envelopes(store_dir, keyring)
    sealed = [e.event.secret for e in envelopes if isinstance(e.event, ScramCredentialUpserted)]
    assert sealed
    needles = [SALT]
    for s in sealed:
        needles += [s.ciphertext, s.nonce]
    forms = set()
    for n in needles:
        forms |= {n.hex(), base64.b64encode(n).decode(), n.decode("latin-1"), repr(n)}
    assert "secret" not in SCHEMA.fieldNames()
    for row in _reader(spark, store_dir, key_file).load().collect():
        text = repr(tuple(row))
        for form in forms:
            assert form not in text


def test_not_a_store_fails_before_any_job(spark, tmp_path, workspace):
    """A path that is not a store is refused when the DataFrame is defined, with the store's message."""
    _, key_file, *_ = workspace
    with pytest.raises(Exception, match="not a secmeta store"):
        _reader(spark, tmp_path, key_file).load()
    with pytest.raises(Exception, match="not a secmeta store"):
        (spark.readStream.format("secmeta").option("path", str(tmp_path))
         .option("keyFile", str(key_file)).load())


def test_stream_available_now_resumes_from_checkpoint(spark, workspace, tmp_path):
    """availableNow reads all events; a second run on the same checkpoint reads only the new ones."""
    store_dir, key_file, keyring, cfg = workspace
    seen: list[list[int]] = []

    def collect(batch_df, batch_id):
        seen.append(sorted(r.offset for r in batch_df.select("offset").collect()))

    def run():
        query = (spark.readStream.format("secmeta").option("path", str(store_dir))
                 .option("keyFile", str(key_file)).option("maxEventsPerTrigger", 15).load()
                 .writeStream.foreachBatch(collect)
                 .option("checkpointLocation", str(tmp_path / "ckpt"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None

    envelopes, _ = _log_envelopes(store_dir, keyring)
    run()
    first = [o for b in seen for o in b]
    assert first == [e.offset for e in envelopes]
    assert all(len(b) <= 15 for b in seen) and len([b for b in seen if b]) > 1

    with SecurityStore.open(store_dir, cfg, keyring=keyring) as store:
        store.create_acls([topic_acl("late-1"), topic_acl("late-2")], context=ADMIN)
    seen.clear()
    run()
    after, _ = _log_envelopes(store_dir, keyring)
    assert [o for b in seen for o in b] == [e.offset for e in after[len(envelopes):]]
    assert len(after) == len(envelopes) + 2


def test_event_row_agrees_with_the_redacted_view(workspace):
    """Every row holds the redacted view's values (enum names, ms as UTC timestamps), secret excepted."""
    store_dir, _, keyring, _ = workspace
    envelopes, _ = _log_envelopes(store_dir, keyring)
    assert {e.event_type for e in envelopes} >= {
        "AclCreated", "AclDeleted", "ScramCredentialUpserted", "DelegationTokenIssued"}
    for e in envelopes:
        view = redacted(e)
        row = dict(zip(SCHEMA.fieldNames(), event_row(e)))
        flat = ({k: v for k, v in view.items() if k not in ("payload", "operator")}
                | {f"operator_{k}": v for k, v in view["operator"].items()} | view["payload"])
        flat.pop("secret", None)
        for key, value in flat.items():
            if key.endswith("_timestamp_ms"):
                assert row[key.removesuffix("_ms")] == datetime.fromtimestamp(value / 1000, UTC)
            else:
                assert row[key] == value, key
        assert row["timestamp"] == datetime.fromtimestamp(e.timestamp_ms / 1000, UTC)


def test_plan_ranges_splits_large_segments():
    """No range holds more than max_events; cuts still fall on segment bases."""
    assert plan_ranges([0, 25], 0, 30, max_events=10) == [
        LogRange(0, 10), LogRange(10, 20), LogRange(20, 25), LogRange(25, 30)]


def test_arrow_batches_equal_python_rows(workspace):
    """The Arrow form the sources hand to Spark holds exactly the rows event_row makes."""
    from secmeta.consumers.spark.rows import arrow_batch

    store_dir, _, keyring, _ = workspace
    envelopes, _ = _log_envelopes(store_dir, keyring)
    batch = arrow_batch(envelopes)
    as_rows = [tuple(r.values()) for r in batch.to_pylist()]
    assert as_rows == [event_row(e) for e in envelopes]
    assert arrow_batch([]).num_rows == 0


def test_arrow_batches_pause_the_collector_only_while_decoding(workspace):
    """Python's GC is on whenever the caller holds a batch, and after the batches end or are dropped."""
    import gc

    from secmeta.consumers.spark.rows import arrow_batches

    store_dir, _key_file, keyring, _cfg = workspace
    envelopes, _bases = _log_envelopes(store_dir, keyring)
    assert gc.isenabled()
    seen = []
    for batch in arrow_batches(envelopes, size=4):
        seen.append((batch.num_rows, gc.isenabled()))
    assert sum(n for n, _ in seen) == len(envelopes) and all(on for _, on in seen) and gc.isenabled()
    batches = arrow_batches(iter(envelopes), size=4)
    next(batches)
    batches.close()
    assert gc.isenabled()
    gc.disable()
    try:  # a caller that turned it off keeps it off
        assert all(not gc.isenabled() for _ in arrow_batches(envelopes, size=4)) and not gc.isenabled()
    finally:
        gc.enable()
