"""Properties of the ACL image: describe equals brute-force filtering; deltas compose."""

from hypothesis import given
from hypothesis import strategies as st

from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.acls import AclsDelta, AclsImage

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def brute_selects(f, b):
    """The reference's filter rules, read directly."""
    pf, ef = f.pattern, f.entry
    if pf.resource_type != ResourceType.ANY and pf.resource_type != b.restype:
        return False
    if pf.pattern_type not in (PatternType.ANY, PatternType.MATCH, b.resource_pattern_type):
        return False
    if pf.name is not None:
        if pf.pattern_type in (PatternType.ANY, b.resource_pattern_type):
            if pf.name != b.name:
                return False
        elif b.resource_pattern_type == LITERAL:
            if b.name not in (pf.name, "*"):
                return False
        elif not pf.name.startswith(b.name):
            return False
    return (
        ef.principal in (None, b.principal)
        and ef.host in (None, b.host)
        and ef.operation in (Op.ANY, b.operation)
        and ef.permission_type in (AclPermissionType.ANY, b.permission_type)
    )


names = st.sampled_from(["a", "ab", "abc", "b", "*"])
principals = st.sampled_from(["User:alice", "User:bob", "User:*"])
hosts = st.sampled_from(["*", "10.0.0.1", "10.0.0.0/8"])
rtypes = st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP])
ops = st.sampled_from([Op.ALL, Op.READ, Op.WRITE])
bindings = st.builds(
    AclBinding.of,
    rtypes,
    names,
    st.sampled_from([LITERAL, PREFIXED]),
    principals,
    hosts,
    ops,
    st.sampled_from([ALLOW, DENY]),
)
filters = st.builds(
    AclBindingFilter.of,
    st.sampled_from([ResourceType.ANY, ResourceType.TOPIC, ResourceType.GROUP]),
    st.none() | st.sampled_from(["a", "ab", "abc", "abd", "*", "c"]),
    st.sampled_from([PatternType.ANY, PatternType.MATCH, LITERAL, PREFIXED]),
    st.none() | principals,
    st.none() | hosts,
    st.sampled_from([Op.ANY, Op.READ, Op.ALL]),
    st.sampled_from([AclPermissionType.ANY, ALLOW, DENY]),
)


def build(pairs):
    return AclsImage.of(pairs)


@given(st.lists(bindings, max_size=20), filters)
def test_describe_equals_brute_force(acls, f):
    """describe(filter) lists exactly the ACLs the filter rules select."""
    pairs = [(f"id{i}", b) for i, b in enumerate(acls)]
    expected = sorted(i for i, b in pairs if brute_selects(f, b))
    assert sorted(i for i, _ in build(pairs).describe(f)) == expected


@given(st.lists(bindings, max_size=20), bindings)
def test_find_equals_scan(acls, probe):
    """find() returns an id of an equal ACL exactly when one exists."""
    pairs = [(f"id{i}", b) for i, b in enumerate(acls)]
    equal = {i for i, b in pairs if b == probe}
    found = build(pairs).find(probe)
    assert found in equal if equal else found is None


# Few distinct (type, pattern, name, principal) so ACLs pile up on the same groups.
crowded_bindings = st.builds(
    AclBinding.of,
    st.just(ResourceType.TOPIC),
    st.sampled_from(["a", "ab"]),
    st.sampled_from([LITERAL, PREFIXED]),
    st.sampled_from(["User:alice", "User:*"]),
    hosts,
    ops,
    st.sampled_from([ALLOW, DENY]),
)

# A script: ("add", id, binding) or ("remove", id); ids drawn from a small pool.
steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from("pqrstuvw"), bindings | crowded_bindings),
        st.tuples(st.just("remove"), st.sampled_from("pqrstuvw")),
    ),
    max_size=30,
)


def final_state(script):
    state = {}
    for step in script:
        if step[0] == "add":
            state[step[1]] = step[2]
        else:
            state.pop(step[1], None)
    return state


@given(steps, st.lists(st.integers(0, 30), max_size=6))
def test_any_split_of_deltas_equals_build_from_scratch(script, cuts):
    """Applying a script in any batches gives the image built from its end state."""
    bounds = sorted({0, len(script), *(c for c in cuts if c <= len(script))})
    img = AclsImage.EMPTY
    for start, end in zip(bounds, bounds[1:], strict=False):
        delta = AclsDelta(img)
        for step in script[start:end]:
            if step[0] == "add":
                delta.add(step[1], step[2])
            elif delta.get(step[1]) is not None:
                delta.remove(step[1])
        img = delta.apply()
    assert img == build(final_state(script).items())


@given(st.lists(bindings, max_size=15), st.lists(bindings, max_size=15))
def test_apply_never_changes_the_base(first, second):
    """The base image equals its rebuild after a delta on it is applied."""
    base = build([(f"a{i}", b) for i, b in enumerate(first)])
    delta = AclsDelta(base)
    for i, b in enumerate(second):
        delta.add(f"b{i}", b)
    for i in range(0, len(first), 2):
        delta.remove(f"a{i}")
    delta.apply()
    assert base == build([(f"a{i}", b) for i, b in enumerate(first)])
