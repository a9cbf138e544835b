"""secmeta's public API: the store, its request and result types, errors and enums.

    from core import SecurityStore, StoreConfig, RequestContext, AclBinding, ...
"""

from core.config import PasswordPolicy, StoreConfig
from core.errors import (
    ApiError,
    ApiException,
    ClusterAuthorizationException,
    ErrorCode,
    SecmetaError,
)
from core.types import (
    DelegationToken,
    DeleteAclsResult,
    RequestContext,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from events.types import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    ScramMechanism,
)


def __getattr__(name: str):
    # SecurityStore pulls in every layer; import it on first use so `import core`
    # stays cheap for tools that only need the types.
    if name == "SecurityStore":
        from core.store import SecurityStore

        return SecurityStore
    raise AttributeError(f"module 'core' has no attribute {name!r}")


__all__ = [
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "ApiError",
    "ApiException",
    "ClusterAuthorizationException",
    "DelegationToken",
    "DeleteAclsResult",
    "ErrorCode",
    "PasswordPolicy",
    "PatternType",
    "RequestContext",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "SecmetaError",
    "SecurityStore",
    "StoreConfig",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
]
