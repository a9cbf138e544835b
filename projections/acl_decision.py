"""The authorization rule: which ACLs decide one request, and what they decide.

Kafka builds one matching rule per request and uses it both for the answer
and for the audit log's explanation (AuthorizerData.findResult per ACL,
AuthorizerData.MatchingRuleBuilder.build for the request, in
metadata/src/main/java/org/apache/kafka/metadata/authorizer/).  Here
``verdict`` is that builder over the packed bits of the ACLs that apply (see
``acl_match``), and every decision goes through it: ``authorize`` and
``authorized_operations`` fold the bits through the index, ``decide`` from
the ACLs a caller hands it (``explain``, ``secmeta.core.forensics.queries.who_could`` and
``access_timeline``).

The rules, in order: a super user is allowed; an ACL applies when its
principal is the request's or 'User:*' and its host is '*', the client host
or a CIDR range holding it (``applies``); an applying DENY of the operation
or ALL denies; an applying ALLOW of it, of ALL or of an operation implying
it (READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies
DESCRIBE_CONFIGS; ALLOW only) allows; ACLs on the resource but none allowing
deny; no ACL on the resource at all gives allow.everyone.if.no.acl.found.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from secmeta.events.types import (
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourceType,
)
from secmeta.projections.acl_match import ACL_BITS, ALLOW_MASK, DENY_MASK, covers, host_matches

__all__ = [
    "ALLOWED_BY_ACL",
    "DENIED_BY_ACL",
    "FOUND",
    "NO_ACL_FOUND",
    "NO_MATCHING_ALLOW",
    "SUPER_USER",
    "Decision",
    "applies",
    "concerns",
    "decide",
    "effect",
    "principal_applies",
    "principals_applying",
    "verdict",
]

FOUND = 1 << 40  # in packed bits: some ACL's pattern covers the resource (Kafka's hasResourceAcls)

SUPER_USER = "super user"
DENIED_BY_ACL = "denied by ACL"
ALLOWED_BY_ACL = "allowed by ACL"
NO_MATCHING_ALLOW = "no ACL allows"
NO_ACL_FOUND = "no ACL found"

_NO_SUPER_USERS: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Decision:
    """An authorization answer and why: the reason and the ACLs that decided it (by ACL id)."""

    allowed: bool
    reason: str
    acls: tuple[tuple[str, AclBinding], ...] = ()


_SUPER = Decision(True, SUPER_USER)
_DENIED = Decision(False, DENIED_BY_ACL)
_ALLOWED = Decision(True, ALLOWED_BY_ACL)
_NO_ALLOW = Decision(False, NO_MATCHING_ALLOW)
_DEFAULT = (Decision(False, NO_ACL_FOUND), Decision(True, NO_ACL_FOUND))


def verdict(super_user: bool, bits: int, operation: int, allow_if_no_acl: bool) -> Decision:
    """The decision (without its ACLs) for the packed bits of the applying ACLs, ``FOUND`` included.

    Kafka's MatchingRuleBuilder.build: a DENY, else an ALLOW, else DefaultDeny
    when the resource has ACLs, else the no-ACL default; super users first.
    """
    if super_user:
        return _SUPER
    if bits & DENY_MASK[operation]:
        return _DENIED
    if bits & ALLOW_MASK[operation]:
        return _ALLOWED
    if bits:
        return _NO_ALLOW
    return _DEFAULT[allow_if_no_acl]


def applies(entry: AccessControlEntry, principal: str, host: str) -> bool:
    """Whether an ACL entry applies to a request's principal and client host (Kafka's findResult,
    principal and host part; a CIDR host is secmeta's extension)."""
    return principal_applies(entry.principal, principal) and host_matches(entry.host, host)


def principal_applies(acl_principal: str, principal: str) -> bool:
    """Whether an ACL of ``acl_principal`` applies to requests of ``principal``: its own, or 'User:*'."""
    return acl_principal in principals_applying(principal)


def principals_applying(principal: str) -> tuple[str, ...]:
    """The ACL principals whose ACLs apply to requests of ``principal`` (the rule's one owner, the keys an index
    looks up): its own, and 'User:*' (once, when it is 'User:*')."""
    return (principal,) if principal == WILDCARD_PRINCIPAL else (principal, WILDCARD_PRINCIPAL)


def concerns(binding: AclBinding, principal: str) -> bool:
    """Whether an ACL belongs to ``principal``'s history: it applies to their requests (``principal_applies``),
    or its resource is the USER resource naming them (Kafka's USER resource, named by the principal string,
    e.g. CREATE_TOKENS on 'User:alice'), by ``covers``: literal, literal '*' or a prefix of the name."""
    return principal_applies(binding.principal, principal) or covers(binding.pattern, ResourceType.USER, principal)


def effect(entry: AccessControlEntry, operation: AclOperation) -> AclPermissionType | None:
    """What an applying ACL entry does to the operation: DENY, ALLOW or nothing (None).

    Kafka's findResult, operation part: a DENY of the operation or ALL; an ALLOW
    of it, of ALL or of an operation implying it.
    """
    bit = ACL_BITS[entry.permission_type][entry.operation]
    if bit & DENY_MASK[operation]:
        return AclPermissionType.DENY
    if bit & ALLOW_MASK[operation]:
        return AclPermissionType.ALLOW
    return None


def decide(
    principal: str,
    host: str,
    operation: AclOperation,
    acls: Iterable[tuple[str, AclBinding]],
    *,
    resource_has_acls: bool,
    super_users: frozenset[str] = _NO_SUPER_USERS,
    allow_if_no_acl: bool = False,
) -> Decision:
    """The decision for a request, with the ACLs that made it (every applying DENY, else every ALLOW).

    ``acls``: (ACL id, binding) pairs whose pattern covers the resource; those
    that do not apply to the principal and host are skipped, so a caller may
    pass more than apply.  ``resource_has_acls``: whether any ACL at all covers
    the resource (whoever it is for), which decides between "no ACL allows"
    and the no-ACL default.
    """
    bits = FOUND if resource_has_acls else 0
    applying = []
    for pair in acls:
        entry = pair[1].entry
        if applies(entry, principal, host):
            bits |= ACL_BITS[entry.permission_type][entry.operation]
            applying.append(pair)
    decision = verdict(principal in super_users, bits, operation, allow_if_no_acl)
    if decision is _DENIED:
        wanted = AclPermissionType.DENY
    elif decision is _ALLOWED:
        wanted = AclPermissionType.ALLOW
    else:
        return decision
    deciding = sorted((pair for pair in applying if effect(pair[1].entry, operation) == wanted),
                      key=lambda pair: pair[0])
    return Decision(decision.allowed, decision.reason, tuple(deciding))
