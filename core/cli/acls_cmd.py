"""``secmeta acls``: kafka-acls.sh (Kafka's AclCommand) against a store directory or a server.

Every option and value is checked before anything is printed or written (a refusal exits 2 with nothing
on stdout).  --add and --remove build their ACLs as AclCommand does (``secmeta.core.cli.acl_request``) and,
once the write is done, print what AclCommand prints: "Adding ACLs for resource ...", "Acl ... already
exists.", "Removed ...", then, as AclCommand.addAcls and removeAcls end with listAcls, the "Current ACLs
for resource ..." blocks of the resources named; before a removal "Are you sure you want to remove ACLs: ... from resource filter ...? (y/n)"
unless --force, the answer read from standard input (a terminal or a pipe, as kafka-acls.sh reads it; at
the end of input nothing is removed).  --list prints AclCommand's "Current ACLs for resource ..." blocks
(under "ACLs for principal ..." with --principal), a table with --output table, JSON with --json; --add
and --remove print what they wrote as JSON with --json.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterable

from secmeta.core.cli import acl_request
from secmeta.core.cli.common import add_json_option, emit, emit_json, held_output, written
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
    p.add_argument("--force", action="store_true",
                   help="remove without asking (else the answer is read from standard input, a terminal or not)")
    p.add_argument("--output", choices=("kafka", "table"), default=None,
                   help="--list's output: kafka (kafka-acls.sh's blocks, the default) or table")
    add_json_option(p, "print JSON: the ACLs listed, or what --add / --remove wrote (log offsets, ACLs)")
    add_point_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Every check first (a refusal prints nothing and writes nothing), then the write, then its output."""
    acl_request.check_options(args)
    ptype = acl_request.pattern_type(args)
    if has_point(args) and not args.list:
        raise InvalidValueError("--as-of and --at-offset apply to --list only")
    if args.output and not args.list:
        raise InvalidValueError("--output applies to --list only (--json applies to every action)")
    if args.output and args.json:
        raise InvalidValueError("--output and --json cannot be used together (--json is the JSON output)")
    if args.list:
        return _list(args, acl_request.resource_filters(args, ptype))
    request = acl_request.build(args, ptype)
    if args.add and not all(request.values()):
        raise InvalidValueError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    named = acl_request.resource_filters(args, ptype)
    if args.add:
        with held_output(), open_admin(args) as session:
            code = _add(session, request, json=args.json)
            _print_current(session, named, json=args.json)
        return code
    confirmed, unanswered = _confirm(request, force=args.force)
    code = 0
    # asked before the store is opened, so no writer's lock is held while a person reads
    with held_output(), open_admin(args, read_only=not confirmed) as session:
        if confirmed:
            code = _remove(session, confirmed, json=args.json)
        _print_current(session, named, json=args.json)
    return code or (1 if unanswered else 0)


def _print_current(session: AdminSession, filters: list[ResourcePatternFilter], *, json: bool) -> None:
    """AclCommand.addAcls and removeAcls end with listAcls: the ACLs of the resources named, as they are now
    (not with --json, whose answer is what was written)."""
    if not json:
        _print_resource_acls(sorted(_described(session, filters, []), key=_binding_key))


def _add(session: AdminSession, request: acl_request.Request, *, json: bool) -> int:
    """AclCommand.addAcls: per resource, say which ACLs exist already and which are added; one create request."""
    admin, ctx = session.admin, session.context
    new: list[AclBinding] = []
    existing: list[AclBinding] = []
    for f, entries in sorted(request.items(), key=_pattern_key):
        pattern = ResourcePattern(f.resource_type, f.name, f.pattern_type)
        held = _existing(session, AclBindingFilter(f, AccessControlEntryFilter()))
        for entry in sorted(entries, key=_entry_key):
            binding = AclBinding(pattern, entry)
            (existing if binding in held else new).append(binding)
    first = session.next_offset()
    errors = admin.create_acls(new, context=ctx) if new else []
    failed = [(b, e) for b, e in zip(new, errors) if e]
    if json:
        emit_json({"log": written(first, session.next_offset()),
                   "added": [_row(b) for b, e in zip(new, errors) if not e],
                   "already_present": [_row(b) for b in existing],
                   "failed": [{**_row(b), "error": str(e)} for b, e in failed]})
        return 1 if failed else 0
    for binding in existing:
        print(f"Acl {kafka_binding(binding)} already exists.")
    for pattern, bindings in itertools.groupby(new, key=lambda b: b.pattern):
        print(kafka_block(f"Adding ACLs for resource `{kafka_pattern(pattern)}`", [b.entry for b in bindings]))
    for binding, error in failed:
        print(f"Failed to add {kafka_binding(binding)}: {error}")
    return 1 if failed else 0


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
            question = (kafka_block("Are you sure you want to remove ACLs", ordered)
                        + f" from resource filter `{kafka_pattern(f)}`? (y/n)")
        else:
            question = f"Are you sure you want to delete all ACLs for resource filter `{kafka_pattern(f)}`? (y/n)"
        answer = True if force else _ask(question)
        unanswered |= answer is None
        if answer:
            confirmed.append((f, ordered))
    return confirmed, unanswered


def _remove(session: AdminSession, confirmed, *, json: bool) -> int:
    """AclCommand.removeAcls: per resource filter, delete the entries given (AccessControlEntry.toFilter), or
    every ACL of the filter; print what went.  1 when the store refused a filter."""
    first, lines, removed_all, failures = session.next_offset(), [], [], []
    for f, ordered in confirmed:
        filters = [AclBindingFilter(f, _entry_filter(e)) for e in ordered] or [AclBindingFilter(f)]
        results = session.admin.delete_acls(filters, context=session.context)
        removed = list(dict.fromkeys(b for r in results for b in r.acls))
        removed_all += removed
        lines += [f"Removed {kafka_binding(binding)}" for binding in removed]
        errors = [r.error for r in results if r.error]
        lines += [f"Failed to remove ACLs from resource filter `{kafka_pattern(f)}`: {error}" for error in errors]
        failures += [{"filter": kafka_pattern(f), "error": str(error)} for error in errors]
        if errors:
            break
        if not removed:
            lines.append(f"No ACLs matched resource filter `{kafka_pattern(f)}`")
    if json:
        emit_json({"log": written(first, session.next_offset()), "removed": [_row(b) for b in removed_all],
                   "failed": failures})
    elif lines:
        print("\n".join(lines))
    return 1 if failures else 0


def _ask(question: str) -> bool | None:
    """AclCommand.confirmAction: the question, then a line of standard input (a terminal or a pipe, as
    kafka-acls.sh reads it); 'y' (any case) is yes.  None at the end of input: nothing is removed."""
    print(question, flush=True)
    line = sys.stdin.readline()
    if not line:
        print("secmeta: no answer (end of input), nothing removed (pass --force to remove without asking)",
              file=sys.stderr)
        return None
    return line.rstrip("\r\n").lower() == "y"


def _entry_filter(e: AccessControlEntry) -> AccessControlEntryFilter:
    """AccessControlEntry.toFilter: matches that entry exactly (All matches only All, * only *)."""
    return AccessControlEntryFilter(e.principal, e.host, e.operation, e.permission_type)


def _list(args: argparse.Namespace, filters: list[ResourcePatternFilter]) -> int:
    """AclCommand.listAcls: the ACLs of each resource filter (all without one), of the --principal ones if given
    (each a Type:Name principal in the store's filter, as AclCommand filters by principal), printed as
    AclCommand prints them, as a table (--output table) or as JSON."""
    principals = list(dict.fromkeys(principal(p.strip(), "--principal")  # AclCommand.getPrincipals:
                                    for p in args.principal))              # parseKafkaPrincipal(s.trim)
    entries = [AccessControlEntryFilter(principal=p) for p in principals]
    with open_admin(args, read_only=True) as session:
        ordered = sorted(_described(session, filters, entries), key=_binding_key)
    if args.json or args.output == "table":
        emit([_row(b) for b in ordered], COLUMNS, json=args.json, empty="no ACLs matched")
    elif principals:  # AclCommand.listAcls: per principal, its ACLs per resource
        for p in principals:
            print(f"ACLs for principal `{p}`")
            _print_resource_acls([b for b in ordered if b.principal == p])
    else:
        _print_resource_acls(ordered)
    return 0


def _described(session: AdminSession, filters: list[ResourcePatternFilter],
               entries: list[AccessControlEntryFilter]) -> set[AclBinding]:
    """AclCommand.getAcls: the ACLs each resource filter (every resource without one) and entry filter match."""
    return {b for f in filters or [ResourcePatternFilter()] for e in entries or [AccessControlEntryFilter()]
            for b in session.reader.describe_acls(AclBindingFilter(f, e), context=session.context)}


def _print_resource_acls(bindings: list[AclBinding]) -> None:
    """AclCommand.printResourceAcls: one block per resource pattern."""
    for pattern, of_pattern in itertools.groupby(bindings, key=lambda b: b.pattern):
        print(kafka_block(f"Current ACLs for resource `{kafka_pattern(pattern)}`", [b.entry for b in of_pattern]))


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


def kafka_block(header: str, entries: Iterable[AccessControlEntry]) -> str:
    """A header and its entries as AclCommand.scala prints them, ``s"$header: $Newline ${acls.map("\\t" +
    _).mkString(Newline)} $Newline"`` (println adds the blank line after)."""
    return f"{header}: \n " + "\n".join(f"\t{kafka_entry(e)}" for e in entries) + " \n"


def kafka_entry(e: AccessControlEntry) -> str:
    return (f"(principal={_shown(e.principal)}, host={_shown(e.host)}, operation={e.operation.name}, "
            f"permissionType={e.permission_type.name})")


def _shown(name: str | None) -> str:
    return str(name) if name is None else printable(name)


def kafka_binding(b: AclBinding) -> str:
    return f"(pattern={kafka_pattern(b.pattern)}, entry={kafka_entry(b.entry)})"
