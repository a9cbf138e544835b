"""``secmeta tokens``: kafka-delegation-tokens.sh against a store directory."""

from __future__ import annotations

import argparse
import base64
import binascii

from core.cli.common import iso_time, print_table
from core.cli.security import (
    add_point_options,
    add_remote_options,
    add_security_options,
    context,
    has_point,
    open_admin,
    view,
)
from core.errors import InvalidValueError


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "tokens", help="create, renew, expire and describe delegation tokens (kafka-delegation-tokens.sh options)",
        description="Delegation tokens with kafka-delegation-tokens.sh option names. The token secret comes "
                    "from $SECMETA_TOKEN_SECRET. --create prints the token's HMAC (its password) once; "
                    "--describe never shows it unless the store is configured to.",
    )
    action = p.add_mutually_exclusive_group(required=True)
    for name, what in (("create", "issue a token"), ("renew", "extend a token"), ("expire", "expire a token"), ("describe", "list tokens")):
        action.add_argument(f"--{name}", action="store_true", help=what)
    add_security_options(p)
    add_remote_options(p)
    p.add_argument("--owner-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="--create: the owner (default: the requester); --describe: owners to list (repeatable)")
    p.add_argument("--renewer-principal", action="append", default=[], metavar="PRINCIPAL", help="renewer (repeatable)")
    p.add_argument("--max-life-time-period", type=int, default=-1, metavar="MS", help="requested max lifetime in ms (default: the store's)")
    p.add_argument("--hmac", metavar="BASE64", help="the token's HMAC, for --renew and --expire")
    p.add_argument("--renew-time-period", type=int, default=-1, metavar="MS", help="renew period in ms (default: the store's)")
    p.add_argument("--expiry-time-period", type=int, default=-1, metavar="MS", help="expiry period in ms; negative expires now")
    add_point_options(p)
    p.set_defaults(func=run)


def _hmac(args) -> bytes:
    if not args.hmac:
        raise InvalidValueError("--renew and --expire need --hmac")
    try:
        return base64.b64decode(args.hmac, validate=True)
    except binascii.Error:
        raise InvalidValueError("--hmac must be the base64 HMAC printed by --create") from None


def run(args: argparse.Namespace) -> int:
    if has_point(args) and not args.describe:
        raise InvalidValueError("--as-of and --at-offset apply to --describe only")
    with open_admin(args, read_only=args.describe) as store:
        ctx = context(args, store)
        if args.create:
            if len(args.owner_principal) > 1:
                raise InvalidValueError("--create takes at most one --owner-principal")
            owner = args.owner_principal[0] if args.owner_principal else None
            token = store.create_delegation_token(context=ctx, owner=owner, renewers=args.renewer_principal,
                                                  max_lifetime_ms=args.max_life_time_period)
            print("Created delegation token:")
            _table([token], show_hmac=True)
        elif args.renew:
            expiry = store.renew_delegation_token(_hmac(args), args.renew_time_period, context=ctx)
            print(f"Renewed delegation token; new expiry {iso_time(expiry)} ({expiry})")
        elif args.expire:
            expiry = store.expire_delegation_token(_hmac(args), args.expiry_time_period, context=ctx)
            print(f"Expired delegation token; expiry {iso_time(expiry)} ({expiry})")
        else:
            tokens = view(store, args).describe_delegation_tokens(args.owner_principal or None, context=ctx)
            _table(tokens, show_hmac=any(t.hmac for t in tokens))
    return 0


def _table(tokens, *, show_hmac: bool) -> None:
    headers = ["TOKENID", "OWNER", "REQUESTER", "RENEWERS", "ISSUED", "EXPIRES", "MAX"] + (["HMAC"] if show_hmac else [])
    rows = []
    for t in tokens:
        row = [t.token_id, t.owner, t.requester, ",".join(t.renewers) or "-", iso_time(t.issue_timestamp_ms),
               iso_time(t.expiry_timestamp_ms), iso_time(t.max_timestamp_ms)]
        if show_hmac:
            row.append(base64.b64encode(t.hmac).decode() if t.hmac else "-")
        rows.append(row)
    if rows:
        print_table(headers, rows)
    else:
        print("no tokens visible to this principal")
