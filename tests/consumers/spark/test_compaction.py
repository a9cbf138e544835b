"""The compaction job: Delta tables equal to the store at every offset, committed once per batch and table."""

from __future__ import annotations

import json
import os
import shutil
import uuid

import pytest

from secmeta.consumers.spark.compaction import CompactionError, _Commit, compact, open_tables
from secmeta.consumers.spark.table_reader import TableReader
from secmeta.consumers.spark.tables import TABLE_NAMES, Tables, TablesError
from secmeta.core.log import Log
from tests.consumers.spark.sparkkit import (
    acl_state,
    credential_state,
    make_workspace,
    token_state,
    topic_acl,
)
from tests.storekit import ADMIN


def _ms(ts) -> int:
    from datetime import UTC

    return int(ts.replace(tzinfo=UTC).timestamp() * 1000) if ts.tzinfo is None else int(ts.timestamp() * 1000)


def _in_force(rows, n: int) -> list:
    return [r for r in rows if r.valid_from_offset < n and (r.valid_to_offset is None or r.valid_to_offset >= n)]


def _acl(r) -> tuple:
    return (r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host, r.operation, r.permission_type)


def test_intervals_equal_the_store_at_every_offset(spark, compacted):
    """ACLs, credentials and tokens in force at N (by the interval tables) equal store.as_of(N)."""
    space, tables, version = compacted
    reader = TableReader(spark, tables)
    acls = reader.intervals("acl_intervals").collect()
    creds = reader.intervals("credential_intervals").collect()
    tokens = reader.intervals("token_intervals").collect()
    with space.open() as store:
        end = store.log.end_offset
        assert version.offset == end and end > 60
        for n in range(0, end + 1):
            view = store.as_of(offset=n)
            assert {_acl(r) for r in _in_force(acls, n)} == acl_state(view), n
            assert {(r.user, r.mechanism, r.iterations) for r in _in_force(creds, n)} == credential_state(view), n
            assert {(r.token_id, r.owner, r.requester, _ms(r.expiry_timestamp))
                    for r in _in_force(tokens, n)} == token_state(view), n


def test_shuffled_closes_give_the_same_intervals(spark, compacted, tmp_path, monkeypatch):
    """Batches with more closes than BROADCAST_CLOSES take the shuffle join: same tables as broadcasting. Two
    batches: the second's deletions close ACLs of the first's snapshot as well as of its own events."""
    from secmeta.consumers.spark import compaction

    space, tables, version = compacted
    monkeypatch.setattr(compaction, "BROADCAST_CLOSES", 0)
    shuffled = tmp_path / "tables"
    half = -(-version.offset // 2)
    compact(spark, space.store_dir, shuffled, key_file=str(space.key_file), max_events_per_trigger=half)
    assert [v.offset for v in Tables(shuffled).versions()] == [0, half, version.offset]
    for name in ("acl_intervals", "credential_intervals", "token_intervals"):
        want, got = (sorted(map(tuple, TableReader(spark, t).intervals(name).collect()), key=repr)
                     for t in (tables, shuffled))
        assert got == want and got, name
    closed = [r for r in TableReader(spark, shuffled).intervals("acl_intervals").collect()
              if r.valid_to_offset is not None]
    assert any(r.valid_from_offset < half <= r.valid_to_offset for r in closed)  # a close of the first batch's
    assert any(half <= r.valid_from_offset for r in closed)  # and of the second batch's own ACLs


def test_a_batch_runs_spark_only_for_the_kinds_it_has_events_of(spark, tmp_path, monkeypatch):
    """A batch of ACL requests only advances the ACLs in Spark; every other kind keeps its snapshot (the same
    rows, now at the new version, in its interval table too) and the tables still equal the store."""
    from secmeta.consumers.spark import intervals

    space = make_workspace(tmp_path, seed=13, steps=12)
    tables = tmp_path / "tables"
    first = compact(spark, space.store_dir, tables, key_file=str(space.key_file))
    reader = TableReader(spark, tables)
    before = {k.name: sorted(map(tuple, reader.snapshot(k.name).collect()), key=repr) for k in intervals.KINDS}
    assert before["scram_users"] and before["tokens"]  # kept snapshots that are not empty
    with space.open() as store:
        store.create_acls([topic_acl("only-acls", principal=f"User:p{i}") for i in range(3)], context=ADMIN)
    advanced: list[str] = []
    real = intervals.advance
    monkeypatch.setattr(intervals, "advance", lambda kind, *a, **k: advanced.append(kind.name) or real(kind, *a, **k))
    second = compact(spark, space.store_dir, tables, key_file=str(space.key_file))
    assert advanced == ["acls"] and second.offset == first.offset + 3
    reader = TableReader(spark, tables)
    for kind in intervals.KINDS:
        if kind.name != "acls":
            assert sorted(map(tuple, reader.snapshot(kind.name).collect()), key=repr) == before[kind.name]
    acls, creds = reader.intervals("acl_intervals").collect(), reader.intervals("credential_intervals").collect()
    tokens = reader.intervals("token_intervals").collect()
    with space.open() as store:
        for n in (first.offset, second.offset):
            view = store.as_of(offset=n)
            assert {_acl(r) for r in _in_force(acls, n)} == acl_state(view), n
            assert {(r.user, r.mechanism, r.iterations) for r in _in_force(creds, n)} == credential_state(view), n
            assert {(r.token_id, r.owner, r.requester, _ms(r.expiry_timestamp))
                    for r in _in_force(tokens, n)} == token_state(view), n


def test_history_holds_every_event_once_by_date(spark, compacted):
    space, tables, version = compacted
    history = TableReader(spark, tables).history()
    rows = history.orderBy("offset").collect()
    with Log.open(space.store_dir, keyring=space.keyring, read_only=True) as log:
        envelopes = list(log.read())
    assert [(r.offset, r.event_type, r.actor_principal) for r in rows] == [
        (e.offset, e.event_type, e.actor_principal) for e in envelopes]
    dates = {p.name for p in (tables / "history").iterdir() if not p.name.startswith("_")}
    assert dates and all(d.startswith("event_date=") for d in dates)


def test_each_batch_is_one_version_listing_offsets_rows_and_table_versions(compacted):
    """The history table's versions: contiguous offset ranges of at most 25 events, one Delta commit per
    table per batch (the version names each table's), commit info with the store id and the offsets."""
    space, tables, version = compacted
    versions = Tables(tables).versions()
    assert [v.delta_version for v in versions] == list(range(len(versions))) and len(versions) > 4
    assert versions[0].offset == 0 and versions[-1] == version
    for before, after in zip(versions, versions[1:]):
        assert after.first_offset == before.offset and 0 < after.events == after.offset - before.offset <= 25
        assert all(after.tables[name] > before.tables[name] for name in TABLE_NAMES)
    from deltalake import DeltaTable

    from secmeta.core.store.storedir import StoreDirectory

    store = StoreDirectory.open(space.store_dir, create=False, writer=False)
    store.close()
    assert {v.store_id for v in versions} == {store.store_id}

    for name in TABLE_NAMES:
        commits = {c["version"]: c for c in DeltaTable(Tables(tables).table_path(name)).history()}
        key = "secmeta" if name == "history" else "secmetaBatch"
        assert commits[version.tables[name]][key]["offsets"] == [versions[-2].offset, version.offset], name


def test_old_versions_past_retention_are_vacuumed(spark, compacted):
    """retain_versions=3: the three newest versions stay readable, each equal to the store there; an
    older one's snapshot files are gone and reading it says so."""
    space, tables, version = compacted
    assert [k.offset for k in version.kept] == [v.offset for v in Tables(tables).versions()[-3:]]
    reader = TableReader(spark, tables)
    with space.open() as store:
        for kept in version.kept:
            rows = reader.snapshot("acls", kept.offset).collect()
            assert {_acl(r) for r in rows} == acl_state(store.as_of(offset=kept.offset))
    with pytest.raises(TablesError, match="not a kept version"):
        reader.snapshot("acls", 1)
    old = Tables(tables).versions()[1]
    with pytest.raises(TablesError, match=f"version {old.delta_version} of .* is no longer kept"):
        TableReader(spark, tables, version=old.delta_version).snapshot("acls").collect()


def test_a_reader_whose_version_retention_deleted_after_a_read_says_so(spark, compacted, tmp_path):
    """A reader keeps the tables it has read; once retention has deleted a kept version's files, reading that
    version again raises the TablesError a new reader raises, naming the version, not Spark's missing file."""
    _, tables, _ = compacted
    copy = _copy(tables, tmp_path)
    reader = TableReader(spark, copy)
    kept = reader.version.kept[0]
    assert kept.offset != reader.offset
    assert reader.snapshot("acls", kept.offset).collect()
    for uri in reader.tables.files("acls", kept):
        os.remove(uri.removeprefix("file://"))
    message = f"version {kept.delta_version} of .* is no longer kept: retention deleted"
    for read in (lambda: reader.snapshot("acls", kept.offset), lambda: TableReader(spark, copy).snapshot(
            "acls", kept.offset)):
        with pytest.raises(TablesError, match=message):
            read()
    assert reader.snapshot("acls").collect()  # the current version's files are still there


def test_an_empty_table_has_its_schema_and_no_query_of_it_starts_a_spark_job(spark):
    """A table with no files (a kind nothing happened to) reads as a local relation in the table's schema."""
    from pyspark.sql import functions as F

    from secmeta.consumers.spark.schemas import empty, schema

    sc = spark.sparkContext
    group = f"empty-tables-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "empty tables")
    try:
        for name in TABLE_NAMES:
            frame = empty(spark, name)
            assert frame.schema == schema(name), name
            assert frame.where(F.col(frame.columns[0]).isNotNull()).select(*frame.columns[:2]).collect() == [], name
        assert sc.statusTracker().getJobIdsForGroup(group) == []
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)


def test_no_secret_columns(spark, compacted):
    _, tables, _ = compacted
    reader = TableReader(spark, tables)
    for name in ("scram_users", "credential_intervals", "tokens", "token_intervals"):
        columns = set(reader.snapshot(name).columns if name in ("scram_users", "tokens")
                      else reader.intervals(name).columns)
        assert not columns & {"secret", "salt", "stored_key", "server_key", "hmac"}


# -- what other Delta readers get --------------------------------------------------------------


def test_delta_protocol_is_what_delta_spark_3_and_4_read(compacted):
    """Reader 1 / writer 2, no table features, a timestamp (not timestamp_ntz) type: no newer reader needed."""
    from deltalake import DeltaTable

    _, tables, _ = compacted
    for name in TABLE_NAMES:
        table = DeltaTable(Tables(tables).table_path(name))
        protocol = table.protocol()
        assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2), name
        assert not protocol.reader_features and not protocol.writer_features, name
        assert '"timestamp"' in table.schema().to_json() or name != "history", name
        assert "timestamp_ntz" not in table.schema().to_json(), name


def test_deltalake_and_polars_read_each_kept_version_as_the_store_was(compacted):
    """Without secmeta: deltalake + pyarrow open every table at the Delta versions a version names, and
    Polars runs SQL over them; the ACLs, credentials and tokens equal store.as_of at that offset (the
    snapshot tables) and at earlier offsets (the interval tables); the history holds events [0, offset)."""
    import polars
    from deltalake import DeltaTable

    space, tables, version = compacted
    layout = Tables(tables)

    def table(name, at):
        return DeltaTable(layout.table_path(name), version=at.tables[name])

    with space.open() as store:
        for kept in version.kept:
            n = kept.offset
            view = store.as_of(offset=n)
            acls = table("acls", kept).to_pyarrow_table().to_pylist()
            assert {(a["resource_type"], a["resource_name"], a["pattern_type"], a["principal"], a["host"],
                     a["operation"], a["permission_type"]) for a in acls} == acl_state(view), n
            users = table("scram_users", kept).to_pyarrow_table().to_pylist()
            assert {(u["user"], u["mechanism"], u["iterations"]) for u in users} == credential_state(view), n
            tokens = table("tokens", kept).to_pyarrow_table().to_pylist()
            assert {(t["token_id"], t["owner"], t["requester"], int(t["expiry_timestamp"].timestamp() * 1000))
                    for t in tokens} == token_state(view), n
            offsets = sorted(table("history", kept).to_pyarrow_table()["offset"].to_pylist())
            assert offsets == list(range(n)), n

            # the interval table alone holds every interval, the open ones included
            sql = polars.SQLContext(acl_intervals=polars.from_arrow(table("acl_intervals", kept).to_pyarrow_table()))
            for m in (n // 3, n // 2, n - 1, n):
                rows = sql.execute(
                    "SELECT acl_id, resource_type, resource_name, pattern_type, principal, host, operation, "
                    "permission_type FROM acl_intervals "
                    f"WHERE valid_from_offset < {m} AND (valid_to_offset IS NULL OR valid_to_offset >= {m})",
                    eager=True).rows()
                assert {r[1:] for r in rows} == acl_state(store.as_of(offset=m)), m
                assert len(rows) == len({r[0] for r in rows}) == len(dict(iter(store.as_of(offset=m).image.acls))), m


def test_the_latest_delta_versions_are_the_current_version(spark, compacted):
    """An engine that reads each table's latest Delta version (an idle compactor) sees the current version."""
    from deltalake import DeltaTable

    _, tables, _ = compacted
    reader = TableReader(spark, tables)
    latest = DeltaTable(Tables(tables).table_path("acls")).to_pyarrow_table().to_pylist()
    assert sorted(a["acl_id"] for a in latest) == sorted(r.acl_id for r in reader.snapshot("acls").collect())
    latest = DeltaTable(Tables(tables).table_path("history")).to_pyarrow_table()["offset"].to_pylist()
    assert sorted(latest) == list(range(reader.offset))


# -- bad tables directories: refused before Spark starts, nothing written ----------------------------


def _copy(tables, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tables, copy, ignore=shutil.ignore_patterns("_checkpoint"))
    return copy


def test_a_newer_delta_protocol_is_refused_before_any_job(compacted, tmp_path):
    from deltalake import DeltaTable, TableFeatures

    space, tables, _ = compacted
    copy = _copy(tables, tmp_path)

    DeltaTable(copy / "snapshots" / "acls").alter.add_feature(TableFeatures.DeletionVectors,
                                                              allow_protocol_versions_increase=True)
    for attempt in (lambda: open_tables(space.store_dir, copy, space.key_file), lambda: Tables(copy).check()):
        with pytest.raises(TablesError, match=r"acls uses Delta protocol reader 3 / writer 7 with .*deletionVectors"
                                              r".*newer than secmeta writes and reads \(reader 1 / writer 2"):
            attempt()


def test_a_newer_tables_format_is_refused(compacted, tmp_path):
    from deltalake import DeltaTable
    from deltalake.transaction import CommitProperties

    space, tables, version = compacted
    copy = _copy(tables, tmp_path)
    history = DeltaTable(copy / "history")
    history.create_write_transaction([], "append", history.schema(), partition_by=["event_date"],
                                     commit_properties=CommitProperties(
                                         custom_metadata={"secmeta": {**version.record(), "format": 99}}))
    with pytest.raises(TablesError, match="written by a newer secmeta .tables format 99"):
        open_tables(space.store_dir, copy, space.key_file)


def test_a_delta_table_of_something_else_is_refused(compacted, tmp_path):
    """A tables directory that is a Delta table, or holds one without secmeta's store id: refused, untouched."""
    import pyarrow as pa
    from deltalake import write_deltalake

    space, _, _ = compacted
    write_deltalake(tmp_path / "plain", pa.table({"x": [1, 2]}))
    with pytest.raises(TablesError, match="plain is a Delta table itself, not a secmeta tables directory"):
        open_tables(space.store_dir, tmp_path / "plain", space.key_file)
    write_deltalake(tmp_path / "other" / "history", pa.table({"x": [1, 2]}))
    with pytest.raises(TablesError, match=r"other/history is a Delta table of something else"):
        open_tables(space.store_dir, tmp_path / "other", space.key_file)
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["history"]
    with pytest.raises(TablesError, match="is a Delta table of something else"):
        TableReader(None, tmp_path / "other")


# -- restarts, failures, replays and a second compactor ------------------------------------------


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


@pytest.mark.parametrize("step", ["staged", "committed acls", "committed token_intervals"])
def test_a_failed_batch_leaves_the_previous_version(spark, two_phase, step):
    """A failure inside a batch, even between two tables' commits, raises, and readers still see exactly
    the version before it. The same batch is replayed by the next run (same checkpoint, same batch id):
    tables it committed keep that commit (their Delta txn holds the batch), the others get theirs."""
    space, tables, first, before = two_phase
    with pytest.raises(CompactionError, match=f"keep their last version: Boom: injected failure at {step}"):
        compact(spark, space.store_dir, tables, key_file=str(space.key_file), after_step=_fail(step))
    assert Tables(tables).current() == first
    assert _table_state(spark, tables) == before


def test_a_secmeta_error_in_a_batch_is_raised_as_itself(spark, two_phase):
    space, tables, first, before = two_phase

    def refuse(step: str) -> None:
        if step == "staged":
            raise TablesError(f"refused at {step}")

    with pytest.raises(TablesError, match="refused at staged"):
        compact(spark, space.store_dir, tables, key_file=str(space.key_file), after_step=refuse)
    assert _table_state(spark, tables) == before


def test_restart_after_a_crash_between_tables_equals_a_fresh_run(spark, two_phase, tmp_path):
    """Resuming on the checkpoint after the failed attempts above completes the half-committed batch
    (each table committed once: one Delta commit per table for it) and equals one fresh run."""
    space, tables, first, _ = two_phase
    resumed = compact(spark, space.store_dir, tables, key_file=str(space.key_file), max_events_per_trigger=25)
    fresh_dir = tmp_path / "fresh"
    fresh = compact(spark, space.store_dir, fresh_dir, key_file=str(space.key_file))
    assert resumed.offset == fresh.offset > first.offset
    assert _table_state(spark, tables) == _table_state(spark, fresh_dir)
    assert not (tables / "_staging").exists()
    assert resumed.delta_version == first.delta_version + 1  # one batch, one commit per table
    assert resumed.tables == {name: v + 1 for name, v in first.tables.items()}


def test_a_replayed_batch_id_changes_nothing(spark, two_phase):
    """foreachBatch called again with a batch id already committed (Spark's replay) is a no-op."""
    space, tables, *_ = two_phase
    current = Tables(tables).current()
    before = _table_state(spark, tables)
    commit = _Commit(spark, Tables(tables), str(tables / "_checkpoint"), retain_versions=10)
    batch = (spark.read.format("secmeta").option("path", str(space.store_dir))
             .option("keyFile", str(space.key_file)).option("startOffset", 0).load())
    commit(batch, current.batch)
    assert Tables(tables).current() == current
    assert _table_state(spark, tables) == before


def _checkpoint(path, stream_id: str) -> str:
    path.mkdir()
    (path / "metadata").write_text(json.dumps({"id": stream_id}))
    return str(path)


def test_a_second_compactor_fails_cleanly_and_a_new_stream_repairs_a_crash(spark, compacted, tmp_path):
    """Two compactors on one tables directory: B commits a batch while A works on the same one; A's first
    commit finds a Delta version it did not read (optimistic concurrency), A fails naming the other
    compactor and nothing of A is in any version. Then a stream with another id after a crash between
    tables: its batch replaces the dangling commits, giving the same tables."""
    space, _, _ = compacted
    tables = open_tables(space.store_dir, tmp_path / "tables", space.key_file)
    log = (spark.read.format("secmeta").option("path", str(space.store_dir))
           .option("keyFile", str(space.key_file)).load())
    batch = log.where("offset < 30")
    b = _Commit(spark, tables, _checkpoint(tmp_path / "b", "stream-b"), retain_versions=10)
    a = _Commit(spark, tables, _checkpoint(tmp_path / "a", "stream-a"), retain_versions=10,
                after_step=lambda step: b(batch, 0) if step == "snapshots" else None)
    with pytest.raises(TablesError, match=r"another compactor committed Delta version 1 of .*acls while this one "
                                          r"worked on version 0: this compaction stops"):
        a(batch, 0)
    after_b = Tables(tables.path).current()
    assert (after_b.delta_version, after_b.offset, after_b.stream) == (1, 30, "stream-b")
    assert _table_state(spark, tables.path)["offset"] == 30

    more = log.where("offset < 60")
    crashed = _Commit(spark, tables, _checkpoint(tmp_path / "c", "stream-c"), retain_versions=10,
                      after_step=_fail("committed token_intervals"))
    with pytest.raises(Boom):
        crashed(more, 0)
    assert Tables(tables.path).current() == after_b
    repaired = _Commit(spark, tables, _checkpoint(tmp_path / "d", "stream-d"), retain_versions=10)
    repaired(log.where("offset < 50"), 0)
    reader = TableReader(spark, tables.path)
    assert (reader.version.delta_version, reader.offset) == (2, 50)
    assert sorted(r.offset for r in reader.history().collect()) == list(range(50))
    acls = reader.intervals("acl_intervals").collect()
    with space.open() as store:
        for n in range(0, 51):
            assert {_acl(r) for r in _in_force(acls, n)} == acl_state(store.as_of(offset=n)), n


def test_another_stores_tables_are_refused(spark, two_phase, compacted):
    space, _, _, _ = two_phase
    _, other_tables, _ = compacted
    with pytest.raises(TablesError, match="holds the tables of store .*, not of store"):
        compact(spark, space.store_dir, other_tables, key_file=str(space.key_file))


def test_tables_written_before_a_kind_existed_are_refused_naming_the_missing_table(compacted, tmp_path):
    """Tables compacted by a secmeta that had no quotas kind (issue 20 added it) lack that table: compaction and
    queries refuse them, naming the table and what to do, instead of failing on the first read of it."""
    space, tables, _version = compacted
    old = tmp_path / "old"
    shutil.copytree(tables, old)
    shutil.rmtree(Tables(old).table_path("quota_intervals"))
    before = sorted(old.rglob("*"))
    for attempt in (lambda: open_tables(space.store_dir, old, space.key_file), lambda: TableReader(None, old)):
        with pytest.raises(TablesError, match=rf"{old} was compacted by an older secmeta and has no quota_intervals "
                                              r"table; compact the store into a new tables directory"):
            attempt()
    assert sorted(old.rglob("*")) == before


def test_tables_of_the_unreleased_manifest_format_are_refused(tmp_path):
    """A directory of the development format no release wrote (Parquet with _secmeta_tables.json) is refused
    by compaction and by queries, naming the problem and what to do; nothing is written and no Spark starts."""
    space = make_workspace(tmp_path, seed=3, steps=5)
    old = tmp_path / "old"
    (old / "history" / "event_date=2026-01-01").mkdir(parents=True)
    (old / "_secmeta_tables.json").write_text(json.dumps({"format": "secmeta-tables", "version": 1}))
    before = sorted(old.rglob("*"))
    for attempt in (lambda: open_tables(space.store_dir, old, space.key_file), lambda: TableReader(None, old)):
        with pytest.raises(TablesError, match=rf"{old} holds tables in a development format no release wrote "
                                              r"\(Parquet with _secmeta_tables.json\); secmeta reads Delta tables "
                                              r"only: compact the store into a new tables directory"):
            attempt()
    assert sorted(old.rglob("*")) == before


def test_a_wrong_keyring_and_a_trimmed_log_fail_before_spark(tmp_path):
    """No SparkSession is used: open_tables (which compaction_stream and the CLI call first) refuses, and
    creates nothing."""
    from secmeta.events.errors import KeyringError
    from secmeta.events.keyring import Keyring

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
    assert not (tmp_path / "tables").exists()


def test_versions_command_lists_delta_versions_newest_first(compacted, capsys):
    from secmeta.core.cli import main

    _, tables, version = compacted
    assert main(["spark", "versions", "--tables", str(tables), "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"log offset {version.offset}: acls Delta version {version.tables['acls']}, ")
    assert (f"history Delta version {version.delta_version} (+{version.events} events from log offset "
            f"{version.first_offset}, last event ") in lines[0] and lines[0].endswith("; kept)")


def test_each_kinds_declared_schema_is_what_advance_writes(spark):
    """The Delta tables are created (before Spark starts) with intervals.schema; advance's output has it."""
    from secmeta.consumers.spark import intervals
    from secmeta.consumers.spark.rows import SCHEMA

    events = spark.createDataFrame([], SCHEMA)
    for kind in intervals.KINDS:
        out = intervals.advance(kind, spark.createDataFrame([], intervals.schema(kind)), events)
        assert [(f.name, f.dataType) for f in out.schema] == [(f.name, f.dataType) for f in intervals.schema(kind)]


def test_changed_settings_are_a_version_without_events(compacted, tmp_path):
    """The store's authorizer settings (for who-could) change with no new event: open_tables records a
    version with the new settings, the same offset and table versions, and no rows."""
    space, tables, version = compacted
    copy = _copy(tables, tmp_path)
    config = space.config.with_(super_users=frozenset({"User:root"}), allow_everyone_if_no_acl_found=True)
    store_copy = tmp_path / "store"
    shutil.copytree(space.store_dir, store_copy, ignore=shutil.ignore_patterns("LOCK"))
    config.save(store_copy)
    open_tables(store_copy, copy, space.key_file)
    changed = Tables(copy).current()
    assert changed.settings == {"super_users": ["User:root"], "allow_everyone_if_no_acl_found": True}
    assert (changed.delta_version, changed.offset, changed.events, changed.tables, changed.kept) == (
        version.delta_version + 1, version.offset, 0, version.tables, version.kept)
    open_tables(store_copy, copy, space.key_file)
    assert Tables(copy).current() == changed  # unchanged settings: no new version
