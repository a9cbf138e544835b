"""Admin: the admin calls an embedded store and a remote client both answer.

``SecurityStore`` (in process) and ``RemoteAdmin`` (Kafka's protocol to a running ``secmeta serve``,
the CLI's ``--bootstrap-server``) implement this protocol with the same signatures and result types,
so a caller holding an ``Admin`` cannot tell them apart, and one contract suite
(tests/contract/admin_suite.py) runs the same scenarios through both and requires the same results.

``context`` is who asks.  An admin that carries no identity of its own (SecurityStore) needs one on
every call: None there is a TypeError, as any value that is not a RequestContext.  A remote admin's
login is its identity, so it takes None (a context given to it is not sent: the server decides who
asks from the connection).

Per-item failures come back as values (``ApiError`` per binding, per user, per filter); a
request-level failure raises the ``ApiException`` subclass of its Kafka code, as both do.
``AdminReader`` is the describe half, which a store's read-only view at a past point
(``SecurityStore.as_of``) answers too.

The logged settings (``alter_settings`` / ``describe_settings``, secmeta.core.settings) are not part of
this protocol: ``secmeta serve`` does not serve Kafka's DescribeConfigs / IncrementalAlterConfigs, so a
``RemoteAdmin`` could not implement them; they are SecurityStore's and StoreView's (``SettingsAdmin``,
``SettingsReader``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from secmeta.core.errors import ApiError
from secmeta.core.types import (
    EVERY_ENTITY,
    ClientQuotaAlteration,
    ClientQuotaFilter,
    DelegationToken,
    DeleteAclsResult,
    RequestContext,
    UserScramCredentialAlteration,
    UserScramCredentialsDescription,
)
from secmeta.events.records import ClientQuotaEntity
from secmeta.events.types import AclBinding, AclBindingFilter

__all__ = ["Admin", "AdminReader", "SettingsAdmin", "SettingsReader"]


@runtime_checkable
class AdminReader(Protocol):
    """The describe calls: SCRAM credentials, ACLs, delegation tokens, client quotas."""

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None, *,
                                        context: RequestContext | None,
                                        ) -> dict[str, UserScramCredentialsDescription | ApiError]:
        """Mechanisms and iterations per user (None: every user); an ApiError for a user named but not found."""
        ...

    def describe_acls(self, filter: AclBindingFilter, *, context: RequestContext | None) -> list[AclBinding]:
        """The ACLs the filter selects."""
        ...

    def describe_delegation_tokens(self, owners: Iterable[str] | None = None, *,
                                   context: RequestContext | None) -> list[DelegationToken]:
        """The tokens the requester may see, of ``owners`` (None: every owner)."""
        ...

    def describe_client_quotas(self, filter: ClientQuotaFilter = EVERY_ENTITY, *,
                               context: RequestContext | None) -> dict[ClientQuotaEntity, dict[str, float]]:
        """The quotas of every entity the filter matches (default: every entity)."""
        ...


@runtime_checkable
class Admin(AdminReader, Protocol):
    """Every admin call: the describe calls and the changes to SCRAM credentials, ACLs, tokens and client quotas."""

    def alter_user_scram_credentials(self, alterations: Iterable[UserScramCredentialAlteration], *,
                                     context: RequestContext | None) -> dict[str, ApiError]:
        """Upsert and delete SCRAM credentials; one ApiError per user (NONE on success)."""
        ...

    def create_acls(self, bindings: Iterable[AclBinding], *, context: RequestContext | None) -> list[ApiError]:
        """Create ACLs; one ApiError per binding."""
        ...

    def delete_acls(self, filters: Iterable[AclBindingFilter], *,
                    context: RequestContext | None) -> list[DeleteAclsResult]:
        """Delete the ACLs each filter matches; per filter its error and the bindings it removed."""
        ...

    def create_delegation_token(self, *, context: RequestContext | None, owner: str | None = None,
                                renewers: Iterable[str] = (), max_lifetime_ms: int = -1) -> DelegationToken:
        """Issue a token for ``owner`` (default: the requester); the result carries its HMAC."""
        ...

    def renew_delegation_token(self, hmac: bytes, renew_period_ms: int = -1, *,
                               context: RequestContext | None) -> int:
        """Extend a token's expiry; the new expiry timestamp (ms)."""
        ...

    def expire_delegation_token(self, hmac: bytes, expiry_period_ms: int = -1, *,
                                context: RequestContext | None) -> int:
        """Move a token's expiry (negative: now, which removes it); the new expiry timestamp (ms)."""
        ...

    def alter_client_quotas(self, entries: Iterable[ClientQuotaAlteration], *, validate_only: bool = False,
                            context: RequestContext | None) -> dict[ClientQuotaEntity, ApiError]:
        """Set and remove client quotas; one ApiError per entity (NONE on success)."""
        ...

    def close(self) -> None:
        """Release what the admin holds (the store's directory lock, the connection)."""
        ...


class SettingsReader(Protocol):
    """Describes the logged settings: a SecurityStore, or its view at a past point (not a RemoteAdmin)."""

    def describe_settings(self, *, context: RequestContext | None) -> list[dict]:
        """Every logged setting in force: name, value, source, doc."""
        ...


class SettingsAdmin(SettingsReader, Protocol):
    """Alters the logged settings: a SecurityStore."""

    def alter_settings(self, set: dict[str, str] | None = None, delete: Iterable[str] = (), *,
                       context: RequestContext | None) -> list[str]:
        """Set settings and return others to their defaults as one logged batch; the names that changed."""
        ...
