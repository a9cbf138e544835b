"""The store's one write path: every kind of write, by anyone, at any time, commits as the same skeleton does.

Whatever the call (SCRAM alterations, ACL creation and deletion, token creation, renewal and expiry, client
quota alterations, the expiry sweep), a request appends at most one batch, every event of it stamped with the asker, their host,
one request id and the clock's time at the call; a refused request appends nothing; and the answer comes
back with its batch already published (read-your-writes).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core import (
    AclBindingFilter,
    ApiException,
    RequestContext,
    ResourceType,
    ScramMechanism,
    SecurityStore,
    StoreConfig,
    UserScramCredentialDeletion,
)
from secmeta.core.control.quotas import ClientQuotaAlteration, ClientQuotaOp
from secmeta.core.store.facade import SWEEPER
from secmeta.events.records import ClientQuotaEntity
from tests.logkit import Clock, make_keyring
from tests.storekit import ADMIN, TOKEN_SECRET, acl, upsert

EVE = RequestContext("User:eve", "10.9.9.9")  # no ACL: every write she asks for is refused


def _write(store: SecurityStore, op: tuple, context: RequestContext, hmacs: list[bytes]):
    kind, arg = op
    if kind == "acl":
        return store.create_acls([acl(arg)], context=context)
    if kind == "delete acls":
        return store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, arg)], context=context)
    if kind == "scram":
        return store.alter_user_scram_credentials([upsert(arg)], context=context)
    if kind == "unscram":
        return store.alter_user_scram_credentials([UserScramCredentialDeletion(arg, ScramMechanism.SCRAM_SHA_256)],
                                                  context=context)
    if kind == "token":
        token = store.create_delegation_token(context=context, max_lifetime_ms=arg)
        hmacs.append(token.hmac)
        return token
    if kind == "quota":  # None removes it
        op = ClientQuotaOp("producer_byte_rate", arg)
        return store.alter_client_quotas([ClientQuotaAlteration(ClientQuotaEntity.of({"user": "u1"}), (op,))],
                                         context=context)
    if kind in ("renew", "expire") and hmacs:
        hmac = hmacs[arg % len(hmacs)]
        call = store.renew_delegation_token if kind == "renew" else store.expire_delegation_token
        return call(hmac, 30_000, context=context)
    return store.sweep_expired_tokens()


OPS = st.one_of(
    st.tuples(st.just("acl"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("delete acls"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("scram"), st.sampled_from(["u1", "u2"])),
    st.tuples(st.just("unscram"), st.sampled_from(["u1", "u2"])),
    st.tuples(st.just("token"), st.sampled_from([60_000, 3_600_000])),
    st.tuples(st.sampled_from(["renew", "expire"]), st.integers(0, 3)),
    st.tuples(st.just("quota"), st.sampled_from([1024.0, None])),
    st.tuples(st.just("sweep"), st.none()),
)
STEPS = st.lists(st.tuples(OPS, st.booleans(), st.integers(0, 120)), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_every_write_commits_one_stamped_batch_or_nothing(tmp_path_factory, steps):
    """Each call adds at most one batch, stamped with who asked, from where, and when; refused: nothing."""
    tmp = tmp_path_factory.mktemp("write-path")
    clock = Clock()
    config = StoreConfig(token_secret=TOKEN_SECRET, clock=clock)
    hmacs: list[bytes] = []
    with SecurityStore.open(tmp / "store", config, keyring=make_keyring(tmp)) as store:
        for op, as_admin, seconds_later in steps:
            clock.t += seconds_later
            context = ADMIN if as_admin else EVE
            asker = SWEEPER if op[0] == "sweep" else context
            end = store.log.end_offset
            try:
                _write(store, op, context, hmacs)
            except ApiException:
                assert store.log.end_offset == end, f"a refused {op[0]} wrote"
                continue
            assert store.image.next_offset == store.log.end_offset  # published before the call returned
            batches = list(store.log.batches(end))
            assert len(batches) <= 1, f"{op[0]} wrote {len(batches)} batches"
            written = list(store.log.read(end))
            assert {(e.actor_principal, e.actor_host, e.timestamp_ms) for e in written} <= {
                (asker.principal, asker.host, int(clock.t * 1000))}
            assert len({e.request_id for e in written}) <= 1
