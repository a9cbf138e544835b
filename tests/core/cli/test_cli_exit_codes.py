"""Every command's failure modes exit as `secmeta --help` and the README say, with stderr naming the problem.

The table (core/cli/__init__.py EXIT_CODES): 0 done; 1 refused or failed (a Kafka error, a DENIED decision, a
store or key file that cannot be used); 2 the command line is wrong (an unknown option, options that do not go
together, a bad value).  Issue 23: a missing store and a too-open key file exited 2 while --help said 1, and a
mistyped option (`--lsit`) was reported as "one of the arguments --add --remove --list is required".
"""

from __future__ import annotations

import shutil

import pytest

from secmeta.core.cli import EXIT_CODES, build_parser
from tests.clikit import log_end, run

COMMANDS = {
    "acls --add": ["acls", "--add", "--allow-principal", "User:a", "--topic", "t"],
    "acls --remove": ["acls", "--remove", "--force", "--topic", "t"],
    "acls --list": ["acls", "--list"],
    "configs --alter": ["configs", "--user", "alice", "--alter", "--add-config", "SCRAM-SHA-256=[password=pw]"],
    "configs --alter quotas": ["configs", "--user", "alice", "--alter", "--add-config", "producer_byte_rate=1024"],
    "configs --describe": ["configs", "--entity-type", "users", "--describe"],
    "config --alter": ["config", "--alter", "--add-config", "allow.everyone.if.no.acl.found=true"],
    "config --describe": ["config", "--describe"],
    "tokens --create": ["tokens", "--create"],
    "tokens --describe": ["tokens", "--describe"],
    "history": ["history"],
    "who-could": ["who-could", "--operation", "Read", "--topic", "t"],
    "timeline": ["timeline", "--principal", "User:a", "--host", "10.0.0.1", "--operation", "Read", "--topic", "t"],
    "diff": ["diff"],
    "log dump": ["log", "dump"],
}
WRITES = ["acls --add", "acls --remove", "configs --alter", "configs --alter quotas", "config --alter",
          "tokens --create"]
BAD_VALUES = {
    "acls --add": (["--operation", "Fly"], "'Fly'"),
    "acls --remove": (["--deny-principal", "bob"], "--deny-principal 'bob' is not of the form Type:Name"),
    "acls --list": (["--principal", "alice"], "--principal 'alice' is not of the form Type:Name"),
    "configs --alter": (["--delete-config", "SCRAM-SHA-1"], "'SCRAM-SHA-1'"),
    "configs --alter quotas": (["--entity-type", "users"], "should not be used in conjunction"),
    "configs --describe": (["--entity-type", "topics"], "invalid choice: 'topics'"),
    "config --alter": (["--at-offset", "1"], "--as-of / --at-offset go with --describe"),
    "config --describe": (["--as-of", "yesterday"], "'yesterday'"),
    "tokens --create": (["--max-life-time-period", "soon"], "invalid int value: 'soon'"),
    "tokens --describe": (["--hmac", "aGk="], "--hmac cannot be used with --describe"),
    "history": (["--from", "yesterday"], "'yesterday'"),
    "who-could": (["--as-of", "yesterday"], "'yesterday'"),
    "timeline": (["--operation", "Fly"], "'Fly'"),
    "diff": (["--to", "yesterday"], "'yesterday'"),
    "log dump": (["--from-offset", "minus-one"], "minus-one"),
}


def test_help_states_the_exit_codes():
    assert EXIT_CODES in " ".join(build_parser().format_help().split())


@pytest.mark.parametrize("name", COMMANDS)
def test_a_store_that_does_not_exist_exits_1_naming_it(store, capsys, name):
    missing = store.parent / "no-store-here"
    code, out, err = run(capsys, *COMMANDS[name], "--store", str(missing))
    assert (code, out) == (1, "")
    assert err == f"secmeta: error: {missing} is not a secmeta store (no secmeta.json there)\n"
    assert not missing.exists()


@pytest.mark.parametrize("name", COMMANDS)
def test_a_key_file_others_may_read_exits_1_naming_it(store, capsys, monkeypatch, name):
    monkeypatch.delenv("SECMETA_ALLOW_OPEN_KEY_FILE", raising=False)
    open_keys = store.parent / "open-keys.json"
    shutil.copy(store.parent / "keys.json", open_keys)
    open_keys.chmod(0o644)
    before = log_end(store)
    code, out, err = run(capsys, *COMMANDS[name], "--key-file", str(open_keys))
    assert (code, out) == (1, "")
    assert err.startswith(f"secmeta: error: key file {open_keys}: permissions 0644 are too open")
    assert log_end(store) == before


@pytest.mark.parametrize("name", COMMANDS)
def test_a_mistyped_option_exits_2_naming_it_and_the_nearest(store, capsys, name):
    command = COMMANDS[name]
    code, out, err = run(capsys, *command, "--stroe", str(store))
    assert (code, out) == (2, "")
    assert err.endswith(f"secmeta {' '.join(w for w in command[:2] if not w.startswith('-'))}: error: "
                        "unknown option --stroe (did you mean --store?)\n")


def test_the_issues_typo_is_named_before_the_missing_action(store, capsys):
    code, out, err = run(capsys, "acls", "--lsit")
    assert (code, out) == (2, "") and err.endswith("error: unknown option --lsit (did you mean --list?)\n")
    assert "is required" not in err


@pytest.mark.parametrize("name", COMMANDS)
def test_a_bad_value_exits_2_naming_it_and_writes_nothing(store, capsys, name):
    extra, named = BAD_VALUES[name]
    before = log_end(store)
    code, out, err = run(capsys, *COMMANDS[name], *extra)
    assert (code, out) == (2, "") and named in err
    assert log_end(store) == before


@pytest.mark.parametrize("name", WRITES)
def test_a_write_kafkas_rules_refuse_exits_1_naming_the_error(store, capsys, name):
    before = log_end(store)
    for_another = ["--owner-principal", "User:alice"] if name == "tokens --create" else []
    code, out, err = run(capsys, *COMMANDS[name], "--as", "User:eve", *for_another)
    assert code == 1 and "AUTHORIZATION_FAILED" in out + err
    assert log_end(store) == before


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_is_done_with_0(store, capsys, name):
    """The baseline the failure modes depart from: each command as written succeeds on the store."""
    code, _, err = run(capsys, *COMMANDS[name])
    assert (code, err) == (0, "")
