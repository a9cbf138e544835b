"""Forensic answers: who could do something at a point, and when a principal could.

``who_could`` reads one image: every principal (and host) that ``authorize``
would allow, with the ACLs or the rule that allow it.  ``Grant.allows``
states exactly which (principal, host) pairs a grant covers, including the
hosts a DENY takes away and, for the 'User:*' grant, the principals whose
own DENY ACLs take them out of it (they are listed on their own).

``access_timeline`` replays only the ACL events that can change one
decision (ACLs of that resource type whose pattern applies to the name)
and reports the intervals in which it was true, each opened and closed by
the event that flipped it.  Super users and allow.everyone.if.no.acl.found
come from the store's current config: settings are not logged.

Both also answer for access through delegation tokens (``token_access``: a token's requester,
or a renewer that used it, could act as its owner until it is removed or expires): who_could
lists a holder under each grant of the owner (``Grant.via``), and the timeline of a holder
adds the owner's intervals while the token was live (``Interval.via``).

Both decide through ``secmeta.projections.acl_decision.decide``, the rule
``authorize`` and ``explain`` use; this module only chooses the ACLs to hand
it and presents the answers.  The ACLs at a point and the ACL events on a
resource are asked of a ``HistoryBackend`` (by default the history index
where it answers, else the log scan).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from secmeta.core import settings as logged_settings
from secmeta.core import validation
from secmeta.core.config import StoreConfig
from secmeta.core.errors import QueryError
from secmeta.core.forensics.backend import Change, HistoryBackend, HistoryQuery
from secmeta.core.forensics.preferred import IndexOrScan
from secmeta.core.forensics.timetravel import TimeTravel
from secmeta.core.forensics.token_access import TokenAccess, token_access
from secmeta.events.types import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourceType,
)
from secmeta.projections.acl_decision import (
    ALLOWED_BY_ACL,
    SUPER_USER,
    Decision,
    applies,
    decide,
    effect,
    principal_applies,
)
from secmeta.projections.acl_match import acl_network, covers, host_matches
from secmeta.projections.authorizer import acls_on
from secmeta.projections.image import SecurityImage

__all__ = ["Change", "Grant", "Interval", "access_timeline", "live_tokens", "resource_question", "who_could",
           "who_could_at"]


# -- arguments -------------------------------------------------------------------------------


def resource_question(operation: object, resource_type: object,
                      resource_name: object) -> tuple[AclOperation, ResourceType, str]:
    """(operation, resource type, resource name) of a question about one resource: a concrete
    operation and type (not UNKNOWN or ANY; the enum, its name or its code) and a non-empty name,
    as ``secmeta.core.validation`` reads them; a QueryError names the one that is not."""
    with validation.reraised_as(QueryError):
        return (validation.enum_value(AclOperation, operation, "operation", concrete=True),
                validation.enum_value(ResourceType, resource_type, "resource type", concrete=True),
                validation.nonempty_text(resource_name, "resource name", selects=True))


# -- who could -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Grant:
    """A principal allowed from ``host`` (an ACL host: '*', a host or a CIDR range), and why.

    ``except_hosts``: client hosts inside ``host`` that a DENY ACL refuses.
    ``except_principals`` (only on the 'User:*' grant): principals whose own
    DENY ACLs take them out of it; their allowed hosts are their own grants.
    ``via``: the principal is a token's holder acting as its owner, whose grant this is.
    """

    principal: str
    host: str
    reason: str
    acls: tuple[tuple[str, AclBinding], ...] = ()
    except_hosts: tuple[str, ...] = ()
    except_principals: tuple[str, ...] = ()
    via: TokenAccess | None = None

    def acts_for(self, principal: str) -> bool:
        """Whether the grant (from some host) is ``principal``'s: its own, or 'User:*' without excepting it."""
        if self.principal == WILDCARD_PRINCIPAL:
            return principal not in self.except_principals
        return principal == self.principal

    def allows(self, principal: str, host: str) -> bool:
        """Whether this grant lets ``principal`` in from client ``host`` as itself (a grant ``via`` a token lets
        its holder in only as the owner, authenticated with the token: False)."""
        if self.via is not None:
            return False
        if self.principal == WILDCARD_PRINCIPAL:
            if principal in self.except_principals:
                return False
        elif principal != self.principal:
            return False
        return host_matches(self.host, host) and not any(host_matches(d, host) for d in self.except_hosts)

    def to_dict(self) -> dict:
        return {
            "principal": self.principal, "host": self.host, "reason": self.reason,
            "acls": [{"acl_id": acl_id, "pattern_type": b.resource_pattern_type.name, "resource_name": b.name,
                      "principal": b.principal, "host": b.host, "operation": b.operation.name,
                      "permission_type": b.permission_type.name} for acl_id, b in self.acls],
            "except_hosts": list(self.except_hosts), "except_principals": list(self.except_principals),
            "via": None if self.via is None else self.via.to_dict(),
        }


def live_tokens(travel: TimeTravel, n: int, now_ms: int | None, *, backend: HistoryBackend | None = None,
                image: SecurityImage | None = None) -> list[TokenAccess]:
    """The token accesses live in the state after the first ``n`` events at ``now_ms`` (default: the time of
    that state's last event); ``image``, that state if at hand, spares the log when no token there can be
    held by anyone but its owner (no other requester, no renewer)."""
    if image is not None and not any(t.requester != t.owner or t.renewers for t in image.tokens):
        return []
    if now_ms is None:
        now_ms = travel.timestamp_before(n)
    if now_ms is None:
        return []
    return [a for a in token_access(travel, hi=n, backend=backend) if a.live(n, now_ms)]


def _through_tokens(grants: list[Grant], live: Iterable[TokenAccess]) -> list[Grant]:
    """The grants a token's holder has as its owner: one per grant of the owner, after ``grants`` (a holder the
    'User:*' grant already lets in gains nothing from the owner's share of it)."""
    found = []
    for access in live:
        for grant in grants:
            if grant.via is not None or not grant.acts_for(access.owner):
                continue
            if grant.principal == WILDCARD_PRINCIPAL and grant.acts_for(access.holder):
                continue
            found.append(replace(grant, principal=access.holder, except_principals=(), via=access))
    return grants + found


def who_could(
    image: SecurityImage,
    config: StoreConfig,
    operation: AclOperation | str,
    resource_type: ResourceType | str,
    resource_name: str,
    tokens: Iterable[TokenAccess] = (),
) -> list[Grant]:
    """Every grant by which some principal may perform the operation on the resource in ``image``.

    Super users first, then the 'User:*' grant, then principals by name, then
    the holders of the live ``tokens`` under each grant of the token's owner.  A
    (principal, host) is allowed by ``authorize`` iff some grant without ``via``
    ``allows`` it: each grant is a request ``acl_decision.decide`` allows, the
    grant's ACL host taken as the client host, with the ALLOWs of that host and
    every DENY that applies to the principal.
    """
    op, rt, name = resource_question(operation, resource_type, resource_name)
    return _through_tokens(_grants(acls_on(image.acls, rt, name), config, op), tokens)


def who_could_at(
    travel: TimeTravel,
    config: StoreConfig,
    operation: AclOperation | str,
    resource_type: ResourceType | str,
    resource_name: str,
    n: int,
    *,
    backend: HistoryBackend | None = None,
    now_ms: int | None = None,
) -> list[Grant]:
    """``who_could`` in the state after the first ``n`` events (``n`` already resolved), from the ACLs
    ``backend`` holds in force then on the resource's patterns, with the tokens live then (``now_ms``:
    the time asked, default the time of the state's last event)."""
    op, rt, name = resource_question(operation, resource_type, resource_name)
    grants = _grants((backend or IndexOrScan(travel)).acls_at(n, rt, name), config, op)
    return _through_tokens(grants, live_tokens(travel, n, now_ms, backend=backend))


def _grants(on_resource: list[tuple[str, AclBinding]], config: StoreConfig, op: AclOperation) -> list[Grant]:
    """who_could's answer from the ACLs whose pattern covers the resource, by ACL id."""
    grants = [Grant(su, WILDCARD, SUPER_USER) for su in sorted(config.super_users)]
    if not on_resource:
        default = decide(WILDCARD_PRINCIPAL, WILDCARD, op, (), resource_has_acls=False,
                         allow_if_no_acl=bool(config.allow_everyone_if_no_acl_found))
        if default.allowed:
            grants.append(Grant(WILDCARD_PRINCIPAL, WILDCARD, default.reason))
        return grants
    allows: dict[str, list[tuple[str, AclBinding]]] = {}
    denies: dict[str, list[tuple[str, AclBinding]]] = {}
    for pair in on_resource:
        entry = pair[1].entry
        what = effect(entry, op)
        if what is not None:
            (denies if what == AclPermissionType.DENY else allows).setdefault(entry.principal, []).append(pair)
    wild_allow = allows.pop(WILDCARD_PRINCIPAL, [])
    wild_deny = denies.pop(WILDCARD_PRINCIPAL, [])
    denied_principals = tuple(sorted(p for p in denies if p not in config.super_users))
    grants += _host_grants(WILDCARD_PRINCIPAL, op, wild_allow, wild_deny, denied_principals)
    for principal in sorted(set(allows) | set(denies)):
        if principal in config.super_users:
            continue
        own_allow, own_deny = allows.get(principal, []), denies.get(principal, [])
        if own_deny:  # out of the wildcard grant: everything that allows it is listed here
            grants += _host_grants(principal, op, own_allow + wild_allow, own_deny + wild_deny)
        else:
            grants += _host_grants(principal, op, own_allow, wild_deny)
    return grants


def _host_grants(principal: str, op: AclOperation, allow: list, deny: list,
                 except_principals: tuple[str, ...] = ()) -> list[Grant]:
    """One grant per allowing ACL host the decision allows, excepting the DENY hosts inside it."""
    by_host: dict[str, list[tuple[str, AclBinding]]] = {}
    for pair in allow:
        by_host.setdefault(pair[1].entry.host, []).append(pair)
    deny_hosts = sorted({binding.entry.host for _, binding in deny})
    grants = []
    for host in sorted(by_host):
        decision = decide(principal, host, op, by_host[host] + deny, resource_has_acls=True)
        if not decision.allowed:
            continue
        excepted = tuple(d for d in deny_hosts if _overlaps(host, d))
        grants.append(Grant(principal, host, decision.reason, decision.acls, excepted, except_principals))
    return grants


def _overlaps(host: str, deny: str) -> bool:
    """Whether some client admitted by ``host`` may be refused by ``deny`` (listing extra is harmless)."""
    if host == WILDCARD:
        return True
    network = acl_network(host)
    if network is None:
        return False  # a plain host admits one client, and it is not refused (else covered)
    if host_matches(host, deny):
        return True
    other = acl_network(deny)
    if other is None or other[0] != network[0]:
        return False
    mask = network[2] & other[2]
    return network[1] & mask == other[1] & mask


# -- access timeline ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Interval:
    """Offsets [start_offset, end_offset) of ``as_of`` in which the access was allowed.

    ``opened_by`` is the event at offset ``start_offset - 1`` (None when the
    access held from the store's beginning: a super user, or no ACL with
    allow.everyone.if.no.acl.found); ``closed_by`` the event at
    ``end_offset - 1`` (None while still open).  Times are those events'.
    """

    start_offset: int
    start_ms: int | None
    opened_by: Change | None
    end_offset: int | None = None
    end_ms: int | None = None
    closed_by: Change | None = None
    reason: str = ALLOWED_BY_ACL  # why access held when the interval opened
    via: TokenAccess | None = None  # access as a token's owner: opened or closed by the token where no change says

    def contains(self, offset: int) -> bool:
        """Whether the state as_of(offset=offset) falls in this interval."""
        return self.start_offset <= offset and (self.end_offset is None or offset < self.end_offset)

    def to_dict(self) -> dict:
        return {
            "start_offset": self.start_offset, "start_ms": self.start_ms,
            "opened_by": None if self.opened_by is None else self.opened_by.to_dict(),
            "end_offset": self.end_offset, "end_ms": self.end_ms,
            "closed_by": None if self.closed_by is None else self.closed_by.to_dict(), "reason": self.reason,
            "via": None if self.via is None else self.via.to_dict(),
        }


class _Tracked:
    """The ACLs on one resource, kept up to date from the log, and the decision they make for one request
    (``host`` None: from any host, the first host the principal is allowed from)."""

    def __init__(self, principal: str, host: str | None, op: AclOperation, rt: ResourceType, name: str,
                 config: StoreConfig):
        self.principal, self.host, self.op, self.rt, self.name = principal, host, op, rt, name
        self.on_resource: set[str] = set()
        self.applying: dict[str, AclBinding] = {}  # the ACLs of on_resource that apply to principal and host
        self.settings(config)

    def settings(self, config: StoreConfig) -> None:
        """Decide with ``config``'s super users and no-ACL default (the settings in force from here on); the
        ACLs tracked stay."""
        self.super_users = frozenset(config.super_users)
        self.allow_if_no_acl = bool(config.allow_everyone_if_no_acl_found)

    def covers(self, binding: AclBinding) -> bool:
        return covers(binding.pattern, self.rt, self.name)

    def add(self, acl_id: str, binding: AclBinding) -> None:
        self.on_resource.add(acl_id)
        if (applies(binding.entry, self.principal, self.host) if self.host is not None
                else principal_applies(binding.entry.principal, self.principal)):
            self.applying[acl_id] = binding

    def remove(self, acl_id: str) -> None:
        self.on_resource.discard(acl_id)
        self.applying.pop(acl_id, None)

    def decision(self) -> Decision:
        if self.host is not None:
            return self._decide(self.host)
        hosts = sorted({b.entry.host for b in self.applying.values()} - {WILDCARD})
        first = self._decide(WILDCARD)
        return next((d for d in map(self._decide, hosts) if d.allowed), first) if not first.allowed else first

    def _decide(self, host: str) -> Decision:
        return decide(self.principal, host, self.op, self.applying.items(),
                      resource_has_acls=bool(self.on_resource), super_users=self.super_users,
                      allow_if_no_acl=self.allow_if_no_acl)


def _merged(acl_changes, setting_changes: list) -> Iterator:
    """ACL changes and settings changes (HistoryEntry) in offset order."""
    settings = iter(setting_changes)
    pending = next(settings, None)
    for change in acl_changes:
        while pending is not None and pending.offset < change.offset:
            yield pending
            pending = next(settings, None)
        yield change
    while pending is not None:
        yield pending
        pending = next(settings, None)


def access_timeline(
    travel: TimeTravel,
    config: StoreConfig,
    principal: str,
    operation: AclOperation | str,
    resource_type: ResourceType | str,
    resource_name: str,
    host: str | None = None,
    *,
    backend: HistoryBackend | None = None,
) -> list[Interval]:
    """The intervals in which ``authorize(principal, host, operation, resource)`` was true, and those in which
    the principal held a live token of an owner for whom it was true (``Interval.via``), in order.

    ``host`` None (the default) is any host: the intervals in which the principal was allowed from some
    host, as ``who_could`` lists its grants (each ACL host the principal is allowed from, and '*', a host
    no ACL names, taken as the client's host)."""
    op, rt, name = resource_question(operation, resource_type, resource_name)
    with validation.reraised_as(QueryError):
        validation.principal(principal, selects=True)
        if host is not None:
            validation.nonempty_text(host, "host", selects=True)
    intervals = _timeline(travel, config, principal, op, rt, name, host, backend)
    for access in token_access(travel, holder=principal, backend=backend):
        owned = _timeline(travel, config, access.owner, op, rt, name, host, backend)
        intervals += [i for i in (_while_held(travel, o, access) for o in owned) if i is not None]
    return sorted(intervals, key=lambda i: (i.start_offset, i.via is not None))


def _while_held(travel: TimeTravel, owned: Interval, access: TokenAccess) -> Interval | None:
    """The part of the owner's interval ``owned`` in which ``access``'s holder held the token (None: none)."""
    held_from, until_ms = access.start_offset + 1, access.until_ms
    if access.end_offset is not None:
        held_to: int | None = access.end_offset + 1
    else:  # the first state stamped past the expiry, if the log holds one
        past = travel.log.offset_for_timestamp(until_ms + 1)
        held_to = past + 1 if past < travel.log.end_offset else None
    start = max(owned.start_offset, held_from)
    ends = [e for e in (owned.end_offset, held_to) if e is not None]
    end = min(ends) if ends else None
    if end is not None and start >= end:
        return None
    by_owner = owned.start_offset >= held_from
    start_ms = owned.start_ms if by_owner else access.start_ms
    closed_by_owner = owned.end_offset is not None and (held_to is None or owned.end_offset <= held_to)
    end_ms = owned.end_ms if closed_by_owner else until_ms
    return Interval(start, start_ms, owned.opened_by if by_owner else None, end, end_ms,
                    owned.closed_by if closed_by_owner else None, owned.reason, access)


def _timeline(travel: TimeTravel, config: StoreConfig, principal: str, op: AclOperation, rt: ResourceType,
              name: str, host: str | None, backend: HistoryBackend | None) -> list[Interval]:
    """The intervals in which ``principal`` itself was allowed (the arguments checked)."""
    log = travel.log
    start, end = log.start_offset, log.end_offset
    begin_ms = travel.begin_ms() if start == 0 else travel.timestamp_before(start)
    backend = backend or IndexOrScan(travel)
    logged = dict(travel.image_at(start).settings) if start > 0 else {}  # the logged settings, as they go
    tracked = _Tracked(principal, host, op, rt, name, logged_settings.with_values(config, logged))
    if start > 0:  # older segments were deleted: begin from the state at the log's start
        for acl_id, binding in travel.image_at(start).acls:
            if tracked.covers(binding):
                tracked.add(acl_id, binding)
    # settings changes (super.users, allow.everyone.if.no.acl.found) open and close access as ACL changes do
    setting_changes = list(backend.entries(HistoryQuery(start, end, event_types=frozenset({"SecuritySettingAltered"}))))
    decision = tracked.decision()
    if decision.reason == SUPER_USER and not setting_changes:  # no logged change can alter it
        return [Interval(start, begin_ms, None, reason=SUPER_USER)]
    intervals: list[Interval] = []
    allowed = decision.allowed
    opened: tuple | None = None  # (start offset, start ms, opener, reason) of the open interval
    if allowed:
        opened = (start, begin_ms, None, decision.reason)
    for change in _merged(backend.acl_changes(start, end, rt, name), setting_changes):
        if change.event_type == "SecuritySettingAltered":
            logged[change.payload["setting_name"]] = change.payload["setting_value"]
            tracked.settings(logged_settings.with_values(config, {k: v for k, v in logged.items() if v is not None}))
        elif change.event_type == "AclCreated":
            tracked.remove(change.acl_id)
            tracked.add(change.acl_id, change.binding)
        elif change.acl_id in tracked.on_resource:
            tracked.remove(change.acl_id)
        else:
            continue
        decision = tracked.decision()
        if decision.allowed == allowed:
            continue
        allowed = decision.allowed
        if allowed:
            opened = (change.offset + 1, change.timestamp_ms, change, decision.reason)
        elif opened is not None:
            start_offset, start_ms, opener, reason = opened
            intervals.append(Interval(start_offset, start_ms, opener, change.offset + 1, change.timestamp_ms,
                                      change, reason))
            opened = None
    if opened is not None:
        start_offset, start_ms, opener, reason = opened
        intervals.append(Interval(start_offset, start_ms, opener, reason=reason))
    return intervals
