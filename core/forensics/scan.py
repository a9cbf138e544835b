"""The reference history backend: every answer read from the log (and, for states at a point, time travel's images).

It needs nothing derived from the log beyond time travel, so it answers for any range
the log holds; the history index must answer exactly as it does (the contract suite in
tests/core/forensics/history_contract.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from secmeta.core.forensics.backend import (
    OTHER_KINDS,
    Change,
    Diff,
    HistoryEntry,
    HistoryQuery,
    about_principal,
    attributes,
    entity_changes,
    expiry_changes,
    open_keys,
    token_parties,
)
from secmeta.events.entities import ACLS, CREDENTIALS, TOKENS, Parties, kind_of
from secmeta.events.records import (
    DelegationTokenIssued,
    DelegationTokenRenewed,
    Envelope,
    Event,
)
from secmeta.events.redact import redacted
from secmeta.events.types import AclBinding, ResourceType, ScramMechanism
from secmeta.projections.acl_match import covers
from secmeta.projections.authorizer import acls_on
from secmeta.projections.entity_events import opening_events
from secmeta.projections.image import SecurityImage

if TYPE_CHECKING:
    from secmeta.core.forensics.timetravel import TimeTravel

__all__ = ["LogScan", "matching_entries"]


class _WindowParties:
    """``entities.Parties`` for a window of the log starting at offset ``lo``.

    An event opening an entity in the window says who the entity involves; for a later
    event of an entity opened before ``lo``, the parties of the entities open at ``lo`` are
    asked of ``at_start`` (once, and only when such an event is met).
    """

    __slots__ = ("_at_start", "_opened", "_start", "_window")

    def __init__(self, at_start: Callable[[], dict[str, tuple[str, ...]]]):
        self._at_start = at_start
        self._window = Parties()
        self._opened: set[str] = set()
        self._start: Parties | None = None

    def observe(self, event: Event) -> None:
        """Note who an entity opened by ``event`` involves (every event of the window, in order)."""
        kind = kind_of(event)
        if kind.carries_parties and type(event) in kind.opens:
            self._window.observe(event)
            self._opened.add(event.entity_key)

    def of(self, event: Event) -> tuple[str, ...]:
        """Every principal ``event`` involves: those it names and those its entity's opening event named."""
        if not kind_of(event).carries_parties or event.entity_key in self._opened:
            return self._window.of(event)
        if self._start is None:
            self._start = Parties(self._at_start().items())
        return self._start.of(event)


class _WindowOpen:
    """Whether each entity was open just before an event, for a window of the log starting at offset ``lo``:
    from the window's earlier events, else from the keys open at ``lo`` (``at_start``, asked once, and only
    for an opening event of a key the window has not met)."""

    __slots__ = ("_at_start", "_start", "_state")

    def __init__(self, at_start: Callable[[], frozenset[str]]):
        self._at_start = at_start
        self._start: frozenset[str] | None = None
        self._state: dict[str, bool] = {}

    def before(self, event: Event) -> bool:
        """Whether ``event``'s entity was open before it (every event of the window, in order)."""
        kind = kind_of(event)
        role = kind.role(event)
        if kind.single_use_keys:
            return role != "open"
        key = event.entity_key
        known = self._state.get(key)
        if known is None and role == "open":
            if self._start is None:
                self._start = self._at_start()
            known = key in self._start
        self._state[key] = role != "close"
        return bool(known)


class LogScan:
    """The history backend that reads the log: the reference every other backend must equal."""

    def __init__(self, travel: TimeTravel):
        self.travel = travel

    def entries(self, query: HistoryQuery) -> Iterator[HistoryEntry]:
        travel = self.travel
        return matching_entries(travel.log.read(query.lo, query.hi), query,
                                lambda: token_parties(travel.image_at_or_after(query.lo)),
                                lambda: open_keys(travel.image_at_or_after(query.lo)))

    def acl_changes(self, lo: int, hi: int, resource_type: ResourceType, name: str) -> Iterator[Change]:
        for envelope in self.travel.log.read(lo, hi):
            if kind_of(envelope.event) is ACLS and covers(envelope.event.binding.pattern, resource_type, name):
                yield Change.of(envelope)

    def acls_at(self, n: int, resource_type: ResourceType, name: str) -> list[tuple[str, AclBinding]]:
        return acls_on(self.travel.image_at(n).acls, resource_type, name)

    def diff(self, a: int, b: int) -> Diff:
        """The diff from the events between both points, and the images there for the entities they touch
        other than ACLs (none are built when only ACLs changed).

        ACLs are netted by id from their events (ids are never reused: a fresh UUID per created ACL): one
        created in between and not deleted was added, one deleted in between but not created there was
        removed (its deletion carries its binding), as the images' difference has them.
        """
        travel = self.travel
        images: dict[int, SecurityImage] = {}

        def image(n: int) -> SecurityImage:
            if n not in images:
                images[n] = travel.image_at(n)
            return images[n]

        added_acls: dict[str, AclBinding] = {}
        removed_acls: dict[str, AclBinding] = {}
        cred_keys: set[tuple[str, ScramMechanism]] = set()
        token_ids: set[str] = set()
        others: set[str] = set()  # entity keys of the other kinds
        renewed: dict[str, list] = {}
        expired: dict[str, list] = {}
        expiry: dict[str, tuple[str, int]] = {}  # token_id -> (owner, current expiry) while scanning

        def current(token_id: str) -> tuple[str, int] | None:
            if token_id not in expiry:
                info = image(a).tokens.get(token_id)
                if info is None:
                    return None
                expiry[token_id] = (info.owner, info.expiry_timestamp_ms)
            return expiry[token_id]

        for envelope in travel.log.read(a, b):
            event = envelope.event
            kind = type(event)
            entity = kind_of(event)
            if entity is ACLS:
                if kind in ACLS.opens:
                    added_acls[event.acl_id] = event.binding
                elif added_acls.pop(event.acl_id, None) is None:
                    removed_acls[event.acl_id] = event.binding
            elif entity is CREDENTIALS:
                cred_keys.add((event.user, ScramMechanism(event.mechanism)))
            elif entity is not TOKENS:
                others.add(event.entity_key)
            else:
                token_ids.add(event.token_id)
                if kind is DelegationTokenIssued:
                    expiry[event.token_id] = (event.owner, event.expiry_timestamp_ms)
                elif kind in TOKENS.updates:
                    known = current(event.token_id)
                    if known is None:
                        continue
                    owner, old = known
                    target = renewed if kind is DelegationTokenRenewed else expired
                    entry = target.setdefault(event.token_id, [owner, old, old, envelope.offset])
                    entry[2], entry[3] = event.expiry_timestamp_ms, envelope.offset
                    expiry[event.token_id] = (owner, event.expiry_timestamp_ms)

        upserted, deleted = [], []
        for user, mechanism in sorted(cred_keys):
            old, new = image(a).scram.get(user, mechanism), image(b).scram.get(user, mechanism)
            if old == new:
                continue
            if new is not None:
                upserted.append((user, mechanism, new.iterations))
            elif old is not None:
                deleted.append((user, mechanism, old.iterations))
        issued, gone = [], []
        for token_id in sorted(token_ids):
            old, new = image(a).tokens.get(token_id), image(b).tokens.get(token_id)
            if old is None and new is not None:
                issued.append(new)
            elif old is not None and new is None:
                gone.append(old)
        before, after = (image(a), image(b)) if others else (SecurityImage.EMPTY, SecurityImage.EMPTY)
        return Diff(a, b, tuple((i, added_acls[i]) for i in sorted(added_acls)),
                    tuple((i, removed_acls[i]) for i in sorted(removed_acls)), tuple(upserted), tuple(deleted),
                    tuple(issued), expiry_changes(renewed), expiry_changes(expired), tuple(gone),
                    entity_changes(_states(before, others), _states(after, others), others))


def _states(image: SecurityImage, keys: set[str]) -> dict[str, dict]:
    """The attributes of each entity of ``keys`` open in ``image`` (as its opening event, redacted, gives them)."""
    if not keys:
        return {}
    return {event.entity_key: attributes(kind_of(event), redacted(Envelope(-1, 0, "", "", "", event))["payload"])
            for event in opening_events(image, OTHER_KINDS) if event.entity_key in keys}



def matching_entries(envelopes: Iterable[Envelope], query: HistoryQuery,
                     parties_at_start: Callable[[], dict[str, tuple[str, ...]]],
                     open_at_start: Callable[[], frozenset[str]]) -> Iterator[HistoryEntry]:
    """The history rule over ``envelopes`` (in offset order, up to ``query.hi``): the entries that pass ``query``.

    Envelopes before ``query.lo`` only inform who each entity involves and whether it was open;
    ``parties_at_start`` / ``open_at_start`` answer for the entities open before the first envelope
    (asked only when needed). The log scan passes the window's envelopes; a reader of every event from
    offset 0 (the Delta history table) passes all of them and needs neither.
    """
    principal, user, types, resource = query.principal, query.user, query.event_types, query.resource
    parties = _WindowParties(parties_at_start)
    opened = _WindowOpen(open_at_start)
    for envelope in envelopes:
        if envelope.offset >= query.hi:
            return
        if envelope.offset < query.lo:
            parties.observe(envelope.event)
            opened.before(envelope.event)
            continue
        if query.start_ms is not None and envelope.timestamp_ms < query.start_ms:
            continue
        if query.end_ms is not None and envelope.timestamp_ms > query.end_ms:
            continue
        event = envelope.event
        involved = parties.of(event)  # who the event and its entity's previous opening event name
        parties.observe(event)  # before any filter: a later event may need the parties this one names
        was_open = opened.before(event)
        if types is not None and envelope.event_type not in types:
            continue
        if user is not None and not (kind_of(event) is CREDENTIALS and event.user == user):
            continue
        if resource is not None and not resource.matches(envelope.event_type, getattr(event, "binding", None),
                                                         event.entity_key):
            continue
        if principal is not None and not about_principal(envelope, principal, involved):
            continue
        yield HistoryEntry.of(envelope, was_open)
