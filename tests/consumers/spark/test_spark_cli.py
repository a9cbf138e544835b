"""``secmeta spark compact | query | audit`` run in-process on the shared session."""

from __future__ import annotations

import json

import pytest

from core.cli import main
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
    code, out, _ = _run(capsys, "spark", "compact", *common, "--once", "--max-events-per-trigger", "30")
    assert code == 0 and "version 30: +30 events" in out and "tables at version" in out
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
    (["spark", "query", "who-could", "--operation", "FLY", "--topic", "t"], "unknown AclOperation 'FLY'"),
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
    assert code == 2 and "not a secmeta store" in err
    code, _, err = _run(capsys, "spark", "query", "acls", "--tables", str(tmp_path))
    assert code == 2 and "not a secmeta tables directory" in err


def test_audit_once_reports_alerts(cli_space, capsys, tmp_path):
    space, _ = cli_space
    code, out, _ = _run(capsys, "spark", "audit", "--store", str(space.store_dir), "--key-file",
                        str(space.key_file), "--alerts", str(tmp_path / "alerts"), "--once")
    assert code == 0 and "audited" in out and "alerts table" in out
