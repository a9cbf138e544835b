"""store.history: attributed, redacted changes with filters; store.diff between two points."""

from __future__ import annotations

import base64
import json
from dataclasses import replace

import pytest

from secmeta.core import (
    AclBindingFilter,
    PatternType,
    RequestContext,
    ResourcePatternFilter,
    ResourceType,
    ScramMechanism,
    UserScramCredentialDeletion,
)
from secmeta.core.errors import PointInTimeError, QueryError
from secmeta.core.forensics.timetravel import Point
from secmeta.events.records import AclCreated, ScramCredentialUpserted
from tests import storekit
from tests.logkit import Clock
from tests.storekit import acl, decoded_batches, upsert

ADMIN = replace(storekit.ADMIN, request_id="req-admin")
OPS = RequestContext("User:ops", "10.0.0.7")
T0 = 1_800_000_000_000
SHA256 = ScramMechanism.SCRAM_SHA_256


@pytest.fixture
def store(open_store):
    return open_store(super_users=frozenset({"User:admin", "User:ops"}))


def tick(clock: Clock) -> None:
    clock.t += 1


def offsets(entries) -> list[int]:
    return [e.offset for e in entries]


# -- history ------------------------------------------------------------------------------


def test_history_attributes_every_change(store):
    """Each entry carries offset, time, actor, host, request id, event type and entity key."""
    store.create_acls([acl("t")], context=ADMIN)
    [entry] = store.history()
    assert (entry.offset, entry.timestamp_ms, entry.actor_principal, entry.actor_host, entry.request_id,
            entry.event_type) == (0, T0, "User:admin", "10.0.0.1", "req-admin", "AclCreated")
    assert entry.entity_key.startswith("acl:") and entry.payload["resource_name"] == "t"


def test_history_is_in_offset_order(store, clock):
    """Entries come in log order."""
    for name in "abc":
        store.create_acls([acl(name)], context=ADMIN)
        tick(clock)
    assert offsets(store.history()) == [0, 1, 2]


def test_history_principal_matches_the_actor(store):
    """principal= selects changes the principal made."""
    store.create_acls([acl("a")], context=ADMIN)
    store.create_acls([acl("b")], context=OPS)
    assert offsets(store.history(principal="User:ops")) == [1]


def test_history_principal_matches_an_acl_subject(store):
    """principal= selects ACL changes about the principal."""
    store.create_acls([acl("a"), acl("b", "User:bob")], context=ADMIN)
    assert [e.payload["resource_name"] for e in store.history(principal="User:bob")] == ["b"]


def test_history_principal_matches_a_scram_user(store):
    """principal=User:<name> selects that user's credential changes."""
    store.alter_user_scram_credentials([upsert("carol"), upsert("dave")], context=ADMIN)
    assert [e.payload["user"] for e in store.history(principal="User:carol")] == ["carol"]


def test_history_principal_matches_a_token_owner_on_later_token_events(store, clock):
    """A renewal, which does not name the owner, is found by the owner when the window starts after the issue."""
    token = store.create_delegation_token(context=ADMIN, owner="User:etl", renewers=["User:admin"])
    store.create_acls([acl("noise")], context=ADMIN)
    tick(clock)
    store.renew_delegation_token(token.hmac, context=ADMIN)
    entries = list(store.history(principal="User:etl", start_offset=1))
    assert [e.event_type for e in entries] == ["DelegationTokenRenewed"]


def test_history_user_selects_that_users_credentials(store):
    """user= selects SCRAM events of that user only."""
    store.alter_user_scram_credentials([upsert("carol"), upsert("dave")], context=ADMIN)
    store.create_acls([acl("t", "User:carol")], context=ADMIN)
    assert [(e.event_type, e.payload["user"]) for e in store.history(user="carol")] == [
        ("ScramCredentialUpserted", "carol")]


def test_history_resource_match_finds_every_pattern_that_applies(store):
    """A MATCH filter selects literal, wildcard and prefixed ACLs that apply to the name."""
    store.create_acls([acl("orders"), acl("*"), acl("ord", pattern=PatternType.PREFIXED), acl("payments"),
                       acl("orders", rtype=ResourceType.GROUP)], context=ADMIN)
    selected = store.history(resource=ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.MATCH))
    assert sorted(e.payload["resource_name"] for e in selected) == ["*", "ord", "orders"]


def test_history_resource_literal_is_exact(store):
    """A LITERAL filter selects only ACLs on exactly that literal name."""
    store.create_acls([acl("orders"), acl("*"), acl("ord", pattern=PatternType.PREFIXED)], context=ADMIN)
    selected = store.history(resource=ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL))
    assert [e.payload["resource_name"] for e in selected] == ["orders"]


def test_history_resource_accepts_an_acl_binding_filter(store):
    """An AclBindingFilter selects ACL events by all its fields."""
    store.create_acls([acl("orders"), acl("orders", "User:bob")], context=ADMIN)
    selected = store.history(resource=AclBindingFilter.of(ResourceType.TOPIC, "orders", principal="User:bob"))
    assert [e.payload["principal"] for e in selected] == ["User:bob"]


def test_history_resource_delegation_token_selects_its_events(store):
    """A DELEGATION_TOKEN filter with a token id selects that token's events."""
    first = store.create_delegation_token(context=ADMIN, owner="User:etl")
    store.create_delegation_token(context=ADMIN, owner="User:etl")
    selected = store.history(resource=ResourcePatternFilter(ResourceType.DELEGATION_TOKEN, first.token_id))
    assert [e.entity_key for e in selected] == [f"token:{first.token_id}"]


def test_history_event_types_by_name_and_class(store):
    """event_types accepts type names and event classes."""
    store.create_acls([acl("a")], context=ADMIN)
    store.alter_user_scram_credentials([upsert("carol")], context=ADMIN)
    assert offsets(store.history(event_types=["ScramCredentialUpserted"])) == [1]
    assert offsets(store.history(event_types=[AclCreated])) == [0]


def test_history_unknown_event_type_is_a_query_error(store):
    """An unknown event type names the known ones."""
    with pytest.raises(QueryError, match="AclCreated"):
        store.history(event_types=["AclMade"])


def test_history_time_range_is_inclusive(store, clock):
    """start_ms and end_ms both include events stamped exactly then."""
    for name in "abcd":
        store.create_acls([acl(name)], context=ADMIN)
        tick(clock)
    assert offsets(store.history(start_ms=T0 + 1000, end_ms=T0 + 2000)) == [1, 2]


def test_history_time_range_reads_only_its_batches(store, clock, monkeypatch):
    """Without the history index, a narrow time window decodes the batches of the window (time index)."""
    monkeypatch.setattr(store.timetravel, "index", None)
    for i in range(20):
        store.create_acls([acl(f"t{i}")], context=ADMIN)
        tick(clock)
    decoded = decoded_batches(store, monkeypatch)
    assert offsets(store.history(start_ms=T0 + 15_000, end_ms=T0 + 16_000)) == [15, 16]
    assert decoded == [15, 16]


def test_history_from_the_index_decodes_no_batch(store, clock, monkeypatch):
    """Once the history index has caught up, a query by principal decodes nothing from the log."""
    for i in range(20):
        store.create_acls([acl(f"t{i}", f"User:p{i % 3}")], context=ADMIN)
        tick(clock)
    assert store.timetravel.index.wait(10)
    store.timetravel.index.catch_up()
    decoded = decoded_batches(store, monkeypatch)
    assert offsets(store.history(principal="User:p1")) == [1, 4, 7, 10, 13, 16, 19]
    assert decoded == []


def test_history_offset_range_is_half_open(store, clock):
    """start_offset is included, end_offset is not."""
    store.create_acls([acl(n) for n in "abcd"], context=ADMIN)
    assert offsets(store.history(start_offset=1, end_offset=3)) == [1, 2]


def test_history_limit_stops_early(store):
    """limit caps the number of entries."""
    store.create_acls([acl(n) for n in "abcd"], context=ADMIN)
    assert offsets(store.history(limit=2)) == [0, 1]


@pytest.mark.parametrize("bad", [{"limit": -1}, {"start_offset": -3}, {"start_ms": 5, "end_ms": 4}, {"end_ms": "x"}])
def test_history_bad_ranges_are_query_errors(store, bad):
    """Negative limits or offsets, reversed or non-integer times are QueryErrors."""
    with pytest.raises(QueryError):
        store.history(**bad)


def test_history_unknown_resource_type_is_a_query_error(store):
    """A resource filter of type UNKNOWN is refused."""
    with pytest.raises(QueryError, match="unknown resource type"):
        store.history(resource=ResourcePatternFilter(ResourceType.UNKNOWN, "x"))


def _walk(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _walk(v)
    else:
        yield value


def test_history_never_contains_secret_material(store):
    """No salt, sealed ciphertext or nonce appears in any entry, in any encoding."""
    salt = b"known-salt-0123456789"
    store.alter_user_scram_credentials([upsert("carol", salt=salt)], context=ADMIN)
    store.alter_user_scram_credentials([UserScramCredentialDeletion("carol", SHA256)], context=ADMIN)
    [sealed] = [e.event.secret for e in store.log.read() if isinstance(e.event, ScramCredentialUpserted)]
    entries = [e.to_dict() for e in store.history()]
    text = json.dumps(entries)
    assert not any(isinstance(v, bytes | bytearray | memoryview) for v in _walk(entries))
    for secret in (salt, sealed.ciphertext, sealed.nonce):
        for form in (secret.hex(), base64.b64encode(secret).decode(), repr(secret)):
            assert form not in text
    assert entries[0]["payload"]["secret"] == f"<sealed:{sealed.key_id}>"


# -- diff -------------------------------------------------------------------------------


def test_diff_lists_acls_added_with_ids(store):
    """ACLs created between the points are added, with their ids."""
    store.create_acls([acl("a")], context=ADMIN)
    store.create_acls([acl("b")], context=ADMIN)
    [(acl_id, binding)] = store.diff(1, 2).acls_added
    assert binding == acl("b") and store.image.acls.get(acl_id) == binding


def test_diff_lists_acls_removed(store):
    """ACLs deleted between the points are removed."""
    store.create_acls([acl("a")], context=ADMIN)
    store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "a")], context=ADMIN)
    diff = store.diff(1, 2)
    assert [b for _, b in diff.acls_removed] == [acl("a")] and diff.acls_added == ()


def test_diff_is_the_net_effect_for_acls(store):
    """An ACL created and deleted between the points does not show."""
    store.create_acls([acl("a")], context=ADMIN)
    store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "a")], context=ADMIN)
    assert not store.diff(0, 2)


def test_diff_lists_credentials_upserted_and_deleted(store):
    """Credentials are reported as (user, mechanism, iterations)."""
    store.alter_user_scram_credentials([upsert("carol"), upsert("dave")], context=ADMIN)
    store.alter_user_scram_credentials([UserScramCredentialDeletion("carol", SHA256), upsert("erin", iterations=8192)],
                                       context=ADMIN)
    diff = store.diff(2, 4)
    assert diff.credentials_upserted == (("erin", SHA256, 8192),)
    assert diff.credentials_deleted == (("carol", SHA256, 4096),)


def test_diff_counts_a_replaced_credential_as_upserted(store):
    """Re-upserting an existing credential is an upsert in the diff."""
    store.alter_user_scram_credentials([upsert("carol")], context=ADMIN)
    store.alter_user_scram_credentials([upsert("carol", iterations=8192)], context=ADMIN)
    assert store.diff(1, 2).credentials_upserted == (("carol", SHA256, 8192),)


def test_diff_lists_tokens_issued_and_removed(store):
    """A token issued is listed as issued; one removed by an expire request as removed."""
    old = store.create_delegation_token(context=ADMIN, owner="User:admin")
    new = store.create_delegation_token(context=ADMIN, owner="User:etl")
    store.expire_delegation_token(old.hmac, -1, context=ADMIN)
    diff = store.diff(1, 3)
    assert [t.token_id for t in diff.tokens_issued] == [new.token_id]
    assert [t.token_id for t in diff.tokens_removed] == [old.token_id]


def test_diff_lists_renewals_with_expiry_before_and_after(store, clock):
    """A renewed token shows its expiry before the first and after the last renewal."""
    token = store.create_delegation_token(context=ADMIN, owner="User:admin")
    before = store.image.tokens.get(token.token_id).expiry_timestamp_ms
    clock.t += 10
    store.renew_delegation_token(token.hmac, context=ADMIN)
    clock.t += 10
    after = store.renew_delegation_token(token.hmac, context=ADMIN)
    [change] = store.diff(1, 3).tokens_renewed
    assert (change.token_id, change.expiry_before_ms, change.expiry_after_ms, change.last_offset) == (
        token.token_id, before, after, 2)


def test_diff_lists_expiry_changes(store, clock):
    """An expire request that moves the expiry (not a removal) is listed as expired."""
    token = store.create_delegation_token(context=ADMIN, owner="User:admin")
    expiry = store.expire_delegation_token(token.hmac, 5000, context=ADMIN)
    diff = store.diff(1, 2)
    assert [(c.token_id, c.expiry_after_ms) for c in diff.tokens_expired] == [(token.token_id, expiry)]
    assert diff.tokens_renewed == () and diff.tokens_removed == ()


def test_diff_accepts_times(store, clock):
    """Points may be Point.at_time(ms) or {"timestamp_ms": ms}."""
    store.create_acls([acl("a")], context=ADMIN)
    tick(clock)
    store.create_acls([acl("b")], context=ADMIN)
    diff = store.diff(Point.at_time(T0), {"timestamp_ms": T0 + 1000})
    assert (diff.start_offset, diff.end_offset) == (1, 2)


def test_diff_backwards_is_a_query_error(store):
    """A diff whose start is after its end is refused."""
    store.create_acls([acl("a")], context=ADMIN)
    with pytest.raises(QueryError, match="after its end"):
        store.diff(1, 0)


def test_diff_past_the_end_is_a_point_in_time_error(store):
    """A diff to an offset beyond the log's end is refused."""
    with pytest.raises(PointInTimeError, match="past the end"):
        store.diff(0, 5)


def test_diff_to_dict_is_json(store):
    """to_dict gives JSON-serialisable values with enum names."""
    store.create_acls([acl("a")], context=ADMIN)
    store.alter_user_scram_credentials([upsert("carol")], context=ADMIN)
    data = json.loads(json.dumps(store.diff(0, 2).to_dict()))
    assert data["acls_added"][0]["operation"] == "READ"
    assert data["credentials_upserted"] == [{"user": "carol", "mechanism": "SCRAM-SHA-256", "iterations": 4096}]
