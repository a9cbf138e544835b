"""The combined security image (SCRAM, ACLs, tokens, client quotas, logged settings) and the delta that replays events.

``SecurityDelta(image)`` replays events (one ``replay`` per event type) into
sub-deltas created on first use; an event that removes, renews or expires
something absent raises InconsistentEventError (a bug in the log, surfaced); ``apply(next_offset)`` returns the next
image, reusing every sub-image its events did not touch.
``SecurityProjection`` is the ``secmeta.core.store.state`` projection over it.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import singledispatchmethod
from typing import Any, ClassVar

from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    AclRow,
    ClientQuotaAltered,
    DelegationTokenExpired,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    DelegationTokenRenewed,
    Envelope,
    Event,
    KeyRotated,
    LogRecovered,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
    SecuritySettingAltered,
)
from secmeta.events.types import ScramMechanism
from secmeta.projections.acls import AclsDelta, AclsImage
from secmeta.projections.errors import InconsistentEventError
from secmeta.projections.gc_pause import paused_gc
from secmeta.projections.quotas import QuotasDelta, QuotasImage
from secmeta.projections.scram import ScramDelta, ScramEntry, ScramImage
from secmeta.projections.settings import SettingsDelta, SettingsImage
from secmeta.projections.tokens import TokenInfo, TokensDelta, TokensImage

__all__ = ["NetChanges", "SecurityDelta", "SecurityImage", "SecurityProjection"]


@dataclass(frozen=True, slots=True)
class SecurityImage:
    """The whole security state after the events [0, next_offset)."""

    scram: ScramImage = ScramImage.EMPTY
    acls: AclsImage = AclsImage.EMPTY
    tokens: TokensImage = TokensImage.EMPTY
    next_offset: int = 0
    quotas: QuotasImage = QuotasImage.EMPTY
    settings: SettingsImage = SettingsImage.EMPTY
    EMPTY: ClassVar[SecurityImage]


SecurityImage.EMPTY = SecurityImage()


@dataclass(frozen=True, slots=True)
class NetChanges:
    """The net change a delta makes to its base image, kind by kind (each sub-delta's ``net``): ACL id -> row or None
    (removed), user -> mechanism -> credential or None, token id -> token or None, entity -> its quotas as they stand,
    setting name -> value or None.  ``SecurityDelta.of_net(base, net).apply(offset)`` is the image the delta gave."""

    acls: Mapping[str, AclRow | None]
    scram: Mapping[str, Mapping[ScramMechanism, ScramEntry | None]]
    tokens: Mapping[str, TokenInfo | None]
    quotas: Mapping[str, Mapping[str, float]]
    settings: Mapping[str, str | None]
    # the ids of ``acls`` the base image holds, when known; a dict of them to where the table of a base read in place
    # holds each (position, group: ``Deferred.where``), when that is known too
    acls_held: Container[str] | None = None


    def __len__(self) -> int:
        """How many entities change."""
        return (len(self.acls) + sum(map(len, self.scram.values())) + len(self.tokens) + len(self.quotas)
                + len(self.settings))


class SecurityDelta:
    """A SecurityImage plus the changes replayed into it so far."""

    __slots__ = ("image", "_scram", "_acls", "_tokens", "_quotas", "_settings")

    def __init__(self, image: SecurityImage):
        self.image = image
        self._scram: ScramDelta | None = None
        self._acls: AclsDelta | None = None
        self._tokens: TokensDelta | None = None
        self._quotas: QuotasDelta | None = None
        self._settings: SettingsDelta | None = None

    def scram_delta(self) -> ScramDelta:
        """The SCRAM sub-delta, created on first use."""
        if self._scram is None:
            self._scram = ScramDelta(self.image.scram)
        return self._scram

    def acls_delta(self) -> AclsDelta:
        """The ACL sub-delta, created on first use."""
        if self._acls is None:
            self._acls = AclsDelta(self.image.acls)
        return self._acls

    def tokens_delta(self) -> TokensDelta:
        """The token sub-delta, created on first use."""
        if self._tokens is None:
            self._tokens = TokensDelta(self.image.tokens)
        return self._tokens

    def quotas_delta(self) -> QuotasDelta:
        """The client-quota sub-delta, created on first use."""
        if self._quotas is None:
            self._quotas = QuotasDelta(self.image.quotas)
        return self._quotas

    def settings_delta(self) -> SettingsDelta:
        """The logged-settings sub-delta, created on first use."""
        if self._settings is None:
            self._settings = SettingsDelta(self.image.settings)
        return self._settings

    @singledispatchmethod
    def replay(self, event: Any) -> None:
        """Record the change one event makes."""
        raise TypeError(f"no replay for event type {type(event).__name__}")

    @replay.register
    def _(self, event: ScramCredentialUpserted) -> None:
        self.scram_delta().upsert(event.user, event.mechanism, event.iterations, event.secret)

    @replay.register
    def _(self, event: ScramCredentialDeleted) -> None:
        self.scram_delta().delete(event.user, event.mechanism)

    @replay.register
    def _(self, event: AclCreated) -> None:
        self.acls_delta().add(event.acl_id, event.binding)

    @replay.register
    def _(self, event: AclDeleted) -> None:
        self.acls_delta().remove(event.acl_id)

    @replay.register
    def _(self, event: DelegationTokenIssued) -> None:
        self.tokens_delta().issue(TokenInfo.of(event))

    @replay.register
    def _(self, event: DelegationTokenRenewed) -> None:
        self.tokens_delta().set_expiry(event.token_id, event.expiry_timestamp_ms)

    @replay.register
    def _(self, event: DelegationTokenExpired) -> None:
        self.tokens_delta().set_expiry(event.token_id, event.expiry_timestamp_ms)

    @replay.register
    def _(self, event: DelegationTokenRemoved) -> None:
        self.tokens_delta().remove(event.token_id)

    @replay.register
    def _(self, event: ClientQuotaAltered) -> None:
        self.quotas_delta().set(event.entity, event.key, event.value)

    @replay.register
    def _(self, event: SecuritySettingAltered) -> None:
        self.settings_delta().set(event.setting_name, event.setting_value)

    @replay.register
    def _(self, event: LogRecovered) -> None:
        """A repair of the log records what was cut; it changes no security state."""

    @replay.register
    def _(self, event: KeyRotated) -> None:
        """A key rotation names the log's new key; it changes no security state."""

    def replay_all(self, envelopes: Iterable[Envelope]) -> None:
        """Replay the events of ``envelopes`` in order (as ``replay_events``)."""
        envelopes = envelopes if isinstance(envelopes, list) else list(envelopes)
        self._replay([envelope.event for envelope in envelopes], lambda i: envelopes[i].offset)

    def replay_events(self, first_offset: int, events: Sequence[Event | AclRow]) -> None:
        """Replay a batch's events as ``Log.replay_batches`` reads them (an ACL's creation may come as its
        row, ``AclCreated.ROW``), the first at ``first_offset``.

        Same effect as ``replay`` per event (the registered handlers, not
        subclass overrides), with the dispatch resolved once per type and
        ACL creations and deletions recorded straight in the ACL delta. An event that does not
        fit the state before it raises InconsistentEventError naming its offset.
        """
        self._replay(events, first_offset.__add__)

    def _replay(self, events: Sequence[Event | AclRow], offset_of: Callable[[int], int]) -> None:
        acls = self.acls_delta()
        if _ROWS_ONLY.issuperset(map(type, events)):  # a batch of ACL creations read as rows: no loop per event
            acls.add_rows(events)  # type: ignore[arg-type]
            return
        if _REMOVALS_ONLY.issuperset(map(type, events)):  # a batch of ACL removals: checked after any pending rows
            acls.remove_later([event.acl_id for event in events], [offset_of(i) for i in range(len(events))])  # type: ignore[union-attr]
            return
        handlers = _HANDLERS
        add_row, remove = acls.add_row, acls.remove
        i = 0
        try:
            for i, event in enumerate(events):  # noqa: B007 (i names the offset of a failing event below)
                cls = event.__class__
                if cls is tuple:  # an ACL's creation as its row
                    add_row(event)  # type: ignore[arg-type]
                    continue
                if cls is AclDeleted:
                    remove(event.acl_id)
                    continue
                handler = handlers.get(cls)
                if handler is None:
                    handler = handlers[cls] = _DISPATCH(cls)
                handler(self, event)
        except InconsistentEventError as exc:
            if exc.offset is not None:  # a removal recorded for later (``AclsDelta.remove_later``), named already
                raise
            try:
                acls.check()  # a removal recorded for later that does not fit came first: it is the one named
            except InconsistentEventError as earlier:
                raise earlier from None
            raise exc.at(offset_of(i)) from None

    def net(self) -> NetChanges:
        """The net change the events replayed so far make to the base image (replaying goes on as before)."""
        acls = {} if self._acls is None else self._acls.net()
        return NetChanges(
            acls,
            {} if self._scram is None else self._scram.net(),
            {} if self._tokens is None else self._tokens.net(),
            {} if self._quotas is None else self._quotas.net(),
            {} if self._settings is None else self._settings.net(),
            set() if self._acls is None else self._acls.held_of(acls),
        )

    @classmethod
    def of_net(cls, image: SecurityImage, net: NetChanges) -> SecurityDelta:
        """A delta onto ``image`` holding ``net`` (what ``net`` gave for a delta onto the same image): its ``apply``
        gives the image that delta gave, ACLs deferred onto an image read in place (``acl_deferred``)."""
        delta = cls(image)
        if net.acls:
            delta._acls = AclsDelta.of_net(image.acls, net.acls, net.acls_held)
        if net.scram:
            delta._scram = ScramDelta.of_net(image.scram, net.scram)
        if net.tokens:
            delta._tokens = TokensDelta.of_net(image.tokens, net.tokens)
        if net.quotas:
            delta._quotas = QuotasDelta.of_net(image.quotas, net.quotas)
        if net.settings:
            delta._settings = SettingsDelta.of_net(image.settings, net.settings)
        return delta

    def apply(self, next_offset: int | None = None) -> SecurityImage:
        """The next image (at ``next_offset``, by default the base's), sharing untouched parts."""
        base = self.image
        scram = base.scram if self._scram is None else self._scram.apply()
        acls = base.acls if self._acls is None else self._acls.apply()
        tokens = base.tokens if self._tokens is None else self._tokens.apply()
        quotas = base.quotas if self._quotas is None else self._quotas.apply()
        settings = base.settings if self._settings is None else self._settings.apply()
        if next_offset is None:
            next_offset = base.next_offset
        if (
            scram is base.scram
            and acls is base.acls
            and tokens is base.tokens
            and quotas is base.quotas
            and settings is base.settings
            and next_offset == base.next_offset
        ):
            return base
        return SecurityImage(scram, acls, tokens, next_offset, quotas, settings)


_DISPATCH: Callable[[type], Callable[[SecurityDelta, Any], None]] = SecurityDelta.__dict__[
    "replay"
].dispatcher.dispatch
_HANDLERS: dict[type, Callable[[SecurityDelta, Any], None]] = {}
_ROWS_ONLY = frozenset((tuple,))  # the event classes of a batch that is all ACL rows
_REMOVALS_ONLY = frozenset((AclDeleted,))  # and of one that is all ACL removals


class SecurityProjection:
    """Projection (for ``secmeta.core.store.state``): replays a batch into the next SecurityImage."""

    empty: SecurityImage = SecurityImage.EMPTY

    def delta(self, state: SecurityImage) -> SecurityDelta:
        """A delta to replay many batches into before one ``apply`` (as ``apply`` per batch would give)."""
        return SecurityDelta(state)

    def apply_events(self, state: SecurityImage, events: Sequence[Event | AclRow]) -> SecurityImage:
        """The image after a run of events that follows ``state`` (as ``SecurityDelta.replay_events`` takes them,
        the first at ``state.next_offset``), under a paused collector as ``apply``."""
        if not events:
            return state
        with paused_gc():
            delta = SecurityDelta(state)
            first = state.next_offset
            delta.replay_events(first, events)
            return delta.apply(first + len(events))

    def apply(self, state: SecurityImage, envelopes: Sequence[Envelope]) -> SecurityImage:
        """The image after ``envelopes``; next_offset is the last envelope's offset + 1."""
        if not envelopes:
            return state
        with paused_gc():
            delta = SecurityDelta(state)
            delta.replay_all(envelopes)
            return delta.apply(envelopes[-1].offset + 1)
