"""The compaction job: history, snapshot and interval tables equal the store at every offset."""

from __future__ import annotations

import json

import pytest

from consumers.spark.compaction import CompactionError, compact, open_tables
from consumers.spark.table_reader import TableReader
from consumers.spark.tables import TablesError
from core.log import Log
from tests.consumers.spark.sparkkit import acl_state, credential_state, make_workspace, token_state


def _ms(ts) -> int:
    from datetime import UTC

    return int(ts.replace(tzinfo=UTC).timestamp() * 1000) if ts.tzinfo is None else int(ts.timestamp() * 1000)


def _in_force(rows, n: int) -> list:
    return [r for r in rows if r.valid_from_offset < n and (r.valid_to_offset is None or r.valid_to_offset >= n)]


@pytest.fixture(scope="module")
def compacted(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("compaction")
    space = make_workspace(root, seed=7, steps=80)
    tables = root / "tables"
    manifest = compact(spark, space.store_dir, tables, key_file=str(space.key_file), max_events_per_trigger=25,
                       retain_versions=3)
    return space, tables, manifest


def test_intervals_equal_the_store_at_every_offset(spark, compacted):
    """ACLs, credentials and tokens in force at N (by the interval tables) equal store.as_of(N)."""
    space, tables, manifest = compacted
    reader = TableReader(spark, tables)
    acls = reader.intervals("acl_intervals").collect()
    creds = reader.intervals("credential_intervals").collect()
    tokens = reader.intervals("token_intervals").collect()
    with space.open() as store:
        end = store.log.end_offset
        assert manifest.offset == end and end > 60
        for n in range(0, end + 1):
            view = store.as_of(offset=n)
            assert {(r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host, r.operation,
                     r.permission_type) for r in _in_force(acls, n)} == acl_state(view), n
            assert {(r.user, r.mechanism, r.iterations) for r in _in_force(creds, n)} == credential_state(view), n
            assert {(r.token_id, r.owner, r.requester, _ms(r.expiry_timestamp))
                    for r in _in_force(tokens, n)} == token_state(view), n


def test_shuffled_closes_give_the_same_intervals(spark, compacted, tmp_path, monkeypatch):
    """Batches with more closes than BROADCAST_CLOSES take the shuffle join: same tables as broadcasting."""
    from consumers.spark import compaction

    space, tables, _manifest = compacted
    monkeypatch.setattr(compaction, "BROADCAST_CLOSES", 0)
    shuffled = tmp_path / "tables"
    compact(spark, space.store_dir, shuffled, key_file=str(space.key_file), max_events_per_trigger=25)
    for name in ("acl_intervals", "credential_intervals", "token_intervals"):
        want, got = (sorted(map(tuple, TableReader(spark, t).intervals(name).collect()), key=repr)
                     for t in (tables, shuffled))
        assert got == want and got, name


def test_history_holds_every_event_once_by_date(spark, compacted):
    space, tables, manifest = compacted
    history = TableReader(spark, tables).history()
    rows = history.orderBy("offset").collect()
    with Log.open(space.store_dir, keyring=space.keyring, read_only=True) as log:
        envelopes = list(log.read())
    assert [(r.offset, r.event_type, r.actor_principal) for r in rows] == [
        (e.offset, e.event_type, e.actor_principal) for e in envelopes]
    dates = {p.name for p in (tables / "history").iterdir()}
    assert dates and all(d.startswith("event_date=") for d in dates)


def test_snapshot_versions_are_kept_up_to_retention(spark, compacted):
    """Several commits happened; only the newest 3 snapshot versions remain, each readable."""
    space, tables, manifest = compacted
    assert manifest.commits > 3 and len(manifest.versions) == 3
    reader = TableReader(spark, tables)
    with space.open() as store:
        for version in manifest.versions:
            rows = reader.snapshot("acls", version.offset).collect()
            assert {(r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host, r.operation,
                     r.permission_type) for r in rows} == acl_state(store.as_of(offset=version.offset))
    kept = sorted(int(p.name[2:]) for p in (tables / "snapshots" / "acls").iterdir())
    assert kept == [v.offset for v in manifest.versions]
    with pytest.raises(TablesError, match="not kept"):
        reader.snapshot("acls", 1)


def test_no_secret_columns(spark, compacted):
    _, tables, _ = compacted
    reader = TableReader(spark, tables)
    for name in ("scram_users", "credential_intervals", "tokens", "token_intervals"):
        columns = set(reader.snapshot(name).columns if name in ("scram_users", "tokens")
                      else reader.intervals(name).columns)
        assert not columns & {"secret", "salt", "stored_key", "server_key", "hmac"}


def test_a_newer_tables_format_is_refused_before_any_job(spark, compacted, tmp_path):
    space, tables, _ = compacted
    newer = tmp_path / "newer"
    newer.mkdir()
    data = json.loads((tables / "_secmeta_tables.json").read_text())
    data["version"] = 99
    (newer / "_secmeta_tables.json").write_text(json.dumps(data))
    with pytest.raises(TablesError, match="newer secmeta"):
        compact(spark, space.store_dir, newer, key_file=str(space.key_file))
    with pytest.raises(TablesError, match="newer secmeta"):
        TableReader(spark, newer)


# -- restarts, failures and replays --------------------------------------------------------


def _table_state(spark, tables) -> dict:
    """Everything a reader sees, as comparable sets (intervals, snapshots, history)."""
    reader = TableReader(spark, tables)
    state = {"offset": reader.offset,
             "history": sorted(tuple(r) for r in reader.history().drop("event_date").collect())}
    for name in ("acl_intervals", "credential_intervals", "token_intervals"):
        state[name] = sorted(map(tuple, reader.intervals(name).collect()), key=repr)
    for name in ("acls", "scram_users", "tokens"):
        state[name] = sorted(map(tuple, reader.snapshot(name).collect()), key=repr)
    return state


class Boom(RuntimeError):
    pass


def _fail(at: str):
    def after_step(step: str) -> None:
        if step == at:
            raise Boom(f"injected failure at {step}")
    return after_step


@pytest.fixture(scope="module")
def two_phase(spark, tmp_path_factory):
    """A store compacted part-way (first half of its requests), then grown by a second workload."""
    from tests.consumers.conftest import random_workload

    root = tmp_path_factory.mktemp("restart")
    space = make_workspace(root, seed=11, steps=30)
    tables = root / "tables"
    first = compact(spark, space.store_dir, tables, key_file=str(space.key_file), max_events_per_trigger=20)
    before = _table_state(spark, tables)
    with space.open() as store:
        random_workload(store, 12, steps=30, clock=space.config.clock)
    return space, tables, first, before


@pytest.mark.parametrize("step", ["staged", "snapshots", "published"])
def test_a_failed_batch_leaves_the_previous_version(spark, two_phase, step):
    """A failure inside a commit raises, and readers still see exactly the version before it."""
    space, tables, first, before = two_phase
    with pytest.raises(CompactionError, match=f"keep their last version: Boom: injected failure at {step}"):
        compact(spark, space.store_dir, tables, key_file=str(space.key_file), after_step=_fail(step))
    assert TableReader(spark, tables).manifest.versions == first.versions
    assert _table_state(spark, tables) == before


def test_a_secmeta_error_in_a_batch_is_raised_as_itself(spark, two_phase):
    space, tables, first, before = two_phase

    def refuse(step: str) -> None:
        if step == "staged":
            raise TablesError(f"refused at {step}")

    with pytest.raises(TablesError, match="refused at staged"):
        compact(spark, space.store_dir, tables, key_file=str(space.key_file), after_step=refuse)
    assert _table_state(spark, tables) == before


def test_restart_after_more_events_equals_a_fresh_run(spark, two_phase, tmp_path):
    """Resuming on the checkpoint (after the failed attempts above) gives the tables of one fresh run."""
    space, tables, first, _ = two_phase
    resumed = compact(spark, space.store_dir, tables, key_file=str(space.key_file), max_events_per_trigger=25)
    fresh_dir = tmp_path / "fresh"
    fresh = compact(spark, space.store_dir, fresh_dir, key_file=str(space.key_file))
    assert resumed.offset == fresh.offset > first.offset
    assert _table_state(spark, tables) == _table_state(spark, fresh_dir)
    assert not (tables / "_staging").exists()


def test_a_replayed_batch_id_changes_nothing(spark, two_phase):
    """foreachBatch called again with a batch id already committed (Spark's replay) is a no-op."""
    from consumers.spark.compaction import _Commit
    from consumers.spark.tables import Tables

    space, tables, *_ = two_phase
    manifest = Tables(tables).manifest()
    before = _table_state(spark, tables)
    commit = _Commit(spark, Tables(tables), manifest.last_batch["checkpoint"], retain_versions=10)
    batch = (spark.read.format("secmeta").option("path", str(space.store_dir))
             .option("keyFile", str(space.key_file)).option("startOffset", 0).load())
    commit(batch, manifest.last_batch["batch_id"])
    assert Tables(tables).manifest().commits == manifest.commits
    assert _table_state(spark, tables) == before


def test_another_stores_tables_are_refused(spark, two_phase, compacted):
    space, _, _, _ = two_phase
    _, other_tables, _ = compacted
    with pytest.raises(TablesError, match="not of"):
        compact(spark, space.store_dir, other_tables, key_file=str(space.key_file))


def test_a_wrong_keyring_and_a_trimmed_log_fail_before_spark(tmp_path):
    """No SparkSession is used: open_tables (which compaction_stream and the CLI call first) refuses."""
    from events.errors import KeyringError
    from events.keyring import Keyring

    space = make_workspace(tmp_path, seed=3, steps=20, segment_bytes=1024)
    Keyring.generate_file(tmp_path / "other-keys.json")
    with pytest.raises(KeyringError, match="none of the keys"):
        open_tables(space.store_dir, tmp_path / "tables", tmp_path / "other-keys.json")
    assert not (tmp_path / "tables").exists()
    space.config.with_(delete_covered_segments=True).save(space.store_dir)  # retention may delete history
    with Log.open(space.store_dir, keyring=space.keyring, retention=True) as log:
        assert log.delete_segments_before(log.end_offset)
        start = log.start_offset
    with pytest.raises(TablesError, match=f"starts at offset {start} .*removed by retention.* from offset 0 on"):
        open_tables(space.store_dir, tmp_path / "tables", space.key_file)
