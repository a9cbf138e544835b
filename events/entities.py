"""What each kind of entity is, declared once: every reader of the log derives from these.

An *entity* is one thing the log's events change: an ACL, a user's SCRAM credential for one
mechanism, a delegation token. Its kind declares

- ``name``: the kind, and the prefix of its entity keys (``acl:<uuid>``);
- ``key``: the flattened payload fields that name one entity (``("user", "mechanism")``);
- ``attributes``: the flattened payload fields that describe it (never a secret);
- ``opens`` / ``updates`` / ``closes``: the event types that start an entity (replacing one of
  the same key that is open), change some of its attributes, and end it;
- ``principals``: the principals an event of the kind names (an ACL's principal, ``User:<user>``
  of a credential, a token's owner, requester and renewers);
- ``closed_when_none``: an attribute whose value None makes an ``opens`` or ``updates`` event
  end the entity instead (a quota value removed, as Kafka's ClientQuotaRecord with ``remove``);
- ``carries_parties``: later events of an entity also involve the principals its opening event
  named (a token's renewal involves its owner, though the event names only the token id);
- ``table`` / ``intervals_table``: the names of its compacted tables.

History rows, the history index's subjects, ``involves``, diff, the Kafka message key and state
form, the Spark interval tables and the contract suite's event list are derived from ``KINDS``,
so a new kind of entity is one declaration here (plus its event records and schemas).

"Flattened payload" is ``redact.redacted(envelope)["payload"]``: an ACL binding's seven fields
appear as ``resource_type``, ``resource_name``, ``pattern_type``, ``principal``, ``host``,
``operation`` and ``permission_type``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace

from .records import (
    AclCreated,
    AclDeleted,
    ClientQuotaAltered,
    ClientQuotaEntity,
    DelegationTokenExpired,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    DelegationTokenRenewed,
    Event,
    KeyRotated,
    LogRecovered,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
    SecuritySettingAltered,
)

__all__ = ["KINDS", "PRINCIPALS_SETTING", "EntityKind", "Parties", "closes", "entity_key", "involves", "kind_of",
           "principals_in"]


@dataclass(frozen=True, slots=True)
class EntityKind:
    """One kind of entity; see the module's docstring for each field."""

    name: str
    key: tuple[str, ...]
    attributes: tuple[str, ...]
    opens: tuple[type, ...]
    closes: tuple[type, ...]
    principals: Callable[[Event], tuple[str, ...]]
    table: str
    intervals_table: str
    updates: tuple[type, ...] = ()
    closed_when_none: str | None = None
    carries_parties: bool = False
    # Each key opens at most once and closes at most once (acl ids are never reused).
    single_use_keys: bool = False
    # what an opening event of a key already open does to it (a password set again: "rotated")
    reopened: str = "replaced"
    # derived: the opening and update types that carry closed_when_none's field (None there: a close)
    closing_when_none: tuple[type, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        name = self.closed_when_none
        closing = tuple(t for t in self.opens + self.updates if name is not None and name in _field_names(t))
        if name is not None and not closing:
            raise TypeError(f"{self.name}: no opening or update event carries closed_when_none's field {name!r}")
        object.__setattr__(self, "closing_when_none", closing)

    @property
    def event_types(self) -> tuple[type, ...]:
        """Every event type of the kind: opens, then updates, then closes."""
        return self.opens + self.updates + self.closes

    @property
    def event_names(self) -> tuple[str, ...]:
        """The names of ``event_types`` (``Envelope.event_type``), in the same order."""
        return _names(self.event_types)

    @property
    def open_names(self) -> tuple[str, ...]:
        return _names(self.opens)

    @property
    def update_names(self) -> tuple[str, ...]:
        return _names(self.updates)

    @property
    def close_names(self) -> tuple[str, ...]:
        return _names(self.closes)

    def updated(self, current: Event, update: Event) -> Event:
        """The entity after ``update``: ``current`` (the event that opens it as it stands) with the
        attributes ``update`` carries; the others carry over."""
        carried = {name: getattr(update, name) for name in _field_names(type(update)) if name in self.attributes}
        return replace(current, **carried)

    def role(self, event: Event) -> str:
        """What ``event`` does to its entity: ``"open"``, ``"update"`` or ``"close"``."""
        kind = type(event)
        if kind in self.closes or (kind in self.closing_when_none and getattr(event, self.closed_when_none) is None):
            return "close"
        return "update" if kind in self.updates else "open"

    def action(self, role: str, was_open: bool) -> str:
        """What a history row says an event of ``role`` did to its entity, given whether the entity was
        open just before it: "created", ``reopened`` ("rotated" for a credential), "updated" or "deleted"."""
        if role == "close":
            return "deleted"
        if role == "update":
            return "updated"
        return self.reopened if was_open else "created"


def _names(types: tuple[type, ...]) -> tuple[str, ...]:
    return tuple(t.__name__ for t in types)


def _field_names(event_type: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(event_type))


def _acl_principals(event: AclCreated | AclDeleted) -> tuple[str, ...]:
    return (event.binding.principal,)


def _user_principals(event: ScramCredentialUpserted | ScramCredentialDeleted) -> tuple[str, ...]:
    return (f"User:{event.user}",)


def _token_principals(event: Event) -> tuple[str, ...]:
    if type(event) is DelegationTokenIssued:
        return (event.owner, event.requester, *event.renewers)
    return ()


ACLS = EntityKind(
    "acl", key=("acl_id",),
    attributes=("resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
                "permission_type"),
    opens=(AclCreated,), closes=(AclDeleted,), principals=_acl_principals,
    table="acls", intervals_table="acl_intervals", single_use_keys=True)
CREDENTIALS = EntityKind(
    "scram", key=("user", "mechanism"), attributes=("iterations",),
    opens=(ScramCredentialUpserted,), closes=(ScramCredentialDeleted,), principals=_user_principals,
    table="scram_users", intervals_table="credential_intervals", reopened="rotated")
TOKENS = EntityKind(
    "token", key=("token_id",),
    attributes=("owner", "requester", "renewers", "issue_timestamp_ms", "expiry_timestamp_ms",
                "max_timestamp_ms"),
    opens=(DelegationTokenIssued,), updates=(DelegationTokenRenewed, DelegationTokenExpired),
    closes=(DelegationTokenRemoved,), principals=_token_principals,
    table="tokens", intervals_table="token_intervals", carries_parties=True)



def _quota_principals(event: ClientQuotaAltered) -> tuple[str, ...]:
    user = ClientQuotaEntity.parse(event.entity).user
    return () if user is None else (f"User:{user}",)


QUOTAS = EntityKind(
    "quota", key=("entity", "key"), attributes=("value",),
    opens=(ClientQuotaAltered,), closes=(), closed_when_none="value", principals=_quota_principals,
    table="quotas", intervals_table="quota_intervals", reopened="altered")


def _no_principals(event: Event) -> tuple[str, ...]:
    return ()


PRINCIPALS_SETTING = "super.users"  # the setting whose value names principals


def principals_in(text: str) -> tuple[str, ...]:
    """The principals a ``super.users`` value names, in order: ``User:a;User:b`` (Kafka's form)."""
    return tuple(dict.fromkeys(p.strip() for p in text.split(";") if p.strip()))


def _setting_principals(event: SecuritySettingAltered) -> tuple[str, ...]:
    if event.setting_name != PRINCIPALS_SETTING or not event.setting_value:
        return ()
    return principals_in(event.setting_value)


# A setting of the cluster that decides access (Kafka's ConfigRecord on the BROKER resource).
# Its principals: those super.users names; it carries its parties, so a change also involves the
# principals the value it replaced named (a super user removed sees the removal in its history).
SETTINGS = EntityKind(
    "setting", key=("setting_name",), attributes=("setting_value",),
    opens=(SecuritySettingAltered,), closes=(), closed_when_none="setting_value", principals=_setting_principals,
    table="settings", intervals_table="setting_intervals", carries_parties=True, reopened="altered")


# A repair of the log (``secmeta log recover``): a fact about the log, not security state; it opens
# once and stays, so history, the mirror and the Spark tables show it forever.
RECOVERIES = EntityKind(
    "recovery", key=("recovery_id",),
    attributes=("operator", "reason", "from_offset", "to_offset", "events", "link", "digest", "quarantine",
                "cut_link"),
    opens=(LogRecovered,), closes=(), principals=_no_principals,
    table="recoveries", intervals_table="recovery_intervals", single_use_keys=True)


# A key rotation (``secmeta keys generate`` added a newer key): a fact about the log's keys, not security
# state; each key opens once, when the store's writes first use it, and stays.
KEYS = EntityKind(
    "key", key=("key_id",), attributes=("previous_key_id",),
    opens=(KeyRotated,), closes=(), principals=_no_principals,
    table="keys", intervals_table="key_intervals", single_use_keys=True)


KINDS: tuple[EntityKind, ...] = (ACLS, CREDENTIALS, TOKENS, QUOTAS, SETTINGS, RECOVERIES, KEYS)

_BY_TYPE: dict[type, EntityKind] = {t: kind for kind in KINDS for t in kind.event_types}
_BY_NAME: dict[str, EntityKind] = {t.__name__: kind for t, kind in _BY_TYPE.items()}


def kind_of(event: Event | type | str) -> EntityKind:
    """The kind of an event, an event type or an event type's name; KeyError for none of ours."""
    if isinstance(event, str):
        return _BY_NAME[event]
    return _BY_TYPE[event if isinstance(event, type) else type(event)]


def closes(event: Event) -> bool:
    """Whether ``event`` ends its entity (a closing type, or ``closed_when_none``'s attribute None)."""
    return kind_of(event).role(event) == "close"


def entity_key(event: Event) -> str:
    """The key of the entity an event changes, e.g. ``acl:<uuid>``."""
    return event.entity_key


class Parties:
    """The principals each open entity of a ``carries_parties`` kind involves, kept as events pass.

    ``of(event)``, asked before ``observe(event)``, is every principal the event involves: those
    it names and those its entity's (previous) opening event named; ``observe`` every event in
    log order after asking.
    """

    __slots__ = ("_by_key",)

    def __init__(self, known: Iterable[tuple[str, tuple[str, ...]]] = ()):
        self._by_key: dict[str, tuple[str, ...]] = dict(known)

    def observe(self, event: Event) -> None:
        kind = kind_of(event)
        if kind.carries_parties and type(event) in kind.opens:
            self._by_key[event.entity_key] = kind.principals(event)

    def of(self, event: Event) -> tuple[str, ...]:
        kind = kind_of(event)
        named = kind.principals(event)
        if not kind.carries_parties:
            return named
        return tuple(dict.fromkeys((*named, *self._by_key.get(event.entity_key, ()))))


def involves(event: Event, principal: str, parties: Parties | None = None) -> bool:
    """Whether ``event`` involves ``principal`` (the actor aside): named by it, or a party to its entity."""
    named = parties.of(event) if parties is not None else kind_of(event).principals(event)
    return principal in named
