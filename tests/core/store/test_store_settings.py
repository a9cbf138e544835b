"""Settings that decide access are logged events (issue 21): the store's API, its past views and its checks at open."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.core import SecurityStore, StoreConfig
from secmeta.core import settings as logged
from secmeta.core.errors import ApiException, ErrorCode, InvalidValueError
from secmeta.core.types import RequestContext
from secmeta.events.types import AclOperation, ResourceType
from tests.storekit import ADMIN, acl

MALLORY = RequestContext("User:mallory", "10.0.0.9")
TOPIC = ResourceType.TOPIC


def test_a_super_user_added_later_is_not_one_in_the_past(store):
    """who_could and authorize at a point before alter_settings answer with the super users of then."""
    store.log_initial_settings(ADMIN)
    before = store.image.next_offset
    store.alter_settings({"super.users": "User:admin;User:mallory"}, context=ADMIN)
    now = {g.principal for g in store.who_could(AclOperation.ALTER, TOPIC, "payments")}
    then = {g.principal for g in store.who_could(AclOperation.ALTER, TOPIC, "payments", at=before)}
    assert now == {"User:admin", "User:mallory"} and then == {"User:admin"}
    assert store.authorize("User:mallory", "h", AclOperation.ALTER, TOPIC, "payments")
    assert not store.as_of(offset=before).authorize("User:mallory", "h", AclOperation.ALTER, TOPIC, "payments")


def test_allow_everyone_if_no_acl_found_is_a_logged_setting(store):
    store.alter_settings({"allow.everyone.if.no.acl.found": "true"}, context=ADMIN)
    assert store.authorize("User:anyone", "h", AclOperation.ALTER, TOPIC, "payments")
    assert not store.as_of(offset=0).authorize("User:anyone", "h", AclOperation.ALTER, TOPIC, "payments")
    store.alter_settings(delete=["allow.everyone.if.no.acl.found"], context=ADMIN)  # back to the default
    assert not store.authorize("User:anyone", "h", AclOperation.ALTER, TOPIC, "payments")


def test_altering_settings_needs_alter_configs_on_the_cluster_and_a_refusal_writes_nothing(store):
    end = store.log.end_offset
    with pytest.raises(ApiException) as info:
        store.alter_settings({"super.users": "User:mallory"}, context=MALLORY)
    assert info.value.error.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    for bad, named in (({"super.users": "mallory"}, "super.users"), ({"no.such": "1"}, "no.such"),
                       ({"delegation.token.max.lifetime.ms": "-5"}, "delegation.token.max.lifetime.ms"),
                       ({"allow.everyone.if.no.acl.found": "yes"}, "allow.everyone.if.no.acl.found")):
        with pytest.raises(ApiException) as info:
            store.alter_settings(bad, context=ADMIN)
        assert info.value.error.code == ErrorCode.INVALID_REQUEST and named in str(info.value)
    assert store.log.end_offset == end


def test_settings_survive_a_snapshot_and_a_reopen(open_store):
    store = open_store()
    store.alter_settings({"super.users": "User:root", "delegation.token.expiry.time.ms": "5000"}, context=ADMIN)
    store.snapshot()
    store.close()
    reopened = open_store()
    assert reopened.loaded.replayed_events == 0
    assert reopened.settings.super_users == {"User:root"} and reopened.settings.token_expiry_time_ms == 5000


@pytest.mark.parametrize("edit", [{"super_users": ["User:admin", "User:mallory"]},
                                  {"allow_everyone_if_no_acl_found": True}])
def test_a_config_json_that_disagrees_with_the_log_is_refused_at_open(open_store, store_dir, keyring, edit):
    """The issue's attack: config.json edited. Both opens refuse, naming the setting and the command."""
    store = open_store()
    store.log_initial_settings(ADMIN)
    store.close()
    (store_dir / "config.json").write_text(json.dumps(edit))
    for read_only in (False, True):
        with pytest.raises(InvalidValueError) as info:
            SecurityStore.open(store_dir, StoreConfig.load(store_dir), keyring=keyring, read_only=read_only)
        assert next(iter(edit)) in str(info.value) and "secmeta config --alter" in str(info.value)
    (store_dir / "config.json").write_text(json.dumps({"super_users": ["User:admin"]}))  # the log's value: fine
    SecurityStore.open(store_dir, StoreConfig.load(store_dir), keyring=keyring, read_only=True).close()


def test_the_token_secret_is_pinned_by_its_fingerprint(open_store):
    """Once logged, another SECMETA_TOKEN_SECRET may not create or renew tokens, and the error names it."""
    store = open_store(token_secret=b"the-right-token-secret, 32 bytes or more")
    store.log_initial_settings(ADMIN)
    token = store.create_delegation_token(context=ADMIN)
    store.close()
    wrong = open_store(token_secret=b"another-token-secret, 32 bytes or more")
    for attempt in (lambda: wrong.create_delegation_token(context=ADMIN),
                    lambda: wrong.renew_delegation_token(token.hmac, context=ADMIN),
                    lambda: wrong.token_hmac(token.token_id)):
        with pytest.raises(ApiException, match="SECMETA_TOKEN_SECRET"):
            attempt()
    assert [t.token_id for t in wrong.as_of(offset=wrong.image.next_offset).describe_delegation_tokens(
        context=ADMIN)] == [token.token_id]  # no HMAC shown: no secret needed


def test_the_first_token_pins_a_secret_the_log_did_not_name(open_store):
    store = open_store(token_secret=None)
    store.log_initial_settings(ADMIN)  # no secret: no fingerprint logged
    store.close()
    store = open_store(token_secret=b"first-token-secret, 32 bytes or more")
    store.create_delegation_token(context=ADMIN)
    assert store.settings.token_secret_fingerprint == logged.secret_fingerprint(b"first-token-secret, 32 bytes or more")
    assert [e.event_type for e in store.history()][-2:] == ["SecuritySettingAltered", "DelegationTokenIssued"]


def test_history_shows_setting_changes_with_their_actor(store):
    store.alter_settings({"super.users": "User:admin;User:ops"}, context=ADMIN)
    [entry] = [e for e in store.history() if e.event_type == "SecuritySettingAltered"]
    assert entry.payload == {"setting_name": "super.users", "setting_value": "User:admin;User:ops"}


_PRINCIPALS = st.lists(st.from_regex(r"User:[a-z]{1,8}", fullmatch=True), max_size=4).map(frozenset)


@given(super_users=_PRINCIPALS, allow=st.booleans(), lifetime=st.integers(1, 2**62))
def test_every_logged_setting_reads_back_what_its_text_form_wrote(super_users, allow, lifetime):
    config = StoreConfig(super_users=super_users, allow_everyone_if_no_acl_found=allow, token_max_lifetime_ms=lifetime)
    for s in logged.LOGGED:
        value = getattr(config, s.field)
        if value is not None:
            assert s.value_of(s.text(value)) == value


def test_the_access_timeline_opens_and_closes_with_super_users_changes(store):
    """A principal made super user, then not: one interval, opened and closed by the logged setting changes."""
    store.create_acls([acl("payments", principal="User:bob")], context=ADMIN)  # the topic has ACLs, none hers
    store.alter_settings({"super.users": "User:admin;User:mallory"}, context=ADMIN)
    granted = store.image.next_offset
    store.alter_settings({"super.users": "User:admin"}, context=ADMIN)
    [interval] = store.access_timeline("User:mallory", AclOperation.ALTER, TOPIC, "payments")
    assert (interval.start_offset, interval.end_offset) == (granted, store.image.next_offset)
    assert interval.opened_by.event_type == interval.closed_by.event_type == "SecuritySettingAltered"
    assert interval.reason == "super user"


def test_a_setting_returned_to_its_default_is_decided_by_the_config_again_in_every_answer(open_store):
    """delete: the log no longer sets it, so the config's value decides, live, as_of and in the timeline alike."""
    store = open_store(allow_everyone_if_no_acl_found=True)
    store.alter_settings({"allow.everyone.if.no.acl.found": "false"}, context=ADMIN)
    closed = store.image.next_offset
    store.alter_settings(delete=["allow.everyone.if.no.acl.found"], context=ADMIN)
    reopened = store.image.next_offset
    anyone = ("User:anyone", "h", AclOperation.READ, TOPIC, "open-topic")
    assert store.authorize(*anyone) and not store.as_of(offset=closed).authorize(*anyone)
    timeline = store.access_timeline("User:anyone", AclOperation.READ, TOPIC, "open-topic")
    assert [(i.start_offset, i.end_offset) for i in timeline] == [(0, closed), (reopened, None)]


# Review 28, finding 1: ALTER_CONFIGS on the cluster (quota tooling's right) must not be enough to change who is
# authorized or who may log in. These settings, and only these, also need ALTER on the cluster (the right writing
# ACLs needs); each with a value that would open access to a holder of ALTER_CONFIGS alone.
_DECIDES_ACCESS = {
    "super.users": "User:admin;User:ops",
    "allow.everyone.if.no.acl.found": "true",
    "delegation.token.secret.fingerprint": logged.secret_fingerprint(b"ops-own-secret"),
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    "secmeta.allow.plaintext.passwords": "true",
    "secmeta.scram.accept.doubled.client.nonce": "true",
}
_TUNING = {"delegation.token.max.lifetime.ms": "86400000", "delegation.token.expiry.time.ms": "3600000",
           "secmeta.scram.default.iterations": "SCRAM-SHA-256=8192"}
OPS = RequestContext("User:ops", "10.0.0.7")


def _grant_ops(store, *operations: AclOperation) -> None:
    store.create_acls([acl("kafka-cluster", principal="User:ops", op=op, rtype=ResourceType.CLUSTER)
                       for op in operations], context=ADMIN)


def test_the_declared_settings_are_exactly_those_named_here():
    """Every logged setting is in one of the two lists above, so a new setting gets a decision in this test."""
    assert {s.name for s in logged.LOGGED} == set(_DECIDES_ACCESS) | set(_TUNING)


@pytest.mark.parametrize("name", sorted(_DECIDES_ACCESS))
@pytest.mark.parametrize("how", ["set", "delete"])
def test_alter_configs_alone_cannot_change_a_setting_that_decides_access(store, name, how):
    """A holder of ALTER_CONFIGS on the cluster alone is refused, naming the setting and ALTER; nothing is written,
    and (for super.users) it has not become a super user. Set and delete alike."""
    store.log_initial_settings(ADMIN)
    _grant_ops(store, AclOperation.ALTER_CONFIGS)
    store.create_acls([acl("payroll", principal="User:hr")], context=ADMIN)
    end, before = store.log.end_offset, store.describe_settings(context=ADMIN)
    with pytest.raises(ApiException) as info:
        if how == "set":
            store.alter_settings({name: _DECIDES_ACCESS[name]}, context=OPS)
        else:
            store.alter_settings(delete=[name], context=OPS)
    assert info.value.error.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert name in str(info.value) and "ALTER on the cluster" in str(info.value) and "User:ops" in str(info.value)
    assert store.log.end_offset == end and store.describe_settings(context=ADMIN) == before
    assert not store.authorize("User:ops", "10.0.0.7", AclOperation.READ, TOPIC, "payroll")


def test_one_setting_that_decides_access_refuses_the_whole_request(store):
    """A tuning setting beside super.users: the request is refused as one and writes nothing."""
    _grant_ops(store, AclOperation.ALTER_CONFIGS)
    end = store.log.end_offset
    with pytest.raises(ApiException) as info:
        store.alter_settings({"delegation.token.expiry.time.ms": "5000", "super.users": "User:ops"}, context=OPS)
    assert "super.users" in str(info.value)
    assert store.log.end_offset == end and store.settings.token_expiry_time_ms != 5000


@pytest.mark.parametrize("name", sorted(_TUNING))
def test_alter_configs_alone_may_change_a_tuning_setting(store, name):
    _grant_ops(store, AclOperation.ALTER_CONFIGS)
    assert store.alter_settings({name: _TUNING[name]}, context=OPS) == [name]


def test_alter_alone_is_not_enough_either_and_both_rights_are(store):
    """ALTER (an ACL writer) without ALTER_CONFIGS is refused naming ALTER_CONFIGS; with both, super.users changes."""
    _grant_ops(store, AclOperation.ALTER)
    with pytest.raises(ApiException) as info:
        store.alter_settings({"super.users": "User:admin;User:ops"}, context=OPS)
    assert "ALTER_CONFIGS" in str(info.value)
    _grant_ops(store, AclOperation.ALTER_CONFIGS)
    assert store.alter_settings({"super.users": "User:admin;User:ops"}, context=OPS) == ["super.users"]
    assert store.authorize("User:ops", "10.0.0.7", AclOperation.READ, TOPIC, "payroll")
