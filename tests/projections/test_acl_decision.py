"""The one authorization rule (secmeta.projections.acl_decision): Kafka's findResult and MatchingRuleBuilder,
and the index path (authorize) and the list path (decide) reaching the same answers."""

from hypothesis import given
from hypothesis import strategies as st

from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.acl_decision import (
    ALLOWED_BY_ACL,
    DENIED_BY_ACL,
    NO_ACL_FOUND,
    NO_MATCHING_ALLOW,
    SUPER_USER,
    applies,
    decide,
    effect,
)
from secmeta.projections.acls import AclsImage
from secmeta.projections.authorizer import acls_on, authorize, explain

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
T = ResourceType.TOPIC
L, P = PatternType.LITERAL, PatternType.PREFIXED
BOB = "User:bob"


def foo_acl(op: Op, permission: AclPermissionType, principal: str = BOB, host: str = "*") -> AclBinding:
    """Kafka's StandardAuthorizerTest.newFooAcl: PREFIXED 'foo_' on a topic, for User:bob from any host."""
    return AclBinding.of(T, "foo_", P, principal, host, op, permission)


def test_find_result_implication():
    """Kafka StandardAuthorizerTest.testFindResultImplication: ALLOW of DESCRIBE/READ/WRITE/DELETE/ALTER
    allows DESCRIBE, ALLOW CREATE does not, and DENY ACLs imply nothing."""
    for op in (Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert effect(foo_acl(op, ALLOW).entry, Op.DESCRIBE) == ALLOW, op
    assert effect(foo_acl(Op.CREATE, ALLOW).entry, Op.DESCRIBE) is None
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert effect(foo_acl(op, DENY).entry, Op.DESCRIBE) is None, op
    assert effect(foo_acl(Op.ALTER_CONFIGS, ALLOW).entry, Op.DESCRIBE_CONFIGS) == ALLOW
    assert effect(foo_acl(Op.ALTER_CONFIGS, DENY).entry, Op.DESCRIBE_CONFIGS) is None
    assert effect(foo_acl(Op.ALL, DENY).entry, Op.DESCRIBE) == DENY


def test_applies_to_the_principal_or_the_wildcard_principal_from_a_matching_host():
    """Kafka AuthorizerData.findResult: the ACL principal is the request's or 'User:*'; the host '*' or equal
    (secmeta: or a CIDR range holding the client address)."""
    assert applies(foo_acl(Op.READ, ALLOW).entry, BOB, "10.0.0.1")
    assert applies(foo_acl(Op.READ, ALLOW, principal="User:*").entry, BOB, "10.0.0.1")
    assert not applies(foo_acl(Op.READ, ALLOW, principal="User:alice").entry, BOB, "10.0.0.1")
    assert applies(foo_acl(Op.READ, ALLOW, host="10.0.0.0/24").entry, BOB, "10.0.0.1")
    assert not applies(foo_acl(Op.READ, ALLOW, host="10.0.0.2").entry, BOB, "10.0.0.1")


def pairs(*bindings):
    return [(f"id{i}", b) for i, b in enumerate(bindings)]


def test_a_deny_decides_over_an_allow_and_is_the_acl_reported():
    """Kafka MatchingRuleBuilder.build: a matching DENY wins, and the rule names the DENY."""
    acls = pairs(foo_acl(Op.READ, ALLOW), foo_acl(Op.ALL, DENY, host="10.0.0.1"), foo_acl(Op.WRITE, DENY))
    decision = decide(BOB, "10.0.0.1", Op.READ, acls, resource_has_acls=True)
    assert (decision.allowed, decision.reason, decision.acls) == (False, DENIED_BY_ACL, (acls[1],))


def test_an_allow_decides_with_every_allow_that_grants_the_operation():
    """With no DENY, the ALLOWs granting the operation (implied ones too) decide, in ACL id order."""
    acls = pairs(foo_acl(Op.WRITE, ALLOW), foo_acl(Op.CREATE, ALLOW), foo_acl(Op.DESCRIBE, ALLOW, principal="User:*"))
    decision = decide(BOB, "h", Op.DESCRIBE, acls, resource_has_acls=True)
    assert (decision.allowed, decision.reason, decision.acls) == (True, ALLOWED_BY_ACL, (acls[0], acls[2]))


def test_acls_on_the_resource_but_none_allowing_deny_whatever_the_default():
    """Kafka MatchingRuleBuilder.build: hasResourceAcls without a match is DefaultDeny (DENY_RULE)."""
    acls = pairs(foo_acl(Op.READ, ALLOW, principal="User:alice"))
    decision = decide(BOB, "h", Op.READ, acls, resource_has_acls=True, allow_if_no_acl=True)
    assert (decision.allowed, decision.reason, decision.acls) == (False, NO_MATCHING_ALLOW, ())


def test_no_acl_on_the_resource_gives_the_configured_default():
    """Kafka MatchingRuleBuilder.build: no resource ACL gives the noAclRule (allow.everyone.if.no.acl.found)."""
    assert decide(BOB, "h", Op.READ, (), resource_has_acls=False) == decide(
        BOB, "h", Op.READ, (), resource_has_acls=False, allow_if_no_acl=False)
    assert not decide(BOB, "h", Op.READ, (), resource_has_acls=False).allowed
    allowed = decide(BOB, "h", Op.READ, (), resource_has_acls=False, allow_if_no_acl=True)
    assert (allowed.allowed, allowed.reason) == (True, NO_ACL_FOUND)


def test_a_super_user_is_allowed_despite_a_deny():
    """Kafka StandardAuthorizerData.authorize: super users are allowed before any ACL is read."""
    acls = pairs(foo_acl(Op.ALL, DENY))
    decision = decide(BOB, "h", Op.READ, acls, resource_has_acls=True, super_users=frozenset({BOB}))
    assert (decision.allowed, decision.reason, decision.acls) == (True, SUPER_USER, ())


# -- the index path and the list path are one rule -------------------------------------------

names = st.sampled_from(["foo", "foo_", "foo_bar", "f", "*", "bar"])
bindings = st.builds(
    AclBinding.of, st.sampled_from([T, ResourceType.GROUP]), names, st.sampled_from([L, P]),
    st.sampled_from([BOB, "User:alice", "User:*"]),
    st.sampled_from(["*", "*", "10.0.0.1", "10.0.0.0/24", "2001:db8::/32", "client-a"]),
    st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.CREATE]),
    st.sampled_from([ALLOW, DENY]),
)
requests = st.tuples(
    st.sampled_from([BOB, "User:alice", "User:carol", "User:*"]),
    st.sampled_from(["10.0.0.1", "10.0.0.9", "2001:db8::1", "client-a", "*"]),
    st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.CREATE, Op.ALL]),
    st.sampled_from([T, ResourceType.GROUP]),
    names,
)
settings = st.fixed_dictionaries(
    {"super_users": st.sampled_from([frozenset(), frozenset({"User:alice"})]), "allow_if_no_acl": st.booleans()})


def decide_on_image(acls, request, config):
    """(image, every ACL on the requested resource, decide() over them) for a request tuple."""
    image = AclsImage.of(pairs(*acls))
    principal, host, op, rtype, name = request
    on_resource = acls_on(image, rtype, name)
    return image, on_resource, decide(principal, host, op, on_resource, resource_has_acls=bool(on_resource),
                                      **config)


@given(st.lists(bindings, max_size=20), requests, settings)
def test_decide_over_every_acl_on_the_resource_equals_authorize_and_explain(acls, request, config):
    """decide() over all ACLs on the resource answers as the indexed authorize() and explain()."""
    image, on_resource, decision = decide_on_image(acls, request, config)
    principal, host, op, rtype, name = request
    assert decision.allowed == authorize(image, principal, host, op, rtype, name, **config)
    assert decision == explain(image, principal, host, op, rtype, name, **config)


@given(st.lists(bindings, max_size=20), requests, settings)
def test_the_deciding_acls_are_exactly_those_that_decide(acls, request, config):
    """Each deciding ACL applies and has the decision's effect; without them all, the decision changes."""
    _, on_resource, decision = decide_on_image(acls, request, config)
    principal, host, op, _, _ = request
    if not decision.acls:
        assert decision.reason in (SUPER_USER, NO_MATCHING_ALLOW, NO_ACL_FOUND)
        return
    wanted = DENY if decision.reason == DENIED_BY_ACL else ALLOW
    for _, binding in decision.acls:
        assert applies(binding.entry, principal, host) and effect(binding.entry, op) == wanted
    rest = [pair for pair in on_resource if pair not in decision.acls]
    assert decide(principal, host, op, rest, resource_has_acls=True, **config).reason != decision.reason


@given(st.lists(bindings, max_size=20), st.lists(bindings, max_size=8), requests, settings)
def test_acls_that_do_not_apply_change_nothing(acls, others, request, config):
    """Handing decide() extra ACLs for other principals or hosts leaves the decision as it was."""
    principal, host, op, _, _ = request
    base = pairs(*acls)
    extra = [(f"x{i}", b) for i, b in enumerate(others) if not applies(b.entry, principal, host)]
    expected = decide(principal, host, op, base, resource_has_acls=True, **config)
    assert decide(principal, host, op, base + extra, resource_has_acls=True, **config) == expected
