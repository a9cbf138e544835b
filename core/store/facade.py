"""SecurityStore: the embedded store a controller process uses.

Every request runs one control function against the published image, appends
the events it returns as one batch (the commit point), replays that batch
into a new image and publishes it, all under one write lock: a request's
events land together or not at all, and a call returns only after its batch
is durable and visible (read-your-writes).  Reads never take the lock: they
read whichever image is published, which is always a whole batch.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, overload

from secmeta.core import control
from secmeta.core import settings as logged_settings
from secmeta.core.auth.login import ScramLogin
from secmeta.core.auth.scram import ScramServer
from secmeta.core.auth.token_hmac import TokenHmacs, token_hmac
from secmeta.core.config import StoreConfig
from secmeta.core.control import ControlResult
from secmeta.core.control.authz import checked_context
from secmeta.core.control.quotas import (
    EVERY_ENTITY,
    ClientQuotaAlteration,
    ClientQuotaFilter,
    alter_client_quotas,
)
from secmeta.core.control.settings import alter_settings, initial_settings
from secmeta.core.errors import ApiError, InvalidValueError, SecmetaError
from secmeta.core.forensics.backend import open_keys
from secmeta.core.forensics.checkpoints import CheckpointFiles
from secmeta.core.forensics.history_index import HistoryIndex, token_parties
from secmeta.core.forensics.timetravel import TimeTravel
from secmeta.core.log import Log
from secmeta.core.operator import local_operator
from secmeta.core.store.commit_gate import (
    CommitGate,
    CommitGateError,
    GroupingGate,
    PendingBatch,
    WritesStoppedError,
)
from secmeta.core.store.follower import LogFollower, replayed
from secmeta.core.store.state import LoadedState, Snapshotter, load_state
from secmeta.core.store.view import StoreView
from secmeta.core.store.write_group import Queued, WriteQueue, decide_group
from secmeta.core.times import Point, as_point
from secmeta.core.types import (
    DelegationToken,
    DeleteAclsResult,
    RequestContext,
    UserScramCredentialAlteration,
    UserScramCredentialsDescription,
)
from secmeta.events.keyring import Keyring
from secmeta.events.records import ClientQuotaEntity, Envelope, Event, KeyRotated
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ResourceType,
    ScramMechanism,
)
from secmeta.projections.gc_pause import FREEZE_AFTER, paused_gc
from secmeta.projections.image import SecurityImage, SecurityProjection
from secmeta.projections.image_snapshot import SecurityImageSnapshot

SWEEPER = RequestContext(principal="System:token-sweeper", host="localhost", tls=True)
KEYRING = RequestContext(principal="System:keyring", host="localhost", tls=True)
R = TypeVar("R")

if TYPE_CHECKING:  # the forensic queries load when first asked: a store's open (every CLI command) needs none
    from secmeta.core.forensics import history as history_mod
    from secmeta.core.forensics import queries as forensics
    from secmeta.core.forensics.token_access import TokenAccess


class SecurityStore:
    """SCRAM credentials, ACLs and delegation tokens with Kafka semantics, on a durable log.

    An ``Admin`` (secmeta.core.admin) that carries no identity: every admin call needs ``context=``.
    """

    def __init__(self, log: Log, config: StoreConfig, keyring: Keyring, loaded: LoadedState[SecurityImage],
                 commit_gate: CommitGate | None = None):
        self._log = log
        self._gate = commit_gate
        self._grouping = _grouping(commit_gate)
        self._stopped: BaseException | None = None  # why writes stopped: the gate failed (commit_gate)
        self.config = config
        self._keyring = keyring
        self._image: SecurityImage = loaded.state
        self.loaded = loaded
        self._snapshot_codec = SecurityImageSnapshot()
        self._snapshotter = Snapshotter(
            log, self._snapshot_codec, config.snapshot_policy, keep=config.keep_snapshots,
            delete_covered_segments=config.delete_covered_segments, clock=config.clock,
        )
        self._write_lock = threading.RLock()
        self._queue = WriteQueue()   # writes waiting for the lock, with a gate that commits groups
        self._hmacs = TokenHmacs.of(self._image.tokens, config.token_secret)
        self._login = ScramLogin(keyring, config, lambda: self._image)
        self._sweeper: threading.Thread | None = None
        self._closed = threading.Event()
        self._view = StoreView(self._image, config)
        self._follower = LogFollower(log, self._image) if log.read_only else None
        index = None if log.read_only else HistoryIndex(
            log, lambda: token_parties(self._timetravel.image_at_or_after(log.start_offset)),
            lambda n: open_keys(self._timetravel.image_at_or_after(n)))
        files = None if log.read_only else CheckpointFiles(log)
        self._timetravel = TimeTravel(log, now_ms=config.now_ms, live=lambda: self._image, index=index, files=files,
                                      memory_bytes=config.time_travel_memory_bytes, fill=files is not None)
        if index is not None:
            index.start()
            files.fill(SecurityImage.EMPTY if log.start_offset == 0 else None)
        self._timetravel.note(self._image)

    # -- lifecycle ---------------------------------------------------------------

    @classmethod
    def open(cls, directory: str | os.PathLike, config: StoreConfig | None = None, *, keyring: Keyring | None = None,
             read_only: bool = False, create: bool = True, commit_gate: CommitGate | None = None) -> SecurityStore:
        """Reopen the store at ``directory``, or create it there (one writer process per directory).

        ``create=False`` refuses a directory that is not a store (NotAStoreError): the CLI opens
        that way, so a mistyped ``--store`` never starts a new store (``secmeta init`` creates one).
        The Python API creates by default, as DESIGN's contract has it: a program names its own
        directory, and an existing non-empty directory that is not a store is refused either way.
        ``read_only`` opens an existing store without its writer lock (beside a running
        writer, e.g. for the CLI's reads and forensic queries); writes then raise.
        A writer needs every key that sealed a live credential or linked the log's chain.
        ``commit_gate`` (replicated mode, secmeta.core.store.commit_gate) commits every batch elsewhere
        before it is appended here, the ones this open writes included.
        """
        if config is None:
            config = StoreConfig.load(directory) if Path(directory).exists() else StoreConfig()
        keyring = keyring or Keyring.load(config.key_file)
        log = Log.open(directory, keyring=keyring, config=config.log, read_only=read_only, create=create,
                       retention=config.delete_covered_segments, clock=config.clock)
        try:
            with paused_gc(freeze=True):  # the loaded image lives long
                loaded = load_state(log, SecurityProjection(), SecurityImageSnapshot())
            image = loaded.state
            if image.next_offset != loaded.next_offset:
                image = _at_offset(image, loaded.next_offset)
                loaded = LoadedState(image, loaded.next_offset, loaded.snapshot, loaded.replayed_events, loaded.rejected_snapshots)
            logged_settings.check_config(config, image)
            if not read_only:
                keyring.require({entry.secret.key_id for _, entry in image.scram} | set(log.store.key_checks),
                                "sealed live SCRAM credentials or linked the log's hash chain, so writing "
                                "would leave them unusable or unverifiable")
        except BaseException:
            log.close()
            raise
        store = cls(log, config, keyring, loaded, commit_gate)
        if not read_only:
            try:
                store._log_key_rotation()
            except CommitGateError:
                pass  # writes stopped; the rotation is logged when a gate is set again
            except BaseException:
                store.close()
                raise
        return store

    def close(self) -> None:
        self._closed.set()
        if self._sweeper is not None:
            self._sweeper.join(timeout=5)
        self._timetravel.close()
        with self._write_lock:
            self._snapshotter.close()  # a snapshot under way gets a grace period, then its child is killed
            if self._timetravel.index is not None:
                self._timetravel.index.close()
                self._timetravel.files.close()
            self._log.close()

    def __enter__(self) -> SecurityStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        img = self._image
        return (f"<SecurityStore {self._log.store.path} offset={img.next_offset} users={len(img.scram)} "
                f"acls={len(img.acls)} tokens={len(img.tokens)}>")

    @property
    def image(self) -> SecurityImage:
        """The published image: every batch up to ``image.next_offset`` applied."""
        return self._image

    @property
    def log(self) -> Log:
        return self._log

    @property
    def keyring(self) -> Keyring:
        return self._keyring

    # -- the write path ------------------------------------------------------------

    def _commit(self, events: Sequence[Event], context: RequestContext, now_ms: int) -> None:
        """Append ``events`` as one batch, replay it, publish the new image. Caller holds the lock."""
        if not events:
            return
        if self._log.read_only:
            raise SecmetaError(f"store {self._log.store.path} was opened read-only; this request would write")
        envelopes = _envelopes(events, context, now_ms)
        gate = self._gate
        if gate is None:                 # the embedded default: the local log is the commit point
            result = self._log.append(envelopes)
            self._publish_batches(envelopes, result.next_offset)
            return
        batch = self._pending_batch(envelopes, self._log.end_offset, self._log.last_link)
        self._through_gate(gate, [batch], partial(gate.commit, batch))
        self._publish_batches(envelopes, batch.next_offset)

    def _pending_batch(self, envelopes: Sequence[Envelope], base: int, link: bytes) -> PendingBatch:
        """The batch of ``envelopes`` framed at offset ``base`` after the link ``link``; nothing is written."""
        frame, next_link, ts = self._log.frame_batch(envelopes, base, link)
        return PendingBatch(base, base + len(envelopes), ts, frame, link, next_link)

    def _frame(self, events: Sequence[Event], context: RequestContext, now_ms: int, base: int,
               link: bytes) -> tuple[list[Envelope], PendingBatch]:
        """A write's events as envelopes and their batch at offset ``base`` after ``link`` (a write group's
        ``write_group.Frame``); nothing is written."""
        envelopes = _envelopes(events, context, now_ms)
        return envelopes, self._pending_batch(envelopes, base, link)

    def _through_gate(self, gate: CommitGate, batches: Sequence[PendingBatch], commit: Callable[[], None]) -> None:
        """Commit ``batches`` through ``gate`` (``commit()``), then append them to the local log with one sync.
        When the commit fails, writes stop (commit_gate), unless the gate refused a batch itself before sending
        anything (InvalidValueError: e.g. too large for the topic); when the local append fails after the commit,
        writes stop and the gate is told (``append_failed``). Caller holds the lock."""
        try:
            commit()
        except InvalidValueError:
            raise
        except BaseException as exc:
            self._stopped = exc
            raise
        try:
            self._log.append_frames([batch.frame for batch in batches])
        except BaseException as exc:  # committed elsewhere, not (all) here: this node writes no more
            self._stopped = exc
            gate.append_failed(batches[0], exc)
            raise

    def _publish_batches(self, envelopes: Sequence[Envelope], next_offset: int) -> None:
        """Replay batches just appended into a new image and publish it. Caller holds the lock."""
        with paused_gc(freeze=len(envelopes) >= FREEZE_AFTER):  # a big batch's image nodes live long
            self._publish(replayed(self._image, envelopes, next_offset), [e.event for e in envelopes])
        self._snapshotter.maybe_snapshot(self._image, next_offset, background=True)

    def set_commit_gate(self, gate: CommitGate | None) -> None:
        """Commit every later batch through ``gate`` (None: the local log is the commit point) and acknowledge
        writes again after a gate failed. The caller vouches that the local log holds everything committed
        (a replicated node catches up with the topic first); a key rotation waiting to be logged is then."""
        with self._write_lock:
            self._gate, self._grouping, self._stopped = gate, _grouping(gate), None
            self._log_key_rotation()

    @property
    def writes_stopped(self) -> BaseException | None:
        """Why the store acknowledges no write (its commit gate failed), or None."""
        return self._stopped

    def append_replicated(self, frame: bytes) -> int:
        """Append a batch the commit point already holds (a replica following the topic), byte for byte, and
        publish its image; DivergedError (naming the offset and both links) when it does not extend the local
        log, and nothing is appended. Returns the log's new end offset."""
        with self._write_lock:
            envelopes, result = self._log.append_frame(frame)
            self._publish_batches(envelopes, result.next_offset)
            return result.next_offset

    def _publish(self, image: SecurityImage, events: Sequence[Event]) -> None:
        """Make ``image`` (the published one with ``events`` replayed) the one every read sees."""
        self._image = image
        self._hmacs = self._hmacs.advanced(events)
        self._timetravel.note(image)

    def catch_up(self) -> int:
        """A store opened read-only beside its writer: replay the batches the writer appended since the
        image was loaded or last caught up, and publish them; the offset every read now sees.

        Raises OffsetOutOfRangeError when the writer's retention deleted batches not read yet (open again).
        """
        if self._follower is None:
            raise SecmetaError("catch_up follows a writer: open the store read-only (its own writes are "
                               "published as they commit)")
        with self._write_lock:
            image, envelopes = self._follower.catch_up(self._image)
            if envelopes or image is not self._image:
                with paused_gc(freeze=len(envelopes) >= FREEZE_AFTER):
                    self._publish(image, [env.event for env in envelopes])
            return self._image.next_offset

    def _write(self, context: RequestContext | None,
               decide: Callable[[SecurityImage, int, RequestContext, TokenHmacs], ControlResult[R]]) -> R:
        """The one write path: under the lock, read the clock, run the control function on the published
        image (and its tokens' HMAC index) as ``context`` asks, commit its events as one batch, then answer with its
        response. With a gate that commits groups (replicated mode), the writes queued meanwhile are committed
        together (``write_group``)."""
        context = checked_context(context)
        if self._grouping is not None:
            return self._write_grouped(context, decide)
        with self._write_lock:
            return self._write_locked(context, decide)

    def _write_locked(self, context: RequestContext,
                      decide: Callable[[SecurityImage, int, RequestContext, TokenHmacs], ControlResult[R]]) -> R:
        self._check_not_stopped()
        now = self.config.now_ms()
        result = decide(self._image, now, context, self._hmacs)
        self._commit(result.events, context, now)
        return result.response

    def _check_not_stopped(self) -> None:
        if self._stopped is not None:
            raise WritesStoppedError(
                f"this node acknowledges no write: its commit gate failed at offset {self._log.end_offset} "
                f"({self._stopped}); nothing was written") from self._stopped

    def _write_grouped(self, context: RequestContext,
                       decide: Callable[[SecurityImage, int, RequestContext, TokenHmacs], ControlResult[R]]) -> R:
        """A write queues; whoever takes the lock next commits the queue's first writes as one group
        (``write_group``), each answered only once that commit and its local append are done."""
        queued = Queued(context, decide)
        self._queue.join(queued)
        with self._write_lock:
            while not queued.done.is_set():     # a group of the queue's first writes; this one may be in a later one
                group = self._queue.take(self._grouping)
                try:
                    self._commit_group(group)
                except BaseException as exc:  # noqa: BLE001 - a bug must not leave a queued write waiting for ever
                    for unsettled in group:
                        if not unsettled.done.is_set():
                            unsettled.fail(exc)
        return queued.outcome()

    def _commit_group(self, group: list[Queued]) -> None:
        """Caller holds the lock. Decide, frame and commit ``group`` with one gate commit (one Kafka transaction);
        a failed commit fails every write of the group and stops writes (commit_gate)."""
        gate = self._grouping
        if self._stopped is not None or gate is None:   # the gate changed meanwhile
            for queued in group:
                queued.settle(partial(self._write_locked, queued.context, queued.decide))
            return
        decided, rest = decide_group(group, self._image, self._hmacs, self._log.end_offset, self._log.last_link,
                                     gate, self.config.now_ms, self._frame)
        if rest:  # the group's batches reached the gate's bytes: the rest waits for the next group, first in line
            self._queue.put_back(rest)
            del group[len(group) - len(rest):]
        batches = [write.batch for write in decided if write.batch is not None]
        try:
            if batches:
                self._through_gate(gate, batches, partial(gate.commit_group, batches))
        except BaseException as exc:  # noqa: BLE001 - none of the group was acknowledged here
            for write in decided:
                write.write.fail(exc)
            return
        for write in decided:
            if write.batch is not None:
                self._publish(write.image, [e.event for e in write.envelopes])
                self._snapshotter.maybe_snapshot(write.image, write.batch.next_offset, background=True)
            write.settle()

    def _config_at(self, image: SecurityImage) -> StoreConfig:
        """The settings that decide at ``image``: the config with the settings the log set by then."""
        return logged_settings.in_force(self.config, image)

    @property
    def settings(self) -> StoreConfig:
        """The settings in force now (secmeta.core.settings.in_force of the published image)."""
        return self._config_at(self._image)

    def _log_key_rotation(self) -> None:
        """Log a KeyRotated as the first batch linked with the keyring's newest key when the log's last batch
        was linked with another one (``secmeta keys generate`` rotated a key in since the last write)."""
        previous, newest = _last_batch_key(self._log), self._keyring.newest_id
        if previous is not None and previous != newest:
            self._write(KEYRING, lambda image, now, _, _hmacs: ControlResult([KeyRotated(newest, previous)], None))

    def _decider(self, image: SecurityImage):
        return control.decider_for(image, self._config_at(image))

    def alter_settings(self, set: dict[str, str] | None = None, delete: Iterable[str] = (), *,
                       context: RequestContext | None) -> list[str]:
        """Set logged settings (name -> text, e.g. {"super.users": "User:a;User:b"}) and return others to their
        defaults, as one logged batch (needs ALTER_CONFIGS on CLUSTER, and ALTER on CLUSTER too for a setting that
        decides access: secmeta.core.settings.Setting.rights); the names of the settings that changed."""
        set_, delete = dict(set or {}), list(delete)
        return self._write(context, lambda image, now, asker, _hmacs: alter_settings(
            image, set_, delete, asker, config=self.config, decider=self._decider(image)))

    def describe_settings(self, *, context: RequestContext | None) -> list[dict]:
        """Every logged setting in force now: name, value, source (log, config or default), doc."""
        return self._live_view().describe_settings(context=context)

    def log_initial_settings(self, context: RequestContext) -> int:
        """Log the config's value of every setting the log has not set yet (``secmeta init``, and the first writer
        open of a store made before settings were logged); how many were logged."""
        return self._write(context, lambda image, now, _, _hmacs: initial_settings(image, self.config))

    def alter_user_scram_credentials(self, alterations: Iterable[UserScramCredentialAlteration], *,
                                     context: RequestContext | None) -> dict[str, ApiError]:
        """Upsert and delete SCRAM credentials; one ApiError per user (NONE on success)."""
        alterations = list(alterations)
        return self._write(context, lambda image, now, asker, _hmacs: control.alter_scram_credentials(
            image, alterations, asker, config=self._config_at(image), keyring=self._keyring, decider=self._decider(image)))

    def alter_client_quotas(self, entries: Iterable[ClientQuotaAlteration], *, validate_only: bool = False,
                            context: RequestContext | None) -> dict[ClientQuotaEntity, ApiError]:
        """Set and remove client quotas (KIP-546); one ApiError per entity (NONE on success)."""
        entries = list(entries)
        return self._write(context, lambda image, now, asker, _hmacs: alter_client_quotas(
            image, entries, asker, decider=self._decider(image), validate_only=validate_only))

    def create_acls(self, bindings: Iterable[AclBinding], *, context: RequestContext | None) -> list[ApiError]:
        """Create ACLs; one ApiError per binding. An identical existing ACL is a successful no-op."""
        bindings = list(bindings)
        return self._write(context, lambda image, now, asker, _hmacs: control.create_acls(
            image, bindings, asker, config=self._config_at(image), decider=self._decider(image)))

    def delete_acls(self, filters: Iterable[AclBindingFilter], *,
                    context: RequestContext | None) -> list[DeleteAclsResult]:
        """Delete the ACLs matching each filter; per filter the bindings it removed."""
        filters = list(filters)
        return self._write(context, lambda image, now, asker, _hmacs: control.delete_acls(
            image, filters, asker, config=self._config_at(image), decider=self._decider(image)))

    def create_delegation_token(self, *, context: RequestContext | None, owner: str | None = None,
                                renewers: Iterable[str] = (), max_lifetime_ms: int = -1) -> DelegationToken:
        """Issue a token (for ``owner``, default the requester); the result carries its HMAC."""
        renewers = tuple(renewers)

        def decide(image: SecurityImage, now: int, asker: RequestContext,
                   _hmacs: TokenHmacs) -> ControlResult[DelegationToken]:
            config = self._config_at(image)
            issued = control.create_token(image, asker, now, owner=owner, renewers=renewers,
                                          max_lifetime_ms=max_lifetime_ms, config=config,
                                          decider=self._decider(image), new_token_id=_new_token_id)
            # the first token issued under a secret logs the secret's fingerprint in the same batch
            return ControlResult([*logged_settings.token_secret_pin(config, image), *issued.events], issued.response)

        return self._write(context, decide)

    def renew_delegation_token(self, hmac: bytes, renew_period_ms: int = -1, *,
                               context: RequestContext | None) -> int:
        """Extend a token's expiry; returns the new expiry timestamp."""
        return self._write(context, lambda image, now, asker, hmacs: control.renew_token(
            image, hmacs, hmac, renew_period_ms, asker, now, config=self._config_at(image)))

    def expire_delegation_token(self, hmac: bytes, expiry_period_ms: int = -1, *,
                                context: RequestContext | None) -> int:
        """Move a token's expiry (a negative period removes it now); returns the new expiry (now, for a removal).
        An expired token is DELEGATION_TOKEN_EXPIRED before the owner check and the removal (KRaft's order)."""
        return self._write(context, lambda image, now, asker, hmacs: control.expire_token(
            image, hmacs, hmac, expiry_period_ms, asker, now, config=self._config_at(image)))

    def sweep_expired_tokens(self) -> int:
        """Remove every expired token (a logged change); returns how many were removed."""
        return self._write(SWEEPER, lambda image, now, _, _hmacs: control.sweep_expired(image, now))

    def start_token_sweeper(self) -> None:
        """Run the expiry sweep in the background every ``token_expiry_check_interval_ms``."""
        if self._sweeper is not None:
            return
        interval = self.config.token_expiry_check_interval_ms / 1000

        def loop() -> None:
            while not self._closed.wait(interval):
                self.sweep_expired_tokens()

        self._sweeper = threading.Thread(target=loop, name="secmeta-token-sweeper", daemon=True)
        self._sweeper.start()

    def wait_for_snapshots(self) -> None:
        """Wait until a policy snapshot being written in the background is on disk."""
        self._snapshotter.wait()

    def snapshot(self):
        """Write a snapshot of the current image now."""
        with self._write_lock:
            return self._snapshotter.snapshot(self._image, self._image.next_offset)

    # -- reads (answered by a view of the published image) -------------------------

    def _live_view(self) -> StoreView:
        view = self._view
        if view.image is not self._image:
            view = self._view = StoreView(self._image, self.config)
        return view

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None, *, context: RequestContext | None,
                                        ) -> dict[str, UserScramCredentialsDescription | ApiError]:
        return self._live_view().describe_user_scram_credentials(users, context=context)

    def describe_acls(self, filter: AclBindingFilter, *, context: RequestContext | None) -> list[AclBinding]:
        return self._live_view().describe_acls(filter, context=context)

    def describe_acl_groups(self, filter: AclBindingFilter, *, context: RequestContext | None) -> list:
        """``describe_acls`` as index groups (``StoreView.describe_acl_groups``): the server's form."""
        return self._live_view().describe_acl_groups(filter, context=context)

    def may_describe_acls(self, context: RequestContext) -> bool:
        """Whether the requester may describe ACLs on the published image (``StoreView.may_describe_acls``)."""
        return self._live_view().may_describe_acls(context)

    def describe_client_quotas(self, filter: ClientQuotaFilter = EVERY_ENTITY, *,
                               context: RequestContext | None) -> dict[ClientQuotaEntity, dict[str, float]]:
        return self._live_view().describe_client_quotas(filter, context=context)

    def require_write_right(self, write: str, *, context: RequestContext | None) -> None:
        """Refuse a requester without the right the write ``write`` needs at all, on the published image
        (``StoreView.require_write_right``); the write asks the same rule again under the lock."""
        self._live_view().require_write_right(write, context=context)

    def describe_delegation_tokens(self, owners: Iterable[str] | None = None, *,
                                   context: RequestContext | None) -> list[DelegationToken]:
        return self._live_view().describe_delegation_tokens(owners, context=context)

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, resource_name: str) -> bool:
        return self._live_view().authorize(principal, host, operation, resource_type, resource_name)

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, resource_name: str) -> int:
        return self._live_view().authorized_operations(principal, host, resource_type, resource_name)

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        return self._live_view().authorize_by_resource_type(principal, host, operation, resource_type)

    def explain(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, resource_name: str):
        """The decision with the ACLs (or rule) that made it."""
        return self._live_view().explain(principal, host, operation, resource_type, resource_name)

    # -- time travel and forensics (secmeta.core.forensics.timetravel, secmeta.core.forensics.history, secmeta.core.forensics.queries) ----

    @property
    def timetravel(self) -> TimeTravel:
        return self._timetravel

    @overload
    def as_of(self, *, offset: int) -> StoreView: ...

    @overload
    def as_of(self, *, timestamp_ms: int) -> StoreView: ...

    def as_of(self, *, offset: int | None = None, timestamp_ms: int | None = None) -> StoreView:
        """A read-only view of the store after its first ``offset`` events, or after every batch <= ``timestamp_ms``:
        keyword-only, exactly one of them (the overloads say so to a type checker; neither or both is a
        PointInTimeError saying so).

        Requesters of describe calls are checked against the current ACLs.
        Raises PointInTimeError for a point the store cannot show.
        """
        n = self._timetravel.resolve(offset=offset, timestamp_ms=timestamp_ms)
        return self._view_at(n)

    def _view_at(self, n: int) -> StoreView:
        image = self._timetravel.image_at(n)
        return StoreView(image, self.config, gate=lambda: self._image,
                         timestamp_ms=self._timetravel.timestamp_before(n))

    def history(self, *, principal: str | None = None, user: str | None = None, resource=None, event_types=None,
                start_ms: int | None = None, end_ms: int | None = None, start_offset: int | None = None,
                end_offset: int | None = None, limit: int | None = None) -> Iterator[history_mod.HistoryEntry]:
        """Logged changes in order, redacted, filtered (see secmeta.core.forensics.history.history for each filter).

        Operator-level: takes no requester and checks nothing, like reading the log files (for a trusted
        caller; an application exposing it to other principals must gate it itself; view.py)."""
        from secmeta.core.forensics import history as history_mod

        return history_mod.history(
            self._timetravel, principal=principal, user=user, resource=resource, event_types=event_types,
            start_ms=start_ms, end_ms=end_ms, start_offset=start_offset, end_offset=end_offset, limit=limit)

    def diff(self, a: int | Point | dict, b: int | Point | dict) -> history_mod.Diff:
        """What changed between two points (offsets, Point.at_time(ms) or {"timestamp_ms": ms}).

        Operator-level: takes no requester and checks nothing, like reading the log files (for a trusted
        caller; an application exposing it to other principals must gate it itself; view.py)."""
        from secmeta.core.forensics import history as history_mod

        travel = self._timetravel
        return history_mod.diff(travel, travel.resolve_point(a), travel.resolve_point(b))

    def who_could(self, operation: AclOperation | str, resource_type: ResourceType | str, resource_name: str,
                  at: int | Point | dict | None = None) -> list[forensics.Grant]:
        """Every principal (and host) allowed at a point (default: now), with the ACLs or rule allowing it, and
        the holders of tokens live then under their owners' grants.

        Operator-level: takes no requester and checks nothing, like reading the log files (for a trusted
        caller; an application exposing it to other principals must gate it itself; view.py)."""
        from secmeta.core.forensics import queries as forensics

        travel = self._timetravel
        if at is None:
            image = self._image
            return forensics.who_could(image, self.settings, operation, resource_type, resource_name,
                                       forensics.live_tokens(travel, image.next_offset, self.config.now_ms(),
                                                             image=image))
        point = as_point(at)
        n = travel.resolve_point(point)
        return forensics.who_could_at(travel, self._config_at(travel.image_at(n)), operation, resource_type,
                                      resource_name, n, now_ms=point.timestamp_ms)

    def token_access(self, *, holder: str | None = None, owner: str | None = None,
                     at: int | Point | dict | None = None) -> list[TokenAccess]:
        """Who could act as whom through a delegation token at a point (default: now): the live accesses,
        of ``holder`` and/or as ``owner`` when given (secmeta.core.forensics.token_access).

        Operator-level: takes no requester and checks nothing, like reading the log files (for a trusted
        caller; an application exposing it to other principals must gate it itself; view.py)."""
        from secmeta.core.forensics import queries as forensics

        travel = self._timetravel
        if at is None:
            n, now_ms = self._image.next_offset, self.config.now_ms()
        else:
            point = as_point(at)
            n = travel.resolve_point(point)
            # at an offset, tokens are judged at that batch's time
            now_ms = point.timestamp_ms if point.timestamp_ms is not None else (travel.timestamp_before(n) or 0)
        return [a for a in forensics.live_tokens(travel, n, now_ms)
                if (holder is None or a.holder == holder) and (owner is None or a.owner == owner)]

    def access_timeline(self, principal: str, operation: AclOperation | str, resource_type: ResourceType | str,
                        resource_name: str, host: str | None = None) -> list[forensics.Interval]:
        """The intervals in which the principal was allowed (from ``host``; None: from any host), each opened and
        closed by a logged change.

        Operator-level: takes no requester and checks nothing, like reading the log files (for a trusted
        caller; an application exposing it to other principals must gate it itself; view.py)."""
        from secmeta.core.forensics import queries as forensics

        return forensics.access_timeline(self._timetravel, self.config, principal, operation, resource_type,
                                         resource_name, host)

    # -- authentication ----------------------------------------------------------

    def scram_server(self, mechanism: ScramMechanism | str) -> ScramServer:
        """A server-side SCRAM exchange for users and (with tokenauth=true) delegation tokens."""
        return self._login.server(mechanism)

    def token_hmac(self, token_id: str) -> bytes:
        """HMAC-SHA512 of the token id under the configured secret (recomputed, never stored)."""
        secret = logged_settings.require_token_secret(self.settings)
        if secret is None:
            raise SecmetaError("delegation tokens are disabled: no token_secret configured")
        return token_hmac(secret, token_id)


def _last_batch_key(log: Log) -> str | None:
    """The id of the key the log's last batch is linked with (None for an empty log)."""
    if log.end_offset <= log.start_offset:
        return None
    batches = list(log.batches(log.end_offset - 1))  # the batch holding the last offset
    return batches[-1].key_id if batches else None


def _new_token_id() -> str:
    return uuid.uuid4().hex[:22]


def _at_offset(image: SecurityImage, next_offset: int) -> SecurityImage:
    return replace(image, next_offset=next_offset)


def _envelopes(events: Sequence[Event], context: RequestContext, now_ms: int) -> list[Envelope]:
    """The envelopes a write's events are logged in: who asked, from where, in which request, by which program."""
    request_id = context.request_id or uuid.uuid4().hex
    operator = local_operator()
    return [Envelope(-1, now_ms, context.principal, context.host, request_id, e, actor_asserted=context.asserted,
                     operator_user=operator.user, operator_host=operator.host, operator_pid=operator.pid,
                     operator_program=operator.program) for e in events]


def _grouping(gate: CommitGate | None) -> GroupingGate | None:
    """``gate`` if it commits groups of writes, else None: asked once per gate, where it is set (isinstance on a
    runtime-checkable protocol inspects its members, about 20 us a call: too much for every write)."""
    return gate if isinstance(gate, GroupingGate) else None
