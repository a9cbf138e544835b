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
its expiry before the first and after the last such event.

Both check their arguments here and ask a ``HistoryBackend``
(secmeta.core.forensics.backend): by default the history index where it
answers, else the log scan (``IndexOrScan``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from secmeta.core.errors import QueryError
from secmeta.core.forensics.backend import (
    Diff,
    HistoryBackend,
    HistoryEntry,
    HistoryQuery,
    ResourceMatch,
    TokenExpiryChange,
)
from secmeta.core.forensics.preferred import IndexOrScan
from secmeta.core.forensics.timetravel import TimeTravel
from secmeta.core.times import require_point_int
from secmeta.events.records import EVENT_TYPES
from secmeta.events.types import AclBindingFilter, ResourcePattern, ResourcePatternFilter

__all__ = ["Diff", "HistoryEntry", "TokenExpiryChange", "diff", "history"]


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
    backend: HistoryBackend | None = None,
) -> Iterator[HistoryEntry]:
    """The logged changes in offset order that pass every filter given.

    ``principal`` matches the actor or a principal the event involves
    (secmeta.events.entities: an ACL's principal; a token's owner, requester
    or renewer, on every event of the token; a SCRAM user as ``User:<name>``).
    ``user`` matches SCRAM events of that user.  ``resource`` selects ACL
    events whose pattern it matches (Kafka filter rules; MATCH finds every
    pattern that applies to a name) and, for DELEGATION_TOKEN, token events
    by token id.  ``start_ms``/``end_ms`` are inclusive, ``start_offset``
    inclusive and ``end_offset`` exclusive.  ``backend`` answers (default:
    the history index where it can, else a scan of the log).
    """
    types = _event_types(event_types)
    match = None if resource is None else ResourceMatch.of(resource)
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
    query = HistoryQuery(lo, hi, principal, user, types, match, start_ms, end_ms)
    return _entries(backend or IndexOrScan(travel), query, limit)


def _entries(backend: HistoryBackend, query: HistoryQuery, limit: int | None) -> Iterator[HistoryEntry]:
    if limit == 0 or query.lo >= query.hi:
        return
    for emitted, entry in enumerate(backend.entries(query), 1):
        yield entry
        if limit is not None and emitted >= limit:
            return


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


def diff(travel: TimeTravel, a: int, b: int, *, backend: HistoryBackend | None = None) -> Diff:
    """The changes between the states at offsets ``a`` <= ``b`` (both already validated)."""
    require_point_int("offset", a)
    require_point_int("offset", b)
    if a > b:
        raise QueryError(f"a diff runs forward: its start (offset {a}) is after its end (offset {b})")
    return (backend or IndexOrScan(travel)).diff(a, b)
