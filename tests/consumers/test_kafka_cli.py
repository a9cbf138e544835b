"""secmeta kafka publish / follow from the command line, against the mock cluster."""

from __future__ import annotations

import pytest

from core.cli import main
from tests.consumers.conftest import random_workload


@pytest.fixture
def env(store, keyring, tmp_path, monkeypatch, clock):
    random_workload(store, seed=3, steps=25, clock=clock)
    store.close()
    keys = tmp_path / "cli-keys.json"
    keys.write_bytes((tmp_path / "keys.json").read_bytes())
    keys.chmod(0o600)
    monkeypatch.setenv("SECMETA_KEY_FILE", str(keys))
    return store


def test_publish_once_then_follow_once_match_the_store(env, store_dir, kafka_bootstrap, topics, tmp_path, capsys):
    """publish --once then follow --once: the follower reports the store's counts."""
    history, state = topics("cli-history"), topics("cli-state")
    common = ["--bootstrap-server", kafka_bootstrap, "--history-topic", history, "--state-topic", state]
    assert main(["kafka", "publish", "--once", "--store", str(store_dir), *common]) == 0
    assert main(["kafka", "publish", "--once", "--store", str(store_dir), *common]) == 0
    out = capsys.readouterr().out
    assert "published 0 events" in out.splitlines()[-1]  # the second run resumes from its checkpoint
    assert main(["kafka", "follow", "--once", "--checkpoint-dir", str(tmp_path / "f"), *common]) == 0
    img = env.image
    summary = capsys.readouterr().out
    assert f"{len(img.acls)} ACLs" in summary and f"{len(img.scram)} users" in summary and "skipped 0" in summary


def test_bad_command_config_is_named(env, store_dir, kafka_bootstrap, tmp_path, capsys):
    """A malformed --command-config exits 2 naming the file and line."""
    bad = tmp_path / "client.properties"
    bad.write_text("acks=all\nthis line has no equals sign\n")
    code = main(["kafka", "publish", "--once", "--store", str(store_dir), "--bootstrap-server", kafka_bootstrap,
                 "--command-config", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and "client.properties" in err and "2" in err


def test_audit_run_once_writes_lines_and_alerts(env, store_dir, kafka_bootstrap, topics, tmp_path, capsys):
    """audit run --once writes one audit line per event and the alerts the default rules raise."""
    history, state = topics("audit-cli-history"), topics("audit-cli-state")
    common = ["--bootstrap-server", kafka_bootstrap, "--history-topic", history]
    assert main(["kafka", "publish", "--once", "--store", str(store_dir), *common, "--state-topic", state]) == 0
    audit, alerts = tmp_path / "audit.jsonl", tmp_path / "alerts.jsonl"
    assert main(["audit", "run", "--once", *common, "--alerts-topic", topics("alerts"), "--audit-file", str(audit),
                 "--alerts-file", str(alerts)]) == 0
    assert len(audit.read_text().splitlines()) == env.log.end_offset
    assert "audited" in capsys.readouterr().out


def test_audit_rules_file_errors_are_named(kafka_bootstrap, tmp_path, capsys):
    """An unknown key in the rules file exits 2 naming the key."""
    rules = tmp_path / "rules.toml"
    rules.write_text("[mass_deletion]\nthreshhold = 3\n")
    code = main(["audit", "run", "--once", "--bootstrap-server", kafka_bootstrap, "--history-topic", "h",
                 "--rules", str(rules), "--audit-file", str(tmp_path / "a"), "--alerts-file", str(tmp_path / "b")])
    assert code == 2 and "threshhold" in capsys.readouterr().err
