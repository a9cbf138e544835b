"""StoreView: the read-only questions (describe, authorize, explain) answered from one image.

The live store answers through a view of its published image; ``as_of``
returns a view of a past image.  A view never changes: it holds one
immutable ``SecurityImage`` and the settings that shape the answers.

Who may *ask* a describe question (describe_acls, describe_acl_groups, describe_user_scram_credentials,
describe_delegation_tokens, describe_client_quotas, describe_settings) is checked against the ``gate``
image, by default the view's own image.  The store passes its live image as the gate for past views, so a
principal whose rights were revoked cannot read old state through a view's describe questions; the
answers themselves come from the past.

That gate covers a view's describe questions only.  The decision questions (authorize,
authorized_operations, authorize_by_resource_type, explain) take a principal to decide for, not a
requester, as Kafka's Authorizer does.  The store's forensic queries (``history``, ``diff``,
``who_could``, ``access_timeline`` and ``token_access`` on SecurityStore) take no requester and check
nothing: they are operator-level, like reading the log files, for a trusted caller.  An application that
exposes them to other principals must gate them itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from secmeta.core import control, validation
from secmeta.core import settings as logged_settings
from secmeta.core.config import StoreConfig
from secmeta.core.control.authz import checked_context, require_write_right
from secmeta.core.control.quotas import EVERY_ENTITY, ClientQuotaFilter, describe_client_quotas
from secmeta.core.control.settings import describe_settings
from secmeta.core.errors import ApiError
from secmeta.core.types import DelegationToken, RequestContext, UserScramCredentialsDescription
from secmeta.events.records import ClientQuotaEntity
from secmeta.events.types import AclBinding, AclBindingFilter, AclOperation, ResourceType
from secmeta.projections import authorizer
from secmeta.projections.image import SecurityImage

__all__ = ["StoreView", "decision_args"]


class StoreView:
    """Describe, authorize and explain over one immutable image (a point in the store's history).

    Its describe calls are an ``AdminReader`` (secmeta.core.admin), needing ``context=`` as the store's do.
    """

    __slots__ = ("image", "config", "timestamp_ms", "_base", "_gate", "_acls", "_super_users", "_allow_if_no_acl",
                 "_own_decider")

    def __init__(
        self,
        image: SecurityImage,
        config: StoreConfig,
        *,
        gate: Callable[[], SecurityImage] | None = None,
        timestamp_ms: int | None = None,
    ):
        self.image = image
        self._base = config
        self.config = config = logged_settings.in_force(config, image)  # the settings in force at this point
        self.timestamp_ms = timestamp_ms
        self._gate = gate
        self._acls = image.acls
        self._super_users = frozenset(config.super_users)
        self._allow_if_no_acl = bool(config.allow_everyone_if_no_acl_found)
        self._own_decider = None    # the decider over this view's image, made on first use (it keeps its cluster decisions)

    @property
    def offset(self) -> int:
        """How many events the view has seen: it is the store after events [0, offset)."""
        return self.image.next_offset

    def __repr__(self) -> str:
        img = self.image
        return (f"<StoreView offset={img.next_offset} users={len(img.scram)} "
                f"acls={len(img.acls)} tokens={len(img.tokens)}>")

    def _decider(self):
        if self._gate is None:
            decider = self._own_decider
            if decider is None:
                decider = self._own_decider = control.decider_for(self.image, self.config)
            return decider
        gate = self._gate()
        return control.decider_for(gate, logged_settings.in_force(self._base, gate))

    # -- describe ------------------------------------------------------------------

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None, *, context: RequestContext | None,
                                        ) -> dict[str, UserScramCredentialsDescription | ApiError]:
        """Mechanisms and iterations per user (needs DESCRIBE on CLUSTER); never a secret."""
        return control.describe_scram_credentials(
            self.image, None if users is None else list(users), checked_context(context), decider=self._decider())

    def describe_acls(self, filter: AclBindingFilter, *, context: RequestContext | None) -> list[AclBinding]:
        """The ACLs the filter selects (needs DESCRIBE on CLUSTER)."""
        return control.describe_acls(self.image, filter, checked_context(context), decider=self._decider())

    def describe_acl_groups(self, filter: AclBindingFilter, *, context: RequestContext | None) -> list:
        """``describe_acls``' answer as the index groups that hold it, each with the (acl_id, entry) pairs
        selected or None for all (secmeta.core.control.acls.describe_acl_groups): for the server, which
        keeps each group's wire encoding (a group is an immutable value, shared by the images that hold it)."""
        return control.describe_acl_groups(self.image, filter, checked_context(context), decider=self._decider())

    def may_describe_acls(self, context: RequestContext) -> bool:
        """Whether the requester may describe ACLs (DESCRIBE on CLUSTER): the decision ``describe_acls`` makes,
        asked of the same decider (which keeps it for this image)."""
        return control.may_describe_acls(context, self._decider())

    def require_write_right(self, write: str, *, context: RequestContext | None) -> None:
        """ClusterAuthorizationException unless the requester holds the right the write ``write`` (a store call's
        name) needs at all (for a token write, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED from a connection that may make
        none), decided on this view's image (``control.authz.require_write_right``, the rule the
        write itself asks under the store's lock): the server refuses an unauthorized write before it queues."""
        require_write_right(self._decider(), checked_context(context), write)

    def describe_delegation_tokens(self, owners: Iterable[str] | None = None, *,
                                   context: RequestContext | None) -> list[DelegationToken]:
        """The tokens the caller may see; with HMACs only if the config says so."""
        return control.describe_tokens(self.image, None if owners is None else list(owners), checked_context(context),
                                       decider=self._decider(), config=self.config, past=self._gate is not None)

    def describe_client_quotas(self, filter: ClientQuotaFilter = EVERY_ENTITY, *,
                               context: RequestContext | None) -> dict[ClientQuotaEntity, dict[str, float]]:
        """The client quotas of every entity the filter matches (needs DESCRIBE_CONFIGS on CLUSTER)."""
        return describe_client_quotas(self.image, filter, checked_context(context), decider=self._decider())

    def describe_settings(self, *, context: RequestContext | None) -> list[dict]:
        """Every logged setting in force at this point (needs DESCRIBE_CONFIGS on CLUSTER): name, value, source, doc."""
        return describe_settings(self.image, checked_context(context), config=self._base, decider=self._decider())

    # -- decisions -----------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: AclOperation | str, resource_type: ResourceType | str,
                  resource_name: str) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` (enum, name or code) on the resource."""
        operation, resource_type = decision_args(principal, host, operation, resource_type, resource_name)
        return authorizer.authorize(
            self._acls, principal, host, operation, resource_type, resource_name,
            super_users=self._super_users, allow_if_no_acl=self._allow_if_no_acl,
        )

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType | str,
                              resource_name: str) -> int:
        """The KIP-430 bitfield of the operations ``principal`` from ``host`` may do on the resource."""
        _, resource_type = decision_args(principal, host, None, resource_type, resource_name)
        return authorizer.authorized_operations(
            self._acls, principal, host, resource_type, resource_name,
            super_users=self._super_users, allow_if_no_acl=self._allow_if_no_acl,
        )

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation | str,
                                   resource_type: ResourceType | str) -> bool:
        operation, resource_type = decision_args(principal, host, operation, resource_type, "")
        return authorizer.authorize_by_resource_type(
            self._acls, principal, host, operation, resource_type,
            super_users=self._super_users, allow_if_no_acl=self._allow_if_no_acl,
        )

    def explain(self, principal: str, host: str, operation: AclOperation | str, resource_type: ResourceType | str,
                resource_name: str) -> authorizer.Decision:
        """The decision with the ACLs (or rule) that made it."""
        operation, resource_type = decision_args(principal, host, operation, resource_type, resource_name)
        return authorizer.explain(
            self._acls, principal, host, operation, resource_type, resource_name,
            super_users=self._super_users, allow_if_no_acl=self._allow_if_no_acl,
        )


def decision_args(principal: object, host: object, operation: object, resource_type: object,
                  resource_name: object) -> tuple[AclOperation | None, ResourceType]:
    """The operation (None stays None) and resource type of a decision, converted from names or codes.

    The strings must be strings (FieldError naming the one that is not); their content is not
    checked: a question stores nothing, and a name no ACL can hold simply matches none.
    """
    for field, value in (("principal", principal), ("host", host), ("resource name", resource_name)):
        validation.string(value, field)
    if operation is not None and type(operation) is not AclOperation:
        operation = validation.enum_value(AclOperation, operation, "operation")
    if type(resource_type) is not ResourceType:
        resource_type = validation.enum_value(ResourceType, resource_type, "resource type")
    return operation, resource_type  # type: ignore[return-value]
