"""``secmeta configs``: kafka-configs.sh's SCRAM credential options against a store directory."""

from __future__ import annotations

import argparse
import getpass
import re
import sys

from core.cli.security import (
    add_point_options,
    add_remote_options,
    add_security_options,
    context,
    has_point,
    open_admin,
    view,
)
from core.errors import ApiError, InvalidValueError
from core.types import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from events.types import ScramMechanism

_CONFIG = re.compile(r"\s*(SCRAM-SHA-\d+)\s*=\s*\[([^\]]*)\]\s*(?:,|$)", re.IGNORECASE)


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "configs", help="alter and describe SCRAM credentials (kafka-configs.sh options)",
        description="Alter and describe users' SCRAM credentials, with kafka-configs.sh option names. "
                    "A password left out of --add-config is asked for without echo (or read from stdin).",
    )
    add_security_options(p)
    add_remote_options(p)
    p.add_argument("--entity-type", required=True, choices=["users"], help="only 'users' is supported")
    p.add_argument("--entity-name", metavar="USER", help="the user (all users with --describe when omitted)")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="change credentials (with --add-config/--delete-config)")
    action.add_argument("--describe", action="store_true", help="show mechanisms and iterations (never secrets)")
    p.add_argument("--add-config", metavar="CONFIGS",
                   help="e.g. 'SCRAM-SHA-256=[iterations=8192,password=...],SCRAM-SHA-512=[password=...]'")
    p.add_argument("--delete-config", metavar="MECHANISMS", help="e.g. SCRAM-SHA-512 (comma-separated)")
    add_point_options(p)
    p.set_defaults(func=run)


def parse_add_config(text: str) -> list[tuple[ScramMechanism, int, bytes | None]]:
    """Parse --add-config into (mechanism, iterations or -1, password or None)."""
    out, pos = [], 0
    while pos < len(text):
        m = _CONFIG.match(text, pos)
        if not m:
            raise InvalidValueError(f"cannot parse --add-config at character {pos + 1}: expected "
                             "SCRAM-SHA-256=[iterations=N,password=P],... (values are not echoed)")
        mech = ScramMechanism.parse(m.group(1))
        iterations, password = -1, None
        for item in filter(None, (s.strip() for s in m.group(2).split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise InvalidValueError(f"{m.group(1)}: expected key=value items (a ',' inside a password is not supported; "
                                 "leave the password out to be prompted for it)")
            if key == "iterations":
                if not value.lstrip("-").isdigit():
                    raise InvalidValueError(f"{m.group(1)}: iterations must be a number, got {value[:20]!r}")
                iterations = int(value)
            elif key == "password":
                password = value.encode()
            else:
                raise InvalidValueError(f"{m.group(1)}: unknown key {key[:20]!r} (use iterations and password)")
        out.append((mech, iterations, password))
        pos = m.end()
    return out


def _read_password(user: str, mech: ScramMechanism) -> bytes:
    if sys.stdin.isatty():
        return getpass.getpass(f"Password for {user} ({mech.mechanism_name}): ").encode()
    line = sys.stdin.readline()
    if not line:
        raise InvalidValueError(f"no password for {user} ({mech.mechanism_name}) on stdin")
    return line.rstrip("\n").encode()


def run(args: argparse.Namespace) -> int:
    if has_point(args) and not args.describe:
        raise InvalidValueError("--as-of and --at-offset apply to --describe only")
    with open_admin(args, read_only=args.describe) as store:
        ctx = context(args, store)
        if args.describe:
            return _describe(view(store, args), ctx, args.entity_name)
        if not args.entity_name:
            raise InvalidValueError("--alter needs --entity-name")
        if not (args.add_config or args.delete_config):
            raise InvalidValueError("--alter needs --add-config or --delete-config")
        alterations = []
        for mech, iterations, password in parse_add_config(args.add_config or ""):
            alterations.append(UserScramCredentialUpsertion(
                args.entity_name, ScramCredentialInfo(mech, iterations),
                password if password is not None else _read_password(args.entity_name, mech)))
        for name in filter(None, (s.strip() for s in (args.delete_config or "").split(","))):
            alterations.append(UserScramCredentialDeletion(args.entity_name, ScramMechanism.parse(name)))
        # Kafka refuses a user named twice in one request, so each mechanism is its own request.
        failed = 0
        for alteration in alterations:
            error = store.alter_user_scram_credentials([alteration], context=ctx)[args.entity_name]
            if error:
                failed += 1
                print(f"Failed to alter {alteration.mechanism.mechanism_name} for user '{args.entity_name}': {error}")
        if not failed:
            print(f"Completed updating config for user {args.entity_name}.")
        return 1 if failed else 0


def _describe(store, ctx, user: str | None) -> int:
    results = store.describe_user_scram_credentials([user] if user else None, context=ctx)
    failed = 0
    for name, result in sorted(results.items()):
        if isinstance(result, ApiError):
            failed += 1
            print(f"user '{name}': {result}")
            continue
        infos = ",".join(f"{i.mechanism.mechanism_name}=iterations={i.iterations}" for i in result.scram_credential_infos)
        print(f"SCRAM credential configs for user-principal '{name}' are {infos}")
    if not results:
        print("no users have SCRAM credentials")
    return 1 if failed else 0
