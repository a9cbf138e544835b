"""Who could act as whom through a delegation token, and when: the one rule every forensic query asks.

A token authenticates as its owner only (SASL/SCRAM with the token id as the user name and
its HMAC as the password: the session's principal is the owner, Kafka's rule).  So whoever
holds the HMAC could act as the owner:

- the token's requester, from its issue (CreateDelegationToken's response carries the HMAC);
- anyone else but the owner who renewed or expired the token (a named renewer: both requests
  need the HMAC), from that request on; a renewer that never used the token is not listed,
  since nothing logged shows it was given the HMAC;

until the token is removed (by request or by the expiry sweep) or its expiry passes
(``TokenInfo.is_expired``, the one expiry rule; a renewal moves the expiry).  The owner itself
gains nothing from its own token.

``token_access`` folds the logged token events (asked of a ``HistoryBackend``) into
``TokenAccess`` values; who_could, access_timeline, history and diff (and their CLI
commands) and the Spark queries show them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from secmeta.core.forensics.backend import HistoryBackend, HistoryEntry, HistoryQuery
from secmeta.core.forensics.preferred import IndexOrScan
from secmeta.core.times import format_ms
from secmeta.events.entities import TOKENS
from secmeta.projections.tokens import TokenInfo

if TYPE_CHECKING:
    from secmeta.core.forensics.timetravel import TimeTravel

__all__ = ["RENEWER", "REQUESTER", "TokenAccess", "issued_access", "requester_access", "token_access",
           "token_accesses"]

REQUESTER = "requester"  # the holder requested the token: the response gave it the HMAC
RENEWER = "renewer"  # the holder renewed or expired the token: it held the HMAC from then on
_ISSUED, _REMOVED = TOKENS.open_names[0], TOKENS.close_names[0]
_EVENTS = frozenset(TOKENS.event_names)


@dataclass(frozen=True, slots=True)
class TokenAccess:
    """``holder`` could act as ``token.owner`` through ``token`` from the state after offset ``start_offset``
    (the event that gave it the HMAC) until the removal at ``end_offset`` (None: not removed) or the expiry.

    ``token`` is the token as issued; ``expiries``: (offset, expiry ms) of each renew or expire request.
    """

    holder: str
    how: str  # REQUESTER or RENEWER
    token: TokenInfo
    start_offset: int
    start_ms: int
    expiries: tuple[tuple[int, int], ...] = ()
    end_offset: int | None = None
    end_ms: int | None = None

    @property
    def owner(self) -> str:
        return self.token.owner

    @property
    def token_id(self) -> str:
        return self.token.token_id

    def expiry_before(self, n: int | None = None) -> int:
        """The token's expiry in the state after the first ``n`` events (None: after the last one known)."""
        expiry = self.token.expiry_timestamp_ms
        for offset, value in self.expiries:
            if n is None or offset < n:
                expiry = value
        return expiry

    def live(self, n: int, now_ms: int) -> bool:
        """Whether the holder could act as the owner in the state after the first ``n`` events, at ``now_ms``."""
        if n <= self.start_offset or (self.end_offset is not None and n > self.end_offset):
            return False
        return not replace(self.token, expiry_timestamp_ms=self.expiry_before(n)).is_expired(now_ms)

    @property
    def until_ms(self) -> int:
        """When the access ended or ends: the removal, else the expiry as it stands (never past the max)."""
        expiry = min(self.expiry_before(), self.token.max_timestamp_ms)
        return expiry if self.end_ms is None else min(self.end_ms, expiry)

    def sentence(self) -> str:
        """How every answer says it: "User:mallory could act as User:alice through token T, issued at ... at
        User:mallory's request"."""
        return (f"{self.holder} could act as {self.owner} through token {self.token_id}, issued at "
                f"{format_ms(self.token.issue_timestamp_ms)} at {self.token.requester}'s request")

    def to_dict(self) -> dict[str, Any]:
        return {"holder": self.holder, "owner": self.owner, "token_id": self.token_id, "how": self.how,
                "requester": self.token.requester, "issue_timestamp_ms": self.token.issue_timestamp_ms,
                "start_offset": self.start_offset, "start_ms": self.start_ms, "end_offset": self.end_offset,
                "until_ms": self.until_ms, "removed": self.end_offset is not None, "sentence": self.sentence()}


def requester_access(info: TokenInfo, offset: int, timestamp_ms: int) -> TokenAccess | None:
    """The access the issue of ``info`` (at ``offset``) gives its requester; None when the owner requested it."""
    if info.requester == info.owner:
        return None
    return TokenAccess(info.requester, REQUESTER, info, offset, timestamp_ms)


def issued_access(entry: HistoryEntry) -> TokenAccess | None:
    """The access a history row gives a token's requester: for a DelegationTokenIssued row of a token whose
    requester is not its owner, else None."""
    if entry.event_type != _ISSUED:
        return None
    return requester_access(TokenInfo.of(entry.payload), entry.offset, entry.timestamp_ms)


def token_accesses(entries: Iterable[HistoryEntry], at_start: Iterable[TokenInfo] = (),
                   start: int = 0) -> list[TokenAccess]:
    """Every (holder, token) access the token events ``entries`` (in offset order) show; ``at_start``: the tokens
    open in the state at offset ``start``, where ``entries`` begin (their requesters hold them from there)."""
    tokens = {info.token_id: info for info in at_start}
    by_token: dict[str, list[TokenAccess]] = {
        token_id: [a for a in (requester_access(info, start - 1, info.issue_timestamp_ms),) if a is not None]
        for token_id, info in tokens.items()}
    for entry in entries:
        if entry.event_type not in _EVENTS:
            continue
        token_id = entry.payload["token_id"]
        if entry.event_type == _ISSUED:
            issued = tokens[token_id] = TokenInfo.of(entry.payload)
            first = requester_access(issued, entry.offset, entry.timestamp_ms)
            by_token[token_id] = [] if first is None else [first]
            continue
        info, held = tokens.get(token_id), by_token.get(token_id)
        if info is None or held is None:
            continue  # a token this window never saw issued
        if entry.event_type == _REMOVED:
            by_token[token_id] = [replace(a, end_offset=entry.offset, end_ms=entry.timestamp_ms)
                                  if a.end_offset is None else a for a in held]
            tokens.pop(token_id)
            continue
        expiry = (entry.offset, entry.payload["expiry_timestamp_ms"])
        held = [replace(a, expiries=(*a.expiries, expiry)) for a in held]
        actor = entry.actor_principal
        if actor != info.owner and all(a.holder != actor for a in held):
            held.append(TokenAccess(actor, RENEWER, info, entry.offset, entry.timestamp_ms, (expiry,)))
        by_token[token_id] = held
    return sorted((a for held in by_token.values() for a in held),
                  key=lambda a: (a.start_offset, a.token_id, a.holder))


def token_access(travel: TimeTravel, *, holder: str | None = None, owner: str | None = None,
                 hi: int | None = None, backend: HistoryBackend | None = None) -> list[TokenAccess]:
    """Every access through a token logged before offset ``hi`` (default: the log's end), of ``holder`` and/or
    as ``owner`` when given, in the order they began."""
    log = travel.log
    lo, hi = log.start_offset, log.end_offset if hi is None else hi
    at_start = list(travel.image_at_or_after(lo).tokens) if lo > 0 else []
    entries = (backend or IndexOrScan(travel)).entries(
        HistoryQuery(lo, hi, principal=holder or owner, event_types=_EVENTS)) if lo < hi else iter(())
    return [a for a in token_accesses(entries, at_start, lo)
            if (holder is None or a.holder == holder) and (owner is None or a.owner == owner)]
