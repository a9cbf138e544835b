"""Forensics: who could do something at a point, and the timeline of one principal's access."""

from __future__ import annotations

import json

import pytest

from secmeta.core import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    RequestContext,
    ResourceType,
)
from secmeta.core.errors import PointInTimeError, QueryError
from secmeta.core.forensics.queries import Grant
from secmeta.core.forensics.timetravel import Point
from tests.storekit import ADMIN, acl

OPS = RequestContext("User:ops", "10.0.0.7")
T0 = 1_800_000_000_000
READ, WRITE = AclOperation.READ, AclOperation.WRITE
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC = ResourceType.TOPIC


@pytest.fixture
def open_store(open_store):
    """The shared open_store, with User:ops a super user too."""

    def _open(**config):
        config.setdefault("super_users", frozenset({"User:admin", "User:ops"}))
        return open_store(**config)

    return _open


def acl_grants(grants: list[Grant]) -> list[tuple[str, str]]:
    return [(g.principal, g.host) for g in grants if g.reason != "super user"]


# -- who_could --------------------------------------------------------------------------


def test_who_could_lists_super_users_first(open_store):
    """Super users are listed with the reason 'super user' even with no ACL."""
    store = open_store()
    grants = store.who_could(READ, TOPIC, "orders")
    assert [(g.principal, g.reason) for g in grants] == [("User:admin", "super user"), ("User:ops", "super user")]


def test_who_could_names_the_allowing_acl(open_store):
    """A principal allowed by an ACL is listed with that ACL and its id."""
    store = open_store()
    store.create_acls([acl("orders")], context=ADMIN)
    [grant] = [g for g in store.who_could(READ, TOPIC, "orders") if g.principal == "User:alice"]
    [(acl_id, binding)] = grant.acls
    assert binding == acl("orders") and store.image.acls.get(acl_id) == binding and grant.host == "*"


def test_who_could_counts_prefixed_and_wildcard_acls(open_store):
    """Prefixed and literal '*' ACLs that apply to the name grant access."""
    store = open_store()
    store.create_acls([acl("ord", "User:bob", pattern=PatternType.PREFIXED), acl("*", "User:carol"),
                       acl("payments", "User:dave")], context=ADMIN)
    assert acl_grants(store.who_could(READ, TOPIC, "orders")) == [("User:bob", "*"), ("User:carol", "*")]


def test_who_could_reports_wildcard_principal_as_such(open_store):
    """An ACL for 'User:*' is reported as the wildcard principal, not expanded."""
    store = open_store()
    store.create_acls([acl("orders", "User:*")], context=ADMIN)
    assert acl_grants(store.who_could(READ, TOPIC, "orders")) == [("User:*", "*")]


def test_who_could_leaves_out_a_principal_denied_everywhere(open_store):
    """A DENY from every host removes the principal's grant."""
    store = open_store()
    store.create_acls([acl("orders"), acl("orders", perm=DENY)], context=ADMIN)
    assert acl_grants(store.who_could(READ, TOPIC, "orders")) == []


def test_who_could_excepts_denied_hosts(open_store):
    """A DENY from one host is reported as an exception of the grant."""
    store = open_store()
    store.create_acls([acl("orders"), acl("orders", perm=DENY, host="10.0.0.9")], context=ADMIN)
    [grant] = [g for g in store.who_could(READ, TOPIC, "orders") if g.principal == "User:alice"]
    assert grant.except_hosts == ("10.0.0.9",)
    assert grant.allows("User:alice", "10.0.0.1") and not grant.allows("User:alice", "10.0.0.9")


def test_who_could_excepts_a_narrower_denied_range(open_store):
    """A DENY for a range inside the allowed range is excepted; clients outside it stay allowed."""
    store = open_store()
    store.create_acls([acl("orders", host="10.0.0.0/16"), acl("orders", perm=DENY, host="10.0.0.0/24")], context=ADMIN)
    [grant] = [g for g in store.who_could(READ, TOPIC, "orders") if g.principal == "User:alice"]
    assert grant.except_hosts == ("10.0.0.0/24",)
    assert grant.allows("User:alice", "10.0.9.1") and not grant.allows("User:alice", "10.0.0.1")


def test_who_could_drops_a_host_inside_a_denied_range(open_store):
    """An ALLOW for one host inside a denied range grants nothing."""
    store = open_store()
    store.create_acls([acl("orders", host="10.0.0.1"), acl("orders", perm=DENY, host="10.0.0.0/24")], context=ADMIN)
    assert acl_grants(store.who_could(READ, TOPIC, "orders")) == []


def test_who_could_takes_principals_with_own_denies_out_of_the_wildcard_grant(open_store):
    """A principal denied on its own is excepted from the 'User:*' grant."""
    store = open_store()
    store.create_acls([acl("orders", "User:*"), acl("orders", "User:eve", perm=DENY)], context=ADMIN)
    [wildcard] = [g for g in store.who_could(READ, TOPIC, "orders") if g.principal == "User:*"]
    assert wildcard.except_principals == ("User:eve",)
    assert not wildcard.allows("User:eve", "h") and wildcard.allows("User:frank", "h")


def test_who_could_reports_the_no_acl_rule(open_store):
    """With allow.everyone.if.no.acl.found and no ACL, everyone is allowed by that rule."""
    store = open_store(allow_everyone_if_no_acl_found=True)
    grants = store.who_could(READ, TOPIC, "orders")
    assert [(g.principal, g.reason) for g in grants if g.reason != "super user"] == [("User:*", "no ACL found")]


def test_who_could_answers_at_a_past_point(open_store, clock):
    """who_could(at=...) answers from the ACLs of that time."""
    store = open_store()
    store.create_acls([acl("orders")], context=ADMIN)
    clock.t += 1
    store.delete_acls([AclBindingFilter.of(TOPIC, "orders")], context=ADMIN)
    assert acl_grants(store.who_could(READ, TOPIC, "orders", at=1)) == [("User:alice", "*")]
    assert acl_grants(store.who_could(READ, TOPIC, "orders", at=Point.at_time(T0))) == [("User:alice", "*")]
    assert acl_grants(store.who_could(READ, TOPIC, "orders")) == []


def test_who_could_accepts_names(open_store):
    """Operation and resource type may be given by name, as the CLI does."""
    store = open_store()
    store.create_acls([acl("orders")], context=ADMIN)
    assert acl_grants(store.who_could("read", "topic", "orders")) == [("User:alice", "*")]


@pytest.mark.parametrize("operation, resource_type", [
    ("read", "planet"), ("read", ResourceType.ANY), ("read", ResourceType.UNKNOWN), ("fly", "topic"),
    (AclOperation.ANY, "topic"),
])
def test_who_could_refuses_unknown_types_and_operations(open_store, operation, resource_type):
    """An unknown or non-concrete operation or resource type is a QueryError."""
    store = open_store()
    with pytest.raises(QueryError):
        store.who_could(operation, resource_type, "orders")


def test_who_could_at_a_bad_point_is_a_point_in_time_error(open_store):
    """A point past the end is refused."""
    store = open_store()
    with pytest.raises(PointInTimeError):
        store.who_could(READ, TOPIC, "orders", at=10)


# -- access_timeline ------------------------------------------------------------------------


def test_timeline_opens_and_closes_with_the_changes(open_store, clock):
    """An ACL created then deleted gives one interval, opened and closed by those events."""
    store = open_store()
    store.create_acls([acl("noise", "User:bob")], context=ADMIN)
    clock.t += 1
    store.create_acls([acl("orders")], context=OPS)
    clock.t += 1
    store.delete_acls([AclBindingFilter.of(TOPIC, "orders")], context=ADMIN)
    [interval] = store.access_timeline("User:alice", READ, TOPIC, "orders")
    assert (interval.start_offset, interval.start_ms, interval.end_offset, interval.end_ms) == (2, T0 + 1000, 3, T0 + 2000)
    assert (interval.opened_by.offset, interval.opened_by.actor_principal, interval.opened_by.actor_host) == (
        1, "User:ops", "10.0.0.7")
    assert (interval.closed_by.offset, interval.closed_by.event_type) == (2, "AclDeleted")


def test_timeline_is_open_while_access_holds(open_store):
    """An interval still in force has no end."""
    store = open_store()
    store.create_acls([acl("orders")], context=ADMIN)
    [interval] = store.access_timeline("User:alice", READ, TOPIC, "orders")
    assert (interval.end_offset, interval.closed_by) == (None, None)


def test_timeline_is_closed_by_a_deny(open_store, clock):
    """A DENY created later closes the interval."""
    store = open_store()
    store.create_acls([acl("orders", "User:*")], context=ADMIN)
    clock.t += 1
    store.create_acls([acl("ord", "User:alice", perm=DENY, pattern=PatternType.PREFIXED)], context=ADMIN)
    [interval] = store.access_timeline("User:alice", READ, TOPIC, "orders")
    assert interval.closed_by.binding.permission_type == DENY


def test_timeline_ignores_acls_on_other_resources(open_store):
    """ACLs on other names or for other hosts do not open access; from any host (the default), the ACL for
    10.0.0.9 does."""
    store = open_store()
    store.create_acls([acl("payments"), acl("orders", host="10.0.0.9")], context=ADMIN)
    assert store.access_timeline("User:alice", READ, TOPIC, "orders", host="10.0.0.1") == []
    assert store.access_timeline("User:alice", READ, TOPIC, "orders", host="*") == []
    [interval] = store.access_timeline("User:alice", READ, TOPIC, "orders")
    assert interval.opened_by.binding.host == "10.0.0.9"


def test_timeline_counts_host_specific_acls_for_that_host(open_store):
    """An ACL for one host opens access for that host."""
    store = open_store()
    store.create_acls([acl("orders", host="10.0.0.0/24")], context=ADMIN)
    assert len(store.access_timeline("User:alice", READ, TOPIC, "orders", host="10.0.0.9")) == 1


def test_timeline_of_a_super_user_spans_everything(open_store):
    """A super user's access holds from the start, by the super-user rule."""
    store = open_store()
    [interval] = store.access_timeline("User:admin", READ, TOPIC, "orders")
    assert (interval.start_offset, interval.opened_by, interval.end_offset, interval.reason) == (0, None, None, "super user")


def test_timeline_with_no_acl_rule_starts_open_and_closes_on_the_first_acl(open_store):
    """With allow.everyone.if.no.acl.found, any first ACL on the resource closes everyone else's access."""
    store = open_store(allow_everyone_if_no_acl_found=True)
    store.create_acls([acl("orders", "User:bob")], context=ADMIN)
    [interval] = store.access_timeline("User:alice", READ, TOPIC, "orders")
    assert (interval.start_offset, interval.reason, interval.end_offset) == (0, "no ACL found", 1)


def test_timeline_refuses_a_malformed_principal(open_store):
    """A principal without a type is a QueryError."""
    store = open_store()
    with pytest.raises(QueryError, match="Type:Name"):
        store.access_timeline("alice", READ, TOPIC, "orders")


def test_timeline_to_dict_is_json(open_store):
    """Intervals serialise to JSON with the opening change's fields."""
    store = open_store()
    store.create_acls([acl("orders")], context=ADMIN)
    [interval] = store.access_timeline("User:alice", READ, TOPIC, "orders")
    data = json.loads(json.dumps(interval.to_dict()))
    assert data["opened_by"]["actor_principal"] == "User:admin" and data["closed_by"] is None


def test_a_settings_change_keeps_the_acls_the_timeline_tracks(open_store):
    """A logged settings change in the middle of an ACL's life does not close the access it gives."""
    store = open_store()
    store.create_acls([acl("orders")], context=ADMIN)
    store.alter_settings({"allow.everyone.if.no.acl.found": "false"}, context=ADMIN)
    [interval] = store.access_timeline("User:alice", READ, TOPIC, "orders")
    assert interval.end_offset is None and interval.closed_by is None
