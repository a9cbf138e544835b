"""``secmeta configs``: kafka-configs.sh's user SCRAM credential options, on a store or a server.

As ConfigCommand (tools/.../ConfigCommand.java): the user is ``--user NAME`` or ``--entity-type users
--entity-name NAME`` (not both); ``--alter`` sends every deletion and upsertion of the user in ONE
AlterUserScramCredentials request, so the store's rule for a request (ScramControlManager.alterCredentials:
a user's alteration is all or nothing, and a second item for the same user is DUPLICATE_RESOURCE)
decides, and a refused command writes nothing.  ``--describe`` prints ConfigCommand's lines, or JSON.
"""

from __future__ import annotations

import argparse
import getpass
import sys

from secmeta.core.cli.common import add_json_option, emit
from secmeta.core.cli.scram_configs import (
    MECHANISMS,
    ScramSetting,
    deleted_mechanisms,
    scram_settings,
    split_add_config,
)
from secmeta.core.cli.security import (
    AdminSession,
    add_point_options,
    add_remote_options,
    add_security_options,
    has_point,
    open_admin,
)
from secmeta.core.errors import ApiError, ErrorCode, InvalidValueError
from secmeta.core.types import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from secmeta.core.wire.client_config import load_properties

_MECHANISMS = ", ".join(MECHANISMS)


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "configs", help="alter and describe users' SCRAM credentials (kafka-configs.sh options)",
        description="Alter and describe users' SCRAM credentials, with kafka-configs.sh option names. "
                    "All of one --alter is one AlterUserScramCredentials request: it applies whole or not at all, "
                    "and Kafka's controller takes one change per user per request, so alter one mechanism per "
                    "command. A password left out "
                    "of --add-config is asked for without echo (or read from stdin, one line per mechanism).",
    )
    add_security_options(p)
    add_remote_options(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true",
                        help="change credentials (with --add-config, --add-config-file or --delete-config)")
    action.add_argument("--describe", action="store_true", help="show mechanisms and iterations (never secrets)")
    p.add_argument("--entity-type", choices=["users"], help="the entity type; only users (SCRAM credentials)")
    p.add_argument("--entity-name", action="append", default=[], metavar="USER",
                   help="the user (with --describe, every user when omitted)")
    p.add_argument("--user", action="append", default=[], metavar="USER",
                   help="the user: short for --entity-type users --entity-name USER")
    p.add_argument("--entity-default", action="store_true",
                   help="the users' default configs: refused, as kafka-configs.sh does with SCRAM configs")
    p.add_argument("--user-defaults", action="store_true", help="short for --entity-type users --entity-default")
    p.add_argument("--add-config", action="append", default=[], metavar="CONFIGS",
                   help=f"configs to set, keys {_MECHANISMS}: e.g. "
                        "'SCRAM-SHA-256=[iterations=8192,password=...]' (iterations optional and first)")
    p.add_argument("--add-config-file", metavar="FILE",
                   help="a Java properties file of the same configs, e.g. SCRAM-SHA-256=iterations=8192,password=...")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEYS",
                   help=f"mechanisms whose credentials to delete, comma-separated ({_MECHANISMS})")
    add_json_option(p)
    add_point_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    user = _user(args)
    if args.describe:
        _check_describe(args)
    else:
        if user is None:
            raise InvalidValueError("--alter needs the user: --user NAME or --entity-type users --entity-name NAME")
        settings, deletions = _alterations(args)
    with open_admin(args, read_only=args.describe) as session:
        if args.describe:
            return _describe(session, user, json=args.json)
        return _alter(session, user, settings, deletions)


def _user(args: argparse.Namespace) -> str | None:
    """The one user the options name (None: every user), as ConfigCommandOptions.checkArgs allows them."""
    if args.user and (args.entity_type or args.entity_name or args.entity_default):
        raise InvalidValueError("--entity-{type,name,default} should not be used in conjunction with "
                                "specific entity flags (--user)")
    if args.entity_default or args.user_defaults:
        raise InvalidValueError("--entity-default and --user-defaults name the users' default quota configs; "
                                "SCRAM credentials belong to one user (kafka-configs.sh refuses them together too)")
    if not (args.user or args.entity_type):
        raise InvalidValueError("give the user: --user NAME, or --entity-type users with --entity-name NAME")
    names = args.user + args.entity_name
    if len(names) > 1:
        raise InvalidValueError(f"give one user: {len(names)} were given (--user / --entity-name)")
    return names[0] if names else None


def _check_describe(args: argparse.Namespace) -> None:
    given = [flag for flag, value in (("--add-config", args.add_config), ("--add-config-file", args.add_config_file),
                                      ("--delete-config", args.delete_config)) if value]
    if given:
        raise InvalidValueError(f"{' and '.join(given)} apply to --alter only")


def _alterations(args: argparse.Namespace) -> tuple[list[ScramSetting], list]:
    if has_point(args):
        raise InvalidValueError("--as-of and --at-offset apply to --describe only")
    if args.json:
        raise InvalidValueError("--json applies to --describe only")
    if args.add_config and args.add_config_file:
        raise InvalidValueError("Only one of --add-config or --add-config-file must be specified")
    if len(args.add_config) > 1:
        raise InvalidValueError("--add-config given more than once: give every config in one, comma-separated")
    if not (args.add_config or args.add_config_file or args.delete_config):
        raise InvalidValueError("At least one of --add-config, --add-config-file, or --delete-config "
                                "must be specified with --alter")
    if args.add_config_file:
        settings = scram_settings(load_properties(args.add_config_file, source="--add-config-file"),
                                  "--add-config-file")
    else:
        settings = scram_settings(split_add_config(args.add_config[0]) if args.add_config else {}, "--add-config")
    return settings, deleted_mechanisms(args.delete_config)


def _read_password(user: str, setting: ScramSetting) -> bytes:
    name = setting.mechanism.mechanism_name
    if sys.stdin.isatty():
        return getpass.getpass(f"Password for {user} ({name}): ").encode()
    line = sys.stdin.readline()
    if not line:
        raise InvalidValueError(f"no password for {user} ({name}) on stdin")
    return line.rstrip("\n").encode()


def _alter(session: AdminSession, user: str, settings: list[ScramSetting], deletions: list) -> int:
    alterations = [UserScramCredentialDeletion(user, mech) for mech in deletions]
    alterations += [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(s.mechanism, s.iterations),
                                     s.password if s.password is not None else _read_password(user, s))
        for s in settings
    ]
    # One request, as ConfigCommand.alterUserScramCredentialConfigs sends: the user's alteration is all or nothing.
    error = session.admin.alter_user_scram_credentials(alterations, context=session.context)[user]
    if error:
        print(f"secmeta: error: altering the SCRAM credentials of user {user!r} failed, nothing was changed: "
              f"{error}{_hint(error, alterations)}", file=sys.stderr)
        return 1
    print(f"Completed updating config for user {user}.")
    return 0


def _hint(error: ApiError, alterations: list) -> str:
    if error.code == ErrorCode.DUPLICATE_RESOURCE and len(alterations) > 1:
        return (" (Kafka's controller takes one credential change per user per request: "
                "alter one mechanism per command)")
    return ""


def _describe(session: AdminSession, user: str | None, *, json: bool) -> int:
    results = session.reader.describe_user_scram_credentials(None if user is None else [user],
                                                             context=session.context)
    found = {name: r for name, r in sorted(results.items()) if not isinstance(r, ApiError)}
    failed = {name: r for name, r in sorted(results.items()) if isinstance(r, ApiError)}
    if json:
        emit(({"user": name, "credentials": [{"mechanism": i.mechanism.mechanism_name, "iterations": i.iterations}
                                              for i in d.scram_credential_infos]}
              for name, d in found.items()), [], json=True)
    else:
        for name, d in found.items():
            infos = ", ".join(f"{i.mechanism.mechanism_name}=iterations={i.iterations}" for i in d.scram_credential_infos)
            print(f"SCRAM credential configs for user-principal '{name}' are {infos}")
    for name, error in failed.items():
        print(f"secmeta: error: retrieving SCRAM credential configs for user-principal '{name}': {error}",
              file=sys.stderr)
    return 1 if failed else 0
