"""A write command's write never depends on whether anyone reads its output (issue 23).

`secmeta acls --add ... --topic a --topic b --topic c | head -c 1` left the write incomplete in 3 of 5 runs:
with unbuffered output (PYTHONUNBUFFERED=1, as here and in many containers) "Adding ACLs for resource ..."
reached the pipe before the write, the reader went away, the next line raised BrokenPipeError and the store
closed unwritten.  Each write command now completes (or is refused) before it prints anything; a closed pipe
afterwards changes nothing.  Each command runs a few times into `head -c 1` in a real shell pipe.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import sys

import pytest

from secmeta.core import SecurityStore, StoreConfig
from secmeta.events.keyring import Keyring
from secmeta.events.types import AclBindingFilter
from tests.clikit import TOKEN_SECRET, cli_env, log_end, run
from tests.storekit import ADMIN

RUNS = 2  # each run is a process of about a second: two runs of each write, ~12 processes in all
ACLS = ["--allow-principal", "User:alice", "--operation", "Read", "--topic", "a", "--topic", "b", "--topic", "c",
        "--group", "g"]


def _piped(path, *argv: str) -> int:
    """``secmeta ARGV | head -c 1`` in a shell, output unbuffered; secmeta's exit status."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SECMETA_STORE": str(path)}
    command = shlex.join([sys.executable, "-m", "secmeta.core.cli", *argv])
    done = subprocess.run(["bash", "-c", f"{command} | head -c 1 >/dev/null; exit ${{PIPESTATUS[0]}}"],
                          env=env, capture_output=True, timeout=120)
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    return done.returncode


def _open(path) -> SecurityStore:
    return SecurityStore.open(path, StoreConfig.load(path), keyring=Keyring.load(None), read_only=True)


@pytest.fixture
def store(tmp_path, monkeypatch, capsys):
    """A store made by `secmeta init`, so its settings are logged and `config --alter` may change them."""
    _, path = cli_env(tmp_path, monkeypatch)
    assert run(capsys, "init", "--store", str(path))[0] == 0
    return path


@pytest.mark.slow  # each runs a few short processes
def test_acls_add_and_remove_are_whole_whoever_reads(store):
    for _ in range(RUNS):
        assert _piped(store, "acls", "--add", *ACLS) in (0, 141)
        with _open(store) as s:
            assert len(s.describe_acls(AclBindingFilter.any(), context=ADMIN)) == 4
        assert _piped(store, "acls", "--remove", "--force", *ACLS) in (0, 141)
        with _open(store) as s:
            assert s.describe_acls(AclBindingFilter.any(), context=ADMIN) == []


@pytest.mark.slow
def test_configs_config_and_quota_alters_are_whole_whoever_reads(store):
    for n in range(RUNS):
        iterations = 4096 + n
        assert _piped(store, "configs", "--user", "alice", "--alter", "--add-config",
                      f"SCRAM-SHA-256=[iterations={iterations},password=pw]") in (0, 141)
        assert _piped(store, "configs", "--user", "alice", "--client", "app", "--alter", "--add-config",
                      f"producer_byte_rate={1024 + n},consumer_byte_rate={2048 + n}") in (0, 141)
        assert _piped(store, "config", "--alter", "--add-config",
                      f"super.users=User:admin;User:ops{n}") in (0, 141)
        with _open(store) as s:
            info = s.describe_user_scram_credentials(["alice"], context=ADMIN)["alice"].scram_credential_infos
            assert [i.iterations for i in info] == [iterations]
            assert list(s.describe_client_quotas(context=ADMIN).values()) == [{"producer_byte_rate": 1024.0 + n,
                                                                                "consumer_byte_rate": 2048.0 + n}]
            assert s.settings.super_users == {"User:admin", f"User:ops{n}"}


@pytest.mark.slow
def test_token_writes_are_whole_whoever_reads(store, monkeypatch):
    monkeypatch.setenv("SECMETA_TOKEN_SECRET", TOKEN_SECRET)
    for _ in range(RUNS):
        assert _piped(store, "tokens", "--create") in (0, 141)
    with _open(store) as s:
        tokens = s.describe_delegation_tokens(context=ADMIN)
        assert len(tokens) == RUNS
        hmac = s.token_hmac(tokens[0].token_id)
    encoded = base64.b64encode(hmac).decode()
    # a renewal long enough that the token is still live when the next process expires it: an expired token is
    # DELEGATION_TOKEN_EXPIRED even for a negative period (KRaft's order)
    assert _piped(store, "tokens", "--renew", "--hmac", encoded, "--renew-time-period", "600000") in (0, 141)
    assert _piped(store, "tokens", "--expire", "--hmac", encoded, "--expiry-time-period", "-1") in (0, 141)
    with _open(store) as s:
        assert len(s.describe_delegation_tokens(context=ADMIN)) == RUNS - 1


def test_json_of_a_write_names_the_offsets_it_wrote(store, capsys):
    """Every write command takes --json: acls --add says the log offsets it wrote and the ACLs it added."""
    before = log_end(store)
    code, out, err = run(capsys, "acls", "--add", "--json", *ACLS)
    assert (code, err) == (0, "")
    answer = json.loads(out)
    assert answer["log"] == {"first_offset": before, "next_offset": before + 4}
    assert sorted((a["resource_type"], a["name"]) for a in answer["added"]) == [
        ("GROUP", "g"), ("TOPIC", "a"), ("TOPIC", "b"), ("TOPIC", "c")]
    code, out, err = run(capsys, "acls", "--remove", "--force", "--json", "--topic", "a")
    answer = json.loads(out)
    assert (code, answer["log"], [a["name"] for a in answer["removed"]]) == (
        0, {"first_offset": before + 4, "next_offset": before + 5}, ["a"])
