"""Who may make a request: the decider the control functions consult.

A ``Decider`` answers (principal, host, operation, resource type, resource
name) -> bool; ``decider_for`` builds one over an image's ACLs with the
store's super users and ``allow.everyone.if.no.acl.found`` setting.
"""

from __future__ import annotations

from collections.abc import Callable

from secmeta.core.errors import ClusterAuthorizationException, UnsupportedByAuthenticationException
from secmeta.core.types import RequestContext
from secmeta.events.types import CLUSTER_NAME, AclOperation, ResourceType
from secmeta.projections.acls import AclsImage
from secmeta.projections.authorizer import authorize

__all__ = ["CLUSTER_DECISIONS_KEPT", "TOKEN_WRITES", "WRITE_RIGHTS", "Decider", "acls_of", "allowed_on_cluster",
           "checked_context", "decider_for", "require_cluster", "require_token_request_allowed", "require_write_right"]

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


#: The right on the cluster a write needs before anything else (Kafka's ControllerApis authorizes the whole request
#: first: handleCreateAcls / handleDeleteAcls / handleAlterUserScramCredentials ALTER, handleAlterClientQuotas
#: ALTER_CONFIGS), by the store call that makes it. Token writes have no such right (their checks are per token).
WRITE_RIGHTS: dict[str, AclOperation] = {
    "create_acls": AclOperation.ALTER,
    "delete_acls": AclOperation.ALTER,
    "alter_user_scram_credentials": AclOperation.ALTER,
    "alter_client_quotas": AclOperation.ALTER_CONFIGS,
}

#: The token writes, whose first check is the connection's, whatever the token (Kafka's ControllerApis and KafkaApis
#: handleCreate/Renew/ExpireDelegationTokenRequest ask ``allowTokenRequests`` before anything else).
TOKEN_WRITES = frozenset({"create_delegation_token", "renew_delegation_token", "expire_delegation_token"})


def require_token_request_allowed(context: RequestContext) -> None:
    """The one rule for which connections may make token requests at all (Kafka's ``allowTokenRequests``):
    UnsupportedByAuthenticationException (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED) for a token-authenticated or
    unauthenticated requester, or the anonymous principal (PLAINTEXT, one-way TLS)."""
    checked_context(context)
    if context.token_authenticated or not context.authenticated or context.principal == "User:ANONYMOUS":
        how = "token-authenticated" if context.token_authenticated else "unauthenticated"
        raise UnsupportedByAuthenticationException(
            f"Delegation token requests are not allowed on {how} connections")


def require_write_right(decider: Decider, context: RequestContext, write: str) -> None:
    """The one rule for who may make the write ``write`` (a store call's name) at all: ClusterAuthorizationException
    unless the requester holds its WRITE_RIGHTS right; for a token write, ``require_token_request_allowed``;
    nothing for another write. The control function asks it under the store's lock; the server asks it too
    before the write queues (on the published image)."""
    right = WRITE_RIGHTS.get(write)
    if right is not None:
        require_cluster(decider, context, right)
    elif write in TOKEN_WRITES:
        require_token_request_allowed(context)
