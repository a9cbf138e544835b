"""``secmeta tokens`` as kafka-delegation-tokens.sh, run as a user would.

Kafka's behaviour pinned here comes from tools/src/main/java/org/apache/kafka/tools/DelegationTokenCommand.java
(createToken / renewToken / expireToken / describeToken output lines, printToken's columns,
DelegationTokenCommandOptions.checkArgs) and its DelegationTokenCommandTest.  A refused command prints
nothing on stdout and leaves the log's end offset where it was.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime

import pytest

from secmeta.core import SecurityStore, StoreConfig
from secmeta.events.keyring import Keyring
from tests.clientkit import client_properties, write_command_config
from tests.clikit import log_end, run
from tests.serverkit import running_server

HEADER = ["TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE"]


def ms(iso: str) -> int:
    return round(datetime.fromisoformat(iso).timestamp() * 1000)


def create(capsys, *options: str) -> tuple[str, str]:
    """``tokens --create OPTIONS``: the new token's id and base64 HMAC, from its output row."""
    code, out, err = run(capsys, "tokens", "--create", *options)
    assert (code, err) == (0, "")
    row = out.splitlines()[3].split()
    return row[0], row[1]


def stored_hmac(path, token_id: str) -> bytes:
    with SecurityStore.open(path, StoreConfig.load(path), keyring=Keyring.load(None), read_only=True) as store:
        return store.token_hmac(token_id)


def test_create_prints_kafkas_lines_with_the_hmac(store, capsys):
    """createToken: 'Created delegation token with tokenId : ID', then printToken's columns with the HMAC
    (times ISO-8601 UTC); the HMAC is the store's, the max date issue + --max-life-time-period."""
    code, out, err = run(capsys, "tokens", "--create", "--renewer-principal", "User:bob",
                         "--renewer-principal", "User:carol", "--max-life-time-period", "3600000")
    assert (code, err) == (0, "")
    first, header, rule, row, *rest = out.splitlines()
    assert header.split() == HEADER and set(rule) <= {"-", " "} and rest == []
    token_id, hmac, owner, requester, renewers, issued, expires, max_date = row.split()
    assert first == f"Created delegation token with tokenId : {token_id}"
    assert base64.b64decode(hmac) == stored_hmac(store, token_id)
    assert (owner, requester, renewers) == ("User:admin", "User:admin", "User:bob,User:carol")
    assert issued.endswith("Z") and ms(max_date) - ms(issued) == 3600000 and ms(expires) == ms(max_date)


def test_describe_prints_the_count_and_withholds_hmacs(store, capsys):
    """describeToken: 'Total number of tokens : N' and the table; secmeta leaves the HMAC column out unless
    the store is configured to return HMACs (describe_tokens_include_hmac), a documented difference."""
    token_id, hmac = create(capsys)
    code, out, err = run(capsys, "tokens", "--describe")
    assert (code, err) == (0, "")
    first, header, _, row = out.splitlines()
    assert first == "Total number of tokens : 1"
    assert header.split() == [h for h in HEADER if h != "HMAC"]
    assert row.split()[:4] == [token_id, "User:admin", "User:admin", "-"] and hmac not in out
    StoreConfig(describe_tokens_include_hmac=True).save(store)
    out = run(capsys, "tokens", "--describe")[1]
    assert out.splitlines()[1].split() == HEADER and out.splitlines()[3].split()[:2] == [token_id, hmac]


def test_describe_by_owner_and_of_nobody(store, capsys):
    """--owner-principal lists that owner's tokens (DelegationTokenCommandTest: describe for an unknown owner
    is empty); no token prints the count 0 and no table."""
    create(capsys)
    carols, _ = create(capsys, "--owner-principal", "User:carol")
    out = run(capsys, "tokens", "--describe", "--owner-principal", "User:carol")[1]
    assert out.splitlines()[0] == "Total number of tokens : 1" and out.splitlines()[3].split()[:2] == [carols, "User:carol"]
    assert run(capsys, "tokens", "--describe", "--owner-principal", "User:unknown") == (0, "Total number of tokens : 0\n", "")


def test_json_output_of_create_and_describe(store, capsys):
    """--json: an array of tokens with Kafka's fields; the HMAC only where the table would show it."""
    code, out, err = run(capsys, "tokens", "--create", "--json", "--renewer-principal", "User:bob")
    assert (code, err) == (0, "")
    [created] = json.loads(out)
    assert list(created) == ["token_id", "hmac", "owner", "requester", "renewers", "issue_timestamp_ms", "issue_time",
                             "expiry_timestamp_ms", "expiry_time", "max_timestamp_ms", "max_time"]
    assert ms(created["issue_time"]) == created["issue_timestamp_ms"] and created["issue_time"].endswith("Z")
    assert base64.b64decode(created["hmac"]) == stored_hmac(store, created["token_id"])
    assert (created["owner"], created["requester"], created["renewers"]) == ("User:admin", "User:admin", ["User:bob"])
    code, out, _ = run(capsys, "tokens", "--describe", "--json")
    assert code == 0 and json.loads(out) == [{k: v for k, v in created.items() if k != "hmac"}]


def test_renew_and_expire_print_the_new_expiry(store, capsys):
    """renewToken / expireToken: 'Completed renew|expire operation. New expiry date : ...'; the renewer may
    renew; --expiry-time-period -1 invalidates the token at once (DelegationTokenCommandTest)."""
    token_id, hmac = create(capsys, "--renewer-principal", "User:bob")
    code, out, err = run(capsys, "tokens", "--renew", "--hmac", hmac, "--renew-time-period", "60000", "--as", "User:bob")
    assert (code, err) == (0, "") and out.startswith("Completed renew operation. New expiry date : ")
    new_expiry = out.rsplit(" : ", 1)[1].strip()
    described = json.loads(run(capsys, "tokens", "--describe", "--json")[1])
    assert [(t["token_id"], t["expiry_time"]) for t in described] == [(token_id, new_expiry)]
    code, out, err = run(capsys, "tokens", "--expire", "--hmac", hmac, "--expiry-time-period", "-1")
    assert (code, err) == (0, "") and out.startswith("Completed expire operation. New expiry date : ")
    assert run(capsys, "tokens", "--describe") == (0, "Total number of tokens : 0\n", "")


@pytest.mark.parametrize("options, message", [
    (["--create", "--hmac", "aGk="], "--hmac cannot be used with --create"),
    (["--create", "--renew-time-period", "1", "--expiry-time-period", "1"],
     "--renew-time-period, --expiry-time-period cannot be used with --create"),
    (["--renew", "--hmac", "aGk=", "--max-life-time-period", "1"], "--max-life-time-period cannot be used with --renew"),
    (["--renew", "--hmac", "aGk=", "--owner-principal", "User:a"], "--owner-principal cannot be used with --renew"),
    (["--expire", "--hmac", "aGk=", "--expiry-time-period", "1", "--renew-time-period", "1"],
     "--renew-time-period cannot be used with --expire"),
    (["--describe", "--renew-time-period", "1"], "--renew-time-period cannot be used with --describe"),
    (["--describe", "--hmac", "aGk="], "--hmac cannot be used with --describe"),
    (["--describe", "--renewer-principal", "User:a"], "--renewer-principal cannot be used with --describe"),
    (["--renew"], "--renew needs --hmac"),
    (["--expire", "--expiry-time-period", "-1"], "--expire needs --hmac"),
    (["--expire", "--hmac", "aGk="], "--expire needs --expiry-time-period"),
    (["--create", "--owner-principal", "User:a", "--owner-principal", "User:b"], "--create takes one --owner-principal"),
    (["--renew", "--hmac", "not base64!"], "--hmac must be the base64 HMAC that --create printed"),
    (["--create", "--describe"], "not allowed with argument"),
    ([], "one of the arguments --create --renew --expire --describe is required"),
])
def test_option_mistakes_are_usage_errors(store, capsys, options, message):
    """DelegationTokenCommandOptions.checkArgs (DelegationTokenCommandTest.testCheckArgsInvalidArgsFor*,
    testCheckArgsMissingRequiredArgs): an option of another action, or a missing required one, is a usage
    error (exit 2), not ignored; --expire never defaults to 'now'."""
    before = log_end(store)
    code, out, err = run(capsys, "tokens", *options)
    assert (code, out) == (2, "") and message in err
    assert "not base64!" not in err
    assert log_end(store) == before


@pytest.mark.parametrize("options, error", [
    (["--renew", "--hmac", base64.b64encode(b"x" * 64).decode()], "DELEGATION_TOKEN_NOT_FOUND"),
    (["--create", "--renewer-principal", "Group:renewers"], "INVALID_PRINCIPAL_TYPE"),
    (["--create", "--as", "User:eve", "--owner-principal", "User:alice"], "DELEGATION_TOKEN_AUTHORIZATION_FAILED"),
    (["--create", "--owner-principal", ""], "INVALID_REQUEST: owner must not be empty"),  # was a token of the requester
])
def test_refused_operations_exit_1_and_write_nothing(store, capsys, options, error):
    """A request the store refuses (DelegationTokenCommandTest: an invalid renewer principal type fails) exits 1
    with Kafka's error on stderr, and the log does not move."""
    create(capsys)
    before = log_end(store)
    code, out, err = run(capsys, "tokens", *options)
    assert (code, out) == (1, "") and error in err
    assert log_end(store) == before


def test_renew_and_expire_json(store, capsys):
    """--json on renew/expire: the new expiry as ISO-8601 UTC and epoch ms, which describe then shows."""
    _, hmac = create(capsys)
    code, out, err = run(capsys, "tokens", "--renew", "--hmac", hmac, "--renew-time-period", "60000", "--json")
    renewed = json.loads(out)
    assert (code, err, list(renewed)) == (0, "", ["log", "expiry_timestamp_ms", "expiry_time"])
    assert renewed["log"]["next_offset"] == renewed["log"]["first_offset"] + 1 == log_end(store)
    assert ms(renewed["expiry_time"]) == renewed["expiry_timestamp_ms"]
    assert json.loads(run(capsys, "tokens", "--describe", "--json")[1])[0]["expiry_time"] == renewed["expiry_time"]
    code, out, _ = run(capsys, "tokens", "--expire", "--hmac", hmac, "--expiry-time-period", "-1", "--json")
    assert code == 0 and json.loads(out)["expiry_timestamp_ms"] <= renewed["expiry_timestamp_ms"]
    assert json.loads(run(capsys, "tokens", "--describe", "--json")[1]) == []


def test_over_the_wire_the_same_commands_and_json(tmp_path, capsys):
    """Against `secmeta serve` (--bootstrap-server, --command-config): --create --json carries the server's HMAC,
    --describe --json the same token without it; a refused renew exits 1 and the server's log does not move."""
    with running_server(tmp_path / "server", "SASL_SSL://127.0.0.1:0") as server:
        config = write_command_config(tmp_path, client_properties(server, "SASL_SSL", "admin"))
        wire = ["--bootstrap-server", server.bootstrap("SASL_SSL"), "--command-config", str(config)]
        code, out, err = run(capsys, "tokens", "--create", "--renewer-principal", "User:bob", "--json", *wire)
        [created] = json.loads(out)
        assert (code, err) == (0, "") and base64.b64decode(created["hmac"]) == server.store.token_hmac(created["token_id"])
        assert json.loads(run(capsys, "tokens", "--describe", "--json", *wire)[1]) == [
            {k: v for k, v in created.items() if k != "hmac"}]
        before = server.log_end()
        code, out, err = run(capsys, "tokens", "--renew", "--hmac", base64.b64encode(b"x" * 64).decode(), *wire)
        assert (code, out) == (1, "") and "DELEGATION_TOKEN_NOT_FOUND" in err
        code, out, err = run(capsys, "tokens", "--create", "--owner-principal", "", *wire)  # issue 22: no silent default
        assert (code, out) == (1, "") and "INVALID_REQUEST" in err  # CreateDelegationTokenResponse has no message
        assert server.log_end() == before
