"""``secmeta authorize``: one decision, with the ACLs (or rule) that made it."""

from __future__ import annotations

import argparse

from secmeta.core.cli.common import add_json_option, emit, emit_json
from secmeta.core.cli.display import printable
from secmeta.core.cli.forensics_cmd import OPERATION_HELP, as_of_arg
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
        description="Print ALLOWED or DENIED, the reason and the ACLs that decided it, and who else could be "
                    "the principal then: the holders of its live delegation tokens (a session authenticated with a "
                    "token is the owner's, so the owner's decision applies to it). "
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
        holders = store.token_access(owner=args.principal, at=as_of_arg(args))
    tokens = [a.sentence() for a in holders]
    verdict = "ALLOWED" if decision.allowed else "DENIED"
    acls = [{"acl_id": i, "pattern_type": b.resource_pattern_type.name, "resource_name": b.name,
             "principal": b.principal, "host": b.host, "operation": b.operation.name,
             "permission_type": b.permission_type.name} for i, b in decision.acls]
    allowed = [o.name for o in AclOperation if ops >> o & 1]
    if args.json:
        emit_json({"decision": verdict, "principal": args.principal, "host": args.host, "operation": op.name,
                   "resource_type": rtype.name, "resource_name": name, "reason": decision.reason, "acls": acls,
                   "authorized_operations": allowed, "authorized_operations_bitfield": ops,
                   "token_holders": [a.to_dict() for a in holders]})
        return 0 if decision.allowed else 1
    print(printable(f"{verdict}: {args.principal} from {args.host} to {op.name} {rtype.name}:{name} ({decision.reason})"))
    if acls:
        emit(acls, {"acl_id": "ACL ID", "pattern_type": "PATTERN", "resource_name": "NAME", "principal": "PRINCIPAL",
                    "host": "HOST", "operation": "OPERATION", "permission_type": "PERMISSION"})
    print(f"authorized operations (KIP-430 bitfield {ops}): {', '.join(allowed) or 'none'}")
    if tokens:
        print(f"this decision also applies to {printable(args.principal)} authenticated with a delegation token it owns, "
              "whoever holds it:")
        for sentence in tokens:
            print(f"  {printable(sentence)}")
    return 0 if decision.allowed else 1
