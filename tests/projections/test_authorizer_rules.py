"""authorize(): one test per rule of the reference, plus CIDR hosts and explain()."""

from secmeta.events.types import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.acls import AclsDelta, AclsImage
from secmeta.projections.authorizer import (
    ALLOWED_BY_ACL,
    DENIED_BY_ACL,
    NO_ACL_FOUND,
    NO_MATCHING_ALLOW,
    SUPER_USER,
    authorize,
    explain,
)
from tests.storekit import acl

T, G = ResourceType.TOPIC, ResourceType.GROUP
L, P = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE = "User:alice"


def image(*bindings):
    delta = AclsDelta(AclsImage.EMPTY)
    for i, binding in enumerate(bindings):
        delta.add(f"id{i}", binding)
    return delta.apply()


def may(img, op=Op.READ, name="foo", principal=ALICE, host="10.0.0.1", rtype=T, **config):
    return authorize(img, principal, host, op, rtype, name, **config)


def test_super_user_is_allowed_despite_deny():
    """A super user is allowed even against a DENY."""
    img = image(acl(perm=DENY))
    assert may(img, super_users=frozenset({ALICE}))


def test_literal_acl_allows_its_name():
    """A LITERAL ALLOW on 'foo' allows 'foo'."""
    assert may(image(acl()))


def test_literal_acl_does_not_cover_other_names():
    """A LITERAL ALLOW on 'foo' does not allow 'foobar'."""
    assert not may(image(acl()), name="foobar", allow_if_no_acl=False)


def test_wildcard_name_allows_any_resource():
    """A LITERAL '*' ALLOW allows any name of that type."""
    assert may(image(acl("*")), name="anything")


def test_wildcard_name_stays_within_its_type():
    """A TOPIC '*' ACL says nothing about groups."""
    assert not may(image(acl("*")), rtype=G)


def test_prefixed_acl_allows_names_it_prefixes():
    """A PREFIXED ALLOW 'fo' allows 'foo'."""
    assert may(image(acl("fo", pattern=P)))


def test_prefixed_acl_ignores_shorter_names():
    """A PREFIXED ALLOW 'foobar' does not allow 'foo' (an ACL exists nowhere for it)."""
    assert not may(image(acl("foobar", pattern=P)))


def test_wildcard_principal_applies_to_everyone():
    """An ALLOW for 'User:*' allows any principal."""
    assert may(image(acl(principal="User:*")), principal="User:bob")


def test_other_principal_acl_does_not_apply():
    """Bob's ALLOW does not allow Alice (and counts as an ACL on the resource)."""
    assert not may(image(acl(principal="User:bob")), allow_if_no_acl=True)


def test_exact_host_matches():
    """An ACL for host 10.0.0.1 applies to a client at 10.0.0.1."""
    assert may(image(acl(host="10.0.0.1")), host="10.0.0.1")


def test_other_host_does_not_match():
    """An ACL for host 10.0.0.1 does not apply to 10.0.0.2."""
    assert not may(image(acl(host="10.0.0.1")), host="10.0.0.2")


def test_deny_beats_allow():
    """An applying DENY of the operation wins over an ALLOW."""
    assert not may(image(acl(), acl(perm=DENY, principal="User:*")))


def test_deny_of_other_operation_does_not_deny():
    """A DENY of WRITE leaves a READ ALLOW in force."""
    assert may(image(acl(), acl(op=Op.WRITE, perm=DENY)))


def test_allow_all_allows_any_operation():
    """ALLOW ALL allows ALTER_CONFIGS."""
    assert may(image(acl(op=Op.ALL)), op=Op.ALTER_CONFIGS)


def test_deny_all_denies_any_operation():
    """DENY ALL denies READ despite ALLOW READ."""
    assert not may(image(acl(), acl(op=Op.ALL, perm=DENY)))


def test_allow_of_read_write_delete_alter_implies_describe():
    """ALLOW of READ, WRITE, DELETE or ALTER each allows DESCRIBE."""
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert may(image(acl(op=op)), op=Op.DESCRIBE), op


def test_allow_of_create_does_not_imply_describe():
    """ALLOW of CREATE does not allow DESCRIBE."""
    assert not may(image(acl(op=Op.CREATE)), op=Op.DESCRIBE)


def test_allow_alter_configs_implies_describe_configs():
    """ALLOW ALTER_CONFIGS allows DESCRIBE_CONFIGS."""
    assert may(image(acl(op=Op.ALTER_CONFIGS)), op=Op.DESCRIBE_CONFIGS)


def test_deny_never_implies():
    """DENY READ does not deny DESCRIBE, which ALLOW WRITE grants."""
    assert may(image(acl(op=Op.READ, perm=DENY), acl(op=Op.WRITE)), op=Op.DESCRIBE)


def test_deny_alter_configs_does_not_deny_describe_configs():
    """DENY ALTER_CONFIGS leaves DESCRIBE_CONFIGS allowed by ALLOW ALL."""
    img = image(acl(op=Op.ALTER_CONFIGS, perm=DENY), acl(op=Op.ALL))
    assert may(img, op=Op.DESCRIBE_CONFIGS)


def test_no_acl_found_defaults_to_deny():
    """With no ACL on the resource and the default config, deny."""
    assert not may(image(acl("bar")))


def test_no_acl_found_allows_when_configured():
    """With no ACL on the resource and allow.everyone.if.no.acl.found, allow."""
    assert may(image(acl("bar")), allow_if_no_acl=True)


def test_acl_for_other_host_still_counts_as_found():
    """An ACL on the resource for another host means 'ACLs exist': deny."""
    assert not may(image(acl(host="10.9.9.9")), allow_if_no_acl=True)


def test_cidr_v4_range_applies_inside():
    """An ACL host 10.0.0.0/8 applies to a client at 10.20.30.40."""
    assert may(image(acl(host="10.0.0.0/8")), host="10.20.30.40")


def test_cidr_v4_range_not_outside():
    """An ACL host 10.0.0.0/8 does not apply to 192.168.0.1."""
    assert not may(image(acl(host="10.0.0.0/8")), host="192.168.0.1")


def test_cidr_v6_range_applies_inside():
    """An ACL host 2001:db8::/32 applies to 2001:db8:1::7."""
    assert may(image(acl(host="2001:db8::/32")), host="2001:db8:1::7")


def test_cidr_v6_range_not_for_v4_client():
    """An ACL host ::/0 does not apply to an IPv4 client."""
    assert not may(image(acl(host="::/0")), host="10.0.0.1")


def test_cidr_range_not_for_host_names():
    """A client host that is not an IP never falls in a range."""
    assert not may(image(acl(host="10.0.0.0/8")), host="client.example")


def test_cidr_deny_beats_exact_allow():
    """A DENY for a range overrides an ALLOW for the exact address in it."""
    img = image(acl(host="10.0.0.1"), acl(host="10.0.0.0/24", perm=DENY))
    assert not may(img, host="10.0.0.1")


def test_explain_super_user():
    """explain() names the super user rule and lists no ACL."""
    decision = explain(image(acl(perm=DENY)), ALICE, "h", Op.READ, T, "foo", super_users={ALICE})
    assert (decision.allowed, decision.reason, decision.acls) == (True, SUPER_USER, ())


def test_explain_deny_lists_the_deny():
    """explain() returns the deciding DENY ACL."""
    decision = explain(image(acl(), acl(perm=DENY)), ALICE, "h", Op.READ, T, "foo")
    assert (decision.allowed, decision.reason, [i for i, _ in decision.acls]) == (
        False,
        DENIED_BY_ACL,
        ["id1"],
    )


def test_explain_allow_lists_the_allows():
    """explain() returns the ALLOW ACLs that grant the operation (implied ones too)."""
    decision = explain(image(acl("fo", pattern=P), acl(op=Op.WRITE)), ALICE, "h", Op.DESCRIBE, T, "foo")
    assert (decision.allowed, decision.reason, [i for i, _ in decision.acls]) == (
        True,
        ALLOWED_BY_ACL,
        ["id0", "id1"],
    )


def test_explain_acls_exist_but_none_allows():
    """explain() says no ACL allows when ACLs exist but none grants."""
    decision = explain(image(acl(principal="User:bob")), ALICE, "h", Op.READ, T, "foo")
    assert (decision.allowed, decision.reason) == (False, NO_MATCHING_ALLOW)


def test_explain_no_acl_found_uses_config():
    """explain() reports the no-ACL default and its value."""
    decision = explain(image(), ALICE, "h", Op.READ, T, "foo", allow_if_no_acl=True)
    assert (decision.allowed, decision.reason) == (True, NO_ACL_FOUND)
