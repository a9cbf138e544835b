"""``secmeta acls / configs / tokens --bootstrap-server ...`` against a running server.

As Kafka's tools (kafka-acls.sh / AclCommand, kafka-configs.sh / ConfigCommand,
kafka-delegation-tokens.sh / DelegationTokenCommand) take --bootstrap-server and
--command-config, the CLI then talks to a server over the protocol instead of opening a
store, with the same output and exit codes as the local path.  The server's log records
each change with the principal the connection logged in as and its client host.
"""

from __future__ import annotations

import base64
import re

import pytest

from secmeta.core import SecurityStore, StoreConfig
from secmeta.core.cli import EXIT_FAILED, EXIT_USAGE
from secmeta.events.keyring import Keyring
from tests.clientkit import client_properties, refusing_port, remote_admin, write_command_config
from tests.clikit import run
from tests.serverkit import ADMIN_PASSWORD

USERS = {"admin": ADMIN_PASSWORD, "alice": "alice-pw"}


@pytest.fixture
def local_store(tmp_path, monkeypatch):
    """A local store directory for the same commands without --bootstrap-server (the reference output)."""
    keys = tmp_path / "local-keys.json"
    Keyring.generate_file(keys)
    monkeypatch.setenv("SECMETA_KEY_FILE", str(keys))
    monkeypatch.setenv("SECMETA_TOKEN_SECRET", "cli-remote-token-secret, 32 bytes or more")
    SecurityStore.open(tmp_path / "local-store", keyring=Keyring.from_file(keys)).close()  # as `secmeta init`
    return ["--store", str(tmp_path / "local-store")]


@pytest.fixture
def remote(serve, tmp_path):
    """A SASL_SSL server and ``--bootstrap-server B --command-config F`` logging in as ``user``."""
    server = serve("SASL_SSL://127.0.0.1:0", users=USERS)

    def args(user: str = "admin", password: str | None = None, **props: str) -> list[str]:
        config = write_command_config(tmp_path, client_properties(server, "SASL_SSL", user, password, **props),
                                      name=f"{user}-{len(props)}.properties")
        return ["--bootstrap-server", server.bootstrap("SASL_SSL"), "--command-config", str(config)]

    args.server = server
    return args


ADD = ["acls", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
       "--topic", "orders", "--group", "etl"]
LIST = ["acls", "--list", "--topic", "orders"]
LIST_ALL = ["acls", "--list"]
REMOVE = ["acls", "--remove", "--force", "--topic", "orders", "--allow-principal", "User:alice", "--operation", "Read"]
BAD = ["acls", "--add", "--allow-principal", "alice", "--topic", "t"]


def test_acls_add_list_remove_print_what_the_local_path_prints(capsys, local_store, remote):
    """Each acls command gives the same exit code and output over the wire as on a local store (AclCommand)."""
    outputs = []
    for argv in (ADD, LIST, LIST_ALL, REMOVE, LIST_ALL, BAD):
        local = run(capsys, *argv, *local_store)
        over_wire = run(capsys, *argv, *remote())
        assert over_wire[:2] == local[:2], argv
        outputs.append(over_wire)
    assert outputs[0][1].count("Adding ACLs for resource") == 2 and outputs[0][1].count("principal=User:alice") == 8
    orders = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    assert outputs[3] == (0, f"Removed (pattern={orders}, entry=(principal=User:alice, host=*, operation=READ, "
                             f"permissionType=ALLOW))\nCurrent ACLs for resource `{orders}`: \n"
                             " \t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n", "")
    assert outputs[5] == (2, "", "secmeta: error: --allow-principal 'alice' is not of the form Type:Name\n")


def test_acls_over_the_change_limit_exit_like_the_local_path(capsys, local_store, serve, tmp_path):
    """max_acl_changes_per_request refuses the whole request (INVALID_REQUEST): over the wire, where the server
    repeats the refusal on every binding, the CLI prints and exits as on a local store with the same limit."""
    config = StoreConfig(token_secret=b"cli-remote-token-secret, 32 bytes or more", max_acl_changes_per_request=2)
    server = serve("SASL_SSL://127.0.0.1:0", users=USERS, store_config=config)
    config.save(local_store[1])
    props = write_command_config(tmp_path, client_properties(server, "SASL_SSL", "admin"))
    over_wire = run(capsys, *ADD, "--bootstrap-server", server.bootstrap("SASL_SSL"), "--command-config", str(props))
    local = run(capsys, *ADD, *local_store)
    assert over_wire == local
    assert local[0] == EXIT_FAILED and "INVALID_REQUEST: The request creates 4 ACLs; the limit is 2 per request" in local[2]


def test_acls_over_the_wire_are_logged_with_the_login_and_client_host(capsys, remote):
    """The store's log shows each change with the connection's principal (User:admin) and client host."""
    server = remote.server
    start = server.log_end()
    assert run(capsys, *ADD, *remote())[0] == 0
    assert run(capsys, *REMOVE, *remote())[0] == 0
    entries = [e for e in server.store.history() if e.offset >= start]
    assert [e.event_type for e in entries] == ["AclCreated"] * 4 + ["AclDeleted"]
    assert {(e.actor_principal, e.actor_host) for e in entries} == {("User:admin", "127.0.0.1")}
    assert {e.actor_asserted for e in entries} == {False}  # the server authenticated them, nobody asserted


def test_refused_request_exits_non_zero_and_writes_nothing(capsys, local_store, remote):
    """alice has no CLUSTER ALTER: exit 1 with CLUSTER_AUTHORIZATION_FAILED naming ALTER, the operation --add needs
    (it said DESCRIBE, the look-up's: issue 22), as the local path; the log does not move."""
    end = remote.server.log_end()
    refused = "CLUSTER_AUTHORIZATION_FAILED: Principal User:alice is not authorized to ALTER on the cluster"
    code, out, err = run(capsys, *ADD, *remote("alice"))
    assert code == EXIT_FAILED and refused in err and out == ""
    local_code, local_out, local_err = run(capsys, *ADD, *local_store, "--as", "User:alice")
    assert (local_code, local_out) == (code, "") and refused in local_err
    code, _, err = run(capsys, "configs", "--entity-type", "users", "--entity-name", "alice", "--alter",
                       "--add-config", "SCRAM-SHA-256=[password=x]", *remote("alice"))
    assert code != 0 and "CLUSTER_AUTHORIZATION_FAILED" in err
    assert remote.server.log_end() == end


def test_configs_alter_and_describe(capsys, local_store, remote):
    """kafka-configs style alter/describe over the wire print what the local path prints; the new password logs in.
    Both ways, two mechanisms in one --add-config are one request, which Kafka's controller refuses
    (DUPLICATE_RESOURCE: one item per user per request), so each mechanism is its own command."""
    user = ["configs", "--entity-type", "users", "--entity-name", "bob"]
    both = [*user, "--alter", "--add-config", "SCRAM-SHA-256=[password=bob-pw],SCRAM-SHA-512=[password=bob-pw]"]
    alter_256 = [*user, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=bob-pw]"]
    alter_512 = [*user, "--alter", "--add-config", "SCRAM-SHA-512=[password=bob-pw]"]
    describe = [*user, "--describe"]
    delete = [*user, "--alter", "--delete-config", "SCRAM-SHA-512"]
    results = {}
    for where, extra in (("local", local_store), ("remote", remote())):
        results[where] = [run(capsys, *argv, *extra) for argv in (both, alter_256, alter_512, describe, delete, describe)]
    assert results["remote"][0][:2] == (1, "") and "DUPLICATE_RESOURCE" in results["remote"][0][2]
    assert results["remote"][1] == (0, "Completed updating config for user bob.\n", "")
    # The wire carries a salted password, so the client picks the iterations for -1: 4096 (ConfigCommand's
    # DefaultScramIterations); the local store uses its own default, also 4096 unless configured.
    assert results["remote"] == results["local"]
    assert results["remote"][3][1] == ("SCRAM credential configs for user-principal 'bob' are "
                                       "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    with remote_admin(remote.server, "SASL_SSL", "bob", "bob-pw") as bob:
        assert bob.describe_delegation_tokens() == []
    last = list(remote.server.store.history())[-1]
    assert (last.event_type, last.actor_principal, last.actor_host) == ("ScramCredentialDeleted", "User:admin", "127.0.0.1")


def test_tokens_create_describe_renew_expire(capsys, remote):
    """kafka-delegation-tokens style (DelegationTokenCommand's lines): --create prints the HMAC once, --describe
    withholds it, renew/expire by HMAC."""
    code, out, _ = run(capsys, "tokens", "--create", "--renewer-principal", "User:alice", *remote())
    first, header, _, row = out.splitlines()
    assert code == 0 and header.split()[:2] == ["TOKENID", "HMAC"]
    token_id, hmac_text = row.split()[:2]
    assert first == f"Created delegation token with tokenId : {token_id}"
    assert base64.b64decode(hmac_text) == remote.server.store.token_hmac(token_id)
    code, out, _ = run(capsys, "tokens", "--describe", *remote())
    assert code == 0 and out.startswith("Total number of tokens : 1\n")
    assert token_id in out and "User:alice" in out and "HMAC" not in out and hmac_text not in out
    code, out, _ = run(capsys, "tokens", "--renew", "--hmac", hmac_text, "--renew-time-period", "60000", *remote())
    assert code == 0 and re.fullmatch(r"Completed renew operation\. New expiry date : \S+Z\n", out)
    code, out, _ = run(capsys, "tokens", "--expire", "--hmac", hmac_text, "--expiry-time-period", "-1", *remote())
    assert code == 0 and out.startswith("Completed expire operation. New expiry date : ")
    assert run(capsys, "tokens", "--describe", *remote())[1] == "Total number of tokens : 0\n"
    issued = [e for e in remote.server.store.history() if e.event_type == "DelegationTokenIssued"]
    assert [(e.actor_principal, e.actor_host) for e in issued] == [("User:admin", "127.0.0.1")]


def test_a_token_login_from_the_command_config_may_not_create_tokens(capsys, remote):
    """ScramLoginModule ... tokenauth=true in sasl.jaas.config logs in with a token: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED."""
    code, out, _ = run(capsys, "tokens", "--create", *remote())
    token_id, hmac_text = out.splitlines()[3].split()[:2]
    code, out, err = run(capsys, "tokens", "--create", *remote(token_id, hmac_text, token=True))
    assert code == 1 and "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED" in err


@pytest.mark.parametrize("command, extra, message", [
    (LIST_ALL, ["--as-of", "2026-01-01T00:00:00Z"], "--as-of reads a store's history"),
    (LIST_ALL, ["--at-offset", "3"], "--at-offset reads a store's history"),
    (ADD, ["--as", "User:alice"], "--as cannot be used with --bootstrap-server"),
    (ADD, ["--from-host", "10.0.0.1"], "--from-host cannot be used with --bootstrap-server"),
    (ADD, ["--store", "/tmp/elsewhere"], "--store cannot be used with --bootstrap-server"),
    (ADD, ["--key-file", "/tmp/keys.json"], "--key-file cannot be used with --bootstrap-server"),
])
def test_local_only_options_are_usage_errors_with_bootstrap_server(capsys, remote, command, extra, message):
    """--as-of / --at-offset / --as / --from-host / --store / --key-file with --bootstrap-server: exit 2,
    nothing written."""
    end = remote.server.log_end()
    code, out, err = run(capsys, *command, *remote(), *extra)
    assert code == EXIT_USAGE and message in err and out == ""
    assert remote.server.log_end() == end


def test_secmeta_store_from_the_environment_is_not_used_with_bootstrap_server(capsys, local_store, remote,
                                                                              monkeypatch):
    """$SECMETA_STORE (and $SECMETA_KEY_FILE) name the local store only: with --bootstrap-server the change
    goes to the server and the local store is untouched; without it, $SECMETA_STORE is the store."""
    monkeypatch.setenv("SECMETA_STORE", local_store[1])
    assert run(capsys, *ADD, *remote())[0] == 0
    assert run(capsys, *LIST_ALL, *remote())[1].count("User:alice") == 4
    code, out, _ = run(capsys, *LIST_ALL)             # the local store, from the environment: untouched
    assert code == 0 and "User:alice" not in out
    assert run(capsys, *ADD)[0] == 0
    assert run(capsys, *LIST_ALL)[1].count("User:alice") == 4


def test_command_config_needs_bootstrap_server(capsys, local_store, tmp_path):
    """--command-config alone is a usage error (it would be silently ignored otherwise)."""
    code, _, err = run(capsys, *LIST_ALL, *local_store, "--command-config", str(tmp_path / "x.properties"))
    assert code == EXIT_USAGE and "--command-config needs --bootstrap-server" in err


def test_unreachable_server_and_bad_password_are_clear_errors(capsys, remote):
    """No server: 'cannot connect to broker HOST:PORT: connection refused'; a bad password: SASL_AUTHENTICATION_FAILED."""
    with refusing_port() as port:
        code, _, err = run(capsys, *LIST_ALL, "--bootstrap-server", f"127.0.0.1:{port}")
    assert code == EXIT_FAILED and f"cannot connect to broker 127.0.0.1:{port}: connection refused" in err
    code, _, err = run(capsys, *LIST_ALL, *remote("admin", "wrong-password"))
    assert code == EXIT_FAILED and "SASL_AUTHENTICATION_FAILED" in err and "wrong-password" not in err
