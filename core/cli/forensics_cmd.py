"""``secmeta history | diff | who-could | timeline``: forensic questions over the store's past."""

from __future__ import annotations

import argparse

from core.cli.common import emit_json, iso_time, print_table
from core.cli.security import (
    add_resource_options,
    add_security_options,
    one_resource,
    open_store,
    pattern_type,
    resources,
)
from core.errors import InvalidValueError
from core.timetravel import Point, parse_offset, parse_time
from events.types import AclOperation, ResourcePatternFilter, ScramMechanism


def register(commands: argparse._SubParsersAction) -> None:
    h = commands.add_parser("history", help="logged changes: who changed what, when, from where",
                            description="Logged changes in order, filtered; payloads redacted (never secrets).")
    add_security_options(h)
    h.add_argument("--principal", help="changes made by, or about, this principal (actor or subject)")
    h.add_argument("--user", help="changes to this SCRAM user's credentials")
    add_resource_options(h, many=False)
    h.add_argument("--resource-pattern-type", default="match", metavar="TYPE",
                   help="how --topic etc. match ACL patterns: match (default), literal, prefixed, any")
    h.add_argument("--event-type", action="append", metavar="TYPE", help="e.g. AclCreated (repeatable)")
    h.add_argument("--since", metavar="TIME", help="from this time (ISO-8601 with zone, or epoch ms)")
    h.add_argument("--until", metavar="TIME", help="up to this time")
    h.add_argument("--limit", type=int, help="at most this many entries")
    h.add_argument("--json", action="store_true", help="print JSON instead of a table")
    h.set_defaults(func=history_cmd)

    d = commands.add_parser("diff", help="what changed between two points in time",
                            description="ACLs added and removed, credentials upserted and deleted, tokens "
                                        "issued, renewed, expired and removed between two points.")
    add_security_options(d)
    add_point_pair(d, "from", "the earlier point")
    add_point_pair(d, "to", "the later point (default: now)")
    d.add_argument("--json", action="store_true", help="print JSON instead of text")
    d.set_defaults(func=diff_cmd)

    w = commands.add_parser("who-could", help="every principal allowed an operation on a resource at a point",
                            description="Who could do OPERATION on the resource at a time or offset (default now), "
                                        "from which hosts, and the ACLs or super-user rule that allowed it.")
    add_security_options(w)
    w.add_argument("--operation", required=True, metavar="OP")
    add_resource_options(w, many=False)
    add_point_pair(w, "at", "the point to ask about (default: now)")
    w.add_argument("--json", action="store_true", help="print JSON instead of a table")
    w.set_defaults(func=who_could_cmd)

    t = commands.add_parser("timeline", help="when a principal could do an operation on a resource, and who changed it",
                            description="The intervals in which the principal was allowed, each opened and closed by "
                                        "the logged change (offset, time, actor) that caused it.")
    add_security_options(t)
    t.add_argument("--principal", required=True)
    t.add_argument("--operation", required=True, metavar="OP")
    t.add_argument("--host", required=True, help="the client's host or address (host-specific ACLs depend on it)")
    add_resource_options(t, many=False)
    t.add_argument("--json", action="store_true", help="print JSON instead of a table")
    t.set_defaults(func=timeline_cmd)


def add_point_pair(parser: argparse.ArgumentParser, name: str, what: str) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(f"--{name}", metavar="TIME", help=f"{what}: ISO-8601 with zone, or epoch ms")
    group.add_argument(f"--{name}-offset", metavar="N", help=f"{what}: after the first N events")


def point_arg(args: argparse.Namespace, name: str) -> Point | None:
    time_text, offset_text = getattr(args, name), getattr(args, f"{name}_offset")
    if time_text is not None:
        return Point.at_time(parse_time(time_text))
    if offset_text is not None:
        return Point.at_offset(parse_offset(offset_text))
    return None


def history_cmd(args: argparse.Namespace) -> int:
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
            start_ms=None if args.since is None else parse_time(args.since),
            end_ms=None if args.until is None else parse_time(args.until), limit=args.limit,
        ))
    if args.json:
        emit_json([e.to_dict() for e in entries])
    elif entries:
        print_table(["OFFSET", "TIME", "ACTOR", "HOST", "EVENT", "ENTITY", "DETAILS"],
                    [[e.offset, iso_time(e.timestamp_ms), e.actor_principal, e.actor_host, e.event_type, e.entity_key,
                      " ".join(f"{k}={v}" for k, v in e.payload.items())] for e in entries])
    else:
        print("no logged changes match")
    return 0


def diff_cmd(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        start = point_arg(args, "from") or Point.at_offset(0)
        end = point_arg(args, "to") or Point.at_offset(store.log.end_offset)
        diff = store.diff(start, end)
    if args.json:
        emit_json(diff.to_dict())
        return 0
    print(f"changes between offset {diff.start_offset} and {diff.end_offset}:")
    sections = [
        ("ACLs added", [_acl(i, b) for i, b in diff.acls_added]),
        ("ACLs removed", [_acl(i, b) for i, b in diff.acls_removed]),
        ("credentials upserted", [f"{c[0]} {ScramMechanism(c[1]).mechanism_name} iterations={c[2]}" for c in diff.credentials_upserted]),
        ("credentials deleted", [f"{c[0]} {ScramMechanism(c[1]).mechanism_name}" for c in diff.credentials_deleted]),
        ("tokens issued", [f"{t.token_id} owner={t.owner} requester={t.requester}" for t in diff.tokens_issued]),
        ("tokens renewed", [f"{t.token_id} expiry {iso_time(t.expiry_before_ms)} -> {iso_time(t.expiry_after_ms)}" for t in diff.tokens_renewed]),
        ("tokens expired", [f"{t.token_id} expiry {iso_time(t.expiry_before_ms)} -> {iso_time(t.expiry_after_ms)}" for t in diff.tokens_expired]),
        ("tokens removed", [f"{t.token_id} owner={t.owner}" for t in diff.tokens_removed]),
    ]
    for title, lines in sections:
        print(f"  {title}: {len(lines)}")
        for line in lines:
            print(f"    {line}")
    return 0


def _acl(acl_id: str, b) -> str:
    return (f"{acl_id} {b.restype.name}:{b.name} ({b.resource_pattern_type.name}) {b.permission_type.name} "
            f"{b.principal} from {b.host} to {b.operation.name}")


def who_could_cmd(args: argparse.Namespace) -> int:
    rtype, name = one_resource(args)
    op = AclOperation.parse(args.operation)
    with open_store(args, read_only=True) as store:
        grants = store.who_could(op, rtype, name, at=point_arg(args, "at"))
    print_grants(grants, op, rtype, name, as_json=args.json)
    return 0


def print_grants(grants, op: AclOperation, rtype, name: str, *, as_json: bool) -> None:
    """who-could's answer as a table (or JSON): principal, host, why, ACLs, exceptions."""
    if as_json:
        emit_json([g.to_dict() for g in grants])
    elif grants:
        print_table(["PRINCIPAL", "HOST", "WHY", "ACL IDS", "EXCEPT HOSTS", "EXCEPT PRINCIPALS"],
                    [[g.principal, g.host, g.reason, ",".join(i for i, _ in g.acls) or "-",
                      ",".join(g.except_hosts) or "-", ",".join(g.except_principals) or "-"] for g in grants])
    else:
        print(f"nobody could {op.name} {rtype.name}:{name} then")


def timeline_cmd(args: argparse.Namespace) -> int:
    rtype, name = one_resource(args)
    op = AclOperation.parse(args.operation)
    with open_store(args, read_only=True) as store:
        intervals = store.access_timeline(args.principal, op, rtype, name, host=args.host)
    if args.json:
        emit_json([i.to_dict() for i in intervals])
        return 0
    if not intervals:
        print(f"{args.principal} was never allowed to {op.name} {rtype.name}:{name} from {args.host}")
        return 0

    def change(c) -> str:
        return "-" if c is None else f"@{c.offset} {c.event_type} by {c.actor_principal} from {c.actor_host}"

    print_table(["FROM", "UNTIL", "OPENED BY", "CLOSED BY", "WHY"],
                [[iso_time(i.start_ms) if i.start_ms is not None else "beginning",
                  iso_time(i.end_ms) if i.end_ms is not None else "now",
                  change(i.opened_by), change(i.closed_by), i.reason] for i in intervals])
    return 0
