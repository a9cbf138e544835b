"""What every `secmeta` command shares: exit codes, --version, help text, and a reader that goes away."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

import pytest

from secmeta.core import RequestContext, SecurityStore
from secmeta.core.cli import build_parser, main, subparsers
from secmeta.core.cli.parser import HelpFormatter
from secmeta.events.keyring import Keyring
from tests.clikit import cli_env, run
from tests.logkit import acl_created


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A store holding 2,000 ACLs (enough output to fill a pipe); keys and store from the environment."""
    keys, path = cli_env(tmp_path, monkeypatch)
    with SecurityStore.open(path, keyring=Keyring.from_file(keys)) as s:
        for n in range(40):
            s.create_acls([acl_created(i).event.binding for i in range(n * 50, n * 50 + 50)],
                          context=RequestContext("User:admin", "127.0.0.1"))
    return path


def test_version_prints_the_installed_version(capsys):
    assert main(["--version"]) == 0  # answered before the parser is built (the CLI's start: test_cli_startup.py)
    from importlib.metadata import version

    assert capsys.readouterr().out == f"secmeta {version('secmeta')}\n"


def test_a_refused_request_exits_1_with_kafkas_error(store, capsys):
    """A Kafka error (here CLUSTER_AUTHORIZATION_FAILED for a principal without ALTER on the cluster)
    is a refused operation: exit 1 and one line naming the error, not the usage code 2."""
    code, out, err = run(capsys, "acls", "--add", "--as", "User:eve", "--allow-principal", "User:eve",
                         "--operation", "Read", "--topic", "t")
    assert (code, out) == (1, "")
    assert err.startswith("secmeta: error: CLUSTER_AUTHORIZATION_FAILED") and err.count("\n") == 1


def test_a_bad_value_is_a_usage_error_exit_2(store, capsys):
    code, out, err = run(capsys, "who-could", "--operation", "Fly", "--topic", "t")
    assert (code, out) == (2, "") and "'Fly'" in err


def test_an_unknown_option_is_a_usage_error_exit_2_naming_it(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["history", "--no-such-option"])
    assert exit_.value.code == 2 and "unknown option --no-such-option" in capsys.readouterr().err


def test_no_store_is_a_usage_error(capsys, monkeypatch):
    monkeypatch.delenv("SECMETA_STORE", raising=False)
    code, out, err = run(capsys, "log", "verify")
    assert (code, out) == (2, "")
    assert err == "secmeta: error: no store given: pass --store DIR or set $SECMETA_STORE\n"


def test_a_denied_decision_exits_1(store, capsys):
    code, out, _ = run(capsys, "authorize", "--principal", "User:nobody", "--host", "10.0.0.1", "--operation",
                       "Read", "--topic", "orders")
    assert code == 1 and out.startswith("DENIED")


def _options():
    """(command, option strings, action) of every option of every command."""
    parser = build_parser()
    for sub in [parser, *subparsers(parser)]:
        for action in sub._actions:
            if action.option_strings and not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                yield sub.prog, action


def test_every_option_has_help_text():
    missing = [f"{prog} {'/'.join(a.option_strings)}" for prog, a in _options() if not a.help]
    assert missing == []


def test_help_shows_defaults_and_accepted_values(capsys):
    with pytest.raises(SystemExit):
        main(["kafka", "publish", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--history-topic TOPIC every logged event, in log order (default: secmeta.history)" in shown
    assert "exit 1 naming what is left unpublished (default: 30.0)" in shown
    with pytest.raises(SystemExit):
        main(["who-could", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "the ACL operation: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction" in shown


def test_every_default_is_shown_once():
    """Each option with a default says it once: the formatter adds '(default: X)' unless the help has it."""
    formatter = HelpFormatter("secmeta")
    twice_or_never = [(prog, action.option_strings) for prog, action in _options()
                      if action.help is not argparse.SUPPRESS and action.default not in (None, False, [])
                      and formatter._expand_help(action).count("default") != 1]
    assert twice_or_never == []


@pytest.mark.parametrize("argv", [["history"], ["log", "dump"]])
def test_a_reader_that_goes_away_ends_the_output_quietly(store, argv, tmp_path):
    """`secmeta history | head -1`: no BrokenPipeError traceback; the exit status a shell gives a
    process killed by SIGPIPE (141), as `seq 1000000 | head -1` has."""
    read, write = os.pipe()
    child = subprocess.Popen([sys.executable, "-m", "secmeta.core.cli", *argv], stdout=write, stderr=subprocess.PIPE,
                             env=os.environ.copy())
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        assert pipe.readline().split()[:2] == [b"OFFSET", b"TIME"]
    err = child.stderr.read().decode()
    assert child.wait(timeout=60) == 128 + signal.SIGPIPE
    assert err == ""


READ_COMMANDS = ["secmeta authorize", "secmeta history", "secmeta diff", "secmeta who-could", "secmeta timeline",
                 "secmeta log dump", "secmeta log verify", "secmeta spark query acls", "secmeta spark query who-could",
                 "secmeta spark query history", "secmeta spark query tokens", "secmeta spark query sql",
                 "secmeta acls", "secmeta configs", "secmeta tokens"]


def test_every_read_command_takes_json():
    with_json = {prog for prog, action in _options() if "--json" in action.option_strings}
    assert [prog for prog in READ_COMMANDS if prog not in with_json] == []
