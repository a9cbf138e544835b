"""Alert rules of the audit jobs (Kafka and Spark): the defaults, their parameters, and loading a rules file.

Each rule looks at one logged event (an ``Envelope``) and returns a message when
it should raise an alert; ``AuditRules.evaluate`` turns those into ``Alert``
values. Every rule but ``mass_deletion`` is a pure function of the envelope.

The default rules (all enabled; each can be disabled and parameterised):

``cluster_admin_grant`` (high)
    An ACL is created that ALLOWs ALL or ALTER (``operations``) on the CLUSTER resource.
``wildcard_principal_grant`` (high)
    An ACL is created that ALLOWs any operation to the wildcard principal
    ``User:*``: every client, authenticated or not, gets it.
``wildcard_grant`` (high)
    An ACL is created that ALLOWs WRITE or ALL (``operations``) on a wildcard
    resource (LITERAL ``*``), or on a PREFIXED resource (unless
    ``include_prefixed = false``).
``super_user_change`` (critical)
    Control over the CLUSTER resource is the power within ACLs closest to a
    super user's (ALTER on it lets a principal grant itself anything). This
    rule watches *who* changes that: any ACL created on or deleted from the
    CLUSTER resource, whatever its operation and permission, by an actor not
    in ``trusted_actors`` (default ``["User:admin"]``). *What* was granted is
    ``cluster_admin_grant``'s concern, so an untrusted actor granting ALL on
    CLUSTER raises both. The super users themselves are a logged setting in
    secmeta (``super.users``, not a static config as in Kafka): a change of
    them is ``access_setting_change``'s.
``access_setting_change`` (critical)
    A logged setting that decides access is set or deleted
    (``SecuritySettingAltered``): ``super.users``,
    ``allow.everyone.if.no.acl.found`` and every other setting
    ``secmeta.core.settings.decides_access`` names (those whose change needs
    ALTER on the cluster), by any actor not in ``trusted_actors`` (default
    none: every change, including the initial settings ``secmeta init``
    logs). The alert names the setting, its new value (never the token
    secret's fingerprint) and the actor.
``protected_credential_change`` (high)
    A SCRAM credential of a user in ``users`` (default ``["admin"]``; a
    ``User:`` prefix is ignored) is created, replaced or deleted.
``token_for_other_owner`` (medium)
    A delegation token is issued whose requester is not its owner (KIP-373).
``outside_allowed_hours`` (medium)
    A change made by a request (every event except the expiry sweep's token
    removals) whose commit time falls outside ``allowed_hours``, a UTC range
    ``"HH-HH"`` (start inclusive, end exclusive, may wrap midnight, e.g.
    ``"08-18"`` or ``"22-06"``). Inactive until ``allowed_hours`` is set.
``mass_deletion`` (high)
    More than ``threshold`` (default 50) ACLs deleted by one actor within
    ``window_seconds`` (default 60) of event time. The window ending at a
    deletion holds the actor's deletions in ``(t - window, t]``; the alert
    fires on the deletion that takes that count from ``threshold`` to
    ``threshold + 1``, so a burst raises one alert, and a new one only after
    the count fell back to the threshold. Its state is the deletions within
    the window, which ``AuditRules.restore`` rebuilds from audit records.

A rules file is TOML (``.toml``) or JSON (``.json``): one table per rule, named
as above, holding ``enabled``, ``severity`` (low, medium, high, critical) and
the rule's parameters. Rules and keys not given keep their defaults; an unknown
rule or key, or a value of the wrong kind, raises ``RulesFileError`` naming the
key and the file. Example::

    [outside_allowed_hours]
    allowed_hours = "08-18"

    [mass_deletion]
    threshold = 20
    window_seconds = 30

    [wildcard_grant]
    include_prefixed = false

Alert messages name principals, users, resources and token ids, never secrets.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tomllib
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from secmeta.core import settings as logged_settings
from secmeta.core import validation
from secmeta.events.errors import InvalidValueError
from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    Envelope,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
    SecuritySettingAltered,
    TokenRemovalReason,
)
from secmeta.events.types import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = [
    "SEVERITIES",
    "AccessSettingChange",
    "Alert",
    "AuditRules",
    "ClusterAdminGrant",
    "MassDeletion",
    "OutsideAllowedHours",
    "ProtectedCredentialChange",
    "RulesFileError",
    "SuperUserChange",
    "TokenForOtherOwner",
    "WildcardGrant",
    "WildcardPrincipalGrant",
    "load_rules",
    "parse_rules",
]

SEVERITIES = ("low", "medium", "high", "critical")


class RulesFileError(InvalidValueError):
    """A rules file or setting that cannot be used; the message names the key and the file."""


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert: which rule fired on which logged event, and why."""

    rule: str
    severity: str
    offset: int
    timestamp_ms: int
    actor_principal: str
    actor_host: str
    entity_key: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        """The alert as a JSON-serialisable dict (the alerts file line and topic value)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Alert:
        """The alert ``to_dict`` produced."""
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls)})

    @property
    def identity(self) -> tuple[int, str]:
        """What makes an alert unique: the event's log offset and the rule."""
        return (self.offset, self.rule)


# -- the rules -----------------------------------------------------------------------


def _allow(binding: AclBinding, operations: frozenset[AclOperation]) -> bool:
    return binding.permission_type == AclPermissionType.ALLOW and binding.operation in operations


def _acl_text(binding: AclBinding) -> str:
    return (
        f"{binding.permission_type.name} {binding.principal} {binding.operation.name} on "
        f"{binding.restype.name} {binding.resource_pattern_type.name} {binding.name!r} "
        f"from host {binding.host}"
    )


@dataclass(frozen=True)
class ClusterAdminGrant:
    """An ACL created that ALLOWs ALL or ALTER on the CLUSTER resource."""

    name: ClassVar[str] = "cluster_admin_grant"
    severity: str = "high"
    operations: frozenset[AclOperation] = frozenset({AclOperation.ALL, AclOperation.ALTER})

    def check(self, envelope: Envelope) -> str | None:
        event = envelope.event
        if not isinstance(event, AclCreated):
            return None
        binding = event.binding
        if binding.restype != ResourceType.CLUSTER or not _allow(binding, self.operations):
            return None
        return f"cluster-level grant: {_acl_text(binding)}"


@dataclass(frozen=True)
class WildcardPrincipalGrant:
    """An ACL created that ALLOWs any operation to ``User:*`` (every client)."""

    name: ClassVar[str] = "wildcard_principal_grant"
    severity: str = "high"

    def check(self, envelope: Envelope) -> str | None:
        event = envelope.event
        if not isinstance(event, AclCreated):
            return None
        binding = event.binding
        if binding.principal != WILDCARD_PRINCIPAL or binding.permission_type != AclPermissionType.ALLOW:
            return None
        return f"wildcard principal granted {binding.operation.name}: {_acl_text(binding)}"


@dataclass(frozen=True)
class WildcardGrant:
    """An ACL created that ALLOWs WRITE or ALL on a wildcard or prefixed resource."""

    name: ClassVar[str] = "wildcard_grant"
    severity: str = "high"
    operations: frozenset[AclOperation] = frozenset({AclOperation.WRITE, AclOperation.ALL})
    include_prefixed: bool = True

    def check(self, envelope: Envelope) -> str | None:
        event = envelope.event
        if not isinstance(event, AclCreated) or not _allow(event.binding, self.operations):
            return None
        binding = event.binding
        reasons = []
        pattern = binding.resource_pattern_type
        if pattern == PatternType.LITERAL and binding.name == WILDCARD:
            reasons.append("wildcard resource")
        if pattern == PatternType.PREFIXED and self.include_prefixed:
            reasons.append("prefixed resource")
        if not reasons:
            return None
        return f"{' and '.join(reasons)} granted {binding.operation.name}: {_acl_text(binding)}"


@dataclass(frozen=True)
class SuperUserChange:
    """Any ACL change on the CLUSTER resource by an actor not in ``trusted_actors``."""

    name: ClassVar[str] = "super_user_change"
    severity: str = "critical"
    trusted_actors: frozenset[str] = frozenset({"User:admin"})

    def check(self, envelope: Envelope) -> str | None:
        event = envelope.event
        if not isinstance(event, AclCreated | AclDeleted):
            return None
        if event.binding.restype != ResourceType.CLUSTER:
            return None
        if envelope.actor_principal in self.trusted_actors:
            return None
        verb = "created" if isinstance(event, AclCreated) else "deleted"
        return (
            f"cluster ACL {verb} by untrusted actor {envelope.actor_principal}: "
            f"{_acl_text(event.binding)}"
        )


@dataclass(frozen=True)
class AccessSettingChange:
    """A logged setting that decides access (``logged_settings.decides_access``) set or deleted by an actor not in
    ``trusted_actors``."""

    name: ClassVar[str] = "access_setting_change"
    severity: str = "critical"
    trusted_actors: frozenset[str] = frozenset()

    def check(self, envelope: Envelope) -> str | None:
        event = envelope.event
        if not isinstance(event, SecuritySettingAltered) or not logged_settings.decides_access(event.setting_name):
            return None
        if envelope.actor_principal in self.trusted_actors:
            return None
        if event.setting_value is None:
            change = "deleted (back to its default)"
        elif event.setting_name == logged_settings.FINGERPRINT:
            change = "set to a token secret's fingerprint (value not shown)"
        else:
            change = f"set to {event.setting_value!r}"
        return f"setting {event.setting_name}, which decides access, {change} by {envelope.actor_principal}"


@dataclass(frozen=True)
class ProtectedCredentialChange:
    """A SCRAM credential of a protected user created, replaced or deleted."""

    name: ClassVar[str] = "protected_credential_change"
    severity: str = "high"
    users: frozenset[str] = frozenset({"admin"})

    def check(self, envelope: Envelope) -> str | None:
        event = envelope.event
        if not isinstance(event, ScramCredentialUpserted | ScramCredentialDeleted):
            return None
        if event.user not in self.users:
            return None
        verb = "upserted" if isinstance(event, ScramCredentialUpserted) else "deleted"
        return (
            f"{event.mechanism.mechanism_name} credential of protected user {event.user!r} "
            f"{verb} by {envelope.actor_principal}"
        )


@dataclass(frozen=True)
class TokenForOtherOwner:
    """A delegation token issued for an owner other than its requester (KIP-373)."""

    name: ClassVar[str] = "token_for_other_owner"
    severity: str = "medium"

    def check(self, envelope: Envelope) -> str | None:
        event = envelope.event
        if not isinstance(event, DelegationTokenIssued) or event.requester == event.owner:
            return None
        return (
            f"delegation token {event.token_id} issued for owner {event.owner} "
            f"at the request of {event.requester}"
        )


@dataclass(frozen=True)
class OutsideAllowedHours:
    """A change made by a request outside the allowed UTC hours ("HH-HH"); inactive if unset."""

    name: ClassVar[str] = "outside_allowed_hours"
    severity: str = "medium"
    allowed_hours: tuple[int, int] | None = None

    def check(self, envelope: Envelope) -> str | None:
        if self.allowed_hours is None:
            return None
        event = envelope.event
        if isinstance(event, DelegationTokenRemoved) and (
            event.reason == TokenRemovalReason.EXPIRED_BY_SWEEP
        ):
            return None
        start, end = self.allowed_hours
        minute_of_day = (envelope.timestamp_ms // 60_000) % (24 * 60)
        hour = minute_of_day // 60
        inside = start <= hour < end if start < end else (hour >= start or hour < end)
        if inside:
            return None
        return (
            f"{envelope.event_type} on {envelope.entity_key} by {envelope.actor_principal} "
            f"at {hour:02d}:{minute_of_day % 60:02d} UTC, outside allowed hours "
            f"{start:02d}-{end:02d}"
        )


@dataclass
class MassDeletion:
    """More than ``threshold`` ACL deletions by one actor within ``window_seconds`` of event time."""

    name: ClassVar[str] = "mass_deletion"
    severity: str = "high"
    threshold: int = 50
    window_seconds: float = 60
    _windows: dict[str, deque[int]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def window_ms(self) -> int:
        return int(self.window_seconds * 1000)

    def check(self, envelope: Envelope) -> str | None:
        if not isinstance(envelope.event, AclDeleted):
            return None
        count = self.observe(envelope.actor_principal, envelope.timestamp_ms)
        if not count:
            return None
        return (
            f"{envelope.actor_principal} deleted {count} ACLs within {self.window_seconds:g} s "
            f"(threshold {self.threshold})"
        )

    def observe(self, actor: str, timestamp_ms: int) -> int:
        """Count one deletion; the actor's deletions in the window if it crossed, else 0."""
        window = self._windows.setdefault(actor, deque())
        cutoff = timestamp_ms - self.window_ms
        while window and window[0] <= cutoff:
            window.popleft()
        before = len(window)
        window.append(timestamp_ms)
        return before + 1 if before == self.threshold else 0

    def restore_record(self, record: Mapping[str, Any]) -> None:
        """Replay one redacted audit record into the window state (no alert)."""
        if record.get("event_type") == AclDeleted.__name__:
            self.observe(record["actor_principal"], record["timestamp_ms"])

    def fresh(self) -> MassDeletion:
        """The same rule with an empty window."""
        return dataclasses.replace(self, _windows={})

    def state(self) -> dict[str, list[int]]:
        """The window state as JSON-ready values: each actor's deletion times, as held."""
        return {actor: list(window) for actor, window in self._windows.items() if window}

    def load_state(self, state: Mapping[str, Sequence[int]]) -> None:
        """Replace the window state with one ``state`` returned (exactly, unlike ``restore``)."""
        self._windows = {actor: deque(int(t) for t in times) for actor, times in state.items()}


RULE_TYPES: tuple[type, ...] = (
    ClusterAdminGrant,
    WildcardPrincipalGrant,
    WildcardGrant,
    SuperUserChange,
    AccessSettingChange,
    ProtectedCredentialChange,
    TokenForOtherOwner,
    OutsideAllowedHours,
    MassDeletion,
)


# -- the rule set ------------------------------------------------------------------


class AuditRules:
    """The enabled rules, in order; ``evaluate`` one envelope at a time, in log order."""

    def __init__(self, rules: Sequence[Any]) -> None:
        self.rules = tuple(rules)

    @classmethod
    def defaults(cls) -> AuditRules:
        """Every rule enabled with its default parameters."""
        return cls([rule_type() for rule_type in RULE_TYPES])

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(rule.name for rule in self.rules)

    @property
    def horizon_ms(self) -> int:
        """How much event time before the last event ``restore`` needs to see."""
        return max((getattr(r, "window_ms", 0) for r in self.rules), default=0)

    def evaluate(self, envelope: Envelope) -> list[Alert]:
        """The alerts the envelope raises (updating the state of stateful rules)."""
        alerts = []
        for rule in self.rules:
            message = rule.check(envelope)
            if message is not None:
                alerts.append(
                    Alert(
                        rule=rule.name,
                        severity=rule.severity,
                        offset=envelope.offset,
                        timestamp_ms=envelope.timestamp_ms,
                        actor_principal=envelope.actor_principal,
                        actor_host=envelope.actor_host,
                        entity_key=envelope.entity_key,
                        message=message,
                    )
                )
        return alerts

    def restore(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Rebuild the state of stateful rules from redacted audit records, oldest first."""
        stateful = [r for r in self.rules if hasattr(r, "restore_record")]
        for record in records:
            for rule in stateful:
                rule.restore_record(record)

    def fresh(self) -> AuditRules:
        """The same rules with empty state."""
        return AuditRules([r.fresh() if hasattr(r, "fresh") else r for r in self.rules])


# -- parsing a rules file -------------------------------------------------------------


def _parse_operations(value: Any, where: str) -> frozenset[AclOperation]:
    names = _string_list(value, where)
    try:
        return frozenset(validation.enum_value(AclOperation, n, "operation", concrete=True) for n in names)
    except ValueError as exc:
        raise RulesFileError(f"{where}: {exc}") from None


def _string_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RulesFileError(f"{where}: expected a list of strings, got {value!r}")
    return value


def _parse_principals(value: Any, where: str) -> frozenset[str]:
    """Type:Name principals: a bare name would never equal an actor, so the rule would never apply."""
    try:
        return frozenset(validation.principal(p) for p in _string_list(value, where))
    except ValueError as exc:
        raise RulesFileError(f"{where}: {exc}") from None


def _parse_users(value: Any, where: str) -> frozenset[str]:
    return frozenset(u.removeprefix("User:") for u in _string_list(value, where))


def _parse_bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise RulesFileError(f"{where}: expected true or false, got {value!r}")
    return value


def _parse_threshold(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RulesFileError(f"{where}: expected a whole number >= 0, got {value!r}")
    return value


def _parse_seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise RulesFileError(f"{where}: expected a number of seconds > 0, got {value!r}")
    return value


def _parse_hours(value: Any, where: str) -> tuple[int, int]:
    bad = RulesFileError(
        f'{where}: expected a UTC hour range "HH-HH" (start 00-23, end 01-24, '
        f"start != end), got {value!r}"
    )
    if not isinstance(value, str):
        raise bad
    start, sep, end = value.strip().partition("-")
    if not sep or not start.strip().isdigit() or not end.strip().isdigit():
        raise bad
    first, last = int(start), int(end)
    if not (0 <= first <= 23 and 1 <= last <= 24 and first != last):
        raise bad
    return (first, last)


def _parse_severity(value: Any, where: str) -> str:
    if value not in SEVERITIES:
        raise RulesFileError(f"{where}: expected one of {', '.join(SEVERITIES)}, got {value!r}")
    return value


#: How each rule parameter is read from a rules file.
_PARAMETERS: dict[str, Callable[[Any, str], Any]] = {
    "severity": _parse_severity,
    "operations": _parse_operations,
    "include_prefixed": _parse_bool,
    "trusted_actors": _parse_principals,
    "users": _parse_users,
    "allowed_hours": _parse_hours,
    "threshold": _parse_threshold,
    "window_seconds": _parse_seconds,
}


def _rule_keys(rule_type: type) -> list[str]:
    return ["enabled"] + [f.name for f in dataclasses.fields(rule_type) if f.name in _PARAMETERS]


def parse_rules(settings: Mapping[str, Any], source: str = "<rules>") -> AuditRules:
    """The rule set a parsed rules file describes; ``source`` names it in errors."""
    by_name = {t.name: t for t in RULE_TYPES}
    if not isinstance(settings, Mapping):
        raise RulesFileError(f"{source}: expected a table of rules, got {type(settings).__name__}")
    for name in settings:
        if name not in by_name:
            raise RulesFileError(
                f"{source}: unknown rule {name!r} (known rules: {', '.join(by_name)})"
            )
    rules = []
    for name, rule_type in by_name.items():
        section = settings.get(name, {})
        if not isinstance(section, Mapping):
            raise RulesFileError(f"{source}: [{name}] must be a table, got {section!r}")
        known = _rule_keys(rule_type)
        for key in section:
            if key not in known:
                raise RulesFileError(
                    f"{source}: unknown key {key!r} in [{name}] (known keys: {', '.join(known)})"
                )
        if not _parse_bool(section.get("enabled", True), f"{source}: [{name}] enabled"):
            continue
        values = {
            key: _PARAMETERS[key](value, f"{source}: [{name}] {key}")
            for key, value in section.items()
            if key != "enabled"
        }
        rules.append(rule_type(**values))
    return AuditRules(rules)


def load_rules(path: str | os.PathLike | None) -> AuditRules:
    """The rule set in a TOML or JSON rules file (by its suffix); the defaults for None."""
    if path is None:
        return AuditRules.defaults()
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise RulesFileError(f"rules file {path}: expected a .toml or .json file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RulesFileError(f"rules file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RulesFileError(f"rules file {path} cannot be read: {exc}") from None
    try:
        settings = tomllib.loads(text) if suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise RulesFileError(
            f"rules file {path} is not valid {suffix[1:].upper()}: {exc}"
        ) from None
    return parse_rules(settings, str(path))
