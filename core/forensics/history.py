"""Attributed history: the logged changes, filtered, and the difference between two points.

``history`` yields ``HistoryEntry`` values (offset, time, actor, request id,
event type, entity key and a redacted payload: sealed secrets show only
their key id, bytes only their length).  Time ranges become offset ranges
through the log's time index, so a narrow window reads only its batches.

``diff`` compares two points.  ACLs, credentials and tokens issued or
removed are the *net* effect (the image at ``a`` against the image at
``b``: something created and deleted in between does not show).
Renewals and expiry changes are *events*: every token with a
DelegationTokenRenewed (or DelegationTokenExpired) event in [a, b), with
its expiry before the first and after the last such event.  When the
history index covers [a, b) the diff is read from its rows in that range
and one indexed probe per touched credential or token, without building
either image.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from secmeta.core.errors import QueryError
from secmeta.core.forensics.history_index import HistoryIndex, acls, net_acls
from secmeta.core.forensics.timetravel import TimeTravel, _require_int
from secmeta.events.records import (
    EVENT_TYPES,
    AclCreated,
    AclDeleted,
    DelegationTokenExpired,
    DelegationTokenIssued,
    DelegationTokenRenewed,
    Envelope,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
)
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
from secmeta.projections.acl_match import filter_matches, pattern_filter_matches
from secmeta.projections.gc_pause import paused_gc
from secmeta.projections.image import SecurityImage
from secmeta.projections.tokens import TokenInfo

__all__ = ["Diff", "HistoryEntry", "TokenExpiryChange", "diff", "history"]

_TOKEN_EVENTS = frozenset(name for name in EVENT_TYPES if name.startswith("DelegationToken"))


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One logged change, attributed and redacted (no secret material)."""

    offset: int
    timestamp_ms: int
    actor_principal: str
    actor_host: str
    request_id: str
    event_type: str
    entity_key: str
    payload: dict[str, Any]

    @classmethod
    def of(cls, envelope: Envelope) -> HistoryEntry:
        r = redacted(envelope)
        return cls(r["offset"], r["timestamp_ms"], r["actor_principal"], r["actor_host"], r["request_id"],
                   r["event_type"], r["entity_key"], r["payload"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "offset": self.offset, "timestamp_ms": self.timestamp_ms, "actor_principal": self.actor_principal,
            "actor_host": self.actor_host, "request_id": self.request_id, "event_type": self.event_type,
            "entity_key": self.entity_key, "payload": self.payload,
        }


# -- history -------------------------------------------------------------------------------


def history(
    travel: TimeTravel,
    *,
    principal: str | None = None,
    user: str | None = None,
    resource: ResourcePatternFilter | ResourcePattern | AclBindingFilter | None = None,
    event_types: Iterable[str | type] | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
    start_offset: int | None = None,
    end_offset: int | None = None,
    limit: int | None = None,
) -> Iterator[HistoryEntry]:
    """The logged changes in offset order that pass every filter given.

    ``principal`` matches the actor or a subject (an ACL's principal; a
    token's owner, requester or renewer; a SCRAM user as ``User:<name>``).
    ``user`` matches SCRAM events of that user.  ``resource`` selects ACL
    events whose pattern it matches (Kafka filter rules; MATCH finds every
    pattern that applies to a name) and, for DELEGATION_TOKEN, token events
    by token id.  ``start_ms``/``end_ms`` are inclusive, ``start_offset``
    inclusive and ``end_offset`` exclusive.
    """
    types = _event_types(event_types)
    matches_resource = _resource_matcher(resource)
    for name, value in (("start_ms", start_ms), ("end_ms", end_ms), ("start_offset", start_offset),
                        ("end_offset", end_offset), ("limit", limit)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise QueryError(f"{name} must be an integer, not {value!r}")
    for name, value in (("start_offset", start_offset), ("end_offset", end_offset), ("limit", limit)):
        if value is not None and value < 0:
            raise QueryError(f"{name} must not be negative, not {value}")
    if start_ms is not None and end_ms is not None and start_ms > end_ms:
        raise QueryError(f"start_ms {start_ms} is after end_ms {end_ms}")
    log = travel.log
    lo, hi = log.start_offset, log.end_offset
    if start_offset is not None:
        lo = max(lo, start_offset)
    if end_offset is not None:
        hi = min(hi, end_offset)
    if start_ms is not None:
        lo = max(lo, log.offset_for_timestamp(start_ms))
    if end_ms is not None:
        hi = min(hi, log.offset_for_timestamp(end_ms + 1))
    return _entries(travel, lo, hi, principal, user, types, matches_resource, start_ms, end_ms, limit)


def _entries(travel, lo, hi, principal, user, types, matches_resource, start_ms, end_ms, limit):
    if limit == 0 or lo >= hi:
        return
    index = travel.index
    if index is not None and index.covered(hi):
        entries = _indexed_entries(index, lo, hi, principal, user, types, matches_resource, start_ms, end_ms)
    else:
        entries = _scanned_entries(travel, lo, hi, principal, user, types, matches_resource, start_ms, end_ms)
    for emitted, entry in enumerate(entries, 1):
        yield entry
        if limit is not None and emitted >= limit:
            return


def _indexed_entries(index, lo, hi, principal, user, types, matches_resource, start_ms, end_ms):
    """The entries the history index selects: the same filters, asked of its columns."""
    where, args = [], []
    if start_ms is not None:
        where.append("ts >= ?")
        args.append(start_ms)
    if end_ms is not None:
        where.append("ts <= ?")
        args.append(end_ms)
    if types is not None:
        where.append(f"type IN ({', '.join('?' * len(types))})")
        args += sorted(types)
    if user is not None:  # a SCRAM credential's rows are those of its entity
        where.append("restype IS NULL AND entity IN (?, ?)")
        args += [ScramCredentialDeleted(user, m).entity_key for m in (ScramMechanism.SCRAM_SHA_256,
                                                                      ScramMechanism.SCRAM_SHA_512)]
    if principal is not None:  # the actor, an ACL's principal, User:<scram user> or a token's party
        where.append("offset IN (SELECT offset FROM events WHERE actor = ? UNION ALL SELECT offset FROM events "
                     "WHERE principal = ? UNION ALL SELECT offset FROM parties WHERE party = ?)")
        args += [principal, principal, principal]
    if matches_resource is not None:
        where.append("restype IS NOT NULL OR type LIKE 'DelegationToken%'")
    for row in index.select(lo, hi, " AND ".join(f"({w})" for w in where), tuple(args),
                            indexed=principal is not None or user is not None):
        if matches_resource is not None and not matches_resource(row.event_type, row.binding,
                                                                 row.entity_key.split(":", 1)[1]):
            continue
        yield HistoryEntry(row.offset, row.timestamp_ms, row.actor_principal, row.actor_host, row.request_id,
                           row.event_type, row.entity_key, row.payload)


def _scanned_entries(travel, lo, hi, principal, user, types, matches_resource, start_ms, end_ms):
    """The entries found by reading every event in [lo, hi)."""
    parties = _TokenParties(lambda: travel.image_at_or_after(lo)) if principal is not None else None
    for envelope in travel.log.read(lo, hi):
        if start_ms is not None and envelope.timestamp_ms < start_ms:
            continue
        if end_ms is not None and envelope.timestamp_ms > end_ms:
            continue
        event = envelope.event
        if parties is not None and type(event) is DelegationTokenIssued:
            parties.issued(event)
        if types is not None and envelope.event_type not in types:
            continue
        if user is not None and not (isinstance(event, ScramCredentialUpserted | ScramCredentialDeleted)
                                     and event.user == user):
            continue
        if matches_resource is not None and not matches_resource(
                envelope.event_type, getattr(event, "binding", None), getattr(event, "token_id", None)):
            continue
        if principal is not None and not _involves(envelope, principal, parties):
            continue
        yield HistoryEntry.of(envelope)


def _event_types(event_types) -> frozenset[str] | None:
    if event_types is None:
        return None
    if isinstance(event_types, str | type):
        event_types = [event_types]
    names = set()
    for item in event_types:
        name = item.__name__ if isinstance(item, type) else item
        if name not in EVENT_TYPES:
            raise QueryError(f"unknown event type {item!r} (one of: {', '.join(EVENT_TYPES)})")
        names.add(name)
    return frozenset(names)


def _resource_matcher(resource) -> Callable[[str, AclBinding | None, str | None], bool] | None:
    if resource is None:
        return None
    if isinstance(resource, ResourcePattern):
        resource = ResourcePatternFilter(resource.resource_type, resource.name, resource.pattern_type)
    if isinstance(resource, AclBindingFilter):
        acl_filter = resource
        pattern = resource.pattern
    elif isinstance(resource, ResourcePatternFilter):
        acl_filter = None
        pattern = resource
    else:
        raise QueryError(f"a resource filter is a ResourcePatternFilter or AclBindingFilter, not {resource!r}")
    if pattern.resource_type == ResourceType.UNKNOWN:
        raise QueryError("unknown resource type in the resource filter")
    if pattern.pattern_type == PatternType.UNKNOWN:
        raise QueryError("unknown pattern type in the resource filter")
    tokens = pattern.resource_type in (ResourceType.ANY, ResourceType.DELEGATION_TOKEN) and acl_filter is None

    def matches(event_type: str, binding: AclBinding | None, token_id: str | None) -> bool:
        """Whether an event (its type, its ACL's binding or its token's id) passes the filter."""
        if binding is not None:
            if acl_filter is not None:
                return filter_matches(acl_filter, binding)
            return pattern_filter_matches(pattern, binding.pattern)
        if tokens and event_type in _TOKEN_EVENTS:
            return pattern.name is None or pattern.name == token_id
        return False

    return matches


class _TokenParties:
    """Who a token involves (owner, requester, renewers), for token events that do not say."""

    def __init__(self, image_at_start: Callable[[], SecurityImage]):
        self._image_at_start = image_at_start
        self._start: SecurityImage | None = None
        self._known: dict[str, frozenset[str]] = {}

    def issued(self, event: DelegationTokenIssued) -> None:
        self._known[event.token_id] = frozenset((event.owner, event.requester, *event.renewers))

    def of(self, token_id: str) -> frozenset[str]:
        found = self._known.get(token_id)
        if found is None:
            if self._start is None:
                self._start = self._image_at_start()
            info = self._start.tokens.get(token_id)
            found = frozenset() if info is None else frozenset((info.owner, info.requester, *info.renewers))
            self._known[token_id] = found
        return found


def _involves(envelope: Envelope, principal: str, parties: _TokenParties) -> bool:
    if envelope.actor_principal == principal:
        return True
    event = envelope.event
    if isinstance(event, AclCreated | AclDeleted):
        return event.binding.principal == principal
    if isinstance(event, ScramCredentialUpserted | ScramCredentialDeleted):
        return f"User:{event.user}" == principal
    if type(event) is DelegationTokenIssued:
        return principal == event.owner or principal == event.requester or principal in event.renewers
    token_id = getattr(event, "token_id", None)
    return token_id is not None and principal in parties.of(token_id)


# -- diff ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TokenExpiryChange:
    """A token's expiry moved by renew (or expire) requests between two points."""

    token_id: str
    owner: str
    expiry_before_ms: int
    expiry_after_ms: int
    last_offset: int


Credential = tuple[str, ScramMechanism, int]  # (user, mechanism, iterations)


@dataclass(frozen=True, slots=True)
class Diff:
    """What changed from the state at ``start_offset`` to the state at ``end_offset``.

    ACL, credential, issued and removed entries are net (image against
    image); renewed and expired list every token with such an event in
    between.  Entries are sorted (ACLs by id, credentials by user and
    mechanism, tokens by id).
    """

    start_offset: int
    end_offset: int
    acls_added: tuple[tuple[str, AclBinding], ...] = ()
    acls_removed: tuple[tuple[str, AclBinding], ...] = ()
    credentials_upserted: tuple[Credential, ...] = ()
    credentials_deleted: tuple[Credential, ...] = ()
    tokens_issued: tuple[TokenInfo, ...] = ()
    tokens_renewed: tuple[TokenExpiryChange, ...] = ()
    tokens_expired: tuple[TokenExpiryChange, ...] = ()
    tokens_removed: tuple[TokenInfo, ...] = ()

    def __bool__(self) -> bool:
        """True when anything changed."""
        return any((self.acls_added, self.acls_removed, self.credentials_upserted, self.credentials_deleted,
                    self.tokens_issued, self.tokens_renewed, self.tokens_expired, self.tokens_removed))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: enums by name, bindings as their seven fields, tokens without any HMAC."""
        def acl(pair):
            acl_id, b = pair
            return {"acl_id": acl_id, "resource_type": b.restype.name, "resource_name": b.name,
                    "pattern_type": b.resource_pattern_type.name, "principal": b.principal, "host": b.host,
                    "operation": b.operation.name, "permission_type": b.permission_type.name}

        def cred(c):
            return {"user": c[0], "mechanism": ScramMechanism(c[1]).mechanism_name, "iterations": c[2]}

        def token(t: TokenInfo):
            return {"token_id": t.token_id, "owner": t.owner, "requester": t.requester,
                    "renewers": list(t.renewers), "issue_timestamp_ms": t.issue_timestamp_ms,
                    "expiry_timestamp_ms": t.expiry_timestamp_ms, "max_timestamp_ms": t.max_timestamp_ms}

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
        }


def diff(travel: TimeTravel, a: int, b: int) -> Diff:
    """The changes between the states at offsets ``a`` <= ``b`` (both already validated)."""
    _require_int("offset", a)
    _require_int("offset", b)
    if a > b:
        raise QueryError(f"a diff runs forward: its start (offset {a}) is after its end (offset {b})")
    index = travel.index
    # from offset 0 only: a credential's or token's state at ``a`` is its last event before ``a``, which an
    # index built after retention (starting past 0) may not hold
    if index is not None and index.first_offset == 0 and travel.log.start_offset <= a and index.covered(b):
        with paused_gc():  # tens of thousands of rows and bindings, no cycles among them
            return _indexed_diff(index, a, b)
    return _imaged_diff(travel, a, b)


def _imaged_diff(travel: TimeTravel, a: int, b: int) -> Diff:
    """The diff from the images at both points and the events between them."""
    before, after = travel.image_at(a), travel.image_at(b)
    acl_ids: set[str] = set()
    cred_keys: set[tuple[str, ScramMechanism]] = set()
    token_ids: set[str] = set()
    renewed: dict[str, list] = {}
    expired: dict[str, list] = {}
    expiry: dict[str, tuple[str, int]] = {}  # token_id -> (owner, current expiry) while scanning

    def current(token_id: str) -> tuple[str, int] | None:
        if token_id not in expiry:
            info = before.tokens.get(token_id)
            if info is None:
                return None
            expiry[token_id] = (info.owner, info.expiry_timestamp_ms)
        return expiry[token_id]

    for envelope in travel.log.read(a, b):
        event = envelope.event
        kind = type(event)
        if kind is AclCreated or kind is AclDeleted:
            acl_ids.add(event.acl_id)
        elif kind is ScramCredentialUpserted or kind is ScramCredentialDeleted:
            cred_keys.add((event.user, ScramMechanism(event.mechanism)))
        else:
            token_ids.add(event.token_id)
            if kind is DelegationTokenIssued:
                expiry[event.token_id] = (event.owner, event.expiry_timestamp_ms)
            elif kind is DelegationTokenRenewed or kind is DelegationTokenExpired:
                known = current(event.token_id)
                if known is None:
                    continue
                owner, old = known
                target = renewed if kind is DelegationTokenRenewed else expired
                entry = target.setdefault(event.token_id, [owner, old, old, envelope.offset])
                entry[2], entry[3] = event.expiry_timestamp_ms, envelope.offset
                expiry[event.token_id] = (owner, event.expiry_timestamp_ms)

    added, removed = [], []
    for acl_id in sorted(acl_ids):
        old, new = before.acls.get(acl_id), after.acls.get(acl_id)
        if old == new:
            continue
        if old is not None:
            removed.append((acl_id, old))
        if new is not None:
            added.append((acl_id, new))
    upserted, deleted = [], []
    for user, mechanism in sorted(cred_keys):
        old, new = before.scram.get(user, mechanism), after.scram.get(user, mechanism)
        if old == new:
            continue
        if new is not None:
            upserted.append((user, mechanism, new.iterations))
        elif old is not None:
            deleted.append((user, mechanism, old.iterations))
    issued, gone = [], []
    for token_id in sorted(token_ids):
        old, new = before.tokens.get(token_id), after.tokens.get(token_id)
        if old is None and new is not None:
            issued.append(new)
        elif old is not None and new is None:
            gone.append(old)

    def changes(found: dict[str, list]) -> tuple[TokenExpiryChange, ...]:
        return tuple(TokenExpiryChange(t, *found[t]) for t in sorted(found))

    return Diff(a, b, tuple(added), tuple(removed), tuple(upserted), tuple(deleted), tuple(issued),
                changes(renewed), changes(expired), tuple(gone))


_SCRAM_EVENTS = ("ScramCredentialUpserted", "ScramCredentialDeleted")
_TOKEN_PRESENCE = ("DelegationTokenIssued", "DelegationTokenRemoved")
_TOKEN_EXPIRY = ("DelegationTokenIssued", "DelegationTokenRenewed", "DelegationTokenExpired")


def _indexed_diff(index: HistoryIndex, a: int, b: int) -> Diff:
    """The diff from the history index alone: the rows in [a, b) and one probe per touched credential or token.

    ACLs are netted by id (``net_acls``).  A credential's state at a point is its last
    event before it; two upsert events never carry the same sealed secret (a fresh salt
    and nonce per seal), so one upserted in [a, b) differs.
    """
    added, removed = net_acls(index.acl_changes(a, b))
    scram_last: dict[str, tuple[str, str]] = {}
    token_rows = []
    for offset, event_type, entity, payload in index.entity_changes(a, b):
        if event_type in _SCRAM_EVENTS:
            scram_last[entity] = (event_type, payload)
        else:
            token_rows.append((offset, event_type, entity, payload))
    upserted, deleted = _credential_changes(index, a, scram_last)
    issued, renewed, expired, gone = _token_changes(index, a, token_rows)
    return Diff(a, b, tuple(acls(added[i] for i in sorted(added))), tuple(acls(removed[i] for i in sorted(removed))),
                upserted, deleted, issued, renewed, expired,
                gone)


def _credential_changes(index: HistoryIndex, a: int, last: dict[str, tuple[str, str]]):
    """(upserted, deleted) credentials, given each touched credential's last event before the end."""
    upserted = [_credential(json.loads(payload)) for event_type, payload in last.values()
                if event_type == "ScramCredentialUpserted"]
    # a credential deleted last was deleted if it existed at the start: its last event before it says
    before = index.last_changes([e for e, (t, _) in last.items() if t == "ScramCredentialDeleted"], a, _SCRAM_EVENTS)
    deleted = [_credential(json.loads(payload)) for _, event_type, payload in before.values()
               if event_type == "ScramCredentialUpserted"]
    return tuple(sorted(upserted)), tuple(sorted(deleted))


def _credential(payload: dict) -> Credential:
    return payload["user"], ScramMechanism[payload["mechanism"]], payload["iterations"]


def _token_changes(index: HistoryIndex, a: int, rows: list[tuple[int, str, str, str]]):
    """(issued, renewed, expired, removed) tokens, given the token events in [a, b) in order.

    Token ids are never reused (a fresh UUID per token): one whose first event in
    [a, b) issues it did not exist at a; the others' state at a is looked up.
    """
    first: dict[str, str] = {}
    for _, event_type, entity, _ in rows:
        first.setdefault(entity, event_type)
    present = index.last_changes([e for e, t in first.items() if t != "DelegationTokenIssued"], a, _TOKEN_PRESENCE)
    issued_rows = {e: payload for e, (_, t, payload) in present.items() if t == "DelegationTokenIssued"}
    expiry_rows = index.last_changes(issued_rows, a, _TOKEN_EXPIRY)
    at_start: dict[str, tuple[TokenInfo, int]] = {  # (as issued, expiry at a)
        e: (_token(json.loads(payload)), json.loads(expiry_rows[e][2])["expiry_timestamp_ms"])
        for e, payload in issued_rows.items()}
    now: dict[str, tuple[TokenInfo, int] | None] = dict(at_start)
    renewed: dict[str, list] = {}
    expired: dict[str, list] = {}
    for offset, event_type, entity, payload in rows:
        if event_type == "DelegationTokenIssued":
            info = _token(json.loads(payload))
            now[entity] = (info, info.expiry_timestamp_ms)
        elif event_type == "DelegationTokenRemoved":
            now[entity] = None
        elif (state := now.get(entity)) is not None:  # renewed or expired
            info, old = state
            expiry = json.loads(payload)["expiry_timestamp_ms"]
            target = renewed if event_type == "DelegationTokenRenewed" else expired
            entry = target.setdefault(info.token_id, [info.owner, old, 0, 0])
            entry[2], entry[3] = expiry, offset
            now[entity] = (info, expiry)
    issued, gone = [], []
    for entity in sorted(first):  # 'token:<id>': in token id order
        old, new = at_start.get(entity), now.get(entity)
        if old is None and new is not None:
            issued.append(_expiring(*new))
        elif old is not None and new is None:
            gone.append(_expiring(*old))

    def changes(found: dict[str, list]) -> tuple[TokenExpiryChange, ...]:
        return tuple(TokenExpiryChange(t, *found[t]) for t in sorted(found))

    return tuple(issued), changes(renewed), changes(expired), tuple(gone)


def _expiring(info: TokenInfo, expiry_ms: int) -> TokenInfo:
    return info if info.expiry_timestamp_ms == expiry_ms else replace(info, expiry_timestamp_ms=expiry_ms)


def _token(payload: dict) -> TokenInfo:
    return TokenInfo(payload["token_id"], payload["owner"], payload["requester"], tuple(payload["renewers"]),
                     payload["issue_timestamp_ms"], payload["expiry_timestamp_ms"], payload["max_timestamp_ms"])
