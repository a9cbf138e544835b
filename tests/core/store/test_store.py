"""SecurityStore end to end: durable requests, read-your-writes, atomic batches, replay, authentication."""

from __future__ import annotations

import base64
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scramp import ScramClient

from secmeta.core import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ApiException,
    ErrorCode,
    PatternType,
    RequestContext,
    ResourceType,
    ScramMechanism,
    SecurityStore,
    StoreConfig,
    UserScramCredentialDeletion,
)
from secmeta.core.errors import StoreLockedError
from secmeta.core.log import verify_log
from secmeta.events.records import DelegationTokenRemoved, TokenRemovalReason
from tests.logkit import make_keyring
from tests.storekit import ADMIN, TOKEN_SECRET, acl, upsert


def state_of(store: SecurityStore) -> tuple:
    """The image as plain values, for comparing stores."""
    img = store.image
    scram = {(u, m): e.iterations for u in img.scram.users() for m, e in img.scram.mechanisms(u).items()}
    acls = dict(iter(img.acls))
    tokens = {t.token_id: t for t in img.tokens}
    return scram, acls, tokens


def test_create_then_authorize_reads_your_write(open_store):
    """A decision right after create_acls returns already sees the new ACL."""
    store = open_store()
    assert not store.authorize("User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "t")
    assert [e.code for e in store.create_acls([acl("t")], context=ADMIN)] == [ErrorCode.NONE]
    assert store.authorize("User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "t")


def test_results_are_per_item_values(open_store):
    """create_acls returns one ApiError per binding; a bad one does not stop the good one."""
    store = open_store()
    results = store.create_acls([acl("good"), acl("")], context=ADMIN)
    assert results[0].code == ErrorCode.NONE and results[1].code == ErrorCode.INVALID_REQUEST
    assert [b.name for b in store.describe_acls(AclBindingFilter.any(), context=ADMIN)] == ["good"]


def test_unauthorized_request_raises_and_writes_nothing(open_store):
    """A principal without ALTER on CLUSTER gets CLUSTER_AUTHORIZATION_FAILED and the log is unchanged."""
    store = open_store()
    end = store.log.end_offset
    with pytest.raises(ApiException) as info:
        store.create_acls([acl("t")], context=RequestContext("User:eve", "h"))
    assert info.value.error.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert store.log.end_offset == end


def test_a_request_is_one_batch(open_store):
    """All events of one request share one batch (they land together or not at all)."""
    store = open_store()
    store.create_acls([acl(f"t{i}") for i in range(50)], context=ADMIN)
    batches = list(store.log.batches())
    assert [b.count for b in batches] == [50]
    assert len({e.request_id for e in store.log.read()}) == 1


def test_readers_never_see_half_a_request(open_store):
    """Concurrent readers see ACL counts only in whole-request steps."""
    store = open_store()
    seen, stop = set(), threading.Event()

    def reader():
        while not stop.is_set():
            seen.add(len(store.image.acls))

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for r in range(20):
        store.create_acls([acl(f"r{r}-{i}") for i in range(25)], context=ADMIN)
    stop.set()
    for t in threads:
        t.join()
    assert seen and all(n % 25 == 0 for n in seen)


def test_reopen_replays_to_the_same_state(open_store, tmp_path, keyring, clock):
    """Closing and reopening gives exactly the state the live store had."""
    store = open_store()
    store.alter_user_scram_credentials([upsert("alice"), upsert("bob", mech=ScramMechanism.SCRAM_SHA_512, iterations=8192)], context=ADMIN)
    store.create_acls([acl("t1"), acl("p-", pattern=PatternType.PREFIXED)], context=ADMIN)
    store.create_delegation_token(context=ADMIN, owner="User:etl")
    live = state_of(store)
    store.close()
    again = open_store()
    assert state_of(again) == live


def test_snapshot_plus_tail_equals_live_state(open_store):
    """After a snapshot and more writes, reopening loads snapshot + tail to the live state."""
    store = open_store()
    store.create_acls([acl(f"a{i}") for i in range(10)], context=ADMIN)
    store.snapshot()
    store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "a1")], context=ADMIN)
    store.alter_user_scram_credentials([upsert("carol")], context=ADMIN)
    live = state_of(store)
    store.close()
    again = open_store()
    assert again.loaded.snapshot is not None and again.loaded.replayed_events == 2
    assert state_of(again) == live


def test_second_store_on_the_same_directory_is_refused(open_store):
    """One writer process per directory."""
    open_store()
    with pytest.raises(StoreLockedError):
        open_store()


def test_scramp_client_authenticates_against_stored_credentials(open_store):
    """A credential created through the store authenticates a real SCRAM client."""
    store = open_store()
    store.alter_user_scram_credentials([upsert("alice", b"s3cret", ScramMechanism.SCRAM_SHA_512, 8192)], context=ADMIN)
    client = ScramClient(["SCRAM-SHA-512"], "alice", "s3cret")
    server = store.scram_server(ScramMechanism.SCRAM_SHA_512)
    client.set_server_first(server.first(client.get_client_first()))
    client.set_server_final(server.final(client.get_client_final()))
    assert server.principal == "User:alice"


def test_deleted_credential_no_longer_authenticates(open_store):
    """After deletion the user fails like an unknown user."""
    store = open_store()
    store.alter_user_scram_credentials([upsert("alice", b"pw")], context=ADMIN)
    store.alter_user_scram_credentials([UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)], context=ADMIN)
    client = ScramClient(["SCRAM-SHA-256"], "alice", "pw")
    server = store.scram_server("SCRAM-SHA-256")
    client.set_server_first(server.first(client.get_client_first()))
    with pytest.raises(ApiException) as info:
        server.final(client.get_client_final())
    assert info.value.error.code == ErrorCode.SASL_AUTHENTICATION_FAILED


def _token_login(store, token) -> object:
    client = ScramClient(["SCRAM-SHA-256"], token.token_id, base64.b64encode(token.hmac).decode())
    first = client.get_client_first() + ",tokenauth=true"
    client.client_first_bare = first[3:]
    server = store.scram_server("SCRAM-SHA-256")
    client.set_server_first(server.first(first))
    client.set_server_final(server.final(client.get_client_final()))
    return server


def test_token_authenticates_as_its_owner(open_store):
    """A token issued by alice for etl authenticates as User:etl."""
    store = open_store()
    store.create_acls([acl("User:etl", op=AclOperation.CREATE_TOKENS, rtype=ResourceType.USER)], context=ADMIN)
    token = store.create_delegation_token(context=RequestContext("User:alice", "h"), owner="User:etl")
    assert token.requester == "User:alice" and token.owner == "User:etl"
    server = _token_login(store, token)
    assert server.principal == "User:etl" and server.token_authenticated


def test_expired_token_is_swept_with_a_logged_reason(open_store, clock):
    """The sweep removes expired tokens and logs DelegationTokenRemoved(EXPIRED_BY_SWEEP)."""
    store = open_store(token_expiry_time_ms=1000)
    token = store.create_delegation_token(context=ADMIN)
    assert store.sweep_expired_tokens() == 0
    clock.t += 2
    assert store.sweep_expired_tokens() == 1
    last = list(store.log.read())[-1]
    assert last.event == DelegationTokenRemoved(token.token_id, TokenRemovalReason.EXPIRED_BY_SWEEP)
    assert last.actor_principal == "System:token-sweeper"
    assert store.describe_delegation_tokens(context=ADMIN) == []


def test_expiring_an_expired_token_at_once_is_expired_and_writes_nothing(open_store, clock):
    """KRaft's order (apache/kafka DelegationTokenControlManager.expireDelegationToken: EXPIRED before
    OWNER_MISMATCH and before a negative period's removal): the owner expiring an already expired token at once,
    and a stranger expiring it, both get DELEGATION_TOKEN_EXPIRED; the log is unchanged and the sweep still
    removes it. Departs from /work/shared/reference/kafka-semantics.md's ZooKeeper-era Expire order."""
    store = open_store(token_expiry_time_ms=1000)
    token = store.create_delegation_token(context=ADMIN)
    clock.t += 2
    end = store.log.end_offset
    for who, period in ((ADMIN, -1), (RequestContext("User:stranger", "10.0.0.8"), 1000)):
        with pytest.raises(ApiException) as info:
            store.expire_delegation_token(token.hmac, period, context=who)
        assert info.value.error.code == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert store.log.end_offset == end
    assert store.sweep_expired_tokens() == 1


def test_anonymous_callers_cannot_request_tokens(open_store):
    """An anonymous (one-way TLS) caller gets DELEGATION_TOKEN_REQUEST_NOT_ALLOWED and nothing is written."""
    store = open_store()
    with pytest.raises(ApiException) as info:
        store.create_delegation_token(context=RequestContext("User:ANONYMOUS", "h"))
    assert info.value.error.code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    assert store.log.end_offset == 0


def test_describe_tokens_omits_hmac_by_default(open_store):
    """Describe does not leak the token's HMAC unless configured."""
    store = open_store()
    store.create_delegation_token(context=ADMIN)
    assert [t.hmac for t in store.describe_delegation_tokens(context=ADMIN)] == [None]


def test_no_secret_in_repr_or_log(open_store):
    """Passwords and derived keys appear in neither the store's repr nor the raw log bytes."""
    store = open_store()
    store.alter_user_scram_credentials([upsert("alice", b"correct-horse-battery")], context=ADMIN)
    assert "correct-horse" not in repr(store)
    raw = b"".join(p.read_bytes() for p in (store.log.store.log_dir).glob("*.log"))
    assert b"correct-horse-battery" not in raw
    assert verify_log(store.log.store.path, keyring=store.keyring).ok


OPS = st.one_of(
    st.tuples(st.just("acl"), st.sampled_from(["a", "b", "ab", "*"]), st.sampled_from(["User:x", "User:*"]), st.booleans()),
    st.tuples(st.just("del"), st.sampled_from(["a", "b", "ab", None])),
    st.tuples(st.just("scram"), st.sampled_from(["u1", "u2"]), st.sampled_from([4096, 5000])),
    st.tuples(st.just("unscram"), st.sampled_from(["u1", "u2"])),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=1, max_size=12))
def test_replaying_the_log_gives_the_live_state(tmp_path_factory, ops):
    """For random request sequences, a fresh store rebuilt from the log equals the live one."""
    tmp = tmp_path_factory.mktemp("replay")
    keyring = make_keyring(tmp)
    cfg = StoreConfig(token_secret=TOKEN_SECRET)
    with SecurityStore.open(tmp / "s", cfg, keyring=keyring) as store:
        for op in ops:
            if op[0] == "acl":
                perm = AclPermissionType.ALLOW if op[3] else AclPermissionType.DENY
                store.create_acls([acl(op[1], op[2], perm=perm)], context=ADMIN)
            elif op[0] == "del":
                store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, op[1])], context=ADMIN)
            elif op[0] == "scram":
                store.alter_user_scram_credentials([upsert(op[1], iterations=op[2])], context=ADMIN)
            else:
                store.alter_user_scram_credentials([UserScramCredentialDeletion(op[1], ScramMechanism.SCRAM_SHA_256)], context=ADMIN)
        live = state_of(store)
    with SecurityStore.open(tmp / "s", cfg, keyring=keyring) as again:
        assert state_of(again) == live


def test_policy_snapshots_are_written_and_used_on_reopen(tmp_path, keyring, clock):
    """With a snapshot every 10 events, writes produce snapshots (in the background) that reopening uses."""
    from secmeta.projections.snapshot import SnapshotPolicy

    cfg = StoreConfig(token_secret=TOKEN_SECRET, clock=clock, snapshot_policy=SnapshotPolicy(every_events=10, every_bytes=None))
    with SecurityStore.open(tmp_path / "s", cfg, keyring=keyring) as store:
        for i in range(6):
            store.create_acls([acl(f"t{i}-{j}") for j in range(5)], context=ADMIN)
        live = state_of(store)
    with SecurityStore.open(tmp_path / "s", cfg, keyring=keyring) as again:
        assert again.loaded.snapshot is not None and again.loaded.snapshot.next_offset >= 10
        assert state_of(again) == live


def test_token_found_by_its_hmac_after_reopen_and_gone_after_removal(open_store, clock):
    """A token's HMAC renews it after the store reopens; once expired by request it answers NOT_FOUND."""
    store = open_store()
    token = store.create_delegation_token(context=ADMIN)
    store.close()
    store = open_store()
    assert store.renew_delegation_token(token.hmac, context=ADMIN) == token.expiry_timestamp_ms
    store.expire_delegation_token(token.hmac, -1, context=ADMIN)
    with pytest.raises(ApiException) as info:
        store.renew_delegation_token(token.hmac, context=ADMIN)
    assert info.value.error.code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
