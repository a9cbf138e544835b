"""Kafka error codes, per-item ApiError values and the exceptions that carry them.

Batch calls return ApiError values per item; request-level failures raise an
ApiException subclass (one per code) whose ``error`` is the ApiError.
Store-level failures that are not Kafka errors (a corrupt log, a locked
directory, a query that cannot be answered) derive from SecmetaError, the one
error root, which lives on the lowest floor (secmeta.events.errors) and is re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from secmeta.events.errors import InvalidValueError as InvalidValueError
from secmeta.events.errors import SecmetaError as SecmetaError


class ErrorCode(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    REQUEST_TIMED_OUT = 7
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    SECURITY_DISABLED = 54
    SASL_AUTHENTICATION_FAILED = 58
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    UNSUPPORTED_ENDPOINT_TYPE = 115


@dataclass(frozen=True, slots=True)
class ApiError:
    """A Kafka error code with a message naming what was wrong."""

    code: ErrorCode = ErrorCode.NONE
    message: str | None = None

    @property
    def is_success(self) -> bool:
        return self.code == ErrorCode.NONE

    def __bool__(self) -> bool:
        """True when this is an error (so ``if err:`` reads naturally)."""
        return self.code != ErrorCode.NONE

    def __str__(self) -> str:
        return self.code.name if not self.message else f"{self.code.name}: {self.message}"


NONE = ApiError()


class ApiException(SecmetaError):
    """A request-level failure carrying a Kafka ApiError."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    _by_code: dict[ErrorCode, type[ApiException]] = {}

    def __init__(self, message: str | None = None, *, error: ApiError | None = None):
        self.error = error if error is not None else ApiError(self.code, message)
        super().__init__(str(self.error))

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        ApiException._by_code[cls.code] = cls

    @staticmethod
    def from_error(error: ApiError) -> ApiException:
        """The exception subclass for ``error.code``, carrying ``error``."""
        cls = ApiException._by_code.get(error.code, ApiException)
        return cls(error=error)


def _exception(name: str, code: ErrorCode) -> type[ApiException]:
    return type(name, (ApiException,), {"code": code, "__doc__": f"Kafka error {code.name} ({int(code)})."})


UnknownServerErrorException = _exception("UnknownServerErrorException", ErrorCode.UNKNOWN_SERVER_ERROR)
ClusterAuthorizationException = _exception("ClusterAuthorizationException", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
UnsupportedSaslMechanismException = _exception("UnsupportedSaslMechanismException", ErrorCode.UNSUPPORTED_SASL_MECHANISM)
IllegalSaslStateException = _exception("IllegalSaslStateException", ErrorCode.ILLEGAL_SASL_STATE)
UnsupportedVersionException = _exception("UnsupportedVersionException", ErrorCode.UNSUPPORTED_VERSION)
NotControllerException = _exception("NotControllerException", ErrorCode.NOT_CONTROLLER)
InvalidRequestException = _exception("InvalidRequestException", ErrorCode.INVALID_REQUEST)
SecurityDisabledException = _exception("SecurityDisabledException", ErrorCode.SECURITY_DISABLED)
SaslAuthenticationException = _exception("SaslAuthenticationException", ErrorCode.SASL_AUTHENTICATION_FAILED)
DelegationTokenDisabledException = _exception("DelegationTokenDisabledException", ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
DelegationTokenNotFoundException = _exception("DelegationTokenNotFoundException", ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
DelegationTokenOwnerMismatchException = _exception("DelegationTokenOwnerMismatchException", ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
UnsupportedByAuthenticationException = _exception("UnsupportedByAuthenticationException", ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
DelegationTokenAuthorizationException = _exception("DelegationTokenAuthorizationException", ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
DelegationTokenExpiredException = _exception("DelegationTokenExpiredException", ErrorCode.DELEGATION_TOKEN_EXPIRED)
InvalidPrincipalTypeException = _exception("InvalidPrincipalTypeException", ErrorCode.INVALID_PRINCIPAL_TYPE)
ResourceNotFoundException = _exception("ResourceNotFoundException", ErrorCode.RESOURCE_NOT_FOUND)
DuplicateResourceException = _exception("DuplicateResourceException", ErrorCode.DUPLICATE_RESOURCE)
UnacceptableCredentialException = _exception("UnacceptableCredentialException", ErrorCode.UNACCEPTABLE_CREDENTIAL)


class StoreError(SecmetaError):
    """A store directory problem: not a store, a newer format, locked by another writer."""


class NotAStoreError(StoreError):
    pass


class NewerFormatError(StoreError):
    pass


class StoreLockedError(StoreError):
    pass


class CorruptLogError(SecmetaError):
    """A batch failed its CRC or chain check somewhere other than a recoverable tail."""

    def __init__(self, message: str, *, segment: str | None = None, offset: int | None = None):
        super().__init__(message)
        self.segment = segment
        self.offset = offset


class QueryError(SecmetaError, ValueError):
    """A history or forensic query that cannot be answered as asked (the message says why)."""


class PointInTimeError(QueryError):
    """A point in time the store cannot show: malformed, before it began, in the future, past the end."""
