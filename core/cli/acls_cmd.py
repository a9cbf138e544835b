"""``secmeta acls``: kafka-acls.sh against a store directory."""

from __future__ import annotations

import argparse
import itertools

from core.cli.common import print_table
from core.cli.security import (
    add_point_options,
    add_remote_options,
    add_resource_options,
    add_security_options,
    context,
    has_point,
    open_admin,
    pattern_type,
    resources,
    view,
)
from core.errors import InvalidValueError
from events.types import (
    WILDCARD,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourceType,
)


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("acls", help="add, remove and list ACLs (kafka-acls.sh options)",
                            description="Add, remove and list ACLs, with kafka-acls.sh option names.")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs matching the options")
    action.add_argument("--list", action="store_true", help="list ACLs matching the options")
    add_security_options(p)
    add_remote_options(p)
    add_resource_options(p, many=True)
    p.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL", help="principal to allow (repeatable)")
    p.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL", help="principal to deny (repeatable)")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST", help="host or CIDR to allow from (default *)")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST", help="host or CIDR to deny from (default *)")
    p.add_argument("--operation", action="append", default=[], metavar="OP", help="operation, e.g. Read, Write, All (repeatable; default All)")
    p.add_argument("--principal", metavar="PRINCIPAL", help="with --list: only ACLs of this principal")
    p.add_argument("--resource-pattern-type", default=None, metavar="TYPE",
                   help="literal or prefixed for --add (default literal); any, match, literal or prefixed for --list/--remove (default any for --list, literal for --remove)")
    p.add_argument("--force", action="store_true", help="accepted for compatibility; secmeta never prompts")
    add_point_options(p)
    p.set_defaults(func=run)


def _operations(args) -> list[AclOperation]:
    return [AclOperation.parse(op) for op in args.operation] or [AclOperation.ALL]


def _entries(args) -> list[tuple[str, str, AclPermissionType]]:
    out = []
    for principals, hosts, perm in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                    (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        out += [(p, h, perm) for p, h in itertools.product(principals, hosts or [WILDCARD])]
    return out


def run(args: argparse.Namespace) -> int:
    default_pattern = "any" if args.list else "literal"
    ptype = pattern_type(args.resource_pattern_type or default_pattern)
    targets = resources(args)
    if args.add and not targets:
        raise SystemExit("secmeta acls: error: --add needs a resource (--topic, --group, --cluster, ...)")
    if args.add and not _entries(args):
        raise SystemExit("secmeta acls: error: --add needs --allow-principal or --deny-principal")
    if args.remove and not targets and not _entries(args) and not args.principal:
        raise InvalidValueError("--remove needs a resource (--topic, --group, --cluster, ...) or a principal; "
                         "it will not remove every ACL")
    if has_point(args) and not args.list:
        raise InvalidValueError("--as-of and --at-offset apply to --list only")
    with open_admin(args, read_only=args.list) as store:
        ctx = context(args, store)
        if args.add:
            return _add(store, ctx, targets, ptype, args)
        filters = _filters(targets, ptype, args)
        if args.remove:
            return _remove(store, ctx, filters)
        source = view(store, args)
        rows = [b for f in filters for b in source.describe_acls(f, context=ctx)]
        _print_bindings(sorted(set(rows), key=_sort_key))
        return 0


def _add(store, ctx, targets, ptype, args) -> int:
    bindings = [
        AclBinding.of(rtype, name, ptype, principal, host, op, perm)
        for (rtype, name), (principal, host, perm), op in itertools.product(targets, _entries(args), _operations(args))
    ]
    failed = 0
    for binding, error in zip(bindings, store.create_acls(bindings, context=ctx)):
        status = "added" if not error else f"FAILED {error}"
        failed += bool(error)
        print(f"{status}: {_describe(binding)}")
    return 1 if failed else 0


def _filters(targets, ptype, args) -> list[AclBindingFilter]:
    entries = _entries(args) or [(args.principal, None, AclPermissionType.ANY)]
    ops = [AclOperation.parse(op) for op in args.operation] or [AclOperation.ANY]
    pats = targets or [(ResourceType.ANY, None)]
    return [
        AclBindingFilter.of(rtype, name, ptype, principal, None if host == WILDCARD and not (args.allow_host or args.deny_host) else host, op, perm)
        for (rtype, name), (principal, host, perm), op in itertools.product(pats, entries, ops)
    ]


def _remove(store, ctx, filters) -> int:
    results = store.delete_acls(filters, context=ctx)
    failed = 0
    for result in results:
        if result.error:
            failed += 1
            print(f"FAILED {result.error}")
        for binding in result.acls:
            print(f"removed: {_describe(binding)}")
    if not any(r.acls for r in results) and not failed:
        print("no ACLs matched")
    return 1 if failed else 0


def _sort_key(b: AclBinding):
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)


def _describe(b: AclBinding) -> str:
    return (f"{b.restype.name}:{b.name} ({b.resource_pattern_type.name}) {b.permission_type.name} "
            f"{b.principal} from {b.host} to {b.operation.name}")


def _print_bindings(bindings: list[AclBinding]) -> None:
    if not bindings:
        print("no ACLs matched")
        return
    print_table(
        ["RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"],
        [[b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name, b.permission_type.name] for b in bindings],
    )

