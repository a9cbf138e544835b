"""secmeta's public API: the store, its request and result types, errors and enums.

    from secmeta.core import SecurityStore, StoreConfig, RequestContext, AclBinding, ...
"""

from secmeta.core.admin import Admin, AdminReader
from secmeta.core.config import PasswordPolicy, StoreConfig
from secmeta.core.errors import (
    ApiError,
    ApiException,
    ClusterAuthorizationException,
    CorruptLogError,
    DelegationTokenAuthorizationException,
    DelegationTokenDisabledException,
    DelegationTokenExpiredException,
    DelegationTokenNotFoundException,
    DelegationTokenOwnerMismatchException,
    DuplicateResourceException,
    ErrorCode,
    IllegalSaslStateException,
    InvalidPrincipalTypeException,
    InvalidRequestException,
    InvalidValueError,
    NewerFormatError,
    NotAStoreError,
    NotControllerException,
    PointInTimeError,
    QueryError,
    ResourceNotFoundException,
    SaslAuthenticationException,
    SecmetaError,
    SecurityDisabledException,
    StoreError,
    StoreLockedError,
    UnacceptableCredentialException,
    UnknownServerErrorException,
    UnsupportedByAuthenticationException,
    UnsupportedSaslMechanismException,
    UnsupportedVersionException,
)
from secmeta.core.types import (
    ClientQuotaAlteration,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ClientQuotaOp,
    DelegationToken,
    DeleteAclsResult,
    RequestContext,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from secmeta.core.validation import FieldError
from secmeta.events.errors import KeyringError, SealedSecretError, UnknownKeyError
from secmeta.events.keyring import Keyring
from secmeta.events.records import ClientQuotaEntity
from secmeta.events.types import (
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

# These pull in every layer; each is imported on first use so `import secmeta` stays cheap for
# tools that only need the types.
_LAZY = {
    "SecurityStore": "secmeta.core.store.facade",
    "StoreView": "secmeta.core.store.view",
    "HistoryEntry": "secmeta.core.forensics.history",
    "Diff": "secmeta.core.forensics.history",
    "Grant": "secmeta.core.forensics.queries",
    "Interval": "secmeta.core.forensics.queries",
    "Point": "secmeta.core.times",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'secmeta.core' has no attribute {name!r}")


__all__ = [
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "Admin",
    "AdminReader",
    "ApiError",
    "ApiException",
    "ClientQuotaAlteration",
    "ClientQuotaEntity",
    "ClientQuotaFilter",
    "ClientQuotaFilterComponent",
    "ClientQuotaOp",
    "ClusterAuthorizationException",
    "CorruptLogError",
    "DelegationToken",
    "DelegationTokenAuthorizationException",
    "DelegationTokenDisabledException",
    "DelegationTokenExpiredException",
    "DelegationTokenNotFoundException",
    "DelegationTokenOwnerMismatchException",
    "DeleteAclsResult",
    "Diff",
    "DuplicateResourceException",
    "ErrorCode",
    "FieldError",
    "Grant",
    "HistoryEntry",
    "IllegalSaslStateException",
    "Interval",
    "InvalidPrincipalTypeException",
    "InvalidRequestException",
    "InvalidValueError",
    "Keyring",
    "KeyringError",
    "NewerFormatError",
    "NotAStoreError",
    "NotControllerException",
    "PasswordPolicy",
    "PatternType",
    "Point",
    "PointInTimeError",
    "QueryError",
    "RequestContext",
    "ResourceNotFoundException",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "SaslAuthenticationException",
    "ScramCredentialInfo",
    "ScramMechanism",
    "SealedSecretError",
    "SecmetaError",
    "SecurityDisabledException",
    "SecurityStore",
    "StoreConfig",
    "StoreError",
    "StoreLockedError",
    "StoreView",
    "UnacceptableCredentialException",
    "UnknownKeyError",
    "UnknownServerErrorException",
    "UnsupportedByAuthenticationException",
    "UnsupportedSaslMechanismException",
    "UnsupportedVersionException",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
]
