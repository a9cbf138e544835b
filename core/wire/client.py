"""A small synchronous admin client over Kafka's protocol, with SecurityStore's admin API.

``RemoteAdmin.connect("127.0.0.1:9092", command_config="client.properties")`` (or
``RemoteAdmin(ClientConfig(...))``) opens one authenticated connection
(secmeta.core.wire.connection) and is an ``Admin`` (secmeta.core.admin), as ``SecurityStore`` is:
the same calls, arguments and result types, so the CLI and tests hold either as an Admin.
``context=`` may be left out and is never sent: the connection's login decides who asks.

Request-level errors raise the ApiException subclass of the Kafka code
(``ApiException.from_error``), as the store does.  CreateAcls, DeleteAcls and
AlterUserScramCredentials have no top-level error on the wire, so a request the broker
refused as a whole comes back as the same error on every item (Kafka's
CreateAclsRequest/DeleteAclsRequest/AlterUserScramCredentialsRequest.getErrorResponse).
The client raises it, as the store would have, when it cannot be a per-item answer:
CLUSTER_AUTHORIZATION_FAILED on every item (no permission to change anything), or an
INVALID_REQUEST on every item of which one at least passes the store's own validation
(secmeta.core.control.acls.validate_binding / validate_filter), so only a request-level refusal such
as ``max_acl_changes_per_request`` can have caused it.

Requests are built from plain values with secmeta.core.wire.codec.build and the field helpers of
secmeta.core.wire.convert; SCRAM upsertions with a password are salted here with a fresh random
salt (Kafka's AdminClient: UserScramCredentialUpsertion.generateRandomSalt and
KafkaAdminClient.getSaltedPassword), and iterations -1 become 4096 (ConfigCommand's
DefaultScramIterations), because the wire carries only the salted password.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from secmeta.core.control.acls import validate_binding, validate_filter
from secmeta.core.control.quotas import EVERY_ENTITY, ClientQuotaAlteration, ClientQuotaFilter
from secmeta.core.errors import ApiError, ApiException, ErrorCode, UnsupportedVersionException
from secmeta.core.types import (
    DelegationToken,
    DeleteAclsResult,
    RequestContext,
    UserScramCredentialAlteration,
    UserScramCredentialsDescription,
)
from secmeta.core.wire import convert
from secmeta.core.wire.client_config import ClientConfig, ClientConfigError
from secmeta.core.wire.codec import ApiKey, build, request_class
from secmeta.core.wire.connection import BrokerConnectionError, Connection
from secmeta.events.records import ClientQuotaEntity
from secmeta.events.types import AclBinding, AclBindingFilter

__all__ = ["BrokerConnectionError", "ClientConfig", "ClientConfigError", "Connection", "RemoteAdmin"]

def _raise_if_error(code: Any, message: str | None = None) -> None:
    error = convert.error_from(int(code), message)
    if error:
        raise ApiException.from_error(error)


def _raise_if_refused(errors: list[ApiError], valid: Iterable[bool] = ()) -> None:
    """Raise the error a refused request repeated on every item (see the module docstring);
    ``valid`` says, per item, whether it passes the store's own validation."""
    if not errors or any(e != errors[0] for e in errors):
        return
    code = errors[0].code
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED or (code == ErrorCode.INVALID_REQUEST and any(valid)):
        raise ApiException.from_error(errors[0])


class RemoteAdmin:
    """An Admin answered by a broker over one connection; a context manager.

    Calls are synchronous, one at a time (not thread-safe: use one RemoteAdmin per thread).
    """

    def __init__(self, config: ClientConfig):
        self.config = config
        self._conn = Connection.open(config)

    @classmethod
    def connect(cls, bootstrap_server: str | None, command_config: str | os.PathLike | None = None) -> RemoteAdmin:
        """Connect as Kafka's tools do: --bootstrap-server and an optional --command-config file."""
        return cls(ClientConfig.load(bootstrap_server, command_config))

    @property
    def broker(self) -> str:
        """HOST:PORT of the broker this client is connected to."""
        return self._conn.broker

    @property
    def connection(self) -> Connection:
        return self._conn

    def __repr__(self) -> str:
        return f"RemoteAdmin({self._conn.broker}, {self.config.security_protocol})"

    def __enter__(self) -> RemoteAdmin:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    def _call(self, api_key: int, **values: Any) -> Any:
        return self._conn.call(api_key, lambda version: build(request_class(api_key, version), **values))

    # -- ACLs ----------------------------------------------------------------------------

    def create_acls(self, bindings: Iterable[AclBinding], *, context: RequestContext | None = None) -> list[ApiError]:
        """Create ACLs; one ApiError per binding (CreateAcls)."""
        bindings = list(bindings)
        response = self._call(ApiKey.CREATE_ACLS, creations=[convert.acl_creation_fields(b) for b in bindings])
        errors = [convert.error_from(r.error_code, r.error_message) for r in response.results]
        _raise_if_refused(errors, (not validate_binding(b) for b in bindings))
        return errors

    def describe_acls(self, filter: AclBindingFilter, *, context: RequestContext | None = None) -> list[AclBinding]:
        """The ACLs the filter selects (DescribeAcls)."""
        response = self._call(ApiKey.DESCRIBE_ACLS, **convert.filter_fields(filter))
        _raise_if_error(response.error_code, response.error_message)
        return convert.bindings_from_resources(response.resources)

    def delete_acls(self, filters: Iterable[AclBindingFilter], *,
                    context: RequestContext | None = None) -> list[DeleteAclsResult]:
        """Delete the ACLs each filter matches; per filter its error and removed bindings (DeleteAcls)."""
        filters = list(filters)
        response = self._call(ApiKey.DELETE_ACLS, filters=[convert.filter_fields(f) for f in filters])
        results = []
        for r in response.filter_results:
            error = convert.error_from(r.error_code, r.error_message)
            results.append(DeleteAclsResult(error, tuple(convert.binding_from(m) for m in r.matching_acls)))
        _raise_if_refused([r.error for r in results], (not validate_filter(f) for f in filters))
        return results

    # -- SCRAM credentials -----------------------------------------------------------------

    def alter_user_scram_credentials(self, alterations: Iterable[UserScramCredentialAlteration], *,
                                     context: RequestContext | None = None) -> dict[str, ApiError]:
        """Upsert and delete SCRAM credentials; one ApiError per user (AlterUserScramCredentials)."""
        response = self._call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, **convert.alter_request_fields(alterations))
        results = convert.alter_results_from(response.results)
        _raise_if_refused(list(results.values()))
        return results

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None, *,
                                        context: RequestContext | None = None,
                                        ) -> dict[str, UserScramCredentialsDescription | ApiError]:
        """Mechanisms and iterations per user (DescribeUserScramCredentials; None = every user)."""
        users = None if users is None else list(users)
        response = self._call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, **convert.describe_users_fields(users))
        _raise_if_error(response.error_code, response.error_message)
        return convert.describe_results_from(response.results)

    # -- delegation tokens -----------------------------------------------------------------

    def create_delegation_token(self, *, context: RequestContext | None = None, owner: str | None = None,
                                renewers: Iterable[str] = (), max_lifetime_ms: int = -1) -> DelegationToken:
        """Issue a token (for ``owner``, default the login's principal); it carries its HMAC."""
        renewers = tuple(renewers)
        if owner is not None and self._conn.version_for(ApiKey.CREATE_DELEGATION_TOKEN) < 3:
            raise UnsupportedVersionException(
                f"broker {self.broker} cannot create a token for another owner (CreateDelegationToken v3 needed)")
        fields = convert.create_token_request_fields(owner, renewers, max_lifetime_ms)
        response = self._call(ApiKey.CREATE_DELEGATION_TOKEN, **fields)
        _raise_if_error(response.error_code)
        return convert.token_from_create_response(response, renewers)

    def renew_delegation_token(self, hmac: bytes, renew_period_ms: int = -1, *,
                               context: RequestContext | None = None) -> int:
        """Extend the token's expiry; the new expiry timestamp (RenewDelegationToken)."""
        response = self._call(ApiKey.RENEW_DELEGATION_TOKEN, hmac=bytes(hmac), renew_period=int(renew_period_ms))
        _raise_if_error(response.error_code)
        return convert.ms_from(response.expiry_timestamp)

    def expire_delegation_token(self, hmac: bytes, expiry_period_ms: int = -1, *,
                                context: RequestContext | None = None) -> int:
        """Move the token's expiry (negative: now); the new expiry timestamp as the broker answers it
        (ExpireDelegationToken): for a negative period secmeta serve answers the time of removal, a KRaft broker the
        period itself (DelegationTokenControlManager.expireDelegationToken), read as the int64 it is."""
        response = self._call(ApiKey.EXPIRE_DELEGATION_TOKEN, hmac=bytes(hmac),
                              expiry_time_period=int(expiry_period_ms))
        _raise_if_error(response.error_code)
        return convert.ms_from(response.expiry_timestamp)

    def describe_delegation_tokens(self, owners: Iterable[str] | None = None, *,
                                   context: RequestContext | None = None) -> list[DelegationToken]:
        """The tokens the login may see, of ``owners`` (None = all; DescribeDelegationToken)."""
        owners = None if owners is None else list(owners)
        response = self._call(ApiKey.DESCRIBE_DELEGATION_TOKEN, **convert.owners_fields(owners))
        _raise_if_error(response.error_code)
        return [convert.token_from_described(t) for t in response.tokens]

    # -- client quotas ---------------------------------------------------------------------

    def alter_client_quotas(self, entries: Iterable[ClientQuotaAlteration], *, validate_only: bool = False,
                            context: RequestContext | None = None) -> dict[ClientQuotaEntity, ApiError]:
        """Set and remove client quotas; one ApiError per entity (AlterClientQuotas)."""
        response = self._call(ApiKey.ALTER_CLIENT_QUOTAS, **convert.quota_alterations_fields(entries, validate_only))
        results = convert.quota_alter_results_from(response.entries)
        _raise_if_refused(list(results.values()))
        return results

    def describe_client_quotas(self, filter: ClientQuotaFilter = EVERY_ENTITY, *,
                               context: RequestContext | None = None) -> dict[ClientQuotaEntity, dict[str, float]]:
        """The quotas of every entity the filter matches (DescribeClientQuotas)."""
        response = self._call(ApiKey.DESCRIBE_CLIENT_QUOTAS, **convert.quota_filter_fields(filter))
        _raise_if_error(response.error_code, response.error_message)
        return convert.quota_entries_from(response.entries)
