"""Admin-API test helpers: secmeta types <-> confluent-kafka's admin types, and results as error codes.

confluent-kafka's enums carry Kafka's codes (its ResourceType.BROKER is Kafka's CLUSTER, 4), so
conversion is by code.  librdkafka stops at ResourceType 5 and AclOperation 12: bindings on
DELEGATION_TOKEN or USER resources, or with CREATE_TOKENS / DESCRIBE_TOKENS, cannot be expressed.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future

from confluent_kafka import KafkaException
from confluent_kafka import admin as ck

from secmeta.core.errors import ErrorCode
from secmeta.core.types import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)

__all__ = ["TIMEOUT", "ck_alteration", "ck_binding", "ck_filter", "code_of", "from_ck", "ours_upsertion", "outcome_of",
           "result_codes"]

TIMEOUT = 15


def ck_binding(b: AclBinding) -> ck.AclBinding:
    return ck.AclBinding(ck.ResourceType(int(b.restype)), b.name, ck.ResourcePatternType(int(b.resource_pattern_type)),
                         b.principal, b.host, ck.AclOperation(int(b.operation)),
                         ck.AclPermissionType(int(b.permission_type)))


def ck_filter(f: AclBindingFilter) -> ck.AclBindingFilter:
    return ck.AclBindingFilter(ck.ResourceType(int(f.pattern.resource_type)), f.pattern.name,
                               ck.ResourcePatternType(int(f.pattern.pattern_type)), f.entry.principal, f.entry.host,
                               ck.AclOperation(int(f.entry.operation)), ck.AclPermissionType(int(f.entry.permission_type)))


def from_ck(b: ck.AclBinding) -> AclBinding:
    return AclBinding.of(ResourceType(b.restype.value), b.name, PatternType(b.resource_pattern_type.value),
                         b.principal, b.host, AclOperation(b.operation.value), AclPermissionType(b.permission_type.value))


def ck_alteration(a: UserScramCredentialUpsertion | UserScramCredentialDeletion):
    """confluent-kafka's alteration for ours (an upsertion must carry a password)."""
    if isinstance(a, UserScramCredentialDeletion):
        return ck.UserScramCredentialDeletion(a.user, ck.ScramMechanism(int(a.mechanism)))
    info = ck.ScramCredentialInfo(ck.ScramMechanism(int(a.mechanism)), a.scram_credential_info.iterations)
    return ck.UserScramCredentialUpsertion(a.user, info, bytes(a.password))


def ours_upsertion(user: str, mechanism: ScramMechanism, iterations: int, password: bytes) -> UserScramCredentialUpsertion:
    return UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password)


def code_of(future: Future) -> ErrorCode:
    """The Kafka error code a future ends with (NONE on success)."""
    try:
        future.result(timeout=TIMEOUT)
    except KafkaException as exc:
        return ErrorCode(exc.args[0].code())
    return ErrorCode.NONE


def outcome_of(future: Future) -> tuple[ErrorCode, str | None]:
    """(code, message) a future ends with ((NONE, None) on success), to compare with an ApiError's."""
    try:
        future.result(timeout=TIMEOUT)
    except KafkaException as exc:
        error = exc.args[0]
        return ErrorCode(error.code()), error.str()
    return ErrorCode.NONE, None


def result_codes(futures: Mapping) -> list[ErrorCode]:
    """The error codes of a dict of futures, in its order."""
    return [code_of(f) for f in futures.values()]
