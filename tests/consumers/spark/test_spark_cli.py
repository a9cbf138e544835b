"""``secmeta spark compact | query | audit`` run in-process on the shared session."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from secmeta.core.cli import main
from secmeta.core.times import Point
from tests.consumers.spark.sparkkit import acl_state, make_workspace


@pytest.fixture(scope="module")
def cli_space(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("spark-cli")
    space = make_workspace(root, seed=21, steps=40)
    return space, root / "tables"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_compact_then_query_equals_the_store(cli_space, capsys):
    space, tables = cli_space
    common = ["--store", str(space.store_dir), "--key-file", str(space.key_file), "--tables", str(tables)]
    code, out, err = _run(capsys, "spark", "compact", *common, "--once", "--max-events-per-trigger", "30")
    assert code == 0 and "tables in " in out and " at log offset " in out
    assert "spark compact: log offset 30: +30 events (history Delta version 1" in err  # each batch, on stderr
    with space.open() as store:
        end = store.log.end_offset
        mid = end // 2
        code, out, _ = _run(capsys, "spark", "query", "acls", "--tables", str(tables), "--at-offset", str(mid),
                            "--json")
        assert code == 0
        got = {(a["resource_type"], a["resource_name"], a["pattern_type"], a["principal"], a["host"],
                a["operation"], a["permission_type"]) for a in json.loads(out)}
        assert got == acl_state(store.as_of(offset=mid))
        code, out, _ = _run(capsys, "spark", "query", "who-could", "--tables", str(tables), "--operation", "READ",
                            "--topic", "topic-1", "--at-offset", str(mid), "--json")
        assert code == 0
        expected = [g.to_dict() for g in store.who_could("READ", "TOPIC", "topic-1", at=mid)]
        assert json.loads(out) == json.loads(json.dumps(expected))
    code, out, _ = _run(capsys, "spark", "query", "sql", "--tables", str(tables),
                        "SELECT count(*) AS n FROM secmeta_history")
    assert code == 0 and f"\n{end}" in out


@pytest.mark.parametrize("argv, message", [
    (["spark", "query", "who-could", "--operation", "FLY", "--topic", "t"],
     "unknown operation 'FLY' (valid operation names: All, Read, "),  # the --operation rule of acls and authorize
    (["spark", "query", "acls", "--at", "yesterday"], "malformed time 'yesterday'"),
    (["spark", "query", "tokens", "--from", "2027-13-01T00:00:00Z"], "malformed time"),
])
def test_bad_query_input_fails_before_spark(cli_space, capsys, argv, message):
    _, tables = cli_space
    code, _, err = _run(capsys, *argv[:3], "--tables", str(tables), *argv[3:])
    assert code == 2 and message in err


@pytest.mark.parametrize("seconds", ["0", "-1", "inf", "soon"])
def test_bad_trigger_seconds_fail_before_spark(cli_space, capsys, tmp_path, seconds):
    space, _ = cli_space
    with pytest.raises(SystemExit) as exit_:
        main(["spark", "compact", "--store", str(space.store_dir), "--key-file", str(space.key_file),
              "--tables", str(tmp_path / "t"), "--trigger-seconds", seconds])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "argument --trigger-seconds:" in err and "number of seconds" in err
    assert not (tmp_path / "t").exists()


def test_not_a_store_and_not_tables_fail_clearly(cli_space, capsys, tmp_path):
    space, _ = cli_space
    code, _, err = _run(capsys, "spark", "compact", "--store", str(tmp_path), "--key-file", str(space.key_file),
                        "--tables", str(tmp_path / "t"), "--once")
    assert code == 1 and "not a secmeta store" in err
    code, _, err = _run(capsys, "spark", "query", "acls", "--tables", str(tmp_path))
    assert code == 2 and "not a secmeta tables directory" in err


def test_audit_once_reports_alerts(cli_space, capsys, tmp_path):
    space, _ = cli_space
    code, out, _ = _run(capsys, "spark", "audit", "--store", str(space.store_dir), "--key-file",
                        str(space.key_file), "--alerts", str(tmp_path / "alerts"), "--once")
    assert code == 0 and "audited" in out and "alerts table" in out


_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


@pytest.fixture(scope="module")
def relative_tables(cli_space, tmp_path_factory):
    """The store compacted by `spark compact` with --store from $SECMETA_STORE and a relative --tables:
    (the working directory to run in, the tables' relative path)."""
    space, _ = cli_space
    where = tmp_path_factory.mktemp("relative")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(where)
        patch.setenv("SECMETA_STORE", str(space.store_dir))
        assert main(["spark", "compact", "--key-file", str(space.key_file), "--tables", "s2.tables", "--once",
                     "--max-events-per-trigger", "25"]) == 0
    assert (where / "s2.tables" / "history" / "_delta_log").is_dir()
    return where, "s2.tables"


@pytest.mark.parametrize("engine", ["polars", "spark"])
def test_a_relative_tables_path_works_for_every_query(relative_tables, cli_space, capsys, monkeypatch, engine):
    """A relative --tables (the issue's `ValueError: relative path can't be expressed as a file URI`): sql,
    history and who-could --as-of answer, with either engine; and compact took --store from $SECMETA_STORE."""
    where, tables = relative_tables
    space, _ = cli_space
    monkeypatch.chdir(where)
    with space.open() as store:
        end = store.log.end_offset
        t = next(store.history(start_offset=end // 2, limit=1)).timestamp_ms
        expected = [g.to_dict() for g in store.who_could("READ", "TOPIC", "topic-1", at=Point.at_time(t))]
    common = ["--tables", tables, "--engine", engine]
    code, out, err = _run(capsys, "spark", "query", "sql", *common, "SELECT count(*) AS n FROM secmeta_history")
    assert code == 0 and f"\n{end}" in out, err
    code, out, err = _run(capsys, "spark", "query", "history", *common, "--limit", "2", "--json")
    assert code == 0 and [r["offset"] for r in json.loads(out)] == [0, 1], err
    code, out, err = _run(capsys, "spark", "query", "who-could", *common, "--operation", "READ", "--topic", "topic-1",
                          "--as-of", str(t), "--json")
    assert code == 0 and json.loads(out) == json.loads(json.dumps(expected)), err


@pytest.mark.parametrize("engine", ["polars", "spark"])
def test_query_times_are_iso_8601_with_z(relative_tables, capsys, monkeypatch, engine):
    """spark query prints times as every command does: ISO-8601 UTC with Z (JSON and table, history and sql)."""
    where, tables = relative_tables
    monkeypatch.chdir(where)
    common = ["--tables", tables, "--engine", engine]
    code, out, _ = _run(capsys, "spark", "query", "history", *common, "--limit", "1", "--json")
    (row,) = json.loads(out)
    assert code == 0 and _ISO.fullmatch(row["timestamp"])
    code, out, _ = _run(capsys, "spark", "query", "history", *common, "--limit", "1")
    assert row["timestamp"] in out
    code, out, _ = _run(capsys, "spark", "query", "history", *common, "--limit", "1000")
    assert all(_ISO.fullmatch(v) for v in re.findall(r"(?:issue|expiry|max)_timestamp=(\S+)", out))
    code, out, _ = _run(capsys, "spark", "query", "sql", *common,
                        "SELECT valid_from FROM secmeta_acl_intervals ORDER BY valid_from_offset LIMIT 1")
    assert code == 0 and _ISO.search(out) and "000000" not in out, out


def test_versions_name_the_log_offset_and_every_tables_delta_version(relative_tables, capsys, monkeypatch):
    """versions --json lists, per compacted log offset, each table's Delta version; a text line names both."""
    from secmeta.consumers.spark.tables import TABLE_NAMES, Tables

    where, tables = relative_tables
    monkeypatch.chdir(where)
    code, out, _ = _run(capsys, "spark", "versions", "--tables", tables, "--json")
    rows = json.loads(out)
    versions = {v.offset: v for v in Tables(where / tables).versions() if v.events}
    assert code == 0 and [r["log_offset"] for r in rows if r["events"]] == sorted(versions, reverse=True)
    for r in rows:
        if r["events"]:
            assert r["delta_versions"] == dict(versions[r["log_offset"]].tables) and set(r["delta_versions"]) == set(
                TABLE_NAMES)
            assert _ISO.fullmatch(r["committed"])
    code, out, _ = _run(capsys, "spark", "versions", "--tables", tables)
    newest = versions[max(versions)]
    line = out.splitlines()[0]
    assert line.startswith(f"log offset {newest.offset}: acls Delta version {newest.tables['acls']}, ")
    assert f" history Delta version {newest.tables['history']} (" in line


def test_spark_help_says_delta():
    """`secmeta spark --help` describes Delta Lake tables (no longer Parquet)."""
    ran = subprocess.run([sys.executable, "-m", "secmeta.core.cli", "spark", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert ran.returncode == 0 and "Delta Lake tables" in ran.stdout and "Parquet" not in ran.stdout


def test_a_fresh_spark_says_it_is_starting_and_prints_no_jvm_lines(tmp_path):
    """In its own process (so Spark really starts): stderr holds the start-up note and one line per
    compaction batch, and none of the JVM's or Spark's start-up lines; stdout holds the answer.
    Its store is its own (not the shared session's fixture), so it may run on either test worker. Its JVM gets the
    tests' JVM options (tests/jvm.py, through the inherited SPARK_SUBMIT_OPTS): 60 -> 40 s of CPU."""
    (tmp_path / "space").mkdir()
    space = make_workspace(tmp_path / "space", seed=21, steps=20)
    with space.open() as store:
        half = (store.log.end_offset + 1) // 2  # two batches: each costs seconds in a fresh JVM
    ran = subprocess.run(
        [sys.executable, "-m", "secmeta.core.cli", "spark", "compact", "--store", str(space.store_dir), "--key-file",
         str(space.key_file), "--tables", str(tmp_path / "tables"), "--once", "--max-events-per-trigger", str(half)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert ran.returncode == 0, ran.stderr
    lines = ran.stderr.splitlines()
    assert lines[0] == "spark compact: starting Spark (local[2])..."
    assert lines[1].startswith(f"spark compact: log offset {half}: +{half} events (history Delta version 1, last "
                               "event ")
    assert len(lines) == 3, ran.stderr
    assert all(line.startswith("spark compact: log offset ") for line in lines[1:]), ran.stderr
    assert ran.stdout.startswith("tables in ")
