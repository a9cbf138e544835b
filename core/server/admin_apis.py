"""Handlers of the admin APIs (ACLs, SCRAM credentials, delegation tokens): kio request -> store -> kio response."""

from __future__ import annotations

from core.server import acl_apis, scram_apis, token_apis
from core.server.call import Handler

#: API key -> handler.
ADMIN_HANDLERS: dict[int, Handler] = {
    29: acl_apis.describe_acls,
    30: acl_apis.create_acls,
    31: acl_apis.delete_acls,
    38: token_apis.create_delegation_token,
    39: token_apis.renew_delegation_token,
    40: token_apis.expire_delegation_token,
    41: token_apis.describe_delegation_token,
    50: scram_apis.describe_user_scram_credentials,
    51: scram_apis.alter_user_scram_credentials,
}
