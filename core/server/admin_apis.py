"""Handlers of the admin APIs (ACLs, SCRAM credentials, delegation tokens, client quotas): kio request -> store -> kio response."""

from __future__ import annotations

from secmeta.core.server import acl_apis, quota_apis, scram_apis, token_apis
from secmeta.core.server.handling import Handler
from secmeta.core.wire.codec import ApiKey

ADMIN_HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.DESCRIBE_ACLS: acl_apis.describe_acls,
    ApiKey.CREATE_ACLS: acl_apis.create_acls,
    ApiKey.DELETE_ACLS: acl_apis.delete_acls,
    ApiKey.CREATE_DELEGATION_TOKEN: token_apis.create_delegation_token,
    ApiKey.RENEW_DELEGATION_TOKEN: token_apis.renew_delegation_token,
    ApiKey.EXPIRE_DELEGATION_TOKEN: token_apis.expire_delegation_token,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: token_apis.describe_delegation_token,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: scram_apis.describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram_apis.alter_user_scram_credentials,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: quota_apis.describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: quota_apis.alter_client_quotas,
}
