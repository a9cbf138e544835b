"""Enumerations and value types that are part of the stored format.

Enum values are Kafka's wire codes (int8), so a value read off the wire or
out of the log means the same thing in every component.  Unknown codes read
as UNKNOWN, as Kafka's ``fromCode`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import TypeVar

from secmeta.events.errors import InvalidValueError

__all__ = [
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "CLUSTER_NAME",
    "INT64_MAX",
    "INT64_MIN",
    "PatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "ScramMechanism",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "from_output_name",
    "is_int64",
    "output_name",
]

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # Kafka's long, Avro's long: every offset, timestamp and period


def is_int64(value: object) -> bool:
    """Whether ``value`` is an int (not a bool) that fits a signed 64-bit long."""
    return isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX


class _KafkaEnum(IntEnum):
    """An int8 enumeration whose unknown codes read as UNKNOWN (code 0)."""

    @classmethod
    def _missing_(cls, value):  # type: ignore[override]
        if isinstance(value, int):
            return cls(0)
        return None

    @classmethod
    def parse(cls, text: str | int) -> _KafkaEnum:
        """Parse a name or a code; raise InvalidValueError (a ValueError) naming the bad value.

        A name matches in any case with or without '_' / '-' between its words, so Kafka's tools'
        spelling (``IdempotentWrite``, SecurityUtils.operation / toPascalCase) and the enum's
        (``IDEMPOTENT_WRITE``) both parse.
        """
        if isinstance(text, int) and not isinstance(text, bool):
            return cls(text)
        by_name = _BY_SQUASHED_NAME.get(cls)
        if by_name is None:
            by_name = _BY_SQUASHED_NAME[cls] = {_squash(m.name): m for m in cls}
        member = by_name.get(_squash(str(text)))
        if member is not None:
            return member
        names = ", ".join(m.name for m in cls)
        raise InvalidValueError(f"unknown {cls.__name__} {text!r} (one of: {names})")


_BY_SQUASHED_NAME: dict[type, dict[str, _KafkaEnum]] = {}  # per enum class, built on first parse


def _squash(name: str) -> str:
    """A name without case or word separators: 'IdempotentWrite', 'idempotent-write' -> 'IDEMPOTENTWRITE'."""
    return name.strip().upper().replace("_", "").replace("-", "")


class ScramMechanism(_KafkaEnum):
    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL mechanism name, e.g. 'SCRAM-SHA-256'."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return {1: "sha256", 2: "sha512"}.get(int(self), "")

    @classmethod
    def parse(cls, text: str | int) -> ScramMechanism:
        return super().parse(text)  # type: ignore[return-value]


E = TypeVar("E", bound=Enum)
_BY_OUTPUT_NAME: dict[type, dict[str, Enum]] = {}


def output_name(value: Enum) -> str:
    """The one name every output gives an enum value (JSON, log dump, history and its index, audit lines, the
    Spark and Delta tables): Kafka's, i.e. a SCRAM mechanism as SASL names it (``SCRAM-SHA-256``) and any
    other value by its name (``TOPIC``, ``READ``, ``EXPIRED``)."""
    return value.mechanism_name if isinstance(value, ScramMechanism) else value.name


def from_output_name(cls: type[E], text: str) -> E:
    """The member of ``cls`` that ``output_name`` names ``text`` (exactly); KeyError naming it otherwise."""
    names = _BY_OUTPUT_NAME.get(cls)
    if names is None:
        names = _BY_OUTPUT_NAME[cls] = {output_name(m): m for m in cls}
    try:
        return names[text]  # type: ignore[return-value]
    except KeyError:
        raise KeyError(f"{text!r} names no {cls.__name__} (one of: {', '.join(names)})") from None



class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """A resource type, a name and how the name matches (LITERAL or PREFIXED)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (principal, host) may or may not (permission) do what (operation)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    """An ACL: an entry bound to a resource pattern (the seven fields Kafka compares)."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    # Flat accessors, named as in confluent_kafka.admin.AclBinding.
    @property
    def restype(self) -> ResourceType:
        return self.pattern.resource_type

    @property
    def name(self) -> str:
        return self.pattern.name

    @property
    def resource_pattern_type(self) -> PatternType:
        return self.pattern.pattern_type

    @property
    def principal(self) -> str:
        return self.entry.principal

    @property
    def host(self) -> str:
        return self.entry.host

    @property
    def operation(self) -> AclOperation:
        return self.entry.operation

    @property
    def permission_type(self) -> AclPermissionType:
        return self.entry.permission_type

    @classmethod
    def of(
        cls,
        resource_type: ResourceType,
        name: str,
        pattern_type: PatternType,
        principal: str,
        host: str,
        operation: AclOperation,
        permission_type: AclPermissionType,
    ) -> AclBinding:
        """Build a binding from Kafka's seven fields in confluent_kafka's order."""
        return cls(
            ResourcePattern(resource_type, name, pattern_type),
            AccessControlEntry(principal, host, operation, permission_type),
        )


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Matches resource patterns; a None name matches any name."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Matches entries; None principal or host matches any."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A filter over the seven ACL fields, as in Kafka's describe and delete requests."""

    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    @classmethod
    def of(
        cls,
        resource_type: ResourceType = ResourceType.ANY,
        name: str | None = None,
        pattern_type: PatternType = PatternType.ANY,
        principal: str | None = None,
        host: str | None = None,
        operation: AclOperation = AclOperation.ANY,
        permission_type: AclPermissionType = AclPermissionType.ANY,
    ) -> AclBindingFilter:
        return cls(
            ResourcePatternFilter(resource_type, name, pattern_type),
            AccessControlEntryFilter(principal, host, operation, permission_type),
        )

    @classmethod
    def any(cls) -> AclBindingFilter:
        return cls()
