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

__all__ = ["CLUSTER_DECISIONS_KEPT", "Decider", "acls_of", "allowed_on_cluster", "checked_context", "decider_for",
           "require_cluster"]

Decider = Callable[[str, str, AclOperation, ResourceType, str], bool]

def acls_of(image) -> AclsImage:
    """The AclsImage of a SecurityImage (or the argument itself if it is one)."""
    return image if isinstance(image, AclsImage) else image.acls


# Read once: on Python 3.11 a member read off its class goes through EnumType.__getattr__'s slot (about 0.25 us),
# and every request's own check asks the cluster decision.
_CLUSTER = ResourceType.CLUSTER

#: Cluster decisions a decider keeps (each its own (principal, host, operation) question; past this, all dropped).
CLUSTER_DECISIONS_KEPT = 1024


def decider_for(image, config) -> Decider:
    """A Decider over ``image``'s ACLs with ``config``'s super users and no-ACL default.

    Its decisions on the CLUSTER resource are kept: every request's own check asks one of them (the
    requester's right on the cluster), and the answer is a function of the immutable image, the
    settings and the question, so it holds for as long as the decider does (one image)."""
    acls = acls_of(image)
    super_users = frozenset(config.super_users)
    allow_if_no_acl = bool(config.allow_everyone_if_no_acl_found)
    cluster: dict[tuple, bool] = {}

    def decide(principal, host, operation, resource_type, resource_name) -> bool:
        if resource_type == _CLUSTER:
            key = (principal, host, operation, resource_name)
            known = cluster.get(key)
            if known is not None:
                return known
            if len(cluster) >= CLUSTER_DECISIONS_KEPT:
                cluster.clear()
            known = cluster[key] = authorize(acls, principal, host, operation, resource_type, resource_name,
                                             super_users=super_users, allow_if_no_acl=allow_if_no_acl)
            return known
        return authorize(acls, principal, host, operation, resource_type, resource_name,
                         super_users=super_users, allow_if_no_acl=allow_if_no_acl)

    return decide


def checked_context(context: object) -> RequestContext:
    """``context`` if it is a RequestContext (its fields are checked when it is built); else TypeError."""
    if not isinstance(context, RequestContext):
        raise TypeError(f"context must be a RequestContext, not {type(context).__name__}")
    return context


def allowed_on_cluster(decider: Decider, context: RequestContext, operation: AclOperation) -> bool:
    """Whether the requester (a checked RequestContext) may ``operation`` the cluster: ``decider``'s answer."""
    return decider(context.principal, context.host, operation, _CLUSTER, CLUSTER_NAME)


def require_cluster(decider: Decider, context: RequestContext, operation: AclOperation, *, why: str = "") -> None:
    """Raise ClusterAuthorizationException unless the requester may ``operation`` the cluster (``why``: text the
    message ends with, saying what needed the right)."""
    if not allowed_on_cluster(decider, checked_context(context), operation):
        raise ClusterAuthorizationException(
            f"Principal {context.principal} is not authorized to {AclOperation(operation).name} "
            f"on the cluster{why}")
