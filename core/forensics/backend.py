"""The interface between the forensic queries and what answers them: the log scan or the history index.

``history``, ``diff``, ``who_could_at`` and ``access_timeline`` ask a ``HistoryBackend``
typed questions and get typed records back; no SQL and no positional rows cross it.
Two backends implement it and a contract suite (tests/core/forensics/history_contract.py)
requires equal answers from both: ``secmeta.core.forensics.scan.LogScan``, the reference,
reads the log (and time travel's images); ``secmeta.core.forensics.history_index.HistoryIndex``
reads its SQLite rows, and all SQL lives there.

The records here are what the queries return to callers (``HistoryEntry``, ``Change``,
``Diff``); each attributed one extends ``Attribution``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from secmeta.core.errors import QueryError
from secmeta.core.forensics.attribution import Attribution, attributed
from secmeta.events.entities import (
    ACLS,
    CREDENTIALS,
    KINDS,
    TOKENS,
    EntityKind,
    kind_of,
)
from secmeta.events.records import Envelope
from secmeta.events.redact import redacted
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    ScramMechanism,
)
from secmeta.projections.acl_decision import concerns
from secmeta.projections.acl_match import filter_matches, pattern_filter_matches
from secmeta.projections.entity_events import opening_events
from secmeta.projections.image import SecurityImage
from secmeta.projections.tokens import TOKEN_FIELDS, TokenInfo

__all__ = ["OTHER_KINDS", "REOPENABLE", "Change", "Credential", "Diff", "EntityChange", "HistoryBackend",
           "HistoryEntry", "HistoryQuery", "ResourceMatch", "TokenExpiryChange", "about_principal", "attributes",
           "binding_dict", "entity_changes", "expiry_changes", "open_keys", "token_parties"]


@dataclass(frozen=True, slots=True)
class HistoryEntry(Attribution):
    """One logged change, attributed and redacted (no secret material).

    ``action``: what it did to its entity (``EntityKind.action``: "created", "rotated" for a
    credential set again, "updated", "deleted"...), from whether the entity was open before it.
    """

    event_type: str
    entity_key: str
    payload: dict[str, Any]
    action: str = ""

    @classmethod
    def of(cls, envelope: Envelope, was_open: bool = False) -> HistoryEntry:
        event = envelope.event
        kind = kind_of(event)
        return cls(*attributed(envelope), envelope.event_type, envelope.entity_key, redacted(envelope)["payload"],
                   kind.action(kind.role(event), was_open))

    def to_dict(self) -> dict[str, Any]:
        return {**Attribution.to_dict(self), "event_type": self.event_type, "entity_key": self.entity_key,
                "action": self.action, "payload": self.payload}


def binding_dict(binding: AclBinding) -> dict[str, str]:
    """An ACL binding's seven fields, enums by name (as history's payloads show them)."""
    return {"resource_type": binding.restype.name, "resource_name": binding.name,
            "pattern_type": binding.resource_pattern_type.name, "principal": binding.principal, "host": binding.host,
            "operation": binding.operation.name, "permission_type": binding.permission_type.name}


@dataclass(frozen=True, slots=True)
class Change(Attribution):
    """The logged ACL event that opened or closed access: where, when, who, and the ACL it touched."""

    event_type: str
    acl_id: str
    binding: AclBinding

    @classmethod
    def of(cls, envelope: Envelope) -> Change:
        return cls(*attributed(envelope), envelope.event_type, envelope.event.acl_id, envelope.event.binding)

    def to_dict(self) -> dict:
        return {**Attribution.to_dict(self), "event_type": self.event_type, "acl_id": self.acl_id,
                **binding_dict(self.binding)}


@dataclass(frozen=True, slots=True)
class TokenExpiryChange:
    """A token's expiry moved by renew (or expire) requests between two points."""

    token_id: str
    owner: str
    expiry_before_ms: int
    expiry_after_ms: int
    last_offset: int


def expiry_changes(found: dict[str, list]) -> tuple[TokenExpiryChange, ...]:
    """``TokenExpiryChange`` values by token id from ``{token_id: [owner, before, after, last offset]}``."""
    return tuple(TokenExpiryChange(t, *found[t]) for t in sorted(found))


Credential = tuple[str, ScramMechanism, int]  # (user, mechanism, iterations)

# The kinds Diff has sections of its own for; every other kind of entities.KINDS (client quotas, and any
# kind declared later) is listed in Diff.entities, by the attributes its declaration names.
SECTIONED = (ACLS, CREDENTIALS, TOKENS)
OTHER_KINDS = tuple(kind for kind in KINDS if kind not in SECTIONED)


@dataclass(frozen=True, slots=True)
class EntityChange:
    """An entity of a kind without a Diff section of its own (a client quota) that differs between two points:
    its attributes (``EntityKind.attributes``, redacted values) at each, None where it did not exist."""

    kind: str
    entity_key: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "entity_key": self.entity_key, "before": self.before, "after": self.after}


def attributes(kind: EntityKind, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes of ``kind`` an event's redacted payload gives (an update's: those it carries)."""
    return {name: payload[name] for name in kind.attributes if name in payload}


def entity_changes(before: Mapping[str, dict[str, Any]], after: Mapping[str, dict[str, Any]],
                   touched: Iterable[str]) -> tuple[EntityChange, ...]:
    """The touched entities (keys) whose attributes differ between ``before`` and ``after`` (absent: None)."""
    return tuple(EntityChange(key.split(":", 1)[0], key, before.get(key), after.get(key))
                 for key in sorted(set(touched)) if before.get(key) != after.get(key))


@dataclass(frozen=True, slots=True)
class Diff:
    """What changed from the state at ``start_offset`` to the state at ``end_offset``.

    ACL, credential, issued and removed entries are net (image against
    image); renewed and expired list every token with such an event in
    between.  Entities of the other kinds (client quotas) are net too.
    Entries are sorted (ACLs by id, credentials by user and mechanism,
    tokens by id, other entities by key).
    """

    start_offset: int
    end_offset: int
    # each a tuple, or a MadeWhenRead that reads as one and makes its entries when first read;
    # acls: (acl_id, binding) pairs
    acls_added: Sequence[tuple[str, AclBinding]] = ()
    acls_removed: Sequence[tuple[str, AclBinding]] = ()
    credentials_upserted: Sequence[Credential] = ()
    credentials_deleted: Sequence[Credential] = ()
    tokens_issued: Sequence[TokenInfo] = ()
    tokens_renewed: Sequence[TokenExpiryChange] = ()
    tokens_expired: Sequence[TokenExpiryChange] = ()
    tokens_removed: Sequence[TokenInfo] = ()
    entities: tuple[EntityChange, ...] = ()  # the other kinds' entities (OTHER_KINDS), by entity key

    def __bool__(self) -> bool:
        """True when anything changed."""
        return any((self.acls_added, self.acls_removed, self.credentials_upserted, self.credentials_deleted,
                    self.tokens_issued, self.tokens_renewed, self.tokens_expired, self.tokens_removed,
                    self.entities))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: enums by name, bindings as their seven fields, tokens without any HMAC."""
        def acl(pair):
            acl_id, b = pair
            return {"acl_id": acl_id, **binding_dict(b)}

        def cred(c):
            return {"user": c[0], "mechanism": ScramMechanism(c[1]).mechanism_name, "iterations": c[2]}

        def token(t: TokenInfo):
            return {**{name: getattr(t, name) for name in TOKEN_FIELDS}, "renewers": list(t.renewers)}

        def change(c: TokenExpiryChange):
            return {"token_id": c.token_id, "owner": c.owner, "expiry_before_ms": c.expiry_before_ms,
                    "expiry_after_ms": c.expiry_after_ms, "last_offset": c.last_offset}

        return {
            "start_offset": self.start_offset, "end_offset": self.end_offset,
            "acls_added": [acl(p) for p in self.acls_added],
            "acls_removed": [acl(p) for p in self.acls_removed],
            "credentials_upserted": [cred(c) for c in self.credentials_upserted],
            "credentials_deleted": [cred(c) for c in self.credentials_deleted],
            "tokens_issued": [token(t) for t in self.tokens_issued],
            "tokens_renewed": [change(c) for c in self.tokens_renewed],
            "tokens_expired": [change(c) for c in self.tokens_expired],
            "tokens_removed": [token(t) for t in self.tokens_removed],
            "entities": [e.to_dict() for e in self.entities],
        }


@dataclass(frozen=True, slots=True)
class ResourceMatch:
    """history's ``resource=`` filter: ACL events whose binding it selects (Kafka filter rules; MATCH finds
    every pattern that applies to a name) and, for ANY or DELEGATION_TOKEN patterns, token events by id."""

    pattern: ResourcePatternFilter
    acl_filter: AclBindingFilter | None = None

    @classmethod
    def of(cls, resource: ResourcePatternFilter | ResourcePattern | AclBindingFilter) -> ResourceMatch:
        if isinstance(resource, ResourcePattern):
            resource = ResourcePatternFilter(resource.resource_type, resource.name, resource.pattern_type)
        if isinstance(resource, AclBindingFilter):
            match = cls(resource.pattern, resource)
        elif isinstance(resource, ResourcePatternFilter):
            match = cls(resource)
        else:
            raise QueryError(f"a resource filter is a ResourcePatternFilter or AclBindingFilter, not {resource!r}")
        if match.pattern.resource_type == ResourceType.UNKNOWN:
            raise QueryError("unknown resource type in the resource filter")
        if match.pattern.pattern_type == PatternType.UNKNOWN:
            raise QueryError("unknown pattern type in the resource filter")
        return match

    @property
    def tokens(self) -> bool:
        """Whether token events can match (a pattern of type ANY or DELEGATION_TOKEN, not an ACL filter)."""
        return self.acl_filter is None and self.pattern.resource_type in (ResourceType.ANY,
                                                                          ResourceType.DELEGATION_TOKEN)

    def matches(self, event_type: str, binding: AclBinding | None, entity_key: str) -> bool:
        """Whether an event (its type, its ACL's binding, its entity's key) passes the filter."""
        if binding is not None:
            if self.acl_filter is not None:
                return filter_matches(self.acl_filter, binding)
            return pattern_filter_matches(self.pattern, binding.pattern)
        if self.tokens and kind_of(event_type) is TOKENS:
            return self.pattern.name is None or entity_key == f"{TOKENS.name}:{self.pattern.name}"
        return False


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """history's filters over offsets [lo, hi), already checked; each given filter must pass."""

    lo: int
    hi: int
    principal: str | None = None  # the actor, or a principal the event involves (secmeta.events.entities)
    user: str | None = None  # SCRAM events of that user
    event_types: frozenset[str] | None = None
    resource: ResourceMatch | None = None
    start_ms: int | None = None  # inclusive
    end_ms: int | None = None  # inclusive


def token_parties(image: SecurityImage) -> dict[str, tuple[str, ...]]:
    """Who each open entity of a ``carries_parties`` kind (a delegation token) involves in ``image``, by entity
    key: the ``entities.Parties`` known at the image's offset, for a backend whose window starts there."""
    carrying = [kind for kind in KINDS if kind.carries_parties]
    return {event.entity_key: kind_of(event).principals(event) for event in opening_events(image, carrying)}


def about_principal(envelope: Envelope, principal: str, involved: tuple[str, ...] | None = None) -> bool:
    """Whether a logged change belongs to ``principal``'s history: they made it, it involves them
    (``entities.involves``: an ACL's principal, their credentials, tokens they own, requested or may renew,
    quotas naming their user), or it is an ACL that concerns them (``acl_decision.concerns``: a 'User:*'
    grant, an ACL on the USER resource naming them). ``involved``: ``Parties.of(event)`` where the event's
    entity carries parties (default: the principals the event names)."""
    event = envelope.event
    named = kind_of(event).principals(event) if involved is None else involved
    return (envelope.actor_principal == principal or principal in named
            or (kind_of(event) is ACLS and concerns(event.binding, principal)))


# The kinds whose keys can open again while open (a credential set again): history says "created" or
# EntityKind.reopened from whether the key was open before.
REOPENABLE = tuple(kind for kind in KINDS if not kind.single_use_keys)


def open_keys(image: SecurityImage) -> frozenset[str]:
    """The entity keys of the ``REOPENABLE`` kinds open in ``image``."""
    return frozenset(event.entity_key for event in opening_events(image, REOPENABLE))


class HistoryBackend(Protocol):
    """What the forensic queries ask of the stored history; every answer is in offset (or id) order."""

    def entries(self, query: HistoryQuery) -> Iterator[HistoryEntry]:
        """The logged changes that pass the query, in offset order."""
        ...

    def acl_changes(self, lo: int, hi: int, resource_type: ResourceType, name: str) -> Iterator[Change]:
        """The ACL events in [lo, hi) whose pattern applies to the resource, in offset order."""
        ...

    def acls_at(self, n: int, resource_type: ResourceType, name: str) -> list[tuple[str, AclBinding]]:
        """The ACLs in force after the first ``n`` events whose pattern applies to the resource, by ACL id."""
        ...

    def diff(self, a: int, b: int) -> Diff:
        """What changed between the states at offsets ``a`` <= ``b``."""
        ...
