"""What an ``acls --add`` or ``--remove`` asks for: resource patterns and the entries for each.

Built from kafka-acls.sh's options as Kafka's AclCommand builds them (tools/.../AclCommand.java,
formerly core/.../admin/AclCommand.scala): ``getResourceFilterToAcls`` maps every resource option
to the entries every principal x operation x host gives (``getAcl``: hosts default to ``*`` once a
principal is given, operations to All); ``--producer`` and ``--consumer`` replace the operations
(``getProducerResourceFilterToAcls``, ``getConsumerResourceFilterToAcls``); ``checkArgs`` refuses
option combinations, and ``validateOperation`` operations a resource type does not have.

Where AclCommand would silently ignore an option (``--operation`` or a host without a principal,
a resource that ``--producer`` / ``--consumer`` do not use, ``--cluster`` with a non-literal
pattern type), the command is refused instead: an ignored ``--operation`` on ``--remove`` would
remove every ACL of the resource.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping

from secmeta.core.cli.security import operation, resources
from secmeta.core.cli.security import pattern_type as pattern_type_named
from secmeta.core.errors import InvalidValueError
from secmeta.core.validation import principal
from secmeta.events.types import (
    CLUSTER_NAME,
    WILDCARD,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)
from secmeta.projections.acl_match import OPERATIONS_BY_TYPE

Op = AclOperation
Request = dict[ResourcePatternFilter, frozenset[AccessControlEntry]]

CLUSTER_FILTER = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
PRODUCER_TOPIC_OPS = (Op.WRITE, Op.DESCRIBE, Op.CREATE)
PRODUCER_TRANSACTIONAL_ID_OPS = (Op.WRITE, Op.DESCRIBE)
CONSUMER_TOPIC_OPS = (Op.READ, Op.DESCRIBE)
CONSUMER_GROUP_OPS = (Op.READ,)
ROLE_RESOURCES = {"producer": (ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID),
                  "consumer": (ResourceType.TOPIC, ResourceType.GROUP)}


def check_options(args: argparse.Namespace) -> None:
    """AclCommandOptions.checkArgs, and the refusals of options AclCommand would ignore."""
    roles = [r for r in ("producer", "consumer") if getattr(args, r)]
    if args.list:
        for flag in ("producer", "consumer", "allow_host", "allow_principal", "deny_host", "deny_principal"):
            if getattr(args, flag):
                raise InvalidValueError(f"--{flag.replace('_', '-')} cannot be used with --list")
        if args.operation:
            raise InvalidValueError("--operation cannot be used with --list: it lists every operation")
    for role in roles:
        for flag in ("operation", "deny_principal", "deny_host"):
            if getattr(args, flag):
                raise InvalidValueError(f"--{flag.replace('_', '-')} cannot be used with --{role}: "
                                        f"--{role} names the operations and only allows")
    if args.principal and not args.list:
        raise InvalidValueError("The --principal option is only available if --list is set "
                                "(--add and --remove take --allow-principal / --deny-principal)")
    if args.producer and not args.topic:
        raise InvalidValueError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise InvalidValueError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group
                          or (not args.producer and (args.cluster or args.transactional_id))):
        raise InvalidValueError("With --consumer you must specify a --topic and a --group and no --cluster "
                                "or --transactional-id option should be specified.")
    if roles:
        used = {t for r in roles for t in ROLE_RESOURCES[r]}
        unused = sorted({t.name for t, _ in resources(args) if t not in used})
        if unused:
            raise InvalidValueError(f"--{' --'.join(roles)} uses no {', '.join(unused)} resource "
                                    "(for the producer's IdempotentWrite on the cluster give --idempotent)")
    for side, verb in (("allow", "allowed"), ("deny", "denied")):
        if getattr(args, f"{side}_host") and not getattr(args, f"{side}_principal"):
            raise InvalidValueError(f"--{side}-host needs --{side}-principal: it is the host that principal "
                                    f"is {verb} from")
    narrowing = ["--operation"] * bool(args.operation) + [f"--{r}" for r in roles]
    if args.remove and narrowing and not (args.allow_principal or args.deny_principal):
        raise InvalidValueError(f"{narrowing[0]} on --remove needs --allow-principal or --deny-principal; without "
                                "one kafka-acls.sh ignores it and removes every ACL of the resource (to do "
                                f"that, leave {narrowing[0]} out)")


def pattern_type(args: argparse.Namespace) -> PatternType:
    """--resource-pattern-type (default literal, as AclCommand); --add takes only literal or prefixed."""
    ptype = pattern_type_named(args.resource_pattern_type)
    if ptype == PatternType.UNKNOWN:
        raise InvalidValueError(f"Unknown resource-pattern-type: {args.resource_pattern_type}")
    if args.add and ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidValueError(f"A '--resource-pattern-type' value of '{ptype.name}' is not valid when adding acls.")
    if args.cluster and ptype != PatternType.LITERAL:
        raise InvalidValueError(f"--cluster is the literal resource {CLUSTER_NAME}: it takes no "
                                f"--resource-pattern-type {ptype.name}")
    return ptype


def resource_filters(args: argparse.Namespace, ptype: PatternType) -> list[ResourcePatternFilter]:
    """AclCommand.getResourceFilter: one filter per resource option (names trimmed, as AclCommand does for
    every option but --transactional-id), the cluster's with --cluster or --idempotent."""
    out = [ResourcePatternFilter(t, n if t == ResourceType.TRANSACTIONAL_ID else n.strip(), ptype)
           for t, n in resources(args) if t != ResourceType.CLUSTER]
    if args.cluster or args.idempotent:
        out.append(CLUSTER_FILTER)
    return list(dict.fromkeys(out))


def build(args: argparse.Namespace, ptype: PatternType) -> Request:
    """AclCommand.getResourceFilterToAcls: each resource filter and the entries the options give it."""
    filters = resource_filters(args, ptype)
    if not filters:
        raise InvalidValueError("You must provide at least one resource: --topic <topic> or --cluster or "
                                "--group <group> or --transactional-id <id> or --delegation-token <id> "
                                "or --user-principal <principal>")
    by_type = {t: [f for f in filters if f.resource_type == t] for t in ResourceType}
    request: Request = {}
    if not (args.producer or args.consumer):
        ops = [operation(o.strip()) for o in args.operation] or [Op.ALL]
        request = {f: entries(args, ops) for f in filters}
    if args.producer:
        request.update({f: entries(args, PRODUCER_TOPIC_OPS) for f in by_type[ResourceType.TOPIC]})
        request.update({f: entries(args, PRODUCER_TRANSACTIONAL_ID_OPS) for f in by_type[ResourceType.TRANSACTIONAL_ID]})
        if args.idempotent:
            request[CLUSTER_FILTER] = entries(args, (Op.IDEMPOTENT_WRITE,))
    if args.consumer:
        for f, ops in [(f, CONSUMER_TOPIC_OPS) for f in by_type[ResourceType.TOPIC]] + \
                      [(f, CONSUMER_GROUP_OPS) for f in by_type[ResourceType.GROUP]]:
            request[f] = request.get(f, frozenset()) | entries(args, ops)
    check_operations(request)
    return request


def entries(args: argparse.Namespace, ops: Iterable[AclOperation]) -> frozenset[AccessControlEntry]:
    """AclCommand.getAcl: allowed principals x ops x allowed hosts, and the same for denied ones; a principal
    that is not Type:Name is refused here, before anything is printed (AclCommand.getPrincipals)."""
    out = set()
    for side, perm in (("allow", AclPermissionType.ALLOW), ("deny", AclPermissionType.DENY)):
        principals = {principal(p.strip(), f"--{side}-principal") for p in getattr(args, f"{side}_principal")}
        hosts = {h.strip() for h in getattr(args, f"{side}_host")} or {WILDCARD}
        out |= {AccessControlEntry(p, h, op, perm) for p in principals for op in ops for h in hosts}
    return frozenset(out)


def check_operations(request: Mapping[ResourcePatternFilter, frozenset[AccessControlEntry]]) -> None:
    """AclCommand.validateOperation: every entry's operation is one its resource type has, or All."""
    for f, acls in request.items():
        valid = (*OPERATIONS_BY_TYPE[f.resource_type], Op.ALL)
        bad = sorted({a.operation for a in acls} - set(valid))
        if bad:
            raise InvalidValueError(
                f"ResourceType {f.resource_type.name} only supports operations [{', '.join(o.name for o in valid)}]"
                f", not {', '.join(o.name for o in bad)}")
