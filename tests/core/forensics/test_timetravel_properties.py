"""Properties: a past view answers exactly as a fresh store fed the same prefix of the log."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ApiException,
    ClientQuotaAlteration,
    ClientQuotaOp,
    PatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    SecurityStore,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from secmeta.core.forensics.checkpoints import CheckpointFiles
from secmeta.core.forensics.timetravel import TimeTravel
from secmeta.core.store.view import StoreView
from secmeta.projections.image import SecurityImage, SecurityProjection
from secmeta.projections.snapshot import SnapshotPolicy
from tests.logkit import Clock, make_keyring
from tests.storekit import ADMIN, store_at

PRINCIPALS = ["User:alice", "User:bob", "User:*", "Group:ops"]
HOSTS = ["*", "10.0.0.1", "10.0.0.0/24"]
NAMES = ["orders", "ord", "payments", "*"]
TYPES = [ResourceType.TOPIC, ResourceType.GROUP]
OPS = [AclOperation.READ, AclOperation.WRITE, AclOperation.ALL, AclOperation.DESCRIBE]

bindings = st.builds(
    AclBinding.of, st.sampled_from(TYPES), st.sampled_from(NAMES),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]), st.sampled_from(PRINCIPALS),
    st.sampled_from(HOSTS), st.sampled_from(OPS), st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)
delete_filters = st.builds(
    AclBindingFilter.of, st.sampled_from([ResourceType.ANY, *TYPES]), st.sampled_from([None, *NAMES]),
    st.just(PatternType.ANY), st.sampled_from([None, *PRINCIPALS]),
)
requests = st.one_of(
    st.tuples(st.just("create"), st.lists(bindings, min_size=1, max_size=4)),
    st.tuples(st.just("delete"), st.lists(delete_filters, min_size=1, max_size=2)),
    st.tuples(st.just("upsert"), st.sampled_from(["alice", "bob"]), st.sampled_from(list(ScramMechanism)[1:])),
    st.tuples(st.just("unset"), st.sampled_from(["alice", "bob"]), st.sampled_from(list(ScramMechanism)[1:])),
    st.tuples(st.just("token"), st.sampled_from(["User:etl", "User:alice"])),
    st.tuples(st.just("renew"), st.integers(0, 3)),
    st.tuples(st.just("expire"), st.integers(0, 3), st.sampled_from([-1, 0, 1500])),
    st.tuples(st.just("sweep"),),
)
steps = st.lists(st.tuples(requests, st.sampled_from([0, 1, 2])), min_size=1, max_size=14)




@pytest.fixture(scope="module")
def keyring(tmp_path_factory):
    return make_keyring(tmp_path_factory.mktemp("keys"))


def run(store: SecurityStore, clock: Clock, plan) -> None:
    """Send the planned requests, the clock advancing between them."""
    tokens = []
    for request, seconds in plan:
        kind = request[0]
        try:
            if kind == "create":
                store.create_acls(request[1], context=ADMIN)
            elif kind == "delete":
                store.delete_acls(request[1], context=ADMIN)
            elif kind == "upsert":
                info = ScramCredentialInfo(request[2], 4096)
                store.alter_user_scram_credentials([UserScramCredentialUpsertion(request[1], info, b"pw")], context=ADMIN)
            elif kind == "unset":
                store.alter_user_scram_credentials([UserScramCredentialDeletion(request[1], request[2])], context=ADMIN)
            elif kind == "token":
                tokens.append(store.create_delegation_token(context=ADMIN, owner=request[1], renewers=["User:admin"]))
            elif kind == "renew" and request[1] < len(tokens):
                store.renew_delegation_token(tokens[request[1]].hmac, context=ADMIN)
            elif kind == "expire" and request[1] < len(tokens):
                store.expire_delegation_token(tokens[request[1]].hmac, request[2], context=ADMIN)
            elif kind == "sweep":
                store.sweep_expired_tokens()
            elif kind == "quota":  # ("quota", user, value or None: removed)
                ops = (ClientQuotaOp("producer_byte_rate", request[2]),)
                store.alter_client_quotas([ClientQuotaAlteration({"user": request[1]}, ops)], context=ADMIN)
            elif kind == "setting":  # ("setting", value or None: back to its default)
                if request[1] is None:
                    store.alter_settings(delete=["allow.everyone.if.no.acl.found"], context=ADMIN)
                else:
                    store.alter_settings({"allow.everyone.if.no.acl.found": request[1]}, context=ADMIN)
        except ApiException:
            pass  # e.g. renewing an expired token: nothing is logged
        clock.t += seconds


def replayed(envelopes) -> SecurityImage:
    """The image a fresh store reaches from these events, one event at a time."""
    state, projection = SecurityImage.EMPTY, SecurityProjection()
    for envelope in envelopes:
        state = projection.apply(state, [envelope])
    return state


def answers(view) -> tuple:
    """Everything a reader can ask a view, as plain values."""
    acls = sorted(map(repr, view.describe_acls(AclBindingFilter.any(), context=ADMIN)))
    scram = view.describe_user_scram_credentials(context=ADMIN)
    tokens = view.describe_delegation_tokens(context=ADMIN)
    decisions = [
        view.authorize(p, h, op, rt, name)
        for p in [*PRINCIPALS, "User:zed"] for h in ["10.0.0.1", "10.0.0.9", "*"]
        for op in (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)
        for rt in TYPES for name in ("orders", "payments", "x")
    ]
    operations = [view.authorized_operations(p, "10.0.0.1", rt, "orders") for p in PRINCIPALS for rt in TYPES]
    return acls, scram, tokens, decisions, operations


def snapshots_every(events: int | None) -> SnapshotPolicy:
    return SnapshotPolicy(every_events=events, every_bytes=None)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(plan=steps, interval=st.integers(1, 6), snapshot_every=st.sampled_from([None, 3]),
       cuts=st.lists(st.floats(0, 1), min_size=1, max_size=4))
def test_as_of_offset_equals_a_fresh_store_of_the_first_n_events(keyring, plan, interval, snapshot_every, cuts):
    """For random requests and offsets N, as_of(offset=N) answers as a store built from events [0, N)."""
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        with store_at(Path(tmp) / "store", keyring, clock=clock, snapshot_policy=snapshots_every(snapshot_every)) as store:
            run(store, clock, plan)
            end = store.log.end_offset
            events = list(store.log.read(0, end))
            travel = TimeTravel(store.log, interval=interval)
            for cut in cuts:
                n = round(cut * end)
                expected = answers(StoreView(replayed(events[:n]), store.config))
                assert answers(store.as_of(offset=n)) == expected
                assert answers(StoreView(travel.image_at(n), store.config)) == expected


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(plan=steps, pick=st.lists(st.integers(0, 10_000), min_size=1, max_size=3), nudge=st.sampled_from([-1, 0, 1]))
def test_as_of_time_equals_a_fresh_store_of_the_events_until_then(keyring, plan, pick, nudge):
    """For random requests and times T, as_of(timestamp_ms=T) answers as a store built from events stamped <= T."""
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        with store_at(Path(tmp) / "store", keyring, clock=clock, snapshot_policy=snapshots_every(None)) as store:
            run(store, clock, plan)
            events = list(store.log.read())
            begin = store.timetravel.begin_ms()
            now = int(clock.t * 1000)
            candidates = sorted({e.timestamp_ms + nudge for e in events} | {now, begin})
            candidates = [t for t in candidates if begin <= t <= now]
            for i in pick:
                t = candidates[i % len(candidates)]
                expected = answers(StoreView(replayed([e for e in events if e.timestamp_ms <= t]), store.config))
                assert answers(store.as_of(timestamp_ms=t)) == expected


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=12,
          deadline=None)  # each file is written by a forked child
@given(plan=steps, every=st.integers(2, 8))
def test_a_cold_process_answers_at_and_beside_every_checkpoint_file_as_a_replay(keyring, plan, every):
    """Checkpoint files every few events; a cold process (replay priced so high that any file is worth loading)
    answers at each file's offset and one event either side as a store built from those events."""
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        with store_at(Path(tmp) / "store", keyring, clock=clock, snapshot_policy=snapshots_every(None)) as store:
            run(store, clock, plan)
            end = store.log.end_offset
            events = list(store.log.read(0, end))
            files = CheckpointFiles(store.log, every=every)
            files.fill(SecurityImage.EMPTY)
            files.wait()
            points = sorted({p for o in files.offsets() for p in (o - 1, o, o + 1) if 0 <= p <= end} | {end})
            for n in points:
                travel = TimeTravel(store.log, interval=1, files=files)
                travel.replay_rate.seconds = 1.0
                expected = answers(StoreView(replayed(events[:n]), store.config))
                assert answers(StoreView(travel.image_at(n), store.config)) == expected
            assert files.problems == []
