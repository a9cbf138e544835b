"""``secmeta configs``: kafka-configs.sh's user SCRAM credential and client quota options, on a store or a server.

As ConfigCommand (tools/.../ConfigCommand.java): the entity is ``--entity-type users|clients`` (users and
clients together for a user's client) each with ``--entity-name NAME`` or ``--entity-default``, paired by
position, or the shorthands ``--user NAME``, ``--client NAME``, ``--user-defaults``, ``--client-defaults``
(not both kinds).  SCRAM mechanism keys alter one user's credentials: every deletion and upsertion in ONE
AlterUserScramCredentials request, so the store's rule for a request (ScramControlManager.alterCredentials:
a user's alteration is all or nothing, and a second item for the same user is DUPLICATE_RESOURCE) decides.
Quota keys (consumer_byte_rate, producer_byte_rate, request_percentage, controller_mutation_rate) go in ONE
AlterClientQuotas entry, after a describe refuses deleting a key that is not set ("Invalid config(s)").
The two kinds of key cannot be mixed in one command; a refused command writes nothing.  ``--describe``
prints ConfigCommand's lines (quotas of the entities a strict filter matches, then, for users alone, their
SCRAM credentials), or JSON.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import TYPE_CHECKING

from secmeta.core.cli.common import add_json_option, emit, emit_json, held_output, written
from secmeta.core.cli.display import printable
from secmeta.core.cli.quota_configs import KEYS as QUOTA_KEYS
from secmeta.core.cli.quota_configs import quota_line, quota_values
from secmeta.core.cli.scram_configs import (
    MECHANISMS,
    ScramSetting,
    deleted_mechanisms,
    password_bytes,
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
from secmeta.core.quota_keys import CLIENT_ID, USER

if TYPE_CHECKING:  # imported where a command runs, so registering the commands stays light
    from secmeta.core.control.quotas import ClientQuotaAlteration, ClientQuotaFilter

_MECHANISMS = ", ".join(MECHANISMS)
_TYPES = {"users": USER, "clients": CLIENT_ID}
_DEFAULT, _ANY = object(), object()  # --entity-default; no name given (--describe: any name)


class _Named(argparse.Action):
    """--entity-name NAME and --entity-default in the order given: paired with --entity-type by position."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = [*getattr(namespace, self.dest), _DEFAULT if option_string == "--entity-default" else values]
        setattr(namespace, self.dest, given)


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "configs", help="alter and describe users' SCRAM credentials and client quotas (kafka-configs.sh options)",
        description="Alter and describe users' SCRAM credentials and users' and clients' quotas (KIP-546), with "
                    "kafka-configs.sh option names. "
                    "All of one --alter is one request: it applies whole or not at all, "
                    "and Kafka's controller takes one SCRAM change per user per request, so alter one mechanism per "
                    "command. A password left out "
                    "of --add-config is asked for without echo (or read from stdin, one line per mechanism).",
    )
    add_security_options(p)
    add_remote_options(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true",
                        help="change credentials (with --add-config, --add-config-file or --delete-config)")
    action.add_argument("--describe", action="store_true", help="show mechanisms and iterations (never secrets)")
    p.add_argument("--entity-type", action="append", default=[], choices=list(_TYPES),
                   help="the entity type: users, clients, or both (a user's client)")
    p.add_argument("--entity-name", dest="entity_names", action=_Named, default=[], metavar="NAME",
                   help="the name of the entity type at the same position (with --describe: every name when omitted)")
    p.add_argument("--entity-default", dest="entity_names", action=_Named, nargs=0,
                   help="the default entity of the type at the same position (quotas only)")
    p.add_argument("--user", action="append", default=[], metavar="USER",
                   help="the user: short for --entity-type users --entity-name USER")
    p.add_argument("--client", action="append", default=[], metavar="CLIENT_ID",
                   help="the client id: short for --entity-type clients --entity-name CLIENT_ID")
    p.add_argument("--user-defaults", action="store_true", help="short for --entity-type users --entity-default")
    p.add_argument("--client-defaults", action="store_true", help="short for --entity-type clients --entity-default")
    p.add_argument("--add-config", action="append", default=[], metavar="CONFIGS",
                   help=f"configs to set: SCRAM credentials of a user, keys {_MECHANISMS}, e.g. "
                        "'SCRAM-SHA-256=[iterations=8192,password=...]' (iterations optional, either order); or quotas, "
                        f"keys {', '.join(QUOTA_KEYS)}, e.g. 'producer_byte_rate=1048576,request_percentage=50'")
    p.add_argument("--add-config-file", metavar="FILE",
                   help="a Java properties file of the same configs, e.g. SCRAM-SHA-256=iterations=8192,password=...")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEYS",
                   help="SCRAM mechanisms whose credentials to delete, or quota keys to remove, comma-separated")
    add_json_option(p, "print JSON: what --describe finds, or what --alter wrote (log offsets, entity, keys; never "
                       "a password)")
    add_point_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    entity = _entity(args)
    if args.describe:
        _check_describe(args)
        with open_admin(args, read_only=True) as session:
            return _describe(session, entity, json=args.json)
    _check_alter(args)
    entries, deleted = _configs(args)
    source = "--add-config-file" if args.add_config_file else "--add-config"
    if any(key in QUOTA_KEYS for key in (*entries, *deleted)):
        alteration = _quota_alteration(entity, quota_values(entries, source), deleted)
        with held_output(), open_admin(args) as session:  # the write completes before anything is printed
            return _alter_quotas(session, alteration, json=args.json)
    user = _scram_user(entity)
    alterations = _scram_alterations(user, scram_settings(entries, source), deleted_mechanisms(args.delete_config))
    with held_output(), open_admin(args) as session:
        return _alter(session, user, alterations, json=args.json)


def _entity(args: argparse.Namespace) -> list[tuple[str, object]]:
    """(entity type, name / _DEFAULT / _ANY) per type, as ConfigCommandOptions.checkArgs allows the options."""
    short = [(USER, n) for n in args.user] + [(CLIENT_ID, n) for n in args.client]
    short += [(t, _DEFAULT) for t, flag in ((USER, args.user_defaults), (CLIENT_ID, args.client_defaults)) if flag]
    if short and (args.entity_type or args.entity_names):
        raise InvalidValueError("--entity-{type,name,default} should not be used in conjunction with "
                                "specific entity flags (--user, --client, --user-defaults, --client-defaults)")
    if not (short or args.entity_type):  # ConfigCommandOptions.checkArgs refuses it too
        raise InvalidValueError("At least one entity type must be specified: --entity-type users|clients (with "
                                "--describe and no --entity-name: every entity of the type), --user NAME or "
                                "--client NAME")
    types = [t for t, _ in short] or [_TYPES[t] for t in args.entity_type]
    for kind in dict.fromkeys(types):
        if types.count(kind) > 1:
            singular = "user" if kind == USER else "client"
            raise InvalidValueError(f"give one {singular}: {types.count(kind)} were given "
                                    f"(Duplicate entity type(s) specified)")
    names = [n for _, n in short] or args.entity_names
    if len(names) > len(types):
        raise InvalidValueError(f"give one --entity-name or --entity-default per --entity-type: "
                                f"{len(names)} were given for {len(types)}")
    return [(t, names[i] if i < len(names) else _ANY) for i, t in enumerate(types)]


def _check_alter(args: argparse.Namespace) -> None:
    if has_point(args):
        raise InvalidValueError("--as-of and --at-offset apply to --describe only")
    if args.add_config and args.add_config_file:
        raise InvalidValueError("Only one of --add-config or --add-config-file must be specified")
    if len(args.add_config) > 1:
        raise InvalidValueError("--add-config given more than once: give every config in one, comma-separated")
    if not (args.add_config or args.add_config_file or args.delete_config):
        raise InvalidValueError("At least one of --add-config, --add-config-file, or --delete-config "
                                "must be specified with --alter")


def _configs(args: argparse.Namespace) -> tuple[dict[str, str], list[str]]:
    """The --add-config (or file) entries and the --delete-config keys, as given."""
    if args.add_config_file:
        from secmeta.core.wire.client_config import load_properties

        entries = dict(load_properties(args.add_config_file, source="--add-config-file"))
    else:
        entries = split_add_config(args.add_config[0]) if args.add_config else {}
    deleted = [key.strip() for value in args.delete_config for key in value.split(",")]
    scram = [key for key in (*entries, *deleted) if key in MECHANISMS]
    if scram and any(key in QUOTA_KEYS for key in (*entries, *deleted)):
        raise InvalidValueError(f"SCRAM credential configs ({', '.join(dict.fromkeys(scram))}) and quota configs "
                                "cannot be altered in one command")
    return entries, deleted


def _scram_user(entity: list[tuple[str, object]]) -> str:
    """The one user SCRAM configs alter; defaults and clients are refused, as ConfigCommand.alterConfig does."""
    if any(name is _DEFAULT for _, name in entity):
        raise InvalidValueError("--entity-default and --user-defaults name the users' default quota configs; "
                                "SCRAM credentials belong to one user (kafka-configs.sh refuses them together too)")
    if [t for t, _ in entity] != [USER]:
        raise InvalidValueError("SCRAM credentials belong to a user alone: give --entity-type users (or --user) only")
    name = entity[0][1]
    if name is _ANY:
        raise InvalidValueError("--alter needs the user: --user NAME or --entity-type users --entity-name NAME")
    return name  # type: ignore[return-value]


def _quota_alteration(entity: list[tuple[str, object]], values: dict[str, float],
                      deleted: list[str]) -> ClientQuotaAlteration:
    from secmeta.core.control.quotas import ClientQuotaAlteration, ClientQuotaOp
    from secmeta.events.records import ClientQuotaEntity

    if any(name is _ANY for _, name in entity):
        raise InvalidValueError("--alter needs the entity: An entity name must be specified for every entity type "
                                "(--entity-name NAME or --entity-default)")
    quota_values(dict.fromkeys(deleted, "0"), "--delete-config")  # the keys alone are checked
    ops = [ClientQuotaOp(k, v) for k, v in values.items()] + [ClientQuotaOp(k, None) for k in deleted]
    return ClientQuotaAlteration(ClientQuotaEntity.of({t: None if n is _DEFAULT else n for t, n in entity}), tuple(ops))


def _strict_filter(entity: list[tuple[str, object]]) -> ClientQuotaFilter:
    """ConfigCommand's describe filter: EXACT for a name, DEFAULT for a default, SPECIFIED for no name; strict."""
    from secmeta.core.control.quotas import ClientQuotaFilter, ClientQuotaFilterComponent

    component = ClientQuotaFilterComponent
    return ClientQuotaFilter.contains_only(
        component.of_entity_type(t) if n is _ANY else component.of_default_entity(t) if n is _DEFAULT
        else component.of_entity(t, n) for t, n in entity)  # type: ignore[arg-type]


def _alter_quotas(session: AdminSession, alteration: ClientQuotaAlteration, *, json: bool) -> int:
    from secmeta.events.records import ClientQuotaEntity

    entity = ClientQuotaEntity.of(alteration.entity)
    exactly = _strict_filter([(t, _DEFAULT if n is None else n) for t, n in entity.parts])
    held = session.admin.describe_client_quotas(exactly, context=session.context).get(entity, {})
    unset = [op.key for op in alteration.ops if op.value is None and op.key not in held]
    if unset:  # ConfigCommand refuses what the server would take as a no-op
        print(f"secmeta: error: Invalid config(s): {', '.join(unset)} (not set for this entity; nothing was changed)",
              file=sys.stderr)
        return 1
    start = session.next_offset()
    error = session.admin.alter_client_quotas([alteration], context=session.context).get(entity, ApiError())
    first, name = entity.parts[0]
    kind = "user" if first == USER else "client"
    if error:
        print(f"secmeta: error: altering the quotas of {entity} failed, nothing was changed: {error}", file=sys.stderr)
        return 1
    if json:
        emit_json({"log": written(start, session.next_offset()), "entity": entity.as_dict(),
                   "set": {op.key: op.value for op in alteration.ops if op.value is not None},
                   "deleted": [op.key for op in alteration.ops if op.value is None]})
        return 0
    print(f"Completed updating default config for {kind}s in the cluster." if name is None
          else printable(f"Completed updating config for {kind} {name}."))
    return 0


def _check_describe(args: argparse.Namespace) -> None:
    given = [flag for flag, value in (("--add-config", args.add_config), ("--add-config-file", args.add_config_file),
                                      ("--delete-config", args.delete_config)) if value]
    if given:
        raise InvalidValueError(f"{' and '.join(given)} apply to --alter only")


def _read_password(user: str, setting: ScramSetting) -> bytes:
    """The password asked for without echo on a terminal, else one line of stdin (read as bytes: a text
    read of a line that is not UTF-8 raises a UnicodeDecodeError holding it)."""
    name = setting.mechanism.mechanism_name
    if sys.stdin.isatty():
        typed: str | None = None
        try:
            typed = getpass.getpass(f"Password for {user} ({name}): ")
        except UnicodeDecodeError:
            pass  # refused below, outside the handler: the error holds the bytes typed
        if typed is None:
            raise InvalidValueError(f"{name} password is not valid UTF-8")
        return password_bytes(typed, name)
    line = getattr(sys.stdin, "buffer", sys.stdin).readline()  # a stdin replaced by a text stream has no buffer
    if not line:
        raise InvalidValueError(f"no password for {user} ({name}) on stdin")
    if isinstance(line, bytes):
        return password_bytes(line.removesuffix(b"\n").removesuffix(b"\r"), name)  # as a text read ends lines
    return password_bytes(line.rstrip("\n"), name)


def _scram_alterations(user: str, settings: list[ScramSetting], deletions: list) -> list:
    """The deletions and upsertions of one user, each password asked for now, before the store is opened."""
    from secmeta.core.types import (
        ScramCredentialInfo,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    alterations: list = [UserScramCredentialDeletion(user, mech) for mech in deletions]
    alterations += [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(s.mechanism, s.iterations),
                                     s.password if s.password is not None else _read_password(user, s))
        for s in settings
    ]
    return alterations


def _alter(session: AdminSession, user: str, alterations: list, *, json: bool) -> int:
    from secmeta.core.types import UserScramCredentialDeletion, UserScramCredentialUpsertion

    # One request, as ConfigCommand.alterUserScramCredentialConfigs sends: the user's alteration is all or nothing.
    first = session.next_offset()
    error = session.admin.alter_user_scram_credentials(alterations, context=session.context)[user]
    if error:
        print(f"secmeta: error: altering the SCRAM credentials of user {user!r} failed, nothing was changed: "
              f"{error}{_hint(error, alterations)}", file=sys.stderr)
        return 1
    if json:  # what was written, never a password
        emit_json({"log": written(first, session.next_offset()), "user": user,
                   "upserted": [{"mechanism": a.scram_credential_info.mechanism.mechanism_name,
                                 "iterations": a.scram_credential_info.iterations}
                                for a in alterations if isinstance(a, UserScramCredentialUpsertion)],
                   "deleted": [a.mechanism.mechanism_name for a in alterations
                               if isinstance(a, UserScramCredentialDeletion)]})
        return 0
    print(printable(f"Completed updating config for user {user}."))
    return 0


def _hint(error: ApiError, alterations: list) -> str:
    if error.code == ErrorCode.DUPLICATE_RESOURCE and len(alterations) > 1:
        return (" (Kafka's controller takes one credential change per user per request: "
                "alter one mechanism per command)")
    return ""


def _describe(session: AdminSession, entity: list[tuple[str, object]], *, json: bool) -> int:
    """Quotas of the entities ConfigCommand's strict filter matches, then (users alone) SCRAM credentials."""
    quotas = session.reader.describe_client_quotas(_strict_filter(entity), context=session.context)
    rows: list[dict] = [{"entity": e.as_dict(), "quotas": values} for e, values in quotas.items()]
    if not json:
        for e, values in quotas.items():
            print(quota_line(e, values))
    (kind, user), failed = entity[0], 0
    if len(entity) == 1 and kind == USER and user is not _DEFAULT:
        named = None if user is _ANY else [user]
        rows_scram, failed = _describe_scram(session, named, quoted=bool(quotas), json=json)
        rows += rows_scram
    if json:
        emit(rows, [], json=True)
    return 1 if failed else 0


def _describe_scram(session: AdminSession, users: list | None, *, quoted: bool, json: bool) -> tuple[list[dict], int]:
    """The SCRAM rows (printed unless ``json``) and how many named users failed; a named user without credentials
    is no failure when it has quotas (``quoted``)."""
    results = session.reader.describe_user_scram_credentials(users, context=session.context)
    found = {name: r for name, r in sorted(results.items()) if not isinstance(r, ApiError)}
    failed = {name: r for name, r in sorted(results.items()) if isinstance(r, ApiError)
              and not (quoted and r.code == ErrorCode.RESOURCE_NOT_FOUND)}
    rows = [{"user": name, "credentials": [{"mechanism": i.mechanism.mechanism_name, "iterations": i.iterations}
                                           for i in d.scram_credential_infos]} for name, d in found.items()]
    if not json:
        for name, d in found.items():
            infos = ", ".join(f"{i.mechanism.mechanism_name}=iterations={i.iterations}" for i in d.scram_credential_infos)
            print(printable(f"SCRAM credential configs for user-principal '{name}' are {infos}"))
    for name, error in failed.items():
        print(f"secmeta: error: retrieving SCRAM credential configs for user-principal '{name}': {error}",
              file=sys.stderr)
    return rows, len(failed)
