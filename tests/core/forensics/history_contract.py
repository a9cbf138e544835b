"""The contract of a HistoryBackend: what every backend of the forensic queries answers, on the same logs.

As eventsourcing's persistence tests (eventsourcing/tests/persistence.py) do for its recorders,
``HistoryBackendContract`` holds the tests and each backend's module subclasses it, giving
``backend(store)``: tests/core/forensics/test_history_backends.py runs it for the log scan
(the reference) and for the SQLite history index.  Each test asks a forensic query
(history, diff, who_could_at, access_timeline) through the backend and checks what a user
would see; the properties compare with a fresh replay of the log, which neither backend uses.

Also here: stores after a random plan, with or without retention (``store_after``), shared by
the tests that compare the two backends and by the retention tests.
"""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from secmeta.core import (
    AclBindingFilter,
    AclOperation,
    PatternType,
    RequestContext,
    ResourcePatternFilter,
    ResourceType,
    ScramMechanism,
    StoreConfig,
    UserScramCredentialDeletion,
)
from secmeta.core.control.quotas import ClientQuotaAlteration, ClientQuotaOp
from secmeta.core.forensics.backend import HistoryBackend
from secmeta.core.forensics.history import diff, history
from secmeta.core.forensics.queries import access_timeline, who_could_at
from secmeta.core.log import LogConfig
from secmeta.projections.authorizer import acls_on
from secmeta.projections.snapshot import SnapshotPolicy
from tests.core.forensics.test_timetravel_properties import OPS, TYPES, replayed, run, steps
from tests.logkit import Clock
from tests.storekit import ADMIN, acl, store_at, upsert

OTHER = RequestContext("User:ops", "10.0.0.7")
RENEWER = RequestContext("User:dan", "10.0.0.8")
MALLORY = RequestContext("User:mallory", "10.0.0.66")
ALICE = RequestContext("User:alice", "10.0.0.5")
T0 = 1_800_000_000_000
READ, TOPIC = AclOperation.READ, ResourceType.TOPIC

# a token, a credential and an ACL each opened and closed again (windows hold both ends, one end, or neither); the
# credential's key used again, a second token renewed
OPENED_AND_CLOSED = [
    (("token", "User:etl"), 1), (("create", [acl("orders")]), 0), (("upsert", "alice", ScramMechanism.SCRAM_SHA_256), 1),
    (("renew", 0), 1), (("expire", 0, -1), 1), (("delete", [AclBindingFilter.of(TOPIC, "orders")]), 0), (("sweep",), 1),
    (("unset", "alice", ScramMechanism.SCRAM_SHA_256), 0), (("upsert", "alice", ScramMechanism.SCRAM_SHA_256), 0),
    (("token", "User:alice"), 1), (("renew", 1), 1), (("create", [acl("orders", "User:bob")]), 0)]

# small segments, deleted once a snapshot covers them: the log starts past 0, and so does an index built then
RETAINED = dict(log=LogConfig(segment_bytes=1024), delete_covered_segments=True, keep_snapshots=1000,
                snapshot_policy=SnapshotPolicy(every_events=None, every_bytes=None))


class _SnapshotEveryRequest:
    """The store, snapshotted after every request: the log's start (a batch boundary) always has an image."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        method = getattr(self._store, name)

        def then_snapshot(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            finally:
                self._store.snapshot()
        return then_snapshot


@contextmanager
def store_after(keyring, plan, retained: bool = False):
    """A store that ran ``plan`` with its history index caught up; ``retained``: with old segments deleted and
    the index rebuilt from the log's start."""
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        path, config = Path(tmp) / "store", RETAINED if retained else {}
        with store_at(path, keyring, clock=clock, **config) as store:
            if not retained:
                run(store, clock, plan)
                assert store.timetravel.index.wait(10)
                store.timetravel.index.catch_up()
                yield store
                return
            run(_SnapshotEveryRequest(store), clock, plan)
        shutil.rmtree(path / "history")  # rebuilt from log.start_offset at the next open
        with store_at(path, keyring, clock=clock, **config) as store:
            assert store.timetravel.index.wait(10)
            assert store.timetravel.index.first_offset == store.log.start_offset
            yield store


def scanned(store, fn, *args, **kwargs):
    """What ``fn`` answers through the store when it has no history index (its queries scan the log)."""
    index = store.timetravel.index
    store.timetravel.index = None
    try:
        return fn(*args, **kwargs)
    finally:
        store.timetravel.index = index


class HistoryBackendContract:
    """The forensic queries through one backend; a subclass gives ``backend``."""

    @staticmethod
    def backend(store) -> HistoryBackend:
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path, keyring, clock):
        with store_at(tmp_path / "store", keyring, clock=clock, super_users=frozenset({"User:admin", "User:ops"})) as s:
            yield s

    def history(self, store, **filters) -> list:
        return list(history(store.timetravel, backend=self.backend(store), **filters))

    def diff(self, store, a: int, b: int):
        return diff(store.timetravel, a, b, backend=self.backend(store))

    # -- history --------------------------------------------------------------------------

    def test_history_attributes_each_change(self, store):
        """An entry says where (offset), when, who from where, by which request, and what changed."""
        store.create_acls([acl("orders")], context=OTHER)
        [entry] = self.history(store)
        assert (entry.offset, entry.timestamp_ms, entry.actor_principal, entry.actor_host, entry.event_type) == (
            0, T0, "User:ops", "10.0.0.7", "AclCreated")
        assert entry.request_id and entry.entity_key.startswith("acl:")
        assert entry.payload["resource_name"] == "orders" and entry.payload["principal"] == "User:alice"

    def test_history_by_principal_finds_actor_acl_subject_scram_user_and_token_parties(self, store, clock):
        """principal= finds the changes it made and those that involve it, a token's later events included."""
        store.create_acls([acl("a", "User:bob")], context=ADMIN)  # 0: an ACL of bob's
        store.create_acls([acl("b")], context=OTHER)  # 1: made by ops
        store.alter_user_scram_credentials([upsert("bob"), upsert("carol")], context=ADMIN)  # 2, 3
        token = store.create_delegation_token(context=ADMIN, owner="User:etl", renewers=["User:dan"])  # 4
        clock.t += 1
        store.renew_delegation_token(token.hmac, context=RENEWER)  # 5: names only the token id
        assert [e.offset for e in self.history(store, principal="User:bob")] == [0, 2]
        assert [e.offset for e in self.history(store, principal="User:dan")] == [4, 5]
        assert [e.offset for e in self.history(store, principal="User:ops")] == [1]
        assert [e.offset for e in self.history(store, principal="User:etl", start_offset=5)] == [5]
        assert [e.offset for e in self.history(store, principal="User:carol")] == [3]

    def test_principal_history_holds_the_wildcard_grants_and_the_user_resource_acls_that_concern_it(self, store):
        """principal= also finds 'User:*' grants (they apply to everyone) and ACLs on the USER resource naming the
        principal (literal or a prefix of it), not USER ACLs naming someone else."""
        store.create_acls([acl("orders", "User:*")], context=ADMIN)  # 0: applies to alice
        store.create_acls([acl("User:alice", "User:mallory", op=AclOperation.CREATE_TOKENS,
                               rtype=ResourceType.USER)], context=ADMIN)  # 1: mallory may create alice's tokens
        store.create_acls([acl("User:al", "User:ops", op=AclOperation.DESCRIBE_TOKENS, rtype=ResourceType.USER,
                               pattern=PatternType.PREFIXED)], context=ADMIN)  # 2: a prefix of alice's name
        store.create_acls([acl("User:bob", "User:mallory", op=AclOperation.CREATE_TOKENS,
                               rtype=ResourceType.USER)], context=ADMIN)  # 3: about bob
        store.create_acls([acl("payments", "User:bob")], context=ADMIN)  # 4: bob's
        assert [e.offset for e in self.history(store, principal="User:alice")] == [0, 1, 2]
        assert [e.offset for e in self.history(store, principal="User:bob")] == [0, 3, 4]
        assert [e.offset for e in self.history(store, principal="User:mallory")] == [0, 1, 3]

    def test_a_super_users_change_is_in_the_history_of_each_principal_it_adds_or_removes(self, store):
        """super.users naming mallory is in her history when she is made a super user and when she is removed
        (the change replaced a value naming her), not in the history of a principal neither value names."""
        store.alter_settings({"super.users": "User:admin;User:mallory"}, context=ADMIN)  # 0
        store.alter_settings({"super.users": "User:admin"}, context=ADMIN)  # 1
        store.create_acls([acl("orders", "User:bob")], context=ADMIN)  # 2
        mallory = self.history(store, principal="User:mallory")
        assert [(e.offset, e.event_type, e.action) for e in mallory] == [
            (0, "SecuritySettingAltered", "created"), (1, "SecuritySettingAltered", "altered")]
        assert [e.offset for e in self.history(store, principal="User:bob")] == [2]
        assert [e.offset for e in self.history(store, principal="User:mallory", start_offset=1)] == [1]

    def test_credential_rows_say_created_rotated_or_deleted(self, store):
        """A password set, set again and removed shows as created, rotated and deleted, not as two equal upserts."""
        store.alter_user_scram_credentials([upsert("alice")], context=ADMIN)  # 0
        store.alter_user_scram_credentials([upsert("alice", b"new")], context=ADMIN)  # 1
        store.alter_user_scram_credentials([UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)],
                                           context=ADMIN)  # 2
        store.alter_user_scram_credentials([upsert("alice", b"again")], context=ADMIN)  # 3
        entries = self.history(store, principal="User:alice")
        assert [e.action for e in entries] == ["created", "rotated", "deleted", "created"]
        assert [e.to_dict()["action"] for e in entries] == ["created", "rotated", "deleted", "created"]
        assert [e.action for e in self.history(store, principal="User:alice", start_offset=1)] == [
            "rotated", "deleted", "created"]

    def test_history_filters_by_user_resource_event_type_and_time(self, store, clock):
        """user=, resource=, event_types= and a time window each select their changes only."""
        store.create_acls([acl("orders"), acl("ord", pattern=PatternType.PREFIXED), acl("payments")],
                          context=ADMIN)  # 0-2
        clock.t += 1
        store.alter_user_scram_credentials([upsert("carol"), upsert("dave")], context=ADMIN)  # 3, 4
        clock.t += 1
        token = store.create_delegation_token(context=ADMIN, owner="User:etl")  # 5
        assert [e.payload["user"] for e in self.history(store, user="carol")] == ["carol"]
        match = ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH)
        assert [e.payload["resource_name"] for e in self.history(store, resource=match)] == ["orders", "ord"]
        by_token = ResourcePatternFilter(ResourceType.DELEGATION_TOKEN, token.token_id)
        assert [e.offset for e in self.history(store, resource=by_token)] == [5]
        assert [e.offset for e in self.history(store, event_types=["ScramCredentialUpserted"])] == [3, 4]
        assert [e.offset for e in self.history(store, start_ms=T0 + 1000, end_ms=T0 + 1000)] == [3, 4]
        assert [e.offset for e in self.history(store, start_offset=1, end_offset=4, limit=2)] == [1, 2]

    def test_history_shows_no_secret(self, store):
        """A credential's sealed secret shows as its key id only."""
        store.alter_user_scram_credentials([upsert("carol", salt=b"a-known-salt-value")], context=ADMIN)
        [entry] = self.history(store)
        assert entry.payload["secret"].startswith("<sealed:") and "salt" not in str(entry.to_dict())

    # -- diff -----------------------------------------------------------------------------

    def test_diff_is_the_net_change_with_token_expiry_moves(self, store, clock):
        """ACLs and credentials net (created and deleted between: not shown); renewals listed with both expiries."""
        store.create_acls([acl("kept"), acl("gone")], context=ADMIN)  # 0, 1
        store.alter_user_scram_credentials([upsert("carol")], context=ADMIN)  # 2
        token = store.create_delegation_token(context=ADMIN, owner="User:admin")  # 3
        before = store.image.tokens.get(token.token_id).expiry_timestamp_ms
        clock.t += 10
        store.delete_acls([AclBindingFilter.of(TOPIC, "gone")], context=ADMIN)  # 4
        store.create_acls([acl("brief")], context=ADMIN)  # 5
        store.delete_acls([AclBindingFilter.of(TOPIC, "brief")], context=ADMIN)  # 6
        store.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256),
                                            upsert("dave", iterations=8192)], context=ADMIN)  # 7, 8
        after = store.renew_delegation_token(token.hmac, context=ADMIN)  # 9
        found = self.diff(store, 4, 10)
        assert [b for _, b in found.acls_removed] == [acl("gone")] and found.acls_added == ()
        assert found.credentials_deleted == (("carol", ScramMechanism.SCRAM_SHA_256, 4096),)
        assert found.credentials_upserted == (("dave", ScramMechanism.SCRAM_SHA_256, 8192),)
        [renewal] = found.tokens_renewed
        assert (renewal.token_id, renewal.expiry_before_ms, renewal.expiry_after_ms, renewal.last_offset) == (
            token.token_id, before, after, 9)
        assert [t.token_id for t in self.diff(store, 0, 10).tokens_issued] == [token.token_id]
        assert not self.diff(store, 5, 7)

    def test_diff_never_shows_a_tokens_hmac(self, store):
        """Tokens issued, renewed, expired and removed: between every two points the diff lists them (by id), and
        neither its repr nor its JSON form holds an HMAC in any form (raw, hex, base64)."""
        kept = store.create_delegation_token(context=ADMIN, owner="User:admin")  # 0
        gone = store.create_delegation_token(context=ADMIN, owner="User:admin")  # 1
        store.renew_delegation_token(kept.hmac, context=ADMIN)  # 2
        store.expire_delegation_token(kept.hmac, 10**13, context=ADMIN)  # 3
        store.expire_delegation_token(gone.hmac, -1, context=ADMIN)  # 4 (and its removal)
        secrets = [form for t in (kept, gone)
                   for form in (repr(t.hmac), t.hmac.hex(), base64.b64encode(t.hmac).decode())]
        end = store.log.end_offset
        for a in range(end + 1):
            for b in range(a, end + 1):
                found = self.diff(store, a, b)
                shown = repr(found) + json.dumps(found.to_dict())
                assert not [s for s in secrets if s in shown], (a, b)
        found = self.diff(store, 2, end)
        assert [t.token_id for t in found.tokens_removed] == [gone.token_id]
        assert [c.token_id for c in found.tokens_renewed + found.tokens_expired] == [kept.token_id] * 2

    def test_diff_lists_client_quotas_as_they_stood_at_both_points(self, store):
        """A quota altered between the points shows both values; one set then removed between them does not show;
        one removed shows its value before (kinds without a section of their own: entities.KINDS)."""
        def alter(entity, **ops):
            store.alter_client_quotas([ClientQuotaAlteration(entity, tuple(ClientQuotaOp(k, v) for k, v in ops.items()))],
                                      context=ADMIN)
        alter({"user": "alice"}, consumer_byte_rate=100)  # 0
        alter({"user": "bob"}, producer_byte_rate=5)  # 1
        alter({"user": "alice"}, consumer_byte_rate=200)  # 2
        alter({"client-id": "app"}, request_percentage=10)  # 3
        alter({"client-id": "app"}, request_percentage=None)  # 4
        alter({"user": "bob"}, producer_byte_rate=None)  # 5
        found = self.diff(store, 2, 6)
        assert [(c.kind, c.entity_key, c.before, c.after) for c in found.entities] == [
            ("quota", "quota:user=alice:consumer_byte_rate", {"value": 100.0}, {"value": 200.0}),
            ("quota", "quota:user=bob:producer_byte_rate", {"value": 5.0}, None)]
        assert [c.after for c in self.diff(store, 0, 1).entities] == [{"value": 100.0}]
        assert not self.diff(store, 3, 5)

    # -- who could, access timeline -----------------------------------------------------------

    def test_who_could_at_answers_from_the_acls_then(self, store):
        """who_could at a point lists the principals an ACL in force then allows."""
        store.create_acls([acl("ord", "User:bob", pattern=PatternType.PREFIXED), acl("payments", "User:dave")],
                          context=ADMIN)
        store.delete_acls([AclBindingFilter.of(TOPIC, "ord", PatternType.PREFIXED)], context=ADMIN)
        config = StoreConfig(super_users=frozenset())

        def principals(n):
            return [g.principal for g in who_could_at(store.timetravel, config, READ, TOPIC, "orders", n,
                                                      backend=self.backend(store))]
        assert (principals(0), principals(1), principals(2), principals(3)) == ([], ["User:bob"], ["User:bob"], [])

    def test_access_timeline_opens_and_closes_with_the_changes(self, store, clock):
        """An interval opened by the ACL's creation and closed by its deletion, each attributed."""
        store.create_acls([acl("noise", "User:bob")], context=ADMIN)
        clock.t += 1
        store.create_acls([acl("orders")], context=OTHER)
        clock.t += 1
        store.delete_acls([AclBindingFilter.of(TOPIC, "orders")], context=ADMIN)
        [interval] = access_timeline(store.timetravel, store.config, "User:alice", READ, TOPIC, "orders",
                                     backend=self.backend(store))
        assert (interval.start_offset, interval.start_ms, interval.end_offset, interval.end_ms) == (
            2, T0 + 1000, 3, T0 + 2000)
        assert (interval.opened_by.actor_principal, interval.opened_by.actor_host, interval.opened_by.binding) == (
            "User:ops", "10.0.0.7", acl("orders"))
        assert interval.closed_by.event_type == "AclDeleted"

    def test_a_token_requester_could_act_as_the_owner_from_issue_to_removal(self, store, clock):
        """mallory, who requested a token of alice's, is listed under alice's grant while the token lives, and her
        timeline holds alice's access from the issue to the removal; before and after it, nothing."""
        store.create_acls([acl("orders"), acl("User:alice", "User:mallory", op=AclOperation.CREATE_TOKENS,
                                              rtype=ResourceType.USER)], context=ADMIN)  # 0, 1
        clock.t += 60
        token = store.create_delegation_token(context=MALLORY, owner="User:alice")  # 2
        clock.t += 60
        store.expire_delegation_token(token.hmac, -1, context=ALICE)  # 3 (and its removal)
        config, backend = StoreConfig(super_users=frozenset()), self.backend(store)

        def holders(n):
            return [(g.principal, g.via and g.via.owner) for g in who_could_at(
                store.timetravel, config, READ, TOPIC, "orders", n, backend=backend) if g.via is not None]
        assert holders(2) == [] and holders(store.log.end_offset) == []
        assert holders(3) == [("User:mallory", "User:alice")]
        [grant] = [g for g in who_could_at(store.timetravel, config, READ, TOPIC, "orders", 3, backend=backend)
                   if g.via is not None]
        assert grant.via.sentence() == (f"User:mallory could act as User:alice through token {token.token_id}, "
                                        "issued at 2027-01-15T08:01:00.000Z at User:mallory's request")
        assert not grant.allows("User:mallory", "10.0.0.66")  # as herself she is not let in
        [interval] = access_timeline(store.timetravel, config, "User:mallory", READ, TOPIC, "orders", "10.0.0.66",
                                     backend=backend)
        removed = store.log.end_offset - 1
        assert (interval.start_offset, interval.start_ms, interval.end_offset, interval.end_ms) == (
            3, T0 + 60_000, removed + 1, T0 + 120_000)
        assert interval.via.token_id == token.token_id and interval.via.how == "requester"

    def test_a_renewer_that_renews_holds_the_token_one_that_never_does_not(self, store, clock):
        """Renewing needs the HMAC: dan, who renewed, could act as the owner from the renewal on; carol, a renewer
        who never used it, is not listed."""
        store.create_acls([acl("orders", "User:etl")], context=ADMIN)  # 0
        token = store.create_delegation_token(context=ADMIN, owner="User:etl",
                                              renewers=["User:dan", "User:carol"])  # 1
        clock.t += 1
        store.renew_delegation_token(token.hmac, context=RENEWER)  # 2
        grants = who_could_at(store.timetravel, StoreConfig(super_users=frozenset()), READ, TOPIC, "orders",
                              store.log.end_offset, backend=self.backend(store))
        assert [(g.principal, g.via.how) for g in grants if g.via is not None] == [
            ("User:admin", "requester"), ("User:dan", "renewer")]
        [interval] = access_timeline(store.timetravel, store.config, "User:dan", READ, TOPIC, "orders",
                                     backend=self.backend(store))
        assert interval.start_offset == 3 and interval.via.owner == "User:etl"
        assert access_timeline(store.timetravel, store.config, "User:carol", READ, TOPIC, "orders",
                               backend=self.backend(store)) == []

    # -- properties: the answers of a fresh replay of the log ------------------------------------------

    def test_acls_and_diffs_are_those_of_the_replayed_images(self, keyring):
        """acls_at(n) is the replayed image's ACLs on the resource; diff(a, b)'s ACLs, credentials and tokens issued
        and removed are the images' difference (a credential upserted again in between is listed too), for every
        window: those opened and closed inside it, and a credential's key used again, are in none of them."""

        @settings(suppress_health_check=[HealthCheck.too_slow], max_examples=25, deadline=None)
        @given(plan=steps, asks=st.lists(st.tuples(st.sampled_from(TYPES), st.sampled_from(["orders", "ord", "*"])),
                                         min_size=1, max_size=3))
        @example(plan=OPENED_AND_CLOSED, asks=[(TOPIC, "orders")])
        def check(plan, asks):
            self._check_against_replay(keyring, plan, asks)

        check()

    def _check_against_replay(self, keyring, plan, asks):
        with store_after(keyring, plan) as store:
            backend = self.backend(store)
            events = list(store.log.read())
            images = [replayed(events[:n]) for n in range(len(events) + 1)]
            for n, image in enumerate(images):
                for rt, name in asks:
                    assert backend.acls_at(n, rt, name) == acls_on(image.acls, rt, name)
            for a in range(len(images)):
                for b in range(a, len(images)):
                    found = self.diff(store, a, b)
                    before, after = dict(images[a].acls), dict(images[b].acls)
                    assert dict(found.acls_added) == {i: x for i, x in after.items() if i not in before}
                    assert dict(found.acls_removed) == {i: x for i, x in before.items() if i not in after}
                    creds_a, creds_b = _credentials(images[a]), _credentials(images[b])
                    upserted = {(u, m): i for u, m, i in found.credentials_upserted}
                    assert {k: i for k, i in creds_b.items() if k not in creds_a}.items() <= upserted.items()
                    assert upserted.items() <= creds_b.items()
                    assert {(u, m): i for u, m, i in found.credentials_deleted} == {
                        k: i for k, i in creds_a.items() if k not in creds_b}
                    tokens_a, tokens_b = _tokens(images[a]), _tokens(images[b])
                    assert found.tokens_issued == tuple(tokens_b[t] for t in sorted(tokens_b.keys() - tokens_a.keys()))
                    assert found.tokens_removed == tuple(tokens_a[t] for t in sorted(tokens_a.keys() - tokens_b.keys()))


def _credentials(image) -> dict[tuple[str, ScramMechanism], int]:
    return {(user, entry.mechanism): entry.iterations for user, entry in image.scram}


def _tokens(image) -> dict:
    return {token.token_id: token for token in image.tokens}


__all__ = ["OPS", "RETAINED", "HistoryBackendContract", "scanned", "store_after"]
