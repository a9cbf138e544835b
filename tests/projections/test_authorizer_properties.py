"""The indexed decisions equal a brute-force reading of the reference over all ACLs."""

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.acls import AclsDelta, AclsImage
from secmeta.projections.authorizer import (
    authorize,
    authorize_by_resource_type,
    authorized_operations,
    explain,
)

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED

# --- brute force, straight from reference/kafka-semantics.md -------------------------

KIP430 = {
    ResourceType.TOPIC: {3, 4, 5, 8, 6, 7, 10, 11},
    ResourceType.GROUP: {3, 8, 6, 10, 11},
    ResourceType.CLUSTER: {5, 9, 10, 11, 12, 7, 8},
}


def host_ok(acl_host, host):
    """'*', equal, or (our extension) a CIDR range holding the client address."""
    if acl_host in ("*", host):
        return True
    try:
        network = ipaddress.ip_network(acl_host, strict=False) if "/" in acl_host else None
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return network is not None and address.version == network.version and address in network


def covers(b, rtype, name):
    if b.restype != rtype:
        return False
    if b.resource_pattern_type == LITERAL:
        return b.name in (name, "*")
    return name.startswith(b.name)


def brute_authorize(acls, principal, host, op, rtype, name, supers, allow_if_no_acl):
    if principal in supers:
        return True
    on_resource = [b for b in acls if covers(b, rtype, name)]
    applying = [
        b for b in on_resource if b.principal in (principal, "User:*") and host_ok(b.host, host)
    ]
    if any(b.permission_type == DENY and b.operation in (op, Op.ALL) for b in applying):
        return False
    granting = {op, Op.ALL}
    if op == Op.DESCRIBE:
        granting |= {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}
    if op == Op.DESCRIBE_CONFIGS:
        granting.add(Op.ALTER_CONFIGS)
    if any(b.permission_type == ALLOW and b.operation in granting for b in applying):
        return True
    return allow_if_no_acl if not on_resource else False


def brute_operations(acls, principal, host, rtype, name, supers, allow_if_no_acl):
    return sum(
        1 << op
        for op in KIP430[rtype]
        if brute_authorize(acls, principal, host, Op(op), rtype, name, supers, allow_if_no_acl)
    )


def brute_by_type(acls, principal, host, op, rtype, supers, allow_if_no_acl):
    """Kafka's default Authorizer.authorizeByResourceType, as a scan: probe "hardcode" first."""
    if brute_authorize(acls, principal, host, op, rtype, "hardcode", supers, allow_if_no_acl):
        return True
    relevant = [
        b
        for b in acls
        if b.restype == rtype
        and b.principal in (principal, "User:*")
        and host_ok(b.host, host)
        and b.operation in (op, Op.ALL)
    ]

    def names(permission, pattern):
        return {
            b.name
            for b in relevant
            if b.permission_type == permission and b.resource_pattern_type == pattern
        }

    deny_literal, deny_prefixed = names(DENY, LITERAL), names(DENY, PREFIXED)
    if "*" in deny_literal:
        return False

    def dominated(name):
        return any(name.startswith(prefix) for prefix in deny_prefixed)

    allow_literal, allow_prefixed = names(ALLOW, LITERAL), names(ALLOW, PREFIXED)
    if "*" in allow_literal:
        return True
    return any(not dominated(p) for p in allow_prefixed) or any(
        name not in deny_literal and not dominated(name) for name in allow_literal
    )


# --- strategies: small alphabets so prefixes and wildcards collide ----------------------

names = st.sampled_from(["a", "ab", "abc", "b", "ba", "*", "h", "hardcode"])
request_names = st.sampled_from(["a", "ab", "abc", "abd", "b", "ba", "c", "*", "h", "hardcode"])
principals = st.sampled_from(["User:alice", "User:bob", "User:*"])
request_principals = st.sampled_from(["User:alice", "User:bob", "User:carol"])
acl_hosts = st.sampled_from(
    ["*", "*", "10.0.0.1", "10.0.0.0/24", "10.0.0.0/99", "2001:db8::/32", "::/0", "client-a"]
)
request_hosts = st.sampled_from(
    ["10.0.0.1", "10.0.0.2", "10.1.0.1", "2001:db8::5", "::1", "client-a", "10.0.0.0/24"]
)
rtypes = st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER])
acl_ops = st.sampled_from([op for op in Op if op >= Op.ALL])
request_ops = st.sampled_from([op for op in Op if op >= Op.ALL])
bindings = st.builds(
    AclBinding.of,
    rtypes,
    names,
    st.sampled_from([LITERAL, PREFIXED]),
    principals,
    acl_hosts,
    acl_ops,
    st.sampled_from([ALLOW, DENY]),
)
acl_lists = st.lists(bindings, max_size=25)
configs = st.fixed_dictionaries(
    {
        "super_users": st.sampled_from([frozenset(), frozenset({"User:bob"})]),
        "allow_if_no_acl": st.booleans(),
    }
)


def build(acls):
    return AclsImage.of((f"id{i}", b) for i, b in enumerate(acls))


@given(acl_lists, request_principals, request_hosts, request_ops, rtypes, request_names, configs)
def test_authorize_equals_brute_force(acls, principal, host, op, rtype, name, config):
    """authorize() agrees with a scan of every ACL under the reference's rules."""
    expected = brute_authorize(
        acls, principal, host, op, rtype, name, config["super_users"], config["allow_if_no_acl"]
    )
    assert authorize(build(acls), principal, host, op, rtype, name, **config) == expected


@given(acl_lists, request_principals, request_hosts, request_ops, rtypes, request_names, configs)
def test_explain_agrees_with_authorize(acls, principal, host, op, rtype, name, config):
    """explain() reaches the decision authorize() makes."""
    img = build(acls)
    decision = explain(img, principal, host, op, rtype, name, **config)
    assert decision.allowed == authorize(img, principal, host, op, rtype, name, **config)


@given(acl_lists, request_principals, request_hosts, rtypes, request_names, configs)
def test_authorized_operations_equals_brute_force(acls, principal, host, rtype, name, config):
    """authorized_operations() equals one brute-force decision per KIP-430 operation."""
    expected = brute_operations(
        acls, principal, host, rtype, name, config["super_users"], config["allow_if_no_acl"]
    )
    assert authorized_operations(build(acls), principal, host, rtype, name, **config) == expected


@given(acl_lists, request_principals, request_hosts, request_ops, rtypes, configs)
def test_authorize_by_resource_type_equals_brute_force(acls, principal, host, op, rtype, config):
    """authorize_by_resource_type() agrees with Kafka's scan over every ACL."""
    expected = brute_by_type(
        acls, principal, host, op, rtype, config["super_users"], config["allow_if_no_acl"]
    )
    assert authorize_by_resource_type(build(acls), principal, host, op, rtype, **config) == expected


# Prefixes of many lengths (and the empty one), with writes between questions: a type index probes a name at its
# held prefix lengths only (TypeIndex.prefixes_of, cut by one itemgetter per count of lengths that fit the name).
prefix_texts = st.text(alphabet="ab.-é", max_size=6)
prefix_steps = st.lists(st.tuples(st.booleans(), prefix_texts, st.sampled_from([LITERAL, PREFIXED])), max_size=30)


@given(prefix_steps, st.lists(st.text(alphabet="ab.-éx", max_size=8), min_size=1, max_size=10))
def test_prefix_probing_through_writes_finds_every_covering_prefix(steps, asked):
    """After each write (a binding added, or every ACL of a pattern removed), authorize on any name answers as the
    rules do, and the prefixes a type index probes for a name include every held prefix of it."""
    image, held = AclsImage.EMPTY, {}
    for n, (add, name, pattern_type) in enumerate(steps):
        delta = AclsDelta(image)
        if add:
            held[f"id{n}"] = AclBinding.of(ResourceType.TOPIC, name, pattern_type, "User:alice", "*", Op.READ, ALLOW)
            delta.add(f"id{n}", held[f"id{n}"])
        else:
            for acl_id in [i for i, b in held.items() if (b.name, b.resource_pattern_type) == (name, pattern_type)]:
                delta.remove(acl_id)
                del held[acl_id]
        image = delta.apply()
        t = image.index.types[ResourceType.TOPIC]
        prefixes = {b.name for b in held.values() if b.resource_pattern_type == PREFIXED}
        for asked_name in asked:
            assert set(t.prefixes_of(asked_name)) >= {p for p in prefixes if asked_name.startswith(p)}
            assert authorize(image, "User:alice", "h", Op.READ, ResourceType.TOPIC, asked_name) == brute_authorize(
                list(held.values()), "User:alice", "h", Op.READ, ResourceType.TOPIC, asked_name, set(), False)


@given(st.lists(st.text(alphabet="ab", min_size=1, max_size=40), max_size=60, unique=True),
       st.lists(st.text(alphabet="ab", max_size=45), min_size=1, max_size=5))
def test_a_type_index_probes_a_name_at_every_held_prefix_length_that_fits_it(prefixes, names):
    """prefixes_of (its slicers made when first asked for, and shared by indexes of equal lengths) probes every held
    prefix of a name and only prefixes at held lengths, whatever order the names are asked in."""
    for asked_first in (True, False):
        bindings = [AclBinding.of(ResourceType.TOPIC, p, PREFIXED, "User:a", "*", Op.READ, ALLOW) for p in prefixes]
        t = AclsImage.of((f"id{n}", b) for n, b in enumerate(bindings)).index.types[ResourceType.TOPIC]
        lengths = sorted({len(p) for p in prefixes})
        for name in names if asked_first else reversed(names):
            probed = set(t.prefixes_of(name))
            assert {p for p in prefixes if name.startswith(p)} <= probed <= {name[:n] for n in lengths}
