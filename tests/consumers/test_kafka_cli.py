"""secmeta kafka publish / follow from the command line, against the mock cluster."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from secmeta.consumers.kafka.wire import encode_message
from secmeta.core.cli import main
from secmeta.events.codec import EventCodec
from tests.clientkit import refusing_port
from tests.consumers.conftest import format2_message, produce_raw, random_workload
from tests.logkit import acl_created
from tests.storekit import ADMIN

CODEC = EventCodec()


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


def _answer(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_the_follower_s_directory_is_a_store_the_read_commands_read(env, store_dir, kafka_bootstrap, topics,
                                                                      tmp_path, capsys):
    """Issue 23: `acls --list --store FOLLOWER_DIR` was refused and no command read the follower's image. With a
    keyring the follower keeps a local log: every read command answers on its directory as on the store, the
    past included (history, --at-offset), it reports the store's next offset (not the last one), a write there
    is refused, and a second run adds nothing twice."""
    history, state = topics("read-history"), topics("read-state")
    common = ["--bootstrap-server", kafka_bootstrap, "--history-topic", history, "--state-topic", state]
    follower = str(tmp_path / "f")
    assert main(["kafka", "publish", "--once", "--store", str(store_dir), *common]) == 0
    assert main(["kafka", "follow", "--once", "--checkpoint-dir", follower, *common]) == 0
    end = env.log.end_offset
    assert f"follower at log offset {end} (the next to apply)" in capsys.readouterr().out
    middle = str(end // 2)
    for argv in (["acls", "--list", "--json"], ["configs", "--describe", "--entity-type", "users", "--json"],
                 ["history", "--json"], ["acls", "--list", "--json", "--at-offset", middle],
                 ["who-could", "--operation", "Read", "--topic", "t1", "--json"],
                 ["authorize", "--principal", "User:u1", "--host", "10.0.0.1", "--operation", "Read", "--topic",
                  "t1", "--json"], ["config", "--describe", "--json"]):
        on_store = _answer(capsys, *argv, "--store", str(store_dir))
        assert on_store[0] in (0, 1) and on_store[1], argv  # authorize: 1 is DENIED
        assert _answer(capsys, *argv, "--store", follower) == on_store, argv
    assert main(["kafka", "follow", "--once", "--checkpoint-dir", follower, *common]) == 0
    capsys.readouterr()
    assert _answer(capsys, "history", "--json", "--store", follower) == _answer(capsys, "history", "--json",
                                                                               "--store", str(store_dir))
    code = main(["acls", "--add", "--allow-principal", "User:x", "--operation", "Read", "--topic", "t",
                 "--store", follower])
    assert code != 0 and "follower's directory" in capsys.readouterr().err


@pytest.mark.parametrize("job", ["publish", "follow"])
@pytest.mark.parametrize("line, named", [
    # In a Java properties file whitespace also separates key and value (java.util.Properties.load):
    # this is the key 'this', which librdkafka does not have.
    ("this line has no equals sign", 'No such configuration property: "this"'),
    ("linger.ms=hunter2-secret", 'Invalid value for configuration property "queue.buffering.max.ms"'),
])
def test_a_setting_librdkafka_refuses_is_a_usage_error_naming_file_and_key(env, store_dir, kafka_bootstrap, tmp_path,
                                                                            capsys, job, line, named):
    """Exit 2 naming the file and the key (librdkafka's name for it), never the value (it may be a password)."""
    bad = tmp_path / "client.properties"
    bad.write_text(f"acks=all\n{line}\n")
    where = (["--store", str(store_dir)] if job == "publish" else ["--checkpoint-dir", str(tmp_path / "f")])
    code = main(["kafka", job, "--once", *where, "--bootstrap-server", kafka_bootstrap, "--command-config", str(bad)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == f"secmeta: error: {bad}: librdkafka refuses it: {named}\n"


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


# -- bounded jobs against an unreachable broker, librdkafka's log summarised ------------------------


def _secmeta(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The CLI in its own process, as a user runs it (stderr is the terminal's, not a logger's)."""
    return subprocess.run([sys.executable, "-m", "secmeta.core.cli", *argv], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_publish_once_to_an_unreachable_broker_gives_up_at_the_timeout(env, store_dir, tmp_path):
    """publish --once exits 1 after --timeout naming what is left and why, with one line per client problem;
    the checkpoint does not move, so the next run resumes where this one was."""
    with refusing_port() as port:
        ran = _secmeta("kafka", "publish", "--once", "--store", str(store_dir), "--bootstrap-server",
                       f"127.0.0.1:{port}", "--timeout", "2", env={"SECMETA_KEY_FILE": os.environ["SECMETA_KEY_FILE"]})
    assert (ran.returncode, ran.stdout) == (1, "")
    lines = ran.stderr.splitlines()
    assert lines[-1].startswith(f"secmeta: error: published 0 of {env.log.end_offset} events to secmeta.history "
                                "and secmeta.state in 2 s, then gave up: ")
    assert f"Connect to ipv4#127.0.0.1:{port} failed: Connection refused" in lines[-1]
    assert "the next run resumes at log offset 0" in lines[-1]
    client_lines = [line for line in lines if line.startswith("kafka: ")]
    assert client_lines == [f"kafka: 127.0.0.1:{port}/bootstrap: Connect to ipv4#127.0.0.1:{port} failed: "
                            "Connection refused"]
    assert len(lines) <= 4 and "Traceback" not in ran.stderr
    assert not (store_dir / "kafka-publisher.json").exists()


def test_follow_once_from_an_unreachable_broker_fails_instead_of_an_empty_image(tmp_path):
    """follow --once that cannot read the history exits 1 saying so, instead of 0 with an empty image."""
    with refusing_port() as port:
        ran = _secmeta("kafka", "follow", "--once", "--checkpoint-dir", str(tmp_path / "f"), "--bootstrap-server",
                       f"127.0.0.1:{port}", "--timeout", "2", env={})
    assert (ran.returncode, ran.stdout) == (1, "")
    lines = ran.stderr.splitlines()
    assert lines[-1].startswith("secmeta: error: could not catch up with secmeta.history in 2 s: ")
    assert "Connection refused" in lines[-1] and "stays at log offset 0 (the next to apply)" in lines[-1]
    assert [line for line in lines if line.startswith("kafka: ")] == [
        f"kafka: 127.0.0.1:{port}/bootstrap: Connect to ipv4#127.0.0.1:{port} failed: Connection refused"]
    assert len(lines) <= 4 and "Traceback" not in ran.stderr


def test_audit_run_once_against_an_unreachable_broker_fails_quietly_by_its_timeout(tmp_path):
    """audit run --once that cannot reach Kafka exits 1 naming the broker, with librdkafka's log summarised to one
    line per problem (it printed ~200 raw lines before, and took no --timeout)."""
    with refusing_port() as port:
        ran = _secmeta("audit", "run", "--once", "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "2",
                       "--audit-file", str(tmp_path / "audit.jsonl"), "--alerts-file", str(tmp_path / "alerts.jsonl"),
                       env={})
    assert (ran.returncode, ran.stdout) == (1, "")
    lines = ran.stderr.splitlines()
    assert lines[-1].startswith(f"secmeta: error: cannot reach Kafka at 127.0.0.1:{port}: ")
    assert [line for line in lines if line.startswith("kafka: ")] == [
        f"kafka: 127.0.0.1:{port}/bootstrap: Connect to ipv4#127.0.0.1:{port} failed: Connection refused"]
    assert len(lines) <= 4 and "Traceback" not in ran.stderr
    assert (tmp_path / "audit.jsonl").read_text() == ""


def test_timeout_must_be_a_positive_number_of_seconds(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["kafka", "follow", "--once", "--checkpoint-dir", "d", "--bootstrap-server", "h:1", "--timeout", "0"])
    assert exit_.value.code == 2 and "must be a positive number of seconds, not 0" in capsys.readouterr().err


# -- gaps name the CLI option ----------------------------------------------------------------------


def test_a_gap_in_the_history_fails_naming_the_cli_option(store, kafka_bootstrap, topics, tmp_path, capsys):
    """follow --once over a history missing log offsets 3..4 exits 1 and points to --bootstrap-from-state."""
    store.create_acls([acl_created(i).event.binding for i in range(6)], context=ADMIN)
    history = topics("cli-gapped")
    envelopes = list(store.log.read())
    produce_raw(kafka_bootstrap, history, [encode_message(CODEC, envelopes[i]) for i in (0, 1, 2, 5)])
    code = main(["kafka", "follow", "--once", "--checkpoint-dir", str(tmp_path / "f"), "--bootstrap-server",
                 kafka_bootstrap, "--history-topic", history, "--timeout", "30"])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert "events 3..4 are missing" in err and "`secmeta kafka follow --bootstrap-from-state`" in err
    assert "bootstrap_from_state_topic" not in err


def test_bootstrap_from_a_state_topic_without_history_positions_fails(store, kafka_bootstrap, topics, tmp_path,
                                                                      capsys):
    """A state topic that does not say where the history continues cannot give a trustworthy image:
    --bootstrap-from-state exits 1 naming the topic, instead of reporting a partial image."""
    store.create_acls([acl_created(i).event.binding for i in range(6)], context=ADMIN)
    history, state = topics("cli-history"), topics("cli-state")
    envelopes = list(store.log.read())
    produce_raw(kafka_bootstrap, history, [encode_message(CODEC, env) for env in envelopes])
    # a format 2 state message without its secmeta.history_offset header (a format 3 state frame always holds one)
    produce_raw(kafka_bootstrap, state, [format2_message(CODEC, envelopes[i]) for i in (0, 5)])
    code = main(["kafka", "follow", "--once", "--bootstrap-from-state", "--checkpoint-dir", str(tmp_path / "f"),
                 "--bootstrap-server", kafka_bootstrap, "--history-topic", history, "--state-topic", state])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err.startswith(f"secmeta: error: the state topic {state} holds events up to log offset 5 but records "
                          f"no position in {history}")
    assert "without --bootstrap-from-state" in err
