"""``secmeta authorize``: one decision, with the ACLs (or rule) that made it."""

from __future__ import annotations

import argparse

from secmeta.core.cli.common import add_json_option, emit, emit_json
from secmeta.core.cli.forensics_cmd import OPERATION_HELP
from secmeta.core.cli.security import (
    add_point_options,
    add_resource_options,
    add_security_options,
    one_resource,
    open_store,
    operation,
    view,
)
from secmeta.events.types import AclOperation


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "authorize", help="decide whether a principal may do an operation on a resource",
        description="Print ALLOWED or DENIED, the reason and the ACLs that decided it. "
                    "Exit code 0 when allowed, 1 when denied.",
    )
    add_security_options(p)
    p.add_argument("--principal", required=True, metavar="PRINCIPAL", help="who, e.g. User:alice")
    p.add_argument("--host", required=True, metavar="HOST",
                   help="the client's host or address (host-specific ACLs depend on it)")
    p.add_argument("--operation", required=True, metavar="OP", help=OPERATION_HELP)
    add_resource_options(p, many=False)
    add_point_options(p)
    add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    (rtype, name), op = one_resource(args), operation(args.operation)
    with open_store(args, read_only=True) as store:
        source = view(store, args)
        decision = source.explain(args.principal, args.host, op, rtype, name)
        ops = source.authorized_operations(args.principal, args.host, rtype, name)
    verdict = "ALLOWED" if decision.allowed else "DENIED"
    acls = [{"acl_id": i, "pattern_type": b.resource_pattern_type.name, "resource_name": b.name,
             "principal": b.principal, "host": b.host, "operation": b.operation.name,
             "permission_type": b.permission_type.name} for i, b in decision.acls]
    allowed = [o.name for o in AclOperation if ops >> o & 1]
    if args.json:
        emit_json({"decision": verdict, "principal": args.principal, "host": args.host, "operation": op.name,
                   "resource_type": rtype.name, "resource_name": name, "reason": decision.reason, "acls": acls,
                   "authorized_operations": allowed, "authorized_operations_bitfield": ops})
        return 0 if decision.allowed else 1
    print(f"{verdict}: {args.principal} from {args.host} to {op.name} {rtype.name}:{name} ({decision.reason})")
    if acls:
        emit(acls, {"acl_id": "ACL ID", "pattern_type": "PATTERN", "resource_name": "NAME", "principal": "PRINCIPAL",
                    "host": "HOST", "operation": "OPERATION", "permission_type": "PERMISSION"})
    print(f"authorized operations (KIP-430 bitfield {ops}): {', '.join(allowed) or 'none'}")
    return 0 if decision.allowed else 1
