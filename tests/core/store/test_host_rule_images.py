"""Property: the ACL host rule ('*', the client's exact string, a CIDR range holding its address) decides alike on
every image a store answers from: the live one (built by deltas), a snapshot-loaded one (its columns read lazily)
and as_of (at the end and before the deletions).

Each image builds its host lookup its own way (a group's host map and networks, or the columns of a loaded
table for a group of a few ACLs), so each answer is checked against a reference written from Kafka's rule
(``AclEntry`` host '*' or equal, and for ranges ``ipaddress``' containment), not from secmeta's code.
"""

import ipaddress
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core.types import RequestContext
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.logkit import make_keyring
from tests.storekit import store_at

ADMIN = RequestContext("User:admin", "127.0.0.1")
ACL_HOSTS = ["*", "10.0.0.1", "10.0.0.2", "10.0.0.0/24", "10.0.0.128/25", "10.0.1.0/24", "10.0.0.0/8",
             "::1", "2001:db8::/32"]  # the store refuses host names
CLIENT_HOSTS = ["10.0.0.1", "10.0.0.2", "10.0.0.200", "10.0.1.7", "11.0.0.1", "::1", "2001:db8::9", "client-a"]
PRINCIPALS = ["User:alice", "User:bob"]  # bob holds no ACL of his own: only 'User:*' ones apply to him
NAMES = ["a", "ab", "abc"]
OPERATIONS = [AclOperation.READ, AclOperation.ALL, AclOperation.WRITE]

# Two patterns, two principals: with up to 60 ACLs a group (one principal on one pattern) often holds more than the
# few a loaded table reads from its columns, so both of its ways are reached.
bindings = st.builds(
    AclBinding.of,
    st.just(ResourceType.TOPIC),
    st.sampled_from(["a", "ab"]),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    st.sampled_from(["User:alice", "User:*"]),
    st.sampled_from(ACL_HOSTS),
    st.sampled_from(OPERATIONS),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)


def host_applies(acl_host: str, host: str) -> bool:
    """Kafka's host rule, with ``ipaddress`` for ranges."""
    if acl_host in ("*", host):
        return True
    try:
        network, address = ipaddress.ip_network(acl_host, strict=False), ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.version == network.version and address in network


def may_read(acls: list[AclBinding], principal: str, host: str, name: str) -> bool:
    """READ on topic ``name``: a DENY of READ or ALL that applies wins, then such an ALLOW; no ACL denies."""
    applying = [b for b in acls
                if (b.name == name if b.resource_pattern_type == PatternType.LITERAL else name.startswith(b.name))
                and b.principal in (principal, "User:*") and host_applies(b.host, host)
                and b.operation in (AclOperation.READ, AclOperation.ALL)]
    if any(b.permission_type == AclPermissionType.DENY for b in applying):
        return False
    return bool(applying)


def answers(view) -> dict[tuple[str, str, str], bool]:
    return {(p, h, n): view.authorize(p, h, AclOperation.READ, ResourceType.TOPIC, n)
            for p in PRINCIPALS for h in CLIENT_HOSTS for n in NAMES}


def expected(acls: list[AclBinding]) -> dict[tuple[str, str, str], bool]:
    return {(p, h, n): may_read(acls, p, h, n) for p in PRINCIPALS for h in CLIENT_HOSTS for n in NAMES}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(created=st.lists(bindings, max_size=60, unique=True), deleted=st.lists(st.integers(0, 59), max_size=6))
def test_live_loaded_and_past_images_apply_the_host_rule_alike(tmp_path_factory, created, deleted):
    directory = tmp_path_factory.mktemp("hosts")
    keyring = make_keyring(directory)
    gone = [created[i] for i in sorted(set(deleted)) if i < len(created)]
    held = [b for b in created if b not in gone]
    store = store_at(directory / "store", keyring)
    try:
        assert not any(store.create_acls(created, context=ADMIN))
        before_deletions = store.log.end_offset
        if gone:
            store.delete_acls([AclBindingFilter.of(b.restype, b.name, b.resource_pattern_type, b.principal, b.host,
                                                   b.operation, b.permission_type) for b in gone], context=ADMIN)
        assert answers(store) == expected(held), "live image"
        assert answers(store.as_of(offset=store.log.end_offset)) == expected(held), "as_of at the end"
        assert answers(store.as_of(offset=before_deletions)) == expected(created), "as_of before the deletions"
        store.snapshot()
        store.wait_for_snapshots()
    finally:
        store.close()
    reopened = store_at(Path(directory) / "store", keyring, read_only=True)
    try:
        assert reopened.loaded.snapshot is not None
        assert answers(reopened) == expected(held), "snapshot-loaded image"
    finally:
        reopened.close()
