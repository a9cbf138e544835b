"""secmeta's public API: the store, its request and result types, errors and enums.

    from secmeta.core import SecurityStore, StoreConfig, RequestContext, AclBinding, ...

Each name is imported on first use, so ``import secmeta`` and the CLI's start (``secmeta.core.cli``
is a subpackage) load none of the store, the codec, the keyring or the settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from secmeta.events.lazy_exports import lazy_exports

if TYPE_CHECKING:  # the same names for type checkers (tests/test_packaging.py checks they are the same)
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
    from secmeta.core.forensics.history import Diff, HistoryEntry
    from secmeta.core.forensics.queries import Grant, Interval
    from secmeta.core.store.facade import SecurityStore
    from secmeta.core.store.view import StoreView
    from secmeta.core.times import Point
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

__getattr__, __dir__, __all__ = lazy_exports(__name__, globals(), {
    "secmeta.core.admin": ("Admin", "AdminReader"),
    "secmeta.core.config": ("PasswordPolicy", "StoreConfig"),
    "secmeta.core.errors": (
        "ApiError", "ApiException", "ClusterAuthorizationException", "CorruptLogError",
        "DelegationTokenAuthorizationException", "DelegationTokenDisabledException",
        "DelegationTokenExpiredException", "DelegationTokenNotFoundException",
        "DelegationTokenOwnerMismatchException", "DuplicateResourceException", "ErrorCode",
        "IllegalSaslStateException", "InvalidPrincipalTypeException", "InvalidRequestException",
        "InvalidValueError", "NewerFormatError", "NotAStoreError", "NotControllerException",
        "PointInTimeError", "QueryError", "ResourceNotFoundException",
        "SaslAuthenticationException", "SecmetaError", "SecurityDisabledException", "StoreError",
        "StoreLockedError", "UnacceptableCredentialException", "UnknownServerErrorException",
        "UnsupportedByAuthenticationException", "UnsupportedSaslMechanismException",
        "UnsupportedVersionException",
    ),
    "secmeta.core.forensics.history": ("HistoryEntry", "Diff"),
    "secmeta.core.forensics.queries": ("Grant", "Interval"),
    "secmeta.core.store.facade": ("SecurityStore",),
    "secmeta.core.store.view": ("StoreView",),
    "secmeta.core.times": ("Point",),
    "secmeta.core.types": (
        "ClientQuotaAlteration", "ClientQuotaFilter", "ClientQuotaFilterComponent",
        "ClientQuotaOp", "DelegationToken", "DeleteAclsResult", "RequestContext",
        "ScramCredentialInfo", "UserScramCredentialDeletion", "UserScramCredentialsDescription",
        "UserScramCredentialUpsertion",
    ),
    "secmeta.core.validation": ("FieldError",),
    "secmeta.events.errors": ("KeyringError", "SealedSecretError", "UnknownKeyError"),
    "secmeta.events.keyring": ("Keyring",),
    "secmeta.events.records": ("ClientQuotaEntity",),
    "secmeta.events.types": (
        "AccessControlEntry", "AccessControlEntryFilter", "AclBinding", "AclBindingFilter",
        "AclOperation", "AclPermissionType", "PatternType", "ResourcePattern",
        "ResourcePatternFilter", "ResourceType", "ScramMechanism",
    ),
})
