"""``secmeta tokens``: kafka-delegation-tokens.sh, on a store or a server.

Options, per-action checks and output lines follow DelegationTokenCommand (tools/.../DelegationTokenCommand.java):
one action; each action refuses the options that belong to another (checkArgs); ``--expire`` needs --hmac and
--expiry-time-period (-1 expires at once, so it is never a default); ``--renew`` needs --hmac.  The table has
Kafka's columns with times as ISO-8601 UTC.  Differences: --max-life-time-period and --renew-time-period may be
left out for the store's default (-1, as Kafka's value -1 means), the request is not echoed (Kafka's
"Calling ... with hmac :..." line repeats the token's password), and --describe shows HMACs only when the
store is configured to return them (``describe_tokens_include_hmac``).
"""

from __future__ import annotations

import argparse
import base64
import binascii
from typing import TYPE_CHECKING

from secmeta.core.cli.common import add_json_option, emit, emit_json, held_output, iso_time, written
from secmeta.core.cli.security import (
    add_point_options,
    add_remote_options,
    add_security_options,
    has_point,
    open_admin,
)
from secmeta.core.errors import InvalidValueError

if TYPE_CHECKING:
    from secmeta.core.types import DelegationToken

ACTIONS = ("create", "renew", "expire", "describe")
# DelegationTokenCommandOptions.checkArgs: the options each action refuses (secmeta adds --renewer-principal
# to --expire's and --describe's, where Kafka ignores it).
_INVALID = {
    "create": ("hmac", "renew_time_period", "expiry_time_period"),
    "renew": ("renewer_principal", "max_life_time_period", "expiry_time_period", "owner_principal"),
    "expire": ("renewer_principal", "max_life_time_period", "renew_time_period", "owner_principal"),
    "describe": ("renewer_principal", "renew_time_period", "max_life_time_period", "hmac", "expiry_time_period"),
}
_REQUIRED = {"renew": ("hmac",), "expire": ("hmac", "expiry_time_period")}
_COLUMNS = {"token_id": "TOKENID", "hmac": "HMAC", "owner": "OWNER", "requester": "REQUESTER",
            "renewers": "RENEWERS", "issue_date": "ISSUEDATE", "expiry_date": "EXPIRYDATE", "max_date": "MAXDATE"}


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "tokens", help="create, renew, expire and describe delegation tokens (kafka-delegation-tokens.sh options)",
        description="Delegation tokens with kafka-delegation-tokens.sh option names. The token secret comes "
                    "from $SECMETA_TOKEN_SECRET. --create prints the token's HMAC (its password) once; "
                    "--describe never shows it unless the store is configured to.",
    )
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create a token (for --owner-principal, default the requester)")
    action.add_argument("--renew", action="store_true", help="renew the token of --hmac by --renew-time-period")
    action.add_argument("--expire", action="store_true", help="expire the token of --hmac after --expiry-time-period")
    action.add_argument("--describe", action="store_true", help="list the tokens this principal may see")
    add_security_options(p)
    add_remote_options(p)
    p.add_argument("--owner-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="--create: the token's owner, Type:name (default: the requester); "
                        "--describe: only tokens of these owners (repeatable)")
    p.add_argument("--renewer-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="--create: a principal that may renew the token, Type:name (repeatable)")
    p.add_argument("--max-life-time-period", type=int, metavar="MS",
                   help="--create: max life of the token in ms; -1 or left out: the store's max lifetime")
    p.add_argument("--hmac", metavar="BASE64", help="--renew / --expire: the token's HMAC, as --create printed it")
    p.add_argument("--renew-time-period", type=int, metavar="MS",
                   help="--renew: renew period in ms; -1 or left out: the store's renew period")
    p.add_argument("--expiry-time-period", type=int, metavar="MS",
                   help="--expire (required): expire after this many ms; -1 expires the token at once")
    add_json_option(p)
    add_point_options(p)
    p.set_defaults(func=run)


def _check(args: argparse.Namespace, action: str) -> None:
    """DelegationTokenCommandOptions.checkArgs: an option of another action is a usage error, not ignored."""
    given = [name for name in _INVALID[action] if getattr(args, name) not in (None, [])]
    if given:
        raise InvalidValueError(f"{', '.join(_flag(n) for n in given)} cannot be used with --{action}")
    missing = [name for name in _REQUIRED.get(action, ()) if getattr(args, name) is None]
    if missing:
        raise InvalidValueError(f"--{action} needs {' and '.join(_flag(n) for n in missing)}")
    if has_point(args) and action != "describe":
        raise InvalidValueError("--as-of and --at-offset apply to --describe only")
    if action == "create" and len(args.owner_principal) > 1:
        raise InvalidValueError("--create takes one --owner-principal")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _hmac(args: argparse.Namespace) -> bytes:
    try:
        return base64.b64decode(args.hmac, validate=True)
    except binascii.Error:
        raise InvalidValueError("--hmac must be the base64 HMAC that --create printed (the value is not repeated)") from None


def run(args: argparse.Namespace) -> int:
    action = next(a for a in ACTIONS if getattr(args, a))
    _check(args, action)
    hmac = _hmac(args) if args.hmac is not None else b""  # _check: given exactly with --renew and --expire
    with held_output(), open_admin(args, read_only=action == "describe") as session:  # write, then print
        admin, ctx = session.admin, session.context
        if action == "create":
            token = admin.create_delegation_token(
                context=ctx, owner=args.owner_principal[0] if args.owner_principal else None,
                renewers=args.renewer_principal, max_lifetime_ms=_period(args.max_life_time_period))
            if not args.json:
                print(f"Created delegation token with tokenId : {token.token_id}")
            _print_tokens([token], json=args.json)
        elif action == "describe":
            tokens = session.reader.describe_delegation_tokens(args.owner_principal or None, context=ctx)
            if not args.json:
                print(f"Total number of tokens : {len(tokens)}")
            _print_tokens(tokens, json=args.json)
        else:
            start = session.next_offset()
            if action == "renew":
                expiry = admin.renew_delegation_token(hmac, _period(args.renew_time_period), context=ctx)
            else:
                expiry = admin.expire_delegation_token(hmac, args.expiry_time_period, context=ctx)
            if args.json:  # with expiry_time beside it (common.emit_json)
                emit_json({"log": written(start, session.next_offset()), "expiry_timestamp_ms": expiry})
            else:
                print(f"Completed {action} operation. New expiry date : {iso_time(expiry)}")
    return 0


def _period(ms: int | None) -> int:
    return -1 if ms is None else ms


def _row(token: DelegationToken, *, json: bool) -> dict[str, object]:
    """A token's row: the table's dates in ISO-8601, or for JSON the epoch-ms fields (each gets its ISO-8601
    ``*_time`` beside it from common.emit)."""
    row: dict[str, object] = {"token_id": token.token_id}
    if token.hmac:
        row["hmac"] = base64.b64encode(token.hmac).decode()
    row.update(owner=token.owner, requester=token.requester, renewers=list(token.renewers))
    for name in ("issue", "expiry", "max"):
        ms = getattr(token, f"{name}_timestamp_ms")
        row.update({f"{name}_timestamp_ms": ms} if json else {f"{name}_date": iso_time(ms)})
    return row


def _print_tokens(tokens: list[DelegationToken], *, json: bool) -> None:
    rows = [_row(t, json=json) for t in tokens]
    if json:
        emit(rows, _COLUMNS, json=True)
    elif rows:
        columns = _COLUMNS if any("hmac" in r for r in rows) else {k: v for k, v in _COLUMNS.items() if k != "hmac"}
        emit(rows, columns)
