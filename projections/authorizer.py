"""Authorization decisions over an AclsImage (Kafka's rules, via the index).

``authorize`` follows the reference's five rules: super users; the ACLs that
apply (same type; LITERAL equal or '*', PREFIXED prefix; principal or
'User:*'; host); any applying DENY of the operation or ALL denies; an ALLOW
of it or ALL allows (READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS
implies DESCRIBE_CONFIGS, for ALLOW only); with no ACL at all on the
resource the answer is ``allow_if_no_acl``; else deny.

Beyond Kafka: an ACL host may be a CIDR range ("10.0.0.0/8",
"2001:db8::/32") that applies to clients whose host parses as an address
inside it; exact host strings and '*' keep hash lookups, and ranges are
checked only when a group holds one and the client host is an IP (parsed
hosts and ranges are cached).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from events.types import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourceType,
)
from projections.acl_index import TypeIndex, grant_key
from projections.acl_match import (
    ALLOW_MASK,
    DENY_MASK,
    DENY_SHIFT,
    EXACT_MASK,
    OPERATIONS_BY_TYPE,
    all_operations_bits,
    host_matches,
)
from projections.acls import AclsImage

__all__ = [
    "ALLOWED_BY_ACL",
    "DENIED_BY_ACL",
    "Decision",
    "NO_ACL_FOUND",
    "NO_MATCHING_ALLOW",
    "SUPER_USER",
    "authorize",
    "authorize_by_resource_type",
    "authorized_operations",
    "explain",
]

_FOUND = 1 << 40  # set by _gather when any ACL exists for the resource
_NO_SUPER_USERS: frozenset[str] = frozenset()

SUPER_USER = "super user"
DENIED_BY_ACL = "denied by ACL"
ALLOWED_BY_ACL = "allowed by ACL"
NO_MATCHING_ALLOW = "no ACL allows"
NO_ACL_FOUND = "no ACL found"


def _gather(t: TypeIndex, principal: str, host: str, name: str) -> int:
    """Packed bits of the ACLs applying to the request, plus _FOUND if any exist."""
    bits = 0
    node = t.literal.get(name)
    if node is not None:
        bits = _FOUND | node.bits(principal, host)
    node = t.wildcard
    if node is not None:
        bits |= _FOUND | node.bits(principal, host)
    lengths = t.lengths
    if lengths:
        get = t.prefixed.get
        size = len(name)
        for length in lengths:
            if length > size:
                break
            node = get(name[:length])
            if node is not None:
                bits |= _FOUND | node.bits(principal, host)
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
    if principal in super_users:
        return True
    bits = _gather(image.index.types[resource_type], principal, host, resource_name)
    if not bits:
        return allow_if_no_acl
    if bits & DENY_MASK[operation]:
        return False
    return bits & ALLOW_MASK[operation] != 0


_OPERATION_MASKS = {
    resource_type: tuple((1 << op, DENY_MASK[op], ALLOW_MASK[op]) for op in ops)
    for resource_type, ops in OPERATIONS_BY_TYPE.items()
}
_ALL_BITS = {
    resource_type: all_operations_bits(resource_type) for resource_type in OPERATIONS_BY_TYPE
}


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
    masks = _OPERATION_MASKS.get(resource_type)
    if masks is None:
        return 0
    if principal in super_users:
        return _ALL_BITS[resource_type]
    bits = _gather(image.index.types[resource_type], principal, host, resource_name)
    if not bits:
        return _ALL_BITS[resource_type] if allow_if_no_acl else 0
    result = 0
    for bit, deny, allow in masks:
        if bits & allow and not bits & deny:
            result |= bit
    return result


@dataclass(frozen=True, slots=True)
class Decision:
    """An authorization answer and why: the reason and the ACLs that decided it."""

    allowed: bool
    reason: str
    acls: tuple[tuple[str, AclBinding], ...] = ()


def _applying(image: AclsImage, principal: str, host: str, t: TypeIndex, name: str):
    """(found, applying ACLs as (id, binding)) for a request, via the index."""
    found = False
    applying = []
    principals = (
        (principal,) if principal == WILDCARD_PRINCIPAL else (principal, WILDCARD_PRINCIPAL)
    )
    for node in t.applicable_nodes(name):
        found = True
        for who in principals:
            group = node.group(who)
            if group is None:
                continue
            for acl_id in group.acl_ids():
                binding = image.acls[acl_id]
                if host_matches(binding.entry.host, host):
                    applying.append((acl_id, binding))
    applying.sort(key=lambda pair: pair[0])
    return found, applying


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
    if principal in super_users:
        return Decision(True, SUPER_USER)
    t = image.index.types[resource_type]
    found, applying = _applying(image, principal, host, t, resource_name)
    deny_ops = EXACT_MASK[operation]
    allow_ops = ALLOW_MASK[operation]
    denies = tuple(
        (acl_id, b)
        for acl_id, b in applying
        if b.entry.permission_type == AclPermissionType.DENY and (1 << b.entry.operation) & deny_ops
    )
    if denies:
        return Decision(False, DENIED_BY_ACL, denies)
    allows = tuple(
        (acl_id, b)
        for acl_id, b in applying
        if b.entry.permission_type == AclPermissionType.ALLOW
        and (1 << b.entry.operation) & allow_ops
    )
    if allows:
        return Decision(True, ALLOWED_BY_ACL, allows)
    if found:
        return Decision(False, NO_MATCHING_ALLOW)
    return Decision(allow_if_no_acl, NO_ACL_FOUND)


def _tables(t: TypeIndex, principal: str, operation: int, deny: bool, prefixed: bool) -> list:
    """The grant tables (name -> Group) of the principal and 'User:*' for op and ALL."""
    tables = []
    principals = (
        (principal,) if principal == WILDCARD_PRINCIPAL else (principal, WILDCARD_PRINCIPAL)
    )
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
