"""Who may make a request: the decider the control functions consult.

A ``Decider`` answers (principal, host, operation, resource type, resource
name) -> bool; ``decider_for`` builds one over an image's ACLs with the
store's super users and ``allow.everyone.if.no.acl.found`` setting.
"""

from __future__ import annotations

from collections.abc import Callable

from secmeta.core.errors import ClusterAuthorizationException
from secmeta.core.types import RequestContext
from secmeta.events.types import CLUSTER_NAME, AclOperation, ResourceType
from secmeta.projections.acls import AclsImage
from secmeta.projections.authorizer import authorize

__all__ = ["Decider", "checked_context", "INT64_MAX", "INT64_MIN", "acls_of", "decider_for", "is_int64", "parse_principal",
           "require_cluster"]

Decider = Callable[[str, str, AclOperation, ResourceType, str], bool]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def acls_of(image) -> AclsImage:
    """The AclsImage of a SecurityImage (or the argument itself if it is one)."""
    return image if isinstance(image, AclsImage) else image.acls


def decider_for(image, config) -> Decider:
    """A Decider over ``image``'s ACLs with ``config``'s super users and no-ACL default."""
    acls = acls_of(image)
    super_users = frozenset(config.super_users)
    allow_if_no_acl = bool(config.allow_everyone_if_no_acl_found)

    def decide(principal, host, operation, resource_type, resource_name) -> bool:
        return authorize(acls, principal, host, operation, resource_type, resource_name,
                         super_users=super_users, allow_if_no_acl=allow_if_no_acl)

    return decide


def checked_context(context: object) -> RequestContext:
    """``context`` if it is a RequestContext (its fields are checked when it is built); else TypeError."""
    if not isinstance(context, RequestContext):
        raise TypeError(f"context must be a RequestContext, not {type(context).__name__}")
    return context


def require_cluster(decider: Decider, context: RequestContext, operation: AclOperation) -> None:
    """Raise ClusterAuthorizationException unless the requester may ``operation`` the cluster."""
    checked_context(context)
    if not decider(context.principal, context.host, operation, ResourceType.CLUSTER, CLUSTER_NAME):
        raise ClusterAuthorizationException(
            f"Principal {context.principal} is not authorized to {AclOperation(operation).name} "
            f"on the cluster")


def parse_principal(principal: object) -> tuple[str, str] | None:
    """(type, name) of a ``Type:Name`` principal string; None if it is not one."""
    if not isinstance(principal, str):
        return None
    kind, colon, name = principal.partition(":")
    if not colon or not kind or not name:
        return None
    return kind, name


def is_int64(value: object) -> bool:
    """Whether ``value`` is an int (not a bool) that fits a signed 64-bit long."""
    return isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX
