"""authorized_operations (KIP-430) and authorize_by_resource_type (KIP-679)."""

import pytest

from secmeta.events.types import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.acls import AclsDelta, AclsImage
from secmeta.projections.authorizer import authorize_by_resource_type, authorized_operations
from tests.storekit import acl

T, G = ResourceType.TOPIC, ResourceType.GROUP
L, P = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE = "User:alice"

TOTALS = [
    (ResourceType.TOPIC, 3576),
    (ResourceType.GROUP, 3400),
    (ResourceType.CLUSTER, 8096),
    (ResourceType.TRANSACTIONAL_ID, 272),
    (ResourceType.DELEGATION_TOKEN, 256),
    (ResourceType.USER, 24576),
]


def image(*bindings):
    delta = AclsDelta(AclsImage.EMPTY)
    for i, binding in enumerate(bindings):
        delta.add(f"id{i}", binding)
    return delta.apply()


def ops(img, rtype=T, name="foo", principal=ALICE, **config):
    return authorized_operations(img, principal, "10.0.0.1", rtype, name, **config)


def by_type(img, op=Op.READ, rtype=T, principal=ALICE, **config):
    return authorize_by_resource_type(img, principal, "10.0.0.1", op, rtype, **config)


def bits(*operations):
    return sum(1 << op for op in operations)


@pytest.mark.parametrize(("rtype", "total"), TOTALS)
def test_allow_all_gives_kip430_total(rtype, total):
    """ALLOW ALL on the resource reports every operation of its type."""
    name = CLUSTER_NAME if rtype == ResourceType.CLUSTER else "foo"
    assert ops(image(acl(name, rtype=rtype, op=Op.ALL)), rtype, name) == total


@pytest.mark.parametrize(("rtype", "total"), TOTALS)
def test_super_user_gets_kip430_total(rtype, total):
    """A super user is reported every operation of the type."""
    assert ops(image(), rtype, super_users=frozenset({ALICE})) == total


def test_no_acl_found_reports_all_when_configured():
    """With no ACL on the resource and allow_if_no_acl, every topic operation."""
    assert ops(image(), allow_if_no_acl=True) == 3576


def test_no_acl_found_reports_none_by_default():
    """With no ACL on the resource and the default config, nothing."""
    assert ops(image()) == 0


def test_read_allow_reports_read_and_describe():
    """ALLOW READ reports READ and the implied DESCRIBE."""
    assert ops(image(acl())) == bits(Op.READ, Op.DESCRIBE)


def test_deny_removes_operation_from_all():
    """ALLOW ALL with DENY WRITE reports all but WRITE (DESCRIBE stays)."""
    assert ops(image(acl(op=Op.ALL), acl(op=Op.WRITE, perm=DENY))) == 3576 - bits(Op.WRITE)


def test_group_ignores_topic_only_operations():
    """ALLOW WRITE on a group reports only the implied DESCRIBE (WRITE is not a group op)."""
    assert ops(image(acl(rtype=G, op=Op.WRITE)), G) == bits(Op.DESCRIBE)


def test_alter_configs_reports_describe_configs():
    """ALLOW ALTER_CONFIGS reports it and DESCRIBE_CONFIGS."""
    assert ops(image(acl(op=Op.ALTER_CONFIGS))) == bits(Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS)


def test_unknown_type_reports_nothing():
    """A resource type without KIP-430 operations reports 0."""
    assert ops(image(), ResourceType.ANY, allow_if_no_acl=True) == 0


def test_by_type_super_user():
    """A super user may always act on some resource of the type."""
    assert by_type(image(acl("*", perm=DENY)), super_users=frozenset({ALICE}))


def test_by_type_literal_allow():
    """One literal ALLOW is enough."""
    assert by_type(image(acl()))


def test_by_type_prefixed_allow():
    """One prefixed ALLOW is enough."""
    assert by_type(image(acl("fo", pattern=P)))


def test_by_type_nothing_allowed():
    """No applying ALLOW of the operation: false."""
    assert not by_type(image(acl(op=Op.WRITE), acl(principal="User:bob")))


def test_by_type_all_counts_as_operation():
    """ALLOW ALL counts for any operation."""
    assert by_type(image(acl(op=Op.ALL)), Op.IDEMPOTENT_WRITE)


def test_by_type_no_implied_describe():
    """ALLOW READ does not count for DESCRIBE here (only the operation or ALL)."""
    assert not by_type(image(acl()), Op.DESCRIBE)


def test_by_type_wildcard_deny_blocks_everything():
    """A DENY on literal '*' blocks even a wildcard-principal allow elsewhere."""
    assert not by_type(image(acl("x"), acl("*", principal="User:*", perm=DENY)))


def test_by_type_wildcard_deny_beats_allow_if_no_acl():
    """allow_if_no_acl does not override a DENY on literal '*'."""
    assert not by_type(image(acl("*", perm=DENY)), allow_if_no_acl=True)


def test_by_type_allow_if_no_acl():
    """Without a '*' DENY, allow_if_no_acl answers true."""
    assert by_type(image(acl(perm=DENY)), allow_if_no_acl=True)


def test_by_type_literal_deny_blocks_same_literal():
    """A literal DENY blocks the literal ALLOW of the same name."""
    assert not by_type(image(acl(), acl(perm=DENY)))


def test_by_type_prefixed_deny_blocks_literal_it_prefixes():
    """A prefixed DENY 'fo' blocks the literal ALLOW 'foo'."""
    assert not by_type(image(acl(), acl("fo", pattern=P, perm=DENY)))


def test_by_type_prefixed_deny_blocks_longer_prefix():
    """A prefixed DENY 'fo' blocks the prefixed ALLOW 'foo'."""
    assert not by_type(image(acl("foo", pattern=P), acl("fo", pattern=P, perm=DENY)))


def test_by_type_longer_prefixed_deny_does_not_block():
    """A prefixed DENY 'foox' leaves the prefixed ALLOW 'foo' (e.g. 'fooy')."""
    assert by_type(image(acl("foo", pattern=P), acl("foox", pattern=P, perm=DENY)))


def test_by_type_literal_deny_does_not_block_prefix():
    """A literal DENY 'foo' leaves the prefixed ALLOW 'foo'."""
    assert by_type(image(acl("foo", pattern=P), acl(perm=DENY)))


def test_by_type_wildcard_allow_beats_prefixed_deny():
    """An ALLOW on literal '*' answers true despite prefixed DENYs."""
    assert by_type(image(acl("*"), acl("f", pattern=P, perm=DENY)))


def test_by_type_deny_of_other_host_does_not_block():
    """A DENY for another host does not block."""
    assert by_type(image(acl(), acl(perm=DENY, host="10.9.9.9")))


def test_by_type_allow_of_other_host_does_not_count():
    """An ALLOW for another host does not count."""
    assert not by_type(image(acl(host="10.9.9.9")))


def test_by_type_other_resource_type_ignored():
    """ACLs of another type say nothing."""
    assert not by_type(image(acl(rtype=G)))
