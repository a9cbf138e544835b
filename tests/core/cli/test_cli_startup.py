"""The CLI starts at once: loading its entry point, building its parser and ``--version`` import
none of the heavy libraries or store modules; each command loads them when it runs.

Checked as which modules a fresh interpreter holds afterwards (never as a timing):
``scripts/bench/cli_startup`` measures the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# What a command loads only when it needs it: the libraries behind the codec, the keyring, the
# settings, progress lines, the wire protocol and the extras, and the store itself.
HEAVY = ("rich", "pydantic", "fastavro", "cryptography", "kio", "javaproperties", "asyncio", "ssl",
         "pyspark", "pyarrow", "pandas", "deltalake", "confluent_kafka",
         "secmeta.core.store", "secmeta.core.log", "secmeta.core.forensics", "secmeta.core.server.server",
         "secmeta.core.config", "secmeta.events.codec", "secmeta.projections.image")


def loaded_after(code: str, modules: tuple[str, ...] = HEAVY) -> list[str]:
    """The ``modules`` (the HEAVY ones unless given) a new interpreter holds after running ``code``."""
    probe = "import sys\n" + textwrap.dedent(code) + textwrap.dedent(f"""
        import json
        print(json.dumps(sorted(m for m in {modules!r} if m in sys.modules)))
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_entry_point_loads_nothing_heavy():
    """`import secmeta.core.cli` (what the console script does first) stays light."""
    assert loaded_after("import secmeta.core.cli") == []


def test_building_the_parser_with_every_plugin_loads_nothing_heavy():
    """Registering every command, the Kafka and Spark ones included, builds parsers only."""
    assert loaded_after("""
        from secmeta.core.cli import build_parser
        parser = build_parser()
        assert {"acls", "kafka", "spark", "demo"} <= set(parser._subparsers._group_actions[0].choices)
    """) == []


def test_version_loads_nothing_heavy():
    """`secmeta --version` answers from the package metadata alone."""
    assert loaded_after("""
        import contextlib, io
        from secmeta.core.cli import main
        out = io.StringIO()
        with contextlib.suppress(SystemExit), contextlib.redirect_stdout(out):
            main(["--version"])
        assert out.getvalue().startswith("secmeta "), out.getvalue()
    """) == []


@pytest.mark.parametrize("command", [["acls", "--help"], ["kafka", "follow", "--help"], ["spark", "query", "sql", "--help"]])
def test_help_loads_nothing_heavy(command):
    """A command's --help is its parser's: nothing it would run is loaded."""
    assert loaded_after(f"""
        import contextlib, io
        from secmeta.core.cli import main
        with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
            main({command!r})
    """) == []


def test_a_store_command_loads_only_what_it_runs(store):
    """`acls --list` on a store (``store`` is $SECMETA_STORE) loads the store, and not the plugins' commands, the
    server, Kafka's protocol, Spark, Kafka's client or progress lines; nor pydantic, while the store's
    settings are the defaults (a default needs no check) or plainly valid: the token secret in the environment
    (``store`` sets $SECMETA_TOKEN_SECRET) is bytes long enough, checked without pydantic (it cost 0.1 s). Nor the
    AEAD cipher: the decoy credentials of SCRAM logins are sealed on the first login, not on every open; nor the
    forensic queries (history, who-could, timeline), which load when first asked."""
    assert os.environ["SECMETA_TOKEN_SECRET"]
    loaded = loaded_after("""
        import contextlib, io
        from secmeta.core.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["acls", "--list"]) == 0
        assert not [m for m in ("secmeta.consumers", "secmeta.core.server.server", "kio", "pyspark",
                                "confluent_kafka", "rich", "pydantic",
                                "cryptography.hazmat.primitives.ciphers.aead", "secmeta.core.forensics.queries",
                                "secmeta.core.forensics.history") if m in sys.modules]
    """)
    assert "secmeta.core.store" in loaded


def test_a_store_command_builds_only_its_own_parser():
    """`acls --list` registers the acls command only: the other commands' modules (the server's settings and
    logging behind `serve`, the password prompt behind `configs`) are not loaded to parse it."""
    others = ("secmeta.core.cli.serve_cmd", "secmeta.core.cli.configs_cmd", "secmeta.core.cli.log_cmd",
              "secmeta.core.cli.tokens_cmd", "secmeta.core.server.config", "logging", "getpass")
    assert loaded_after("""
        from secmeta.core.cli import build_parser
        build_parser(["acls", "--list"]).parse_args(["acls", "--list"])
    """, others) == []


def test_every_command_is_found_by_its_name():
    """The table of the store's commands names each one the whole parser has, in --help's order, and each
    command line parses with the parser built for it alone."""
    from secmeta.core.cli import COMMANDS, build_parser, subparsers

    whole = build_parser()
    names = list(whole._subparsers._group_actions[0].choices)
    assert names[: len(COMMANDS)] == list(COMMANDS)
    for name in COMMANDS:
        alone = build_parser([name, "--help"])
        assert list(alone._subparsers._group_actions[0].choices) == [
            n for n in names if COMMANDS.get(n) == COMMANDS[name]]
        assert {s.prog for s in subparsers(alone)} <= {s.prog for s in subparsers(whole)}


def test_the_public_api_still_imports_on_first_use():
    """`import secmeta` is light too; a name is imported when first used."""
    assert loaded_after("import secmeta, secmeta.core, secmeta.events") == []
    assert "secmeta.core.store" in loaded_after("from secmeta import SecurityStore")


def test_a_store_that_pins_its_token_secret_opens_without_pydantic(tmp_path, monkeypatch):
    """A store initialised with $SECMETA_TOKEN_SECRET logs the secret's fingerprint; every open puts that logged
    setting in force (a non-default value), which loaded pydantic (0.2 s) for each read command. A plain string
    check accepts it now: `acls --list` on such a store loads no pydantic."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SECMETA_KEY_FILE", str(tmp_path / "keys.json"))
    monkeypatch.setenv("SECMETA_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("SECMETA_TOKEN_SECRET", "a-token-secret, 32 bytes or more")
    from secmeta.core.cli import main

    assert main(["keys", "generate", "--key-file", str(tmp_path / "keys.json")]) == 0
    assert main(["init"]) == 0
    assert loaded_after("""
        import contextlib, io
        from secmeta.core.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["acls", "--list"]) == 0
    """, ("pydantic",)) == []
