"""``secmeta history | diff | who-could | timeline``: forensic questions over the store's past."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from secmeta.core.cli.common import add_json_option, emit, emit_json, iso_time
from secmeta.core.cli.display import printable
from secmeta.core.cli.security import (
    OPERATION_NAMES,
    add_point_options,
    add_resource_options,
    add_security_options,
    one_resource,
    open_store,
    operation,
    pattern_type,
    resources,
)
from secmeta.core.errors import InvalidValueError
from secmeta.core.times import Point, parse_offset, parse_time
from secmeta.events.types import AclOperation, ResourcePatternFilter, ScramMechanism

if TYPE_CHECKING:  # imported where a command runs, so registering the commands stays light
    from secmeta.core.forensics.token_access import TokenAccess


def register(commands: argparse._SubParsersAction) -> None:
    h = commands.add_parser("history", help="logged changes: who changed what, when, from where",
                            description="Logged changes in order, filtered; payloads redacted (never secrets).")
    add_security_options(h)
    h.add_argument("--principal", metavar="PRINCIPAL",
                   help="changes made by, or about, this principal: its ACLs and the 'User:*' grants, ACLs on the "
                        "USER resource naming it, its credentials, tokens it owns, requested or may renew, quotas "
                        "of its user")
    h.add_argument("--user", metavar="NAME", help="changes to this SCRAM user's credentials")
    add_resource_options(h, many=False)
    h.add_argument("--resource-pattern-type", default="match", metavar="TYPE",
                   help="how --topic etc. match ACL patterns: match, literal, prefixed or any (default: match)")
    h.add_argument("--event-type", action="append", metavar="TYPE", help="e.g. AclCreated (repeatable)")
    add_window_options(h)
    h.add_argument("--limit", type=int, metavar="N", help="at most N entries (default: all)")
    add_json_option(h)
    h.set_defaults(func=history_cmd)

    d = commands.add_parser("diff", help="what changed between two points in time",
                            description="ACLs added and removed, credentials upserted and deleted, tokens "
                                        "issued, renewed, expired and removed between two points.")
    add_security_options(d)
    add_point_pair(d, "from", "the earlier point")
    add_point_pair(d, "to", "the later point (default: now)")
    add_json_option(d)
    d.set_defaults(func=diff_cmd)

    w = commands.add_parser("who-could", help="every principal allowed an operation on a resource at a point",
                            description="Who could do OPERATION on the resource at a time or offset (default now), "
                                        "from which hosts, and the ACLs or super-user rule that allowed it; a "
                                        "holder of a live delegation token is listed under each grant of the "
                                        "token's owner (THROUGH TOKEN: it could act as the owner).")
    add_security_options(w)
    w.add_argument("--operation", required=True, metavar="OP", help=OPERATION_HELP)
    add_resource_options(w, many=False)
    add_point(w)
    add_json_option(w)
    w.set_defaults(func=who_could_cmd)

    t = commands.add_parser("timeline", help="when a principal could do an operation on a resource, and who changed it",
                            description="The intervals in which the principal was allowed, each opened and closed by "
                                        "the logged change (offset, time, actor) that caused it, and those in which "
                                        "it held a live delegation token of an owner who was allowed (THROUGH "
                                        "TOKEN: it could act as the owner).")
    add_security_options(t)
    t.add_argument("--principal", required=True, metavar="PRINCIPAL", help="who, e.g. User:alice")
    t.add_argument("--operation", required=True, metavar="OP", help=OPERATION_HELP)
    t.add_argument("--host", help="the client's host or address (host-specific ACLs depend on it; default: any "
                                  "host, the intervals in which some host was allowed)")
    add_resource_options(t, many=False)
    add_json_option(t)
    t.set_defaults(func=timeline_cmd)


OPERATION_HELP = "the ACL operation: " + OPERATION_NAMES


def add_point(parser: argparse.ArgumentParser) -> None:
    """One point in the store's past, named as everywhere: --as-of TIME or --at-offset N (--at: old spelling)."""
    add_point_options(parser)
    parser.add_argument("--at", dest="as_of", help=argparse.SUPPRESS)


def add_window_options(parser: argparse.ArgumentParser) -> None:
    """A time window, named as diff's and spark query tokens': --from TIME / --to TIME (--since/--until: old)."""
    parser.add_argument("--from", dest="start", metavar="TIME",
                        help="from this time, inclusive (ISO-8601 with zone, or epoch ms)")
    parser.add_argument("--to", dest="end", metavar="TIME", help="up to this time, inclusive")
    parser.add_argument("--since", dest="start", help=argparse.SUPPRESS)
    parser.add_argument("--until", dest="end", help=argparse.SUPPRESS)


def add_point_pair(parser: argparse.ArgumentParser, name: str, what: str) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(f"--{name}", metavar="TIME", help=f"{what}: ISO-8601 with zone, or epoch ms")
    group.add_argument(f"--{name}-offset", metavar="N", help=f"{what}: after the first N events")


def point_arg(args: argparse.Namespace, time_dest: str, offset_dest: str | None = None) -> Point | None:
    """The point of --NAME TIME / --NAME-offset N (or of the two dests given), None if neither."""
    time_text, offset_text = getattr(args, time_dest), getattr(args, offset_dest or f"{time_dest}_offset")
    if time_text is not None:
        return Point.at_time(parse_time(time_text))
    if offset_text is not None:
        return Point.at_offset(parse_offset(offset_text))
    return None


def as_of_arg(args: argparse.Namespace) -> Point | None:
    """The point of add_point's options."""
    return point_arg(args, "as_of", "at_offset")


def history_cmd(args: argparse.Namespace) -> int:
    from secmeta.core.forensics.token_access import issued_access

    targets = resources(args)
    if len(targets) > 1:
        raise InvalidValueError("give at most one resource")
    resource = None
    if targets:
        (rtype, name), = targets
        resource = ResourcePatternFilter(rtype, name, pattern_type(args.resource_pattern_type))
    with open_store(args, read_only=True) as store:
        entries = list(store.history(
            principal=args.principal, user=args.user, resource=resource, event_types=args.event_type,
            start_ms=None if args.start is None else parse_time(args.start),
            end_ms=None if args.end is None else parse_time(args.end), limit=args.limit,
        ))
    rows = ({**e.to_dict(), "time": iso_time(e.timestamp_ms), "token_access": _sentence(issued_access(e))}
            for e in entries)
    emit(rows if args.json else map(event_text_row, rows), EVENT_COLUMNS, json=args.json,
         empty="no logged changes match")
    return 0


EVENT_COLUMNS = {"offset": "OFFSET", "time": "TIME", "actor_principal": "ACTOR", "actor_host": "HOST",
                 "asserted": "AUTH", "operator": "OPERATOR", "event_type": "EVENT", "action": "ACTION",
                 "entity_key": "ENTITY", "details": "DETAILS"}


def _sentence(access: TokenAccess | None) -> str | None:
    return None if access is None else access.sentence()


def event_text_row(row: dict) -> dict:
    """A logged change's dict (history's to_dict, log dump's redacted envelope) as EVENT_COLUMNS' text:
    its time, whether the actor was asserted or authenticated, the operator as ``user@host pid N (program)``,
    and its details: the token access it gives (history's ``token_access``), then its payload."""
    from secmeta.events.records import Operator

    return {**row, "time": iso_time(row["timestamp_ms"]),
            "asserted": "asserted" if row["actor_asserted"] else "authenticated",
            "operator": str(Operator(**row["operator"])),
            "details": " ".join([*([row["token_access"]] if row.get("token_access") else []),
                                 *(f"{k}={v}" for k, v in row["payload"].items())])}


def diff_cmd(args: argparse.Namespace) -> int:
    from secmeta.core.forensics.token_access import requester_access

    with open_store(args, read_only=True) as store:
        start = point_arg(args, "from") or Point.at_offset(0)
        end = point_arg(args, "to") or Point.at_offset(store.log.end_offset)
        diff = store.diff(start, end)
    acting = {t.token_id: _sentence(requester_access(t, -1, t.issue_timestamp_ms)) for t in diff.tokens_issued}
    if args.json:
        found = diff.to_dict()
        for token in found["tokens_issued"]:
            token["token_access"] = acting[token["token_id"]]
        emit_json(found)
        return 0
    print(f"changes between offset {diff.start_offset} and {diff.end_offset}:")
    sections = [
        ("ACLs added", [_acl(i, b) for i, b in diff.acls_added]),
        ("ACLs removed", [_acl(i, b) for i, b in diff.acls_removed]),
        ("credentials upserted", [f"{c[0]} {ScramMechanism(c[1]).mechanism_name} iterations={c[2]}" for c in diff.credentials_upserted]),
        ("credentials deleted", [f"{c[0]} {ScramMechanism(c[1]).mechanism_name}" for c in diff.credentials_deleted]),
        ("tokens issued", [f"{t.token_id} owner={t.owner} requester={t.requester}"
                           + (f": {acting[t.token_id]}" if acting[t.token_id] else "") for t in diff.tokens_issued]),
        ("tokens renewed", [f"{t.token_id} expiry {iso_time(t.expiry_before_ms)} -> {iso_time(t.expiry_after_ms)}" for t in diff.tokens_renewed]),
        ("tokens expired", [f"{t.token_id} expiry {iso_time(t.expiry_before_ms)} -> {iso_time(t.expiry_after_ms)}" for t in diff.tokens_expired]),
        ("tokens removed", [f"{t.token_id} owner={t.owner}" for t in diff.tokens_removed]),
    ]
    for title, lines in sections:
        print(f"  {title}: {len(lines)}")
        for line in lines:
            print(f"    {printable(line)}")
    return 0


def _acl(acl_id: str, b) -> str:
    return (f"{acl_id} {b.restype.name}:{b.name} ({b.resource_pattern_type.name}) {b.permission_type.name} "
            f"{b.principal} from {b.host} to {b.operation.name}")


def who_could_cmd(args: argparse.Namespace) -> int:
    rtype, name = one_resource(args)
    op = operation(args.operation)
    with open_store(args, read_only=True) as store:
        grants = store.who_could(op, rtype, name, at=as_of_arg(args))
    print_grants(grants, op, rtype, name, as_json=args.json)
    return 0


def print_grants(grants, op: AclOperation, rtype, name: str, *, as_json: bool) -> None:
    """who-could's answer as a table (or JSON): principal, host, why, the ACLs with their patterns, exceptions."""
    emit((g.to_dict() if as_json else {**g.to_dict(), "acls": [_acl_pattern(i, b) for i, b in g.acls],
                                       "via": _sentence(g.via)}
          for g in grants),
         {"principal": "PRINCIPAL", "host": "HOST", "reason": "WHY", "acls": "ACLS (PATTERN)",
          "except_hosts": "EXCEPT HOSTS", "except_principals": "EXCEPT PRINCIPALS", "via": "THROUGH TOKEN"},
         json=as_json, empty=f"nobody could {op.name} {rtype.name}:{name} then")


def _acl_pattern(acl_id: str, binding) -> str:
    """An ACL of a grant as who-could's table shows it: its id and the pattern that matched the resource."""
    return f"{acl_id} {binding.resource_pattern_type.name}:{binding.name}"


def timeline_cmd(args: argparse.Namespace) -> int:
    rtype, name = one_resource(args)
    op = operation(args.operation)
    with open_store(args, read_only=True) as store:
        intervals = store.access_timeline(args.principal, op, rtype, name, host=args.host)

    def change(c) -> str:
        return "-" if c is None else f"@{c.offset} {c.event_type} by {c.actor} operated by {c.operator}"

    emit((i.to_dict() if args.json else
          {"from": iso_time(i.start_ms) if i.start_ms is not None else "beginning",
           "until": iso_time(i.end_ms) if i.end_ms is not None else "now",
           "opened": change(i.opened_by), "closed": change(i.closed_by), "reason": i.reason,
           "via": _sentence(i.via)} for i in intervals),
         {"from": "FROM", "until": "UNTIL", "opened": "OPENED BY", "closed": "CLOSED BY", "reason": "WHY",
          "via": "THROUGH TOKEN"},
         json=args.json, empty=f"{args.principal} was never allowed to {op.name} {rtype.name}:{name} "
                              f"from {args.host or 'any host'}")
    return 0
