"""The state topic's form of each logged event: the whole entity after it, derived from the kind declarations.

The compacted state topic keeps the latest message per entity key, so that message must be the
whole entity (``secmeta.events.entities``):

- an event that opens an entity is already whole;
- an event that updates one carries only some attributes: its state form is the event that opened
  the entity, with those attributes changed (``EntityKind.updated``; e.g. a token renewal becomes
  the ``DelegationTokenIssued`` with the new expiry), at the update's log offset;
- an event that closes an entity (a closing type, or ``closed_when_none``'s attribute None) goes out
  as itself and is followed by a tombstone.

Only entities of kinds with update events are remembered (each one's current opening event).
Folding is per chunk: ``commit`` keeps what the chunk changed, ``discard`` forgets it (the chunk
is sent again). The first update of an entity not folded so far asks ``opened()`` once for every
such entity open at the last commit (the publisher's checkpoint: it reads the image there).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace

from secmeta.events.entities import EntityKind, kind_of
from secmeta.events.records import Envelope, Event

__all__ = ["StateForm"]

logger = logging.getLogger("secmeta.kafka.publisher")


class StateForm:
    """Folds events into their state-topic form; see the module's docstring."""

    __slots__ = ("_opened", "_kind_of", "_known", "_complete", "_pending", "_as_is")

    def __init__(self, opened: Callable[[], Iterable[Event]],
                 kind_of: Callable[[Event], EntityKind] = kind_of) -> None:
        self._opened = opened
        self._kind_of = kind_of
        self._known: dict[str, Event] = {}  # as of the last commit: the open entities folded (all, once complete)
        self._complete = False
        self._pending: dict[str, Event | None] = {}  # this chunk's changes (None: closed)
        # event type -> whether a tombstone follows, for the types that go out as themselves whatever they hold
        # (their kind has no update events, and their role is their type's alone)
        self._as_is: dict[type, bool] = {}

    def of(self, envelope: Envelope) -> tuple[Envelope, bool]:
        """The state-topic envelope of ``envelope`` and whether a tombstone follows it."""
        event = envelope.event
        closes = self._as_is.get(event.__class__)
        if closes is not None:
            return envelope, closes
        kind = self._kind_of(event)
        role = kind.role(event)
        if not kind.updates:
            if _by_type(kind, event.__class__) is not None:
                self._as_is[event.__class__] = role == "close"
            return envelope, role == "close"
        key = event.entity_key
        if role == "open":
            self._pending[key] = event
            return envelope, False
        if role == "close":
            self._pending[key] = None
            return envelope, True
        current = self._current(key)
        if current is None:
            logger.warning("%s at offset %d changes %s, which is not open at the checkpoint; publishing the "
                           "change itself to the state topic", envelope.event_type, envelope.offset, key)
            return envelope, False
        whole = self._pending[key] = kind.updated(current, event)
        return replace(envelope, event=whole), False

    def of_type(self, cls: type) -> bool | None:
        """For an event type whose events go out as themselves whatever they hold (its kind has no update events,
        and its role is its type's alone): whether a tombstone follows each; None for any other type (the form
        depends on the event: ``of``)."""
        closes = self._as_is.get(cls)
        if closes is None:
            closes = _by_type(self._kind_of(cls), cls)  # type: ignore[arg-type]
            if closes is not None:
                self._as_is[cls] = closes
        return closes

    def _current(self, key: str) -> Event | None:
        if key in self._pending:
            return self._pending[key]
        if key not in self._known and not self._complete:
            for event in self._opened():
                self._known.setdefault(event.entity_key, event)
            self._complete = True
        return self._known.get(key)

    def commit(self) -> None:
        """The chunk was delivered: its changes are what the next chunk starts from."""
        for key, event in self._pending.items():
            if event is None:
                self._known.pop(key, None)
            else:
                self._known[key] = event
        self._pending.clear()

    def discard(self) -> None:
        """The chunk will be sent again: forget its changes."""
        self._pending.clear()


def _by_type(kind: EntityKind, cls: type) -> bool | None:
    """Whether a tombstone follows each event of ``cls`` when its events go out as themselves whatever they hold (its
    kind has no update events, and its role is its type's alone: no ``closed_when_none`` attribute decides it);
    None otherwise."""
    if kind.updates or cls in kind.closing_when_none:
        return None
    return cls in kind.closes
