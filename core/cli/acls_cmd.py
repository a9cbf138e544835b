"""``secmeta acls``: kafka-acls.sh (Kafka's AclCommand) against a store directory or a server.

--add and --remove build their ACLs as AclCommand does (``secmeta.core.cli.acl_request``) and print what
AclCommand prints: "Adding ACLs for resource ...", "Acl ... already exists.", and before a removal
"Are you sure you want to remove ACLs: ... from resource filter ...? (y/n)" unless --force.  The
answer is read from a terminal; with none (or at end of input) nothing is removed.  --list prints
a table, or JSON with --json.
"""

from __future__ import annotations

import argparse
import sys

from secmeta.core.cli import acl_request
from secmeta.core.cli.common import add_json_option, emit
from secmeta.core.cli.display import printable
from secmeta.core.cli.security import (
    OPERATION_NAMES,
    AdminSession,
    add_point_options,
    add_remote_options,
    add_resource_options,
    add_security_options,
    has_point,
    open_admin,
)
from secmeta.core.errors import ClusterAuthorizationException, InvalidValueError
from secmeta.core.validation import principal
from secmeta.events.types import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
)

COLUMNS = {"resource_type": "RESOURCE", "name": "NAME", "pattern_type": "PATTERN", "principal": "PRINCIPAL",
           "host": "HOST", "operation": "OPERATION", "permission_type": "PERMISSION"}


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("acls", help="add, remove and list ACLs (kafka-acls.sh options)",
                            description="Add, remove and list ACLs with kafka-acls.sh's options, as Kafka's "
                                        "AclCommand does; options kafka-acls.sh would ignore are refused.")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true",
                        help="remove the ACLs the options name (asks first unless --force)")
    action.add_argument("--list", action="store_true", help="list the ACLs of the resources given (all without one)")
    add_security_options(p)
    add_remote_options(p)
    add_resource_options(p, many=True)
    p.add_argument("--idempotent", action="store_true",
                   help="with --producer: also allow IdempotentWrite on the cluster")
    p.add_argument("--producer", action="store_true",
                   help="allow a producer: Write, Describe and Create on --topic, Write and Describe on "
                        "--transactional-id")
    p.add_argument("--consumer", action="store_true",
                   help="allow a consumer: Read and Describe on --topic, Read on --group")
    p.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="principal (Type:name) to allow (repeatable)")
    p.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="principal (Type:name) to deny (repeatable)")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="host or CIDR --allow-principal is allowed from (repeatable; default *)")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                   help="host or CIDR --deny-principal is denied from (repeatable; default *)")
    p.add_argument("--operation", action="append", default=[], metavar="OP",
                   help=f"operation to allow or deny (repeatable; default All), any case: {OPERATION_NAMES}")
    p.add_argument("--principal", action="append", default=[], metavar="PRINCIPAL",
                   help="with --list: only the ACLs of this principal (repeatable)")
    p.add_argument("--resource-pattern-type", default="literal", metavar="TYPE",
                   help="literal or prefixed; for --list and --remove also any (any pattern type, the name "
                        "exactly) or match (every ACL that applies to the name) (default: literal)")
    p.add_argument("--force", action="store_true", help="remove without asking")
    add_json_option(p)
    add_point_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    acl_request.check_options(args)
    ptype = acl_request.pattern_type(args)
    if has_point(args) and not args.list:
        raise InvalidValueError("--as-of and --at-offset apply to --list only")
    if args.json and not args.list:
        raise InvalidValueError("--json applies to --list only")
    if args.list:
        return _list(args, acl_request.resource_filters(args, ptype))
    request = acl_request.build(args, ptype)
    if args.add and not all(request.values()):
        raise InvalidValueError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    if args.add:
        with open_admin(args) as session:
            return _add(session, request)
    confirmed, unanswered = _confirm(request, force=args.force)
    if confirmed:  # asked before the store is opened, so no writer's lock is held while a person reads
        with open_admin(args) as session:
            if _remove(session, confirmed):
                return 1
    return 1 if unanswered else 0


def _add(session: AdminSession, request: acl_request.Request) -> int:
    """AclCommand.addAcls: per resource, say which ACLs exist already and which are added; one create request.
    The lines are printed once the request was not refused as a whole (a refusal prints nothing on stdout)."""
    admin, ctx = session.admin, session.context
    new: list[AclBinding] = []
    said: list[str] = []
    for f, entries in sorted(request.items(), key=_pattern_key):
        pattern = ResourcePattern(f.resource_type, f.name, f.pattern_type)
        existing = _existing(session, AclBindingFilter(f, AccessControlEntryFilter()))
        adding = []
        for entry in sorted(entries, key=_entry_key):
            binding = AclBinding(pattern, entry)
            if binding in existing:
                said.append(f"Acl {kafka_binding(binding)} already exists.")
            else:
                adding.append(binding)
        if adding:
            said.append(f"Adding ACLs for resource `{kafka_pattern(pattern)}`: \n "
                        + "\n".join(f"\t{kafka_entry(b.entry)}" for b in adding) + "\n")
        new += adding
    errors = admin.create_acls(new, context=ctx) if new else []
    if said:
        print(*said, sep="\n")
    for binding, error in zip(new, errors):
        if error:
            print(f"Failed to add {kafka_binding(binding)}: {error}")
    return 1 if any(errors) else 0


def _existing(session: AdminSession, acl_filter: AclBindingFilter) -> set[AclBinding]:
    """The ACLs of a resource, to say which exist already (secmeta's addition: Kafka's addAcls creates first).
    A requester refused DESCRIBE gets no such notes: the create decides, and a refusal then names ALTER, the
    operation --add needs, not the DESCRIBE of this look-up (which ALLOW ALTER implies)."""
    try:
        return set(session.admin.describe_acls(acl_filter, context=session.context))
    except ClusterAuthorizationException:
        return set()


def _confirm(request: acl_request.Request, *, force: bool):
    """AclCommand.removeAcls's question per resource filter (none with --force): the filters answered yes, each
    with its entries (none: every ACL of the filter), and whether some question went unanswered."""
    confirmed, unanswered = [], False
    for f, entries in sorted(request.items(), key=_pattern_key):
        ordered = sorted(entries, key=_entry_key)
        if ordered:
            question = ("Are you sure you want to remove ACLs: \n "
                        + "\n".join(f"\t{kafka_entry(e)}" for e in ordered)
                        + f"\n from resource filter `{kafka_pattern(f)}`? (y/n)")
        else:
            question = f"Are you sure you want to delete all ACLs for resource filter `{kafka_pattern(f)}`? (y/n)"
        answer = True if force else _ask(question)
        unanswered |= answer is None
        if answer:
            confirmed.append((f, ordered))
    return confirmed, unanswered


def _remove(session: AdminSession, confirmed) -> int:
    """AclCommand.removeAcls: per resource filter, delete the entries given (AccessControlEntry.toFilter), or
    every ACL of the filter; print what went.  1 when the store refused a filter."""
    for f, ordered in confirmed:
        filters = [AclBindingFilter(f, _entry_filter(e)) for e in ordered] or [AclBindingFilter(f)]
        results = session.admin.delete_acls(filters, context=session.context)
        removed = list(dict.fromkeys(b for r in results for b in r.acls))
        for binding in removed:
            print(f"Removed {kafka_binding(binding)}")
        errors = [r.error for r in results if r.error]
        for error in errors:
            print(f"Failed to remove ACLs from resource filter `{kafka_pattern(f)}`: {error}")
        if errors:
            return 1
        if not removed:
            print(f"No ACLs matched resource filter `{kafka_pattern(f)}`")
    return 0


def _ask(question: str) -> bool | None:
    """AclCommand.confirmAction: the question, then a line from the terminal; 'y' (any case) is yes.

    None when there is no terminal to answer on or input ends, and nothing is removed.
    """
    print(question, flush=True)
    if not sys.stdin.isatty():
        print("secmeta: no terminal to answer on, nothing removed (pass --force to remove without asking)",
              file=sys.stderr)
        return None
    line = sys.stdin.readline()
    if not line:
        return None
    return line.rstrip("\r\n").lower() == "y"


def _entry_filter(e: AccessControlEntry) -> AccessControlEntryFilter:
    """AccessControlEntry.toFilter: matches that entry exactly (All matches only All, * only *)."""
    return AccessControlEntryFilter(e.principal, e.host, e.operation, e.permission_type)


def _list(args: argparse.Namespace, filters: list[ResourcePatternFilter]) -> int:
    """AclCommand.listAcls: the ACLs of each resource filter (all without one), of the --principal ones if given
    (each a Type:Name principal in the store's filter, as AclCommand filters by principal)."""
    entries = [AccessControlEntryFilter(principal=principal(p, "--principal"))  # AclCommand.getPrincipals:
               for p in dict.fromkeys(p.strip() for p in args.principal)]    # parseKafkaPrincipal(s.trim)
    with open_admin(args, read_only=True) as session:
        found = {b for f in filters or [ResourcePatternFilter()] for e in entries or [AccessControlEntryFilter()]
                 for b in session.reader.describe_acls(AclBindingFilter(f, e), context=session.context)}
    rows = [_row(b) for b in sorted(found, key=_binding_key)]
    emit(rows, COLUMNS, json=args.json, empty="no ACLs matched")
    return 0


def _row(b: AclBinding) -> dict[str, object]:
    return {"resource_type": b.restype.name, "name": b.name, "pattern_type": b.resource_pattern_type.name,
            "principal": b.principal, "host": b.host, "operation": b.operation.name,
            "permission_type": b.permission_type.name}


def _pattern_key(item) -> tuple:
    f = item[0]
    return (f.resource_type, f.name, f.pattern_type)


def _entry_key(e: AccessControlEntry) -> tuple:
    return (e.principal, e.host, e.operation, e.permission_type)


def _binding_key(b: AclBinding) -> tuple:
    return (b.restype, b.name, b.resource_pattern_type, *_entry_key(b.entry))


# Kafka's toString of ResourcePattern(Filter), AccessControlEntry and AclBinding, as AclCommand prints them.
# Names as ``printable`` shows them (a filter's None as Kafka's null prints: None).
def kafka_pattern(p: ResourcePattern | ResourcePatternFilter) -> str:
    return (f"ResourcePattern(resourceType={p.resource_type.name}, name={_shown(p.name)}, "
            f"patternType={p.pattern_type.name})")


def kafka_entry(e: AccessControlEntry) -> str:
    return (f"(principal={_shown(e.principal)}, host={_shown(e.host)}, operation={e.operation.name}, "
            f"permissionType={e.permission_type.name})")


def _shown(name: str | None) -> str:
    return str(name) if name is None else printable(name)


def kafka_binding(b: AclBinding) -> str:
    return f"(pattern={kafka_pattern(b.pattern)}, entry={kafka_entry(b.entry)})"
