"""Properties: who_could agrees with authorize everywhere; timelines agree with authorize at every offset."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    SecurityStore,
    StoreConfig,
)
from secmeta.core.forensics import queries as forensics
from secmeta.projections import authorizer
from secmeta.projections.acls import AclsImage
from secmeta.projections.image import SecurityImage, SecurityProjection
from tests.logkit import Clock, make_keyring
from tests.storekit import ADMIN

PRINCIPALS = ["User:alice", "User:bob", "User:*", "Group:ops", "User:admin"]
HOSTS = ["*", "10.0.0.1", "10.0.0.0/24", "10.0.0.0/16", "10.0.1.5", "10.0.2.7", "2001:db8::/32", "2001:db8::1"]
NAMES = ["orders", "ord", "o", "payments", "*"]
OPS = [AclOperation.READ, AclOperation.WRITE, AclOperation.ALL, AclOperation.DESCRIBE, AclOperation.ALTER]
TYPES = [ResourceType.TOPIC, ResourceType.GROUP]
EXTRA_HOSTS = ["10.0.0.7", "10.0.2.2", "other", "::1", "2001:db8::9"]

# Small pools, mostly patterns that apply to TOPIC "orders", so that allows and denies collide often.
PATTERNS = [
    (ResourceType.TOPIC, "orders", PatternType.LITERAL), (ResourceType.TOPIC, "*", PatternType.LITERAL),
    (ResourceType.TOPIC, "ord", PatternType.PREFIXED), (ResourceType.TOPIC, "payments", PatternType.LITERAL),
    (ResourceType.GROUP, "orders", PatternType.LITERAL),
]
bindings = st.builds(
    lambda pattern, principal, host, op, perm: AclBinding.of(*pattern, principal, host, op, perm),
    st.sampled_from(PATTERNS),
    st.sampled_from(["User:alice", "User:*", "User:bob", "Group:ops", "User:admin"]),
    st.sampled_from(["*", "*", *HOSTS[1:]]),
    st.sampled_from([AclOperation.READ, AclOperation.ALL, AclOperation.WRITE, AclOperation.DESCRIBE]),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)
configs = st.builds(
    lambda supers, allow: StoreConfig(super_users=frozenset(supers), allow_everyone_if_no_acl_found=allow),
    st.sets(st.sampled_from(["User:admin", "User:bob"]), max_size=2), st.booleans(),
)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(acls=st.lists(bindings, max_size=16), config=configs,
       operation=st.sampled_from([AclOperation.READ, AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE]),
       resource_type=st.sampled_from([ResourceType.TOPIC] * 3 + [ResourceType.GROUP]),
       name=st.sampled_from(["orders", "orders", "ord", "payments"]))
def test_who_could_agrees_with_authorize_for_every_principal_and_host(acls, config, operation, resource_type, name):
    """(principal, host) is allowed by authorize iff some grant of who_could allows it."""
    image = SecurityImage(acls=AclsImage.of((str(uuid.UUID(int=i)), b) for i, b in enumerate(acls)))
    grants = forensics.who_could(image, config, operation, resource_type, name)
    for principal in [*PRINCIPALS, "User:zed", "Group:zed"]:
        for host in [*HOSTS, *EXTRA_HOSTS]:
            expected = authorizer.authorize(
                image.acls, principal, host, operation, resource_type, name,
                super_users=config.super_users, allow_if_no_acl=config.allow_everyone_if_no_acl_found)
            assert any(g.allows(principal, host) for g in grants) == expected, (principal, host)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(acls=st.lists(bindings, max_size=14), operation=st.sampled_from(OPS[:2]), name=st.sampled_from(NAMES[:4]))
def test_who_could_grants_cite_only_allow_acls_that_apply(acls, operation, name):
    """Every ACL a grant cites is an ALLOW that applies to the resource, principal and host of the grant."""
    image = SecurityImage(acls=AclsImage.of((str(uuid.UUID(int=i)), b) for i, b in enumerate(acls)))
    for grant in forensics.who_could(image, StoreConfig(), operation, ResourceType.TOPIC, name):
        for acl_id, binding in grant.acls:
            assert image.acls.get(acl_id) == binding
            assert binding.permission_type == AclPermissionType.ALLOW and binding.host == grant.host
            assert binding.principal in (grant.principal, "User:*")


# -- timelines -------------------------------------------------------------------------------




@pytest.fixture(scope="module")
def keyring(tmp_path_factory):
    return make_keyring(tmp_path_factory.mktemp("keys"))


delete_filters = st.builds(
    AclBindingFilter.of, st.sampled_from([ResourceType.ANY, *TYPES]), st.sampled_from([None, *NAMES]),
    st.just(PatternType.ANY), st.sampled_from([None, *PRINCIPALS]),
)
requests = st.lists(st.one_of(
    st.tuples(st.just("create"), st.lists(bindings, min_size=1, max_size=3)),
    st.tuples(st.just("delete"), st.lists(delete_filters, min_size=1, max_size=2)),
), min_size=1, max_size=16)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(plan=requests, allow_if_no_acl=st.booleans(), principal=st.sampled_from(["User:alice", "User:*", "Group:ops"]),
       host=st.sampled_from(["*", "10.0.0.1", "10.0.1.5", "2001:db8::1"]), operation=st.sampled_from(OPS[:2] + OPS[3:]),
       name=st.sampled_from(["orders", "payments"]))
def test_timeline_agrees_with_authorize_at_every_offset(keyring, plan, allow_if_no_acl, principal, host, operation, name):
    """access_timeline's intervals contain offset N iff authorize was true in the state after events [0, N)."""
    clock = Clock()
    config = StoreConfig(clock=clock, allow_everyone_if_no_acl_found=allow_if_no_acl)
    with tempfile.TemporaryDirectory() as tmp, SecurityStore.open(Path(tmp) / "s", config, keyring=keyring) as store:
        for kind, items in plan:
            if kind == "create":
                store.create_acls(items, context=ADMIN)
            else:
                store.delete_acls(items, context=ADMIN)
            clock.t += 1
        intervals = store.access_timeline(principal, operation, ResourceType.TOPIC, name, host)
        state, projection = SecurityImage.EMPTY, SecurityProjection()
        events = list(store.log.read())
        for n in range(len(events) + 1):
            if n:
                state = projection.apply(state, [events[n - 1]])
            expected = authorizer.authorize(state.acls, principal, host, operation, ResourceType.TOPIC, name,
                                            super_users=config.super_users, allow_if_no_acl=allow_if_no_acl)
            assert any(i.contains(n) for i in intervals) == expected, n
        for interval in intervals:
            if interval.opened_by is not None:
                assert interval.opened_by.offset == interval.start_offset - 1
            if interval.closed_by is not None:
                assert interval.closed_by.offset == interval.end_offset - 1
