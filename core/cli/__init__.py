"""The ``secmeta`` command line.

The store's own commands are here; the Kafka and Spark commands and the demo
live with their code in ``consumers`` and join through the ``secmeta.commands``
entry-point group (``core.cli.plugins``), so ``core`` imports nothing above it.
"""

from __future__ import annotations

import argparse
import sys

from core.cli import (
    acls_cmd,
    authorize_cmd,
    configs_cmd,
    forensics_cmd,
    keys_cmd,
    log_cmd,
    plugins,
    serve_cmd,
    tokens_cmd,
)
from core.errors import SecmetaError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="secmeta",
        description="Event-sourced store of Kafka security state: SCRAM credentials, ACLs, delegation tokens.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    acls_cmd.register(commands)
    configs_cmd.register(commands)
    tokens_cmd.register(commands)
    authorize_cmd.register(commands)
    forensics_cmd.register(commands)
    log_cmd.register(commands)
    keys_cmd.register(commands)
    serve_cmd.register(commands)
    plugins.register_all(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except (SecmetaError, OSError) as exc:  # every error secmeta raises on purpose; files it could not use
        print(f"secmeta: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("secmeta: interrupted", file=sys.stderr)
        return 130

