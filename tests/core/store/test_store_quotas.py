"""SecurityStore.alter_client_quotas / describe_client_quotas: logged, replayed, snapshotted, time-travelled."""

from __future__ import annotations

import pytest

from secmeta.core import ApiError, ClusterAuthorizationException, RequestContext
from secmeta.core.control.quotas import (
    ClientQuotaAlteration,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ClientQuotaOp,
)
from secmeta.events.records import ClientQuotaEntity
from tests.storekit import ADMIN

ALICE = ClientQuotaEntity.of({"user": "alice"})


def set_quota(store, entity, **ops):
    results = store.alter_client_quotas(
        [ClientQuotaAlteration(entity, tuple(ClientQuotaOp(k, v) for k, v in ops.items()))], context=ADMIN)
    assert list(results.values()) == [ApiError()], results


def quotas(store_or_view):
    return store_or_view.describe_client_quotas(context=ADMIN)


def test_a_quota_is_described_after_reopening_from_the_log_and_from_a_snapshot(open_store):
    store = open_store()
    set_quota(store, {"user": "alice"}, producer_byte_rate=1024, consumer_byte_rate=2048)
    set_quota(store, {"user": None, "client-id": "app"}, request_percentage=12.5)
    expected = {ALICE: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
                ClientQuotaEntity.of({"user": None, "client-id": "app"}): {"request_percentage": 12.5}}
    assert quotas(store) == expected
    store.close()
    store = open_store()
    assert quotas(store) == expected and store.loaded.snapshot is None
    store.snapshot()
    store.close()
    store = open_store()
    assert store.loaded.snapshot is not None and store.loaded.replayed_events == 0
    assert quotas(store) == expected


def test_validate_only_and_failed_entities_write_nothing(open_store):
    store = open_store()
    end = store.log.end_offset
    results = store.alter_client_quotas([ClientQuotaAlteration({"user": "alice"}, (ClientQuotaOp("producer_byte_rate", 1),))],
                                        validate_only=True, context=ADMIN)
    assert list(results.values()) == [ApiError()]
    store.alter_client_quotas([ClientQuotaAlteration({"user": "alice"}, (ClientQuotaOp("producer_byte_rate", -1),))],
                              context=ADMIN)
    assert store.log.end_offset == end and quotas(store) == {}


def test_a_requester_without_alter_configs_is_refused(open_store):
    store = open_store()
    with pytest.raises(ClusterAuthorizationException):
        store.alter_client_quotas([ClientQuotaAlteration({"user": "bob"}, (ClientQuotaOp("producer_byte_rate", 1),))],
                                  context=RequestContext("User:bob", "10.0.0.2"))


def test_as_of_answers_the_quotas_in_force_then(open_store):
    store = open_store()
    set_quota(store, {"user": "alice"}, producer_byte_rate=1000)
    first = store.log.end_offset
    set_quota(store, {"user": "alice"}, producer_byte_rate=None)
    assert quotas(store) == {}
    assert quotas(store.as_of(offset=first)) == {ALICE: {"producer_byte_rate": 1000.0}}
    only_alice = ClientQuotaFilter.contains_only([ClientQuotaFilterComponent.of_entity("user", "alice")])
    assert store.as_of(offset=first).describe_client_quotas(only_alice, context=ADMIN) == {
        ALICE: {"producer_byte_rate": 1000.0}}



def test_history_shows_quota_changes_by_the_user_they_name(open_store):
    store = open_store()
    set_quota(store, {"user": "alice", "client-id": "app"}, producer_byte_rate=1000)
    set_quota(store, {"client-id": "alice"}, producer_byte_rate=5)
    set_quota(store, {"user": "alice", "client-id": "app"}, producer_byte_rate=None)
    entries = list(store.history(principal="User:alice"))
    assert [(e.event_type, e.payload["value"]) for e in entries] == [
        ("ClientQuotaAltered", 1000.0), ("ClientQuotaAltered", None)]
    assert entries[0].payload["entity"] == "user=alice,client-id=app"


def test_a_diff_over_quota_changes_answers(open_store):
    """Quota events do not break diff (which does not list quota changes yet) nor as_of."""
    store = open_store()
    set_quota(store, {"user": "alice"}, producer_byte_rate=1000)
    set_quota(store, {"user": "alice"}, producer_byte_rate=None)
    change = store.diff(0, store.log.end_offset)
    assert (change.acls_added, change.credentials_upserted, change.tokens_issued) == ((), (), ())
