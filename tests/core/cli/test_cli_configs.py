"""``secmeta configs`` as kafka-configs.sh for users' SCRAM credentials, run as a user would.

Kafka's behaviour pinned here comes from tools/src/main/java/org/apache/kafka/tools/ConfigCommand.java
(ConfigCommandOptions.checkArgs, parseConfigsToBeAdded, alterUserScramCredentialConfigs,
describeClientQuotaAndUserScramCredentialConfigs) and metadata/.../controller/ScramControlManager.java
(alterCredentials).  A refused command prints nothing on stdout and leaves the log's end offset where it was.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.core.cli.scram_configs import ScramSetting, scram_settings, split_add_config
from secmeta.events.types import ScramMechanism
from tests.clientkit import client_properties, remote_admin, write_command_config
from tests.clikit import log_end, run
from tests.serverkit import running_server

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def alter(*options: str, user: str = "alice") -> list[str]:
    return ["configs", "--user", user, "--alter", *options]


def describe(user: str = "alice") -> list[str]:
    return ["configs", "--user", user, "--describe"]


def test_add_and_delete_of_one_user_in_one_command_is_refused_whole(store, capsys):
    """--add-config and --delete-config of the same mechanism: DUPLICATE_RESOURCE, neither applies.

    ConfigCommand.alterUserScramCredentialConfigs sends the deletions and upsertions in one request;
    ScramControlManager.alterCredentials answers a user's second item with DUPLICATE_RESOURCE and applies none.
    """
    assert run(capsys, *alter("--add-config", "SCRAM-SHA-256=[iterations=8192,password=old]"))[0] == 0
    before = log_end(store)
    code, out, err = run(capsys, *alter("--add-config", "SCRAM-SHA-256=[iterations=4096,password=new]",
                                        "--delete-config", "SCRAM-SHA-256"))
    assert (code, out) == (1, "")
    assert ("altering the SCRAM credentials of user 'alice' failed, nothing was changed: DUPLICATE_RESOURCE: "
            "A user credential cannot be altered twice in the same request") in err
    assert log_end(store) == before
    assert run(capsys, *describe())[1] == "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n"


@pytest.mark.parametrize("add_config, error", [
    ("SCRAM-SHA-256=[iterations=8192,password=x],SCRAM-SHA-512=[iterations=10,password=y]", "DUPLICATE_RESOURCE"),
    ("SCRAM-SHA-512=[iterations=10,password=y],SCRAM-SHA-256=[iterations=8192,password=x]",
     "UNACCEPTABLE_CREDENTIAL: Too few iterations"),
    ("SCRAM-SHA-256=[password=x],SCRAM-SHA-512=[password=y]", "DUPLICATE_RESOURCE"),
])
def test_two_mechanisms_in_one_add_config_apply_neither(store, capsys, add_config, error):
    """One user's alteration is one request, all or nothing: an invalid mechanism beside a valid one applies
    neither, and so do two valid ones, as Kafka's controller takes one item per user per request
    (ScramControlManager.alterCredentials; AlterUserScramCredentialsRequestTest.testAlterAndDescribe: "do not
    update the same user more than once per request"). The first failing item names the error."""
    before = log_end(store)
    code, out, err = run(capsys, *alter("--add-config", add_config))
    assert (code, out) == (1, "") and error in err and "nothing was changed" in err
    if error == "DUPLICATE_RESOURCE":
        assert "alter one mechanism per command" in err
    assert log_end(store) == before
    code, out, err = run(capsys, *describe())
    assert (code, out) == (1, "") and "RESOURCE_NOT_FOUND" in err


def test_one_mechanism_per_command_builds_a_user_with_both(store, capsys):
    """Each mechanism in its own command; describe lists them as ConfigCommand does (', '-joined)."""
    assert run(capsys, *alter("--add-config", "SCRAM-SHA-256=[iterations=8192,password=pw]")) == (
        0, "Completed updating config for user alice.\n", "")
    assert run(capsys, *alter("--add-config", "SCRAM-SHA-512=[password=pw]"))[0] == 0
    assert run(capsys, *describe()) == (0, "SCRAM credential configs for user-principal 'alice' are "
                                           "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n", "")
    assert run(capsys, *alter("--delete-config", "SCRAM-SHA-512"))[0] == 0
    assert run(capsys, *describe())[1].endswith("are SCRAM-SHA-256=iterations=8192\n")


def test_user_is_short_for_entity_type_users_with_entity_name(store, capsys):
    """--user NAME and --entity-type users --entity-name NAME name the same user (ConfigCommandOptions.entityFlags)."""
    long_form = ["configs", "--entity-type", "users", "--entity-name", "alice"]
    assert run(capsys, *long_form, "--alter", "--add-config", "SCRAM-SHA-256=[password=pw]")[0] == 0
    assert run(capsys, *describe()) == run(capsys, *long_form, "--describe")
    assert run(capsys, *alter("--delete-config", "SCRAM-SHA-256"))[0] == 0
    assert run(capsys, *long_form, "--describe")[0] == 1


@pytest.mark.parametrize("entity, message", [
    (["--user", "alice", "--entity-type", "users"],
     "--entity-{type,name,default} should not be used in conjunction with specific entity flags"),
    (["--user", "alice", "--entity-name", "bob"], "should not be used in conjunction with specific entity flags"),
    (["--user-defaults"], "--entity-default and --user-defaults name the users' default quota configs"),
    (["--entity-type", "users", "--entity-default"], "--user-defaults name the users' default quota configs"),
    (["--user", "alice", "--user", "bob"], "give one user: 2 were given"),
    (["--entity-type", "users", "--entity-name", "a", "--entity-name", "b"], "2 were given for 1"),
    (["--entity-type", "users", "--entity-type", "users", "--entity-name", "a"], "Duplicate entity type(s) specified"),
    (["--client", "app"], "SCRAM credentials belong to a user alone"),
    (["--entity-type", "users"], "--alter needs the user"),
    ([], "At least one entity type must be specified"),
    (["--entity-name", "alice"], "At least one entity type must be specified"),
    (["--entity-type", "topics", "--entity-name", "t"], "invalid choice: 'topics'"),
])
def test_entity_options_kafka_refuses_are_usage_errors(store, capsys, entity, message):
    """ConfigCommandOptions.checkArgs refuses mixing --user with --entity-*; --user-defaults with SCRAM configs
    is refused by alterConfig ("not allowed with User SCRAM Credentials"); one user per command."""
    before = log_end(store)
    code, out, err = run(capsys, "configs", *entity, "--alter", "--add-config", "SCRAM-SHA-256=[password=pw]")
    assert (code, out) == (2, "") and message in err
    assert log_end(store) == before


def test_add_config_file_is_a_java_properties_file(store, capsys, tmp_path):
    """--add-config-file takes a properties file of the same keys (ConfigCommand.parseConfigsToBeAdded:
    Utils.loadProps); comments and continuation lines are properties syntax; brackets are optional."""
    path = tmp_path / "alice.properties"
    path.write_text("# alice's SCRAM-SHA-256 credential\nSCRAM-SHA-256 = iterations=8192,\\\n    password=from-file\n")
    assert run(capsys, *alter("--add-config-file", str(path))) == (0, "Completed updating config for user alice.\n", "")
    path.write_text("SCRAM-SHA-512=[iterations=4096,password=from-file]\n")
    assert run(capsys, *alter("--add-config-file", str(path)))[0] == 0
    assert run(capsys, *describe())[1].endswith("are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")


@pytest.mark.parametrize("options, message", [
    (["--add-config", "SCRAM-SHA-256=[password=x]", "--add-config-file", "{file}"],
     "Only one of --add-config or --add-config-file must be specified"),
    (["--add-config-file", "{missing}"], "cannot read --add-config-file"),
    (["--add-config-file", "{bad_key}"], "--add-config-file: unknown config 'producer_byte_rates'"),
    (["--add-config", "SCRAM-SHA-256=[password=x]", "--add-config", "SCRAM-SHA-512=[password=x]"],
     "--add-config given more than once"),
    ([], "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter"),
    (["--delete-config", "SCRAM-SHA-256", "--at-offset", "0"], "--as-of and --at-offset apply to --describe only"),
])
def test_alter_option_mistakes_are_usage_errors(store, capsys, tmp_path, options, message):
    """ConfigCommandOptions.checkArgs's --alter rules; a repeated --add-config is refused, not last-wins."""
    files = {"file": tmp_path / "ok.properties", "missing": tmp_path / "missing.properties",
             "bad_key": tmp_path / "bad.properties"}
    files["file"].write_text("SCRAM-SHA-256=password=x\n")
    files["bad_key"].write_text("producer_byte_rates=1024\n")
    before = log_end(store)
    code, out, err = run(capsys, *alter(*(o.format(**files) for o in options)))
    assert (code, out) == (2, "") and message in err
    assert log_end(store) == before


@pytest.mark.parametrize("options, named", [
    (["--add-config", "SCRAM-SHA-1=[password=x]"], "'SCRAM-SHA-1'"),
    (["--add-config", "scram-sha-256=[password=x]"], "'scram-sha-256'"),
    (["--add-config", "producer_byte_rates=1024"], "'producer_byte_rates'"),
    (["--add-config", "password=x"], "'password'"),
    (["--delete-config", "SCRAM-SHA-1"], "'SCRAM-SHA-1'"),
    (["--delete-config", "SCRAM-SHA-256,consumer_byte_rates"], "'consumer_byte_rates'"),
])
def test_unknown_config_keys_are_named_with_the_accepted_ones(store, capsys, options, named):
    """A key other than a SCRAM mechanism name (ScramMechanism.isScram: exact names) is named, with the
    accepted keys listed; never UNKNOWN as a choice, never a character position."""
    before = log_end(store)
    code, out, err = run(capsys, *alter(*options))
    assert (code, out) == (2, "")
    assert f"unknown config {named} for users" in err and "the accepted keys are SCRAM-SHA-256, SCRAM-SHA-512" in err
    assert "UNKNOWN" not in err and "character" not in err
    assert log_end(store) == before


@pytest.mark.parametrize("add_config, message", [
    ("SCRAM-SHA-256=iterations", "SCRAM-SHA-256: expected [iterations=N,password=P]"),
    ("SCRAM-SHA-256=[iteration=8192,password=zq9x]", "SCRAM-SHA-256: expected [iterations=N,password=P]"),
    ("SCRAM-SHA-256=[iterations=1,password=zq9x,iterations=8192]", "SCRAM-SHA-256: iterations is given twice"),
    ("SCRAM-SHA-256=[password=zq9x", "--add-config has unbalanced square brackets"),
    ("SCRAM-SHA-256=[password=zq9x]]", "--add-config has unbalanced square brackets"),
    ("SCRAM-SHA-256=[password=a],SCRAM-SHA-256=[password=zq9x]", "--add-config gives 'SCRAM-SHA-256' twice"),
    ("zq9x", 'every config must be "key=val", or "key=[val1,val2]"'),
    ("SCRAM-SHA-256=password=zq9x", 'every config must be "key=val"'),
])
def test_malformed_add_config_is_named_and_the_value_not_repeated(store, capsys, add_config, message):
    """What cannot be parsed is named by key and shape; the text, which may hold a password, is not echoed."""
    before = log_end(store)
    code, out, err = run(capsys, *alter("--add-config", add_config))
    assert (code, out) == (2, "") and message in err and "zq9x" not in err
    assert log_end(store) == before


def test_scram_settings_are_taken_in_either_order(store, capsys):
    """Issue 23: `--add-config 'SCRAM-SHA-256=[password=x,iterations=8192]'` was refused (iterations had to come
    first); a Kafka user writes the two in either order, and both orders store the same credential."""
    code, out, err = run(capsys, *alter("--add-config", "SCRAM-SHA-256=[password=pw1,iterations=8192]"))
    assert (code, out, err) == (0, "Completed updating config for user alice.\n", "")
    code, out, err = run(capsys, *alter("--add-config", "SCRAM-SHA-512=[iterations=4096,password=pw2]"))
    assert (code, err) == (0, "")
    assert run(capsys, *describe())[1] == ("SCRAM credential configs for user-principal 'alice' are "
                                           "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")


def test_describe_of_users_without_a_name_describes_every_user(store, capsys):
    """Issue 23: kafka-configs.sh --describe --entity-type users (no --entity-name) describes every user."""
    for user in ("alice", "bob"):
        assert run(capsys, *alter("--add-config", "SCRAM-SHA-256=[iterations=8192,password=pw]", user=user))[0] == 0
    code, out, err = run(capsys, "configs", "--describe", "--entity-type", "users")
    assert (code, err) == (0, "")
    assert out == ("SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n"
                   "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=8192\n")
    code, out, err = run(capsys, "configs", "--describe")  # ConfigCommandOptions.checkArgs refuses no type too
    assert (code, out) == (2, "") and "At least one entity type must be specified" in err


def test_alter_json_says_what_was_written_and_never_the_password(store, capsys):
    """Every write command takes --json: the log offsets it wrote and what it changed, no secret."""
    before = log_end(store)
    code, out, err = run(capsys, *alter("--add-config", "SCRAM-SHA-256=[iterations=8192,password=zq9x]", "--json"))
    assert (code, err) == (0, "") and "zq9x" not in out
    assert json.loads(out) == {"log": {"first_offset": before, "next_offset": before + 1}, "user": "alice",
                               "upserted": [{"mechanism": "SCRAM-SHA-256", "iterations": 8192}], "deleted": []}
    assert log_end(store) == before + 1


def test_a_password_left_out_is_read_from_stdin(store, capsys, monkeypatch):
    """secmeta's addition: without password=, the password is asked for (stdin when it is not a terminal)."""
    monkeypatch.setattr("sys.stdin", io.StringIO("from-stdin\n"))
    code, out, err = run(capsys, *alter("--add-config", "SCRAM-SHA-256=[iterations=8192]"))
    assert (code, err) == (0, "") and "from-stdin" not in out
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    before = log_end(store)
    code, out, err = run(capsys, *alter("--add-config", "SCRAM-SHA-512=[]"))
    assert (code, out) == (2, "") and "no password for alice (SCRAM-SHA-512) on stdin" in err
    assert log_end(store) == before


def test_too_few_iterations_is_the_stores_refusal(store, capsys):
    """The store's UNACCEPTABLE_CREDENTIAL comes back with its message; exit 1, nothing written."""
    before = log_end(store)
    code, out, err = run(capsys, *alter("--add-config", "SCRAM-SHA-256=[iterations=10,password=x]"))
    assert (code, out) == (1, "") and "UNACCEPTABLE_CREDENTIAL: Too few iterations: 10 (minimum 4096)" in err
    assert log_end(store) == before


def test_describe_json_and_errors(store, capsys):
    """--describe --json is one array of users with their mechanisms and iterations; an unknown user is
    an error on stderr with exit 1 (RESOURCE_NOT_FOUND); never a secret."""
    for user, config in (("bob", "SCRAM-SHA-512=[password=bob-pw]"), ("alice", "SCRAM-SHA-256=[iterations=8192,password=a-pw]")):
        assert run(capsys, *alter("--add-config", config, user=user))[0] == 0
    code, out, err = run(capsys, "configs", "--entity-type", "users", "--describe", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == [
        {"user": "alice", "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 8192}]},
        {"user": "bob", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]},
    ]
    assert json.loads(run(capsys, *describe("bob"), "--json")[1]) == json.loads(out)[1:]
    code, out, err = run(capsys, *describe("carol"), "--json")
    assert (code, json.loads(out)) == (1, [])
    assert err == ("secmeta: error: retrieving SCRAM credential configs for user-principal 'carol': RESOURCE_NOT_FOUND: "
                   "Attempt to describe a user credential that does not exist: carol\n")


@pytest.mark.parametrize("options, message", [
    (["--add-config", "SCRAM-SHA-256=[password=x]"], "--add-config apply to --alter only"),
    (["--delete-config", "SCRAM-SHA-256"], "--delete-config apply to --alter only"),
])
def test_describe_with_alter_options_is_a_usage_error(store, capsys, options, message):
    """ConfigCommandOptions.checkArgs: checkInvalidArgs(describeOpt, alterOpt, addConfig, deleteConfig)."""
    assert run(capsys, *describe(), *options) == (2, "", f"secmeta: error: {message}\n")


_PASSWORD = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="[]"), min_size=1).filter(
    lambda p: re.search(r",\s*iterations=", p) is None)


@given(password=_PASSWORD, iterations=st.one_of(st.none(), st.integers(-1, 20000)),
       mechanism=st.sampled_from([SHA256, SHA512]))
def test_a_bracketed_scram_value_carries_any_password(password, iterations, mechanism):
    """Whatever the password (commas, '=', spaces: no square brackets), --add-config gives it back whole,
    as ConfigCommand's 'password=(.*)' does; iterations when given, else -1 (the store's default)."""
    prefix = "" if iterations is None else f"iterations={iterations},"
    text = f"{mechanism.mechanism_name}=[{prefix}password={password}]"
    settings = scram_settings(split_add_config(text), "--add-config")
    assert settings == [ScramSetting(mechanism, -1 if iterations is None else iterations, password.encode())]


# -- over the wire: the same command against `secmeta serve` (--bootstrap-server, --command-config) ----------


@pytest.fixture
def server(tmp_path):
    with running_server(tmp_path / "server", "SASL_SSL://127.0.0.1:0") as running:
        yield running


def over_the_wire(server, tmp_path) -> list[str]:
    config = write_command_config(tmp_path, client_properties(server, "SASL_SSL", "admin"))
    return ["--bootstrap-server", server.bootstrap("SASL_SSL"), "--command-config", str(config)]


def test_over_the_wire_a_refused_alteration_writes_nothing(server, tmp_path, capsys):
    """The server runs the same request: --add-config and --delete-config of the user is DUPLICATE_RESOURCE
    and two mechanisms in one --add-config apply neither; the server's log does not move."""
    wire = over_the_wire(server, tmp_path)
    assert run(capsys, *alter("--add-config", "SCRAM-SHA-256=[password=old]"), *wire)[0] == 0
    before = server.log_end()
    for options in (["--add-config", "SCRAM-SHA-256=[password=new]", "--delete-config", "SCRAM-SHA-256"],
                    ["--add-config", "SCRAM-SHA-512=[password=new],SCRAM-SHA-256=[iterations=10,password=new]"]):
        code, out, err = run(capsys, *alter(*options), *wire)
        assert (code, out) == (1, "") and "nothing was changed: DUPLICATE_RESOURCE" in err
    assert server.log_end() == before
    with remote_admin(server, "SASL_SSL", "alice", "old") as alice:  # the old password still logs in
        assert alice.describe_delegation_tokens() == []


def test_over_the_wire_user_and_add_config_file_set_the_password_given(server, tmp_path, capsys):
    """--user with --add-config-file over the wire: the password from the file, commas and all, logs in;
    --describe --json reads it back from the server."""
    wire = over_the_wire(server, tmp_path)
    path = tmp_path / "bob.properties"
    path.write_text("SCRAM-SHA-512 : iterations=8192,password=p,w=d\\u00e9 1\n")  # properties: ':' and \\u escapes
    assert run(capsys, *alter("--add-config-file", str(path), user="bob"), *wire) == (
        0, "Completed updating config for user bob.\n", "")
    with remote_admin(server, "SASL_SSL", "bob", "p,w=d\u00e9 1", mechanism="SCRAM-SHA-512") as bob:
        assert bob.describe_delegation_tokens() == []
    code, out, err = run(capsys, *describe("bob"), "--json", *wire)
    assert (code, err) == (0, "")
    assert json.loads(out) == [{"user": "bob", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]}]
