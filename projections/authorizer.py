"""Authorization decisions over an AclsImage: Kafka's rules, via the index.

The rule itself (super users, which ACLs apply, deny wins, implied
operations, the no-ACL default) is ``acl_decision``'s: ``authorize`` and
``authorized_operations`` gather the packed bits of the applying ACLs through
the index and ask ``acl_decision.verdict``; ``explain`` hands the ACLs the
index finds for the principal to ``acl_decision.decide``, which returns the
same verdict with the deciding ACLs.

Beyond Kafka: an ACL host may be a CIDR range ("10.0.0.0/8",
"2001:db8::/32") that applies to clients whose host parses as an address
inside it; exact host strings and '*' keep hash lookups, and ranges are
checked only when a group holds one and the client host is an IP (parsed
hosts and ranges are cached).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

from secmeta.events.types import (
    WILDCARD,
    AclBinding,
    AclOperation,
    ResourceType,
)
from secmeta.projections.acl_decision import (
    ALLOWED_BY_ACL,
    DENIED_BY_ACL,
    FOUND,
    NO_ACL_FOUND,
    NO_MATCHING_ALLOW,
    SUPER_USER,
    Decision,
    decide,
    principals_applying,
    verdict,
)
from secmeta.projections.acl_index import TypeIndex, grant_key
from secmeta.projections.acl_match import DENY_SHIFT, EXACT_MASK, OPERATIONS_BY_TYPE
from secmeta.projections.acls import AclsImage

__all__ = [
    "ALLOWED_BY_ACL",
    "DENIED_BY_ACL",
    "Decision",
    "NO_ACL_FOUND",
    "NO_MATCHING_ALLOW",
    "SUPER_USER",
    "acls_on",
    "authorize",
    "authorize_by_resource_type",
    "authorized_operations",
    "explain",
]

_NO_SUPER_USERS: frozenset[str] = frozenset()


def _gather(t: TypeIndex, principal: str, host: str, name: str) -> int:
    """Packed bits of the ACLs applying to the request, plus FOUND if any cover the resource."""
    bits = t.literal.bits(name, principal, host)  # a node not made yet is read from its columns (``NodeMap``)
    bits = 0 if bits is None else FOUND | bits
    node = t.wildcard
    if node is not None:
        bits |= FOUND | node.bits(principal, host)
    if t.lengths:
        of_prefix = t.prefixed.bits
        for prefix in t.prefixes_of(name):  # a prefix given twice ORs the same bits again
            found = of_prefix(prefix, principal, host)
            if found is not None:
                bits |= FOUND | found
    return bits


def authorize(
    image: AclsImage,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    resource_name: str,
    *,
    super_users: frozenset[str] = _NO_SUPER_USERS,
    allow_if_no_acl: bool = False,
) -> bool:
    """Whether the principal from host may perform the operation on the resource."""
    bits = _gather(image.index.types[resource_type], principal, host, resource_name)
    return verdict(principal in super_users, bits, operation, allow_if_no_acl).allowed


def authorized_operations(
    image: AclsImage,
    principal: str,
    host: str,
    resource_type: ResourceType,
    resource_name: str,
    *,
    super_users: frozenset[str] = _NO_SUPER_USERS,
    allow_if_no_acl: bool = False,
) -> int:
    """KIP-430 bitfield: bit i set when operation code i is allowed on the resource."""
    if resource_type not in OPERATIONS_BY_TYPE:
        return 0
    bits = _gather(image.index.types[resource_type], principal, host, resource_name)
    return _operations(principal in super_users, bits, resource_type, allow_if_no_acl)


@lru_cache(maxsize=16384)
def _operations(super_user: bool, bits: int, resource_type: ResourceType, allow_if_no_acl: bool) -> int:
    """The KIP-430 bitfield ``verdict`` gives for packed bits (few distinct values: cached)."""
    result = 0
    for op in OPERATIONS_BY_TYPE[resource_type]:
        if verdict(super_user, bits, op, allow_if_no_acl).allowed:
            result |= 1 << op
    return result


def acls_on(image: AclsImage, resource_type: ResourceType, resource_name: str) -> list[tuple[str, AclBinding]]:
    """Every (ACL id, binding) whose pattern covers the resource, whoever it is for, by ACL id."""
    found = [
        pair
        for node in image.index.types[resource_type].applicable_nodes(resource_name)
        for group in node.groups()
        for pair in group.pairs()
    ]
    found.sort(key=lambda pair: pair[0])
    return found


def _candidates(image: AclsImage, principal: str, t: TypeIndex, name: str):
    """(whether any ACL covers the resource, the covering ACLs of the principal and 'User:*')."""
    found = False
    candidates = []
    principals = principals_applying(principal)
    for node in t.applicable_nodes(name):
        found = True
        for who in principals:
            group = node.group(who)
            if group is not None:
                candidates.extend(group.pairs())
    return found, candidates


def explain(
    image: AclsImage,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    resource_name: str,
    *,
    super_users: frozenset[str] = _NO_SUPER_USERS,
    allow_if_no_acl: bool = False,
) -> Decision:
    """The decision ``authorize`` makes, with the deciding ACLs (for the CLI)."""
    found, candidates = _candidates(image, principal, image.index.types[resource_type], resource_name)
    return decide(principal, host, operation, candidates, resource_has_acls=found,
                  super_users=super_users, allow_if_no_acl=allow_if_no_acl)


def _tables(t: TypeIndex, principal: str, operation: int, deny: bool, prefixed: bool) -> list:
    """The grant tables (name -> Group) of the principal and 'User:*' for op and ALL."""
    tables = []
    principals = principals_applying(principal)
    ops = (operation,) if operation == AclOperation.ALL else (operation, AclOperation.ALL)
    for who in principals:
        per_key = t.grants.get(who)
        if per_key is None:
            continue
        for op in ops:
            table = per_key.get(grant_key(op, deny, prefixed))
            if table is not None:
                tables.append(table)
    return tables


HARDCODED_NAME = "hardcode"  # the resource name Kafka's default method probes first


def authorize_by_resource_type(
    image: AclsImage,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    *,
    super_users: frozenset[str] = _NO_SUPER_USERS,
    allow_if_no_acl: bool = False,
) -> bool:
    """Whether the principal may perform the operation on some resource of the type.

    Kafka's default Authorizer.authorizeByResourceType (KIP-679), without a scan:
    first, if authorize() allows the operation on a literal resource named
    "hardcode", true (this covers super users and allow.everyone.if.no.acl.found
    when no ACL applies to that name).  Then only ACLs of the operation itself or
    ALL count (no implied DESCRIBE): an applying DENY on literal '*' gives false;
    otherwise true if an applying ALLOW exists on literal '*', on a prefix no
    applying prefixed DENY is a prefix of, or on a literal name with no applying
    literal DENY of that name and no applying prefixed DENY that is a prefix of it.
    """
    if authorize(image, principal, host, operation, resource_type, HARDCODED_NAME,
                 super_users=super_users, allow_if_no_acl=allow_if_no_acl):
        return True
    t = image.index.types[resource_type]
    exact = EXACT_MASK[operation]
    deny_bits = exact << DENY_SHIFT
    deny_literal = _tables(t, principal, operation, True, False)
    for table in deny_literal:
        group = table.get(WILDCARD)
        if group is not None and group.host_bits(host) & deny_bits:
            return False
    deny_prefixed = _tables(t, principal, operation, True, True)
    lengths = t.lengths

    def denied(tables: list, name: str) -> bool:
        for table in tables:
            group = table.get(name)
            if group is not None and group.host_bits(host) & deny_bits:
                return True
        return False

    def dominated(name: str) -> bool:
        if not deny_prefixed:
            return False
        size = len(name)
        for length in lengths:
            if length > size:
                break
            if denied(deny_prefixed, name[:length]):
                return True
        return False

    for name in _allowed_names(t, principal, operation, True, host, exact):
        if not dominated(name):
            return True
    for name in _allowed_names(t, principal, operation, False, host, exact):
        if name == WILDCARD:
            return True
        if not denied(deny_literal, name) and not dominated(name):
            return True
    return False


def _allowed_names(
    t: TypeIndex, principal: str, operation: int, prefixed: bool, host: str, exact: int
) -> Iterator[str]:
    """Names with an applying ALLOW of the operation or ALL (may repeat)."""
    for table in _tables(t, principal, operation, False, prefixed):
        for name, group in table.items():
            if group.host_bits(host) & exact:
                yield name
