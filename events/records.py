"""The logged events as Python values, one frozen dataclass per Avro event schema.

Each event names the entity it changes (``entity_key``): ``acl:<acl_id>``,
``scram:<user>:<SCRAM-SHA-256|SCRAM-SHA-512>``, ``token:<token_id>`` or
``quota:<entity>:<key>`` (a ``ClientQuotaEntity`` in its canonical form) or ``setting:<name>``.
An ``Envelope`` wraps one event with its log position, time and actor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar
from urllib.parse import quote, unquote

from .keyring import SealedSecret
from .types import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    ScramMechanism,
)

__all__ = [
    "EVENT_TYPES",
    "AclCreated",
    "AclRow",
    "acl_row",
    "replay_form",
    "row_binding",
    "AclDeleted",
    "ClientQuotaAltered",
    "ClientQuotaEntity",
    "DelegationTokenExpired",
    "DelegationTokenIssued",
    "DelegationTokenRemoved",
    "DelegationTokenRenewed",
    "Envelope",
    "Event",
    "KeyRotated",
    "LogRecovered",
    "Operator",
    "ScramCredentialDeleted",
    "ScramCredentialUpserted",
    "SecuritySettingAltered",
    "TokenRemovalReason",
    "entity_key",
]


class TokenRemovalReason(Enum):
    """Why a delegation token was removed."""

    EXPIRED_BY_REQUEST = "EXPIRED_BY_REQUEST"
    EXPIRED_BY_SWEEP = "EXPIRED_BY_SWEEP"


# An AclCreated as a row (``AclCreated.ROW`` names its fields): what replay records per created ACL.
AclRow = tuple[str, ResourceType, str, PatternType, str, str, AclOperation, AclPermissionType]


def _acl_key(acl_id: str) -> str:
    return f"acl:{acl_id}"


def _scram_key(user: str, mechanism: ScramMechanism) -> str:
    return f"scram:{user}:{ScramMechanism(mechanism).mechanism_name}"


@dataclass(frozen=True, slots=True)
class ScramCredentialUpserted:
    """A SCRAM credential was created or replaced; salt and keys are sealed in ``secret``."""

    user: str
    mechanism: ScramMechanism
    iterations: int
    secret: SealedSecret

    @property
    def entity_key(self) -> str:
        return _scram_key(self.user, self.mechanism)


@dataclass(frozen=True, slots=True)
class ScramCredentialDeleted:
    """The SCRAM credential of a user for one mechanism was deleted."""

    user: str
    mechanism: ScramMechanism

    @property
    def entity_key(self) -> str:
        return _scram_key(self.user, self.mechanism)


@dataclass(frozen=True, slots=True)
class AclCreated:
    """An ACL was created and given the UUID ``acl_id``."""

    acl_id: str
    binding: AclBinding
    # The event as a row: its Avro fields in this order, as ``row()`` gives them and the codec's replay decoder
    # reads them (``EventCodec.decode_events``), so a replay need not build the binding's objects. A class that declares
    # ROW also declares ``row()`` and ``row_entity_key(row)`` (the Kafka follower checks a row's message key by it).
    ROW: ClassVar[tuple[str, ...]] = ("acl_id", "resource_type", "resource_name", "pattern_type", "principal",
                                      "host", "operation", "permission_type")

    @property
    def entity_key(self) -> str:
        return _acl_key(self.acl_id)

    @staticmethod
    def row_entity_key(row: AclRow) -> str:
        """The ``entity_key`` of the event whose ``row()`` is ``row`` (a reader of rows checks keys without the event)."""
        return _acl_key(row[0])

    def row(self) -> AclRow:
        """``(acl_id, resource_type, resource_name, pattern_type, principal, host, operation, permission_type)``."""
        return acl_row(self.acl_id, self.binding)


def acl_row(acl_id: str, binding: AclBinding) -> AclRow:
    """The row of the ACL ``acl_id`` with ``binding`` (``AclCreated.ROW``)."""
    pattern, entry = binding.pattern, binding.entry
    return (acl_id, pattern.resource_type, pattern.name, pattern.pattern_type, entry.principal, entry.host,
            entry.operation, entry.permission_type)


def replay_form(event: Event) -> Event | tuple:
    """An event as a replay takes it: its row when its class declares one (``AclCreated.ROW``), else itself."""
    return event.row() if hasattr(event.__class__, "ROW") else event  # type: ignore[union-attr]


def row_binding(row: AclRow) -> AclBinding:
    """The binding an ACL's row holds (``acl_row``'s inverse, the id aside)."""
    return AclBinding(ResourcePattern(row[1], row[2], row[3]), AccessControlEntry(row[4], row[5], row[6], row[7]))


@dataclass(frozen=True, slots=True)
class AclDeleted:
    """The ACL ``acl_id`` (whose binding is given) was deleted."""

    acl_id: str
    binding: AclBinding

    @property
    def entity_key(self) -> str:
        return _acl_key(self.acl_id)


@dataclass(frozen=True, slots=True)
class DelegationTokenIssued:
    """A delegation token was issued; its HMAC is never stored."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int

    @property
    def entity_key(self) -> str:
        return f"token:{self.token_id}"


@dataclass(frozen=True, slots=True)
class DelegationTokenRenewed:
    """A token was renewed: the period as requested (-1 = default) and the new expiry."""

    token_id: str
    renew_period_ms: int
    expiry_timestamp_ms: int

    @property
    def entity_key(self) -> str:
        return f"token:{self.token_id}"


@dataclass(frozen=True, slots=True)
class DelegationTokenExpired:
    """An expire request changed a token's expiry: the period as requested and the new expiry."""

    token_id: str
    expiry_period_ms: int
    expiry_timestamp_ms: int

    @property
    def entity_key(self) -> str:
        return f"token:{self.token_id}"


@dataclass(frozen=True, slots=True)
class DelegationTokenRemoved:
    """A token was removed, by an expire request or by the expiry sweep."""

    token_id: str
    reason: TokenRemovalReason

    @property
    def entity_key(self) -> str:
        return f"token:{self.token_id}"


QUOTA_ENTITY_TYPES = ("user", "client-id", "ip")
_DEFAULT = "<default>"


@dataclass(frozen=True, slots=True)
class ClientQuotaEntity:
    """What a client quota applies to (Kafka's ClientQuotaEntity): entity type -> name, None = the default.

    ``parts`` is in canonical order (user, client-id, ip, then any other type by name), so two
    entities with the same parts are equal whatever order they were given in. ``str()`` is the
    canonical form stored in events and entity keys: ``user=alice,client-id=app-1``, a default
    name written ``<default>`` and every name percent-encoded (``<`` included), so the form is
    unambiguous (a client-id literally named ``<default>`` is ``client-id=%3Cdefault%3E``).
    """

    parts: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, parts: Mapping[str, str | None] | ClientQuotaEntity) -> ClientQuotaEntity:
        """The entity of a mapping type -> name (None = default), in canonical order."""
        if isinstance(parts, ClientQuotaEntity):
            return parts
        rank = {t: i for i, t in enumerate(QUOTA_ENTITY_TYPES)}
        return cls(tuple(sorted(parts.items(), key=lambda p: (rank.get(p[0], len(rank)), str(p[0])))))

    @classmethod
    def parse(cls, text: str) -> ClientQuotaEntity:
        """The entity of a canonical form ``str()`` wrote."""
        parts = (part.split("=", 1) for part in text.split(",")) if text else ()
        return cls(tuple((unquote(t), None if n == _DEFAULT else unquote(n)) for t, n in parts))

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.parts)

    @property
    def user(self) -> str | None:
        """The user the entity names (None when it has no user part or is the default user)."""
        return dict(self.parts).get("user")

    def __str__(self) -> str:
        return ",".join(f"{quote(t, safe='')}={_DEFAULT if n is None else quote(n, safe='')}"
                        for t, n in self.parts)


@dataclass(frozen=True, slots=True)
class ClientQuotaAltered:
    """A client quota (KIP-546) of one entity and key was set to ``value``, or removed (None)."""

    entity: str  # ClientQuotaEntity in its canonical form
    key: str
    value: float | None

    @property
    def entity_key(self) -> str:
        return f"quota:{self.entity}:{self.key}"


@dataclass(frozen=True, slots=True)
class SecuritySettingAltered:
    """A setting that decides access (``super.users``, ...) was set to ``value``, or back to its default (None).

    Kafka's ConfigRecord for the cluster's BROKER resource; ``setting_value`` is the setting's text form
    (``User:a;User:b``, ``true``, a number of milliseconds, a fingerprint), never a secret.
    """

    setting_name: str
    setting_value: str | None

    @property
    def entity_key(self) -> str:
        return f"setting:{self.setting_name}"


@dataclass(frozen=True, slots=True)
class LogRecovered:
    """``secmeta log recover`` cut the log at ``from_offset``: who, why, what was cut and its digest."""

    recovery_id: str
    operator: str
    reason: str
    from_offset: int
    to_offset: int
    events: int
    link: str  # hex: the chain link of the batch ending at from_offset
    digest: str  # hex SHA-256 of the quarantined log bytes
    quarantine: str = ""
    cut_link: str = ""  # hex: the chain link of the last batch cut ("" when no intact batch was cut)

    @property
    def entity_key(self) -> str:
        return f"recovery:{self.recovery_id}"


@dataclass(frozen=True, slots=True)
class KeyRotated:
    """The store's writes moved to a newer key of the keyring (``secmeta keys generate`` added it):
    the new key's id and the id of the key the log was linked with before. Never key material."""

    key_id: str
    previous_key_id: str

    @property
    def entity_key(self) -> str:
        return f"key:{self.key_id}"


Event = (
    ScramCredentialUpserted
    | ScramCredentialDeleted
    | AclCreated
    | AclDeleted
    | DelegationTokenIssued
    | DelegationTokenRenewed
    | DelegationTokenExpired
    | DelegationTokenRemoved
    | ClientQuotaAltered
    | SecuritySettingAltered
    | LogRecovered
    | KeyRotated
)

EVENT_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        ScramCredentialUpserted,
        ScramCredentialDeleted,
        AclCreated,
        AclDeleted,
        DelegationTokenIssued,
        DelegationTokenRenewed,
        DelegationTokenExpired,
        DelegationTokenRemoved,
        ClientQuotaAltered,
        SecuritySettingAltered,
        LogRecovered,
        KeyRotated,
    )
}


def entity_key(event: Event) -> str:
    """The key of the entity an event changes, e.g. ``acl:<uuid>``."""
    return event.entity_key


@dataclass(frozen=True, slots=True)
class Operator:
    """The operating-system process that wrote a change: its OS user, host name, pid and program.

    Unlike the actor principal (which a local caller asserts), these are what the writing process
    observed of itself. ``Operator.UNKNOWN`` is what logs written before operators were recorded read as.
    """

    user: str
    host: str
    pid: int
    program: str

    UNKNOWN: ClassVar[Operator]

    def __str__(self) -> str:
        if self == Operator.UNKNOWN:
            return "unknown"
        return f"{self.user}@{self.host} pid {self.pid} ({self.program})"


Operator.UNKNOWN = Operator("", "", 0, "")


@dataclass(frozen=True, slots=True)
class Envelope:
    """One logged event with its offset, commit time, actor, operator and request id.

    Writers build envelopes with ``offset=-1`` and no fingerprint. Neither is
    stored: when a batch is decoded, ``offset`` is the batch's base offset plus
    the event's position in it and ``fingerprint`` the CRC-64-AVRO of the event's
    current schema (see EnvelopeGroup.avsc). ``actor_asserted`` says whether the
    actor principal and host are the caller's claim (local writes, ``--as``) or
    were authenticated by ``secmeta serve``; ``operator_*`` name the writing process.
    """

    offset: int
    timestamp_ms: int
    actor_principal: str
    actor_host: str
    request_id: str
    event: Event
    fingerprint: bytes = b""
    actor_asserted: bool = True
    operator_user: str = ""
    operator_host: str = ""
    operator_pid: int = 0
    operator_program: str = ""

    @property
    def operator(self) -> Operator:
        """The process that wrote the event (``Operator.UNKNOWN`` in logs from before operators were recorded)."""
        return Operator(self.operator_user, self.operator_host, self.operator_pid, self.operator_program)

    @property
    def event_type(self) -> str:
        """The event's type name, e.g. ``AclCreated``."""
        return type(self.event).__name__

    @property
    def entity_key(self) -> str:
        """The key of the entity the event changes."""
        return self.event.entity_key
