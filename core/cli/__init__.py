"""The ``secmeta`` command line.

The store's own commands are here; the Kafka and Spark commands and the demo
live with their code in ``consumers`` and join through the ``secmeta.commands``
entry-point group (``secmeta.core.cli.plugins``), so ``core`` imports nothing above it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from secmeta.core.errors import SecmetaError, StoreError
from secmeta.events.errors import KeyringError

# Exit codes, as Kafka's tools and Unix commands use them (the epilog of --help and the README say the same):
EXIT_OK = 0      # done
EXIT_FAILED = 1  # refused or failed: a Kafka error, a DENIED decision, a store or key file that cannot be used
EXIT_USAGE = 2   # the command line is wrong: an unknown option, a bad combination of options, a bad value
EXIT_CODES = ("Exit codes: 0 done; 1 refused or failed (a Kafka error, a DENIED decision, a store or key file "
              "that cannot be used); 2 the command line is wrong (an unknown option, options that do not go "
              "together, a bad value).")


def is_usage_error(exc: SecmetaError) -> bool:
    """What was typed cannot be used: a bad value (secmeta's errors that are ValueErrors: InvalidValueError,
    QueryError, a bad client or listener setting, a directory that is not a tables directory), no --store
    given, a command whose extra is not installed (as argparse's unknown command).  A store or keyring that
    cannot be used is no usage error: the command line named it, the file or directory is what failed."""
    from secmeta.core.cli.plugins import MissingExtraError
    from secmeta.core.log.format import FrameError

    # a log that does not parse is a store that cannot be used
    if isinstance(exc, (StoreError, KeyringError, FrameError)):
        return False
    return isinstance(exc, (ValueError, MissingExtraError))


#: The store's own commands, in --help's order, each with the module of secmeta.core.cli that registers it.
COMMANDS = {"init": "init_cmd", "acls": "acls_cmd", "config": "config_cmd", "configs": "configs_cmd",
            "tokens": "tokens_cmd", "authorize": "authorize_cmd", "history": "forensics_cmd",
            "diff": "forensics_cmd", "who-could": "forensics_cmd", "timeline": "forensics_cmd", "log": "log_cmd",
            "keys": "keys_cmd", "serve": "serve_cmd"}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; given the command line ``argv``, of the one store command it runs only
    (the other commands' modules and the plugins' commands, found through their entry points, are then not
    loaded: they would only slow the start)."""
    # The command modules only register parsers; each command imports what it runs when it runs.
    import importlib

    from secmeta.core.cli import plugins
    from secmeta.core.cli.parser import HelpFormatter, Parser

    parser = Parser(
        prog="secmeta", formatter_class=HelpFormatter,
        description="Event-sourced store of Kafka security state: SCRAM credentials, ACLs, delegation tokens.",
        epilog=EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    named = _command_named(argv) if argv is not None else None
    modules = [COMMANDS[named]] if named in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for module in modules:
        importlib.import_module(f"secmeta.core.cli.{module}").register(commands)
    if named not in COMMANDS:
        plugins.register_all(commands)
    for sub in subparsers(parser):
        sub.formatter_class = HelpFormatter
    return parser


def subparsers(parser: argparse.ArgumentParser):
    """Every parser below ``parser``, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # an alias maps to the same parser
                yield sub
                yield from subparsers(sub)


def _version() -> str:
    from secmeta import (
        __version__,  # pyproject.toml's version is read from it: no importlib.metadata at start
    )

    return __version__


def _command_named(argv: list[str]) -> str | None:
    """The command a command line runs: its first word that is not an option (secmeta's own take no value);
    None when it asks for the whole program's help first (``secmeta -h acls`` lists every command)."""
    word = next((word for word in argv if not word.startswith("-") or word in ("-h", "--help")), None)
    return None if word in ("-h", "--help") else word


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--version"]:  # argparse's answer, without every command's parser
        print(f"secmeta {_version()}")
        return EXIT_OK
    args = build_parser(argv).parse_args(argv)
    try:
        code = args.func(args) or EXIT_OK
        sys.stdout.flush()  # here, so a reader that went away is seen before Python's exit flushes
        return code
    except BrokenPipeError:
        return _reader_went_away()
    except (SecmetaError, OSError) as exc:  # refused by the store or Kafka's rules; files it could not use
        print(f"secmeta: error: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, SecmetaError) and is_usage_error(exc) else EXIT_FAILED
    except KeyboardInterrupt:
        print("secmeta: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT


def _reader_went_away() -> int:
    """``secmeta history | head``: the reader closed the pipe; stop quietly, as Unix tools do.

    Python would report the failed flush of what is still buffered when it exits, so stdout is
    pointed at /dev/null first.  The exit status is the shell's for a process killed by SIGPIPE.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE
