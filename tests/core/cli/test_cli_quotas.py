"""``secmeta configs`` as kafka-configs.sh for client quotas (KIP-546), in process and over the wire.

Kafka's behaviour pinned here: tools/src/main/java/org/apache/kafka/tools/ConfigCommand.java
(alterQuotaConfigs: the describe before the alter and "Invalid config(s)", one AlterClientQuotas entry;
describeClientQuotaAndUserScramCredentialConfigs: a strict filter of EXACT / DEFAULT / SPECIFIED
components) and ConfigCommandTest / UserScramCredentialsCommandTest for the printed lines.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.core.cli.quota_configs import java_double
from tests.clientkit import client_properties, write_command_config
from tests.clikit import log_end, make_store, run
from tests.serverkit import running_server


@pytest.fixture
def store(tmp_path, monkeypatch):
    return make_store(tmp_path, monkeypatch)


def configs(*options: str) -> list[str]:
    return ["configs", *options]


def test_add_describe_and_delete_a_users_quotas(store, capsys):
    """UserScramCredentialsCommandTest: "Quota configs for user-principal 'user1' are consumer_byte_rate=20000.0"."""
    assert run(capsys, *configs("--entity-type", "users", "--entity-name", "user1", "--alter",
                                "--add-config", "consumer_byte_rate=20000,request_percentage=12.5")) == (
        0, "Completed updating config for user user1.\n", "")
    code, out, _ = run(capsys, *configs("--entity-type", "users", "--entity-name", "user1", "--describe"))
    assert (code, out) == (0, "Quota configs for user-principal 'user1' are consumer_byte_rate=20000.0, "
                              "request_percentage=12.5\n")
    assert run(capsys, *configs("--user", "user1", "--alter", "--delete-config", "consumer_byte_rate"))[0] == 0
    assert run(capsys, *configs("--user", "user1", "--describe"))[1] == (
        "Quota configs for user-principal 'user1' are request_percentage=12.5\n")


def test_alter_json_names_the_offsets_entity_and_keys_written(store, capsys):
    """--alter --json (every write command takes it): the log offsets written, the entity, what was set and deleted."""
    before = log_end(store)
    code, out, err = run(capsys, *configs("--user", "user1", "--client", "app", "--alter", "--json",
                                          "--add-config", "producer_byte_rate=1024"))
    assert (code, err) == (0, "")
    assert json.loads(out) == {"log": {"first_offset": before, "next_offset": before + 1},
                               "entity": {"user": "user1", "client-id": "app"}, "set": {"producer_byte_rate": 1024.0},
                               "deleted": []}


def test_defaults_and_a_users_client_are_their_own_entities(store, capsys):
    """--entity-default is the null-named entity; users and clients together name a user's client."""
    assert run(capsys, *configs("--entity-type", "users", "--entity-default", "--alter",
                                "--add-config", "producer_byte_rate=1048576"))[1] == (
        "Completed updating default config for users in the cluster.\n")
    assert run(capsys, *configs("--entity-type", "users", "--entity-type", "clients", "--entity-name", "alice",
                                "--entity-default", "--alter", "--add-config", "producer_byte_rate=10000000"))[0] == 0
    assert run(capsys, *configs("--client", "app", "--alter", "--add-config", "controller_mutation_rate=0.0005"))[1] == (
        "Completed updating config for client app.\n")
    assert run(capsys, *configs("--entity-type", "users", "--describe"))[1] == (
        "Quota configs for the default user-principal are producer_byte_rate=1048576.0\n")
    assert run(capsys, *configs("--entity-type", "users", "--entity-type", "clients", "--describe"))[1] == (
        "Quota configs for user-principal 'alice', the default client-id are producer_byte_rate=1.0E7\n")
    assert run(capsys, *configs("--entity-type", "clients", "--describe"))[1] == (
        "Quota configs for client-id 'app' are controller_mutation_rate=5.0E-4\n")


def test_describe_of_users_shows_quotas_then_scram_credentials(store, capsys):
    """For users alone, SCRAM credential lines follow the quota lines (describeClientQuotaAndUserScramCredentialConfigs)."""
    run(capsys, *configs("--user", "alice", "--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=pw]"))
    run(capsys, *configs("--user", "alice", "--alter", "--add-config", "producer_byte_rate=1024"))
    assert run(capsys, *configs("--user", "alice", "--describe"))[1] == (
        "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0\n"
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n")
    code, out, err = run(capsys, *configs("--entity-type", "users", "--describe", "--json"))
    assert (code, err) == (0, "")
    assert json.loads(out) == [{"entity": {"user": "alice"}, "quotas": {"producer_byte_rate": 1024.0}},
                               {"user": "alice", "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 8192}]}]


def test_a_user_with_quotas_and_no_credential_is_described_without_error(store, capsys):
    run(capsys, *configs("--user", "bob", "--alter", "--add-config", "producer_byte_rate=1024"))
    assert run(capsys, *configs("--user", "bob", "--describe")) == (
        0, "Quota configs for user-principal 'bob' are producer_byte_rate=1024.0\n", "")


def test_deleting_a_quota_that_is_not_set_is_refused(store, capsys):
    """ConfigCommand.alterQuotaConfigs: "Invalid config(s): k" although the server would take it as a no-op."""
    before = log_end(store)
    code, out, err = run(capsys, *configs("--user", "alice", "--alter", "--delete-config", "consumer_byte_rate"))
    assert (code, out) == (1, "") and "Invalid config(s): consumer_byte_rate" in err
    assert log_end(store) == before


@pytest.mark.parametrize("options, message", [
    (["--add-config", "producer_byte_rate=10000.5"], "INVALID_REQUEST: producer_byte_rate cannot be a fractional value."),
    (["--add-config", "producer_byte_rate=-1"], "INVALID_REQUEST: Quota producer_byte_rate must be greater than 0"),
])
def test_a_value_the_store_refuses_writes_nothing(store, capsys, options, message):
    before = log_end(store)
    code, out, err = run(capsys, *configs("--user", "alice", "--alter", *options))
    assert (code, out) == (1, "") and message in err and "nothing was changed" in err
    assert log_end(store) == before


@pytest.mark.parametrize("options, message", [
    (["--user", "a", "--add-config", "producer_byte_rate=fast"], "Cannot parse quota configuration value for "
                                                                  "producer_byte_rate: fast"),
    (["--user", "a", "--add-config", "producer_byte_rate=1,SCRAM-SHA-256=[password=p]"],
     "SCRAM credential configs (SCRAM-SHA-256) and quota configs cannot be altered in one command"),
    (["--user", "a", "--add-config", "producer_byte_rate=1,connection_creation_rate=2"],
     "unknown config 'connection_creation_rate' for quotas"),
    (["--entity-type", "users", "--add-config", "producer_byte_rate=1"], "An entity name must be specified for every"),
    (["--entity-type", "users", "--entity-type", "clients", "--entity-name", "a", "--add-config", "producer_byte_rate=1"],
     "An entity name must be specified for every entity type"),
])
def test_quota_option_mistakes_are_usage_errors(store, capsys, options, message):
    before = log_end(store)
    code, out, err = run(capsys, *configs("--alter", *options))
    assert (code, out) == (2, "") and message in err
    assert log_end(store) == before


def test_describe_as_of_a_past_offset(store, capsys):
    """--at-offset answers from the store as it stood (time travel)."""
    run(capsys, *configs("--user", "alice", "--alter", "--add-config", "producer_byte_rate=1024"))
    offset = log_end(store)
    run(capsys, *configs("--user", "alice", "--alter", "--delete-config", "producer_byte_rate"))
    assert run(capsys, *configs("--user", "alice", "--describe"))[1] == ""
    assert run(capsys, *configs("--user", "alice", "--describe", "--at-offset", str(offset)))[1] == (
        "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0\n")


@given(st.floats(min_value=1e-300, max_value=1e300))
def test_java_double_reads_back_as_the_same_double(value):
    """Double.toString's text is shortest-round-trip: Java's Double.parseDouble (and Python's float) read it back."""
    text = java_double(value)
    assert float(text) == value and ("E" in text) == (not 1e-3 <= value < 1e7)


@pytest.mark.server
def test_over_the_wire_the_same_command_sets_and_describes(tmp_path, capsys):
    """--bootstrap-server: AlterClientQuotas / DescribeClientQuotas to `secmeta serve`, same output."""
    with running_server(tmp_path / "server", "SASL_SSL://127.0.0.1:0") as server:
        config = write_command_config(tmp_path, client_properties(server, "SASL_SSL", "admin"))
        wire = ["--bootstrap-server", server.bootstrap("SASL_SSL"), "--command-config", str(config)]
        assert run(capsys, *configs("--user", "alice", "--client", "app", "--alter",
                                    "--add-config", "consumer_byte_rate=2048", *wire))[0] == 0
        assert run(capsys, *configs("--user", "alice", "--client", "app", "--describe", *wire))[1] == (
            "Quota configs for user-principal 'alice', client-id 'app' are consumer_byte_rate=2048.0\n")
        code, _, err = run(capsys, *configs("--user", "alice", "--client", "app", "--alter",
                                            "--delete-config", "producer_byte_rate", *wire))
        assert code == 1 and "Invalid config(s): producer_byte_rate" in err
