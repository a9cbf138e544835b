"""The bulk index build (replay from empty, snapshot load) makes what one-by-one deltas make.

Kafka's AclsImageTest round-trips an image through records and snapshots; here the
two ways an image is built (``AclIndex.bulk`` from many ACLs at once, ``AclIndex.updated``
per delta) must give equal images for random add/remove scripts, including nodes that
cross from a few principals to many and back, and the by-principal grants built on
first use must equal the grants kept up to date by later deltas (which carry them once
any image they descend from was asked for them).
"""

import itertools
from unittest.mock import patch

from hypothesis import given
from hypothesis import strategies as st

from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections import layered_map
from secmeta.projections.acls import AclsDelta, AclsImage
from secmeta.projections.authorizer import authorize

Op = AclOperation

# Up to 12 principals on 2 names: nodes hold one group, a few, or more than a tuple holds.
principals = st.sampled_from([f"User:u{i}" for i in range(11)] + ["User:*"])
bindings = st.builds(
    AclBinding.of,
    st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP]),
    st.sampled_from(["a", "ab"]),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    principals,
    st.sampled_from(["*", "*", "10.0.0.1", "10.0.0.0/8"]),
    st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE]),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)
ids = st.sampled_from([f"id{i}" for i in range(40)])
step = st.one_of(st.tuples(st.just("add"), ids, bindings), st.tuples(st.just("remove"), ids))
steps = st.lists(step, max_size=80)


def run(script, cuts, *, grants_first: bool, ask: dict | None = None):
    """The image after the script applied in batches split at ``cuts``; the end state as a dict.

    With ``ask`` ({"at": batch}), before that batch a reader asks the image
    one write older than the current one for its grants (once); ``ask``
    gets "built", the resource types whose grants that ask built, "newest",
    the newest image at the ask, and
    "empty_before", the batches that started from an image with no ACL
    (its write builds a new index: a new lineage).
    """
    bounds = sorted({0, len(script), *(c for c in cuts if c <= len(script))})
    image, state = AclsImage.EMPTY, {}
    older = image
    for batch, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False)):
        if grants_first:
            for t in image.index.types:
                t.grants  # noqa: B018 - built now, so the next delta keeps it up to date
        if ask is not None and batch == ask["at"]:
            ask["built"] = [code for code, t in enumerate(older.index.types) if t._grants is None]
            ask["newest"] = image
            for t in older.index.types:
                t.grants  # noqa: B018 - a reader of the older image
        if ask is not None and not state:
            ask.setdefault("empty_before", []).append(batch)
        older = image
        delta = AclsDelta(image)
        for step in script[start:end]:
            if step[0] == "add":
                delta.add(step[1], step[2])
                state[step[1]] = step[2]
            elif step[1] in state:
                delta.remove(step[1])
                del state[step[1]]
        image = delta.apply()
    return image, state


def grants(image):
    return [dict((p, dict((k, dict(table)) for k, table in per.items())) for p, per in t.grants.items())
            for t in image.index.types]


@given(steps, st.lists(st.integers(0, 80), max_size=5), st.sampled_from([1, 3, 4096]))
def test_bulk_build_equals_incremental_build(script, cuts, fold_floor):
    """AclsImage.of of the end state equals the image the script's deltas make, and reads back the same ACLs.

    A small fold floor folds the id table's overlay into its base every few changes.
    """
    with patch.object(layered_map, "_FOLD_FLOOR", fold_floor):
        image, state = run(script, cuts, grants_first=False)
    bulk = AclsImage.of(state.items())
    assert bulk == image
    assert sorted(bulk) == sorted(image) == sorted(state.items())
    assert sorted(image.acls) == sorted(state) and len(image) == len(state)
    assert all((f"id{i}" in image.acls) == (f"id{i}" in state) for i in range(45))


@given(steps, st.lists(st.integers(0, 80), max_size=5))
def test_grants_kept_by_deltas_equal_grants_built_on_first_use(script, cuts):
    """Grants built before each delta and then updated by it equal those a fresh bulk image builds."""
    image, state = run(script, cuts, grants_first=True)
    assert grants(image) == grants(AclsImage.of(state.items()))


@given(st.lists(step, min_size=40, max_size=80), st.lists(st.integers(1, 8), min_size=5, max_size=8),
       st.integers(2, 4))
def test_grants_wanted_once_are_carried_by_every_later_write(script, sizes, ask_at):
    """Once a reader asked an image of a lineage (here one write older than the newest) for its grants,
    each image a later write makes holds them without being asked, equal to a fresh bulk image's."""
    cuts = list(itertools.accumulate(sizes))
    ask = {"at": ask_at}
    image, state = run(script, cuts, grants_first=False, ask=ask)
    new_lineage = any(batch >= ask_at - 1 for batch in ask.get("empty_before", ()))
    if "built" in ask and image is not ask["newest"] and not new_lineage:  # a write of the asked lineage followed
        assert [code for code in ask["built"] if image.index.types[code]._grants is not None] == ask["built"]
    assert grants(image) == grants(AclsImage.of(state.items()))


@given(st.lists(st.tuples(ids, bindings), max_size=60))
def test_every_acl_reads_back_from_its_group(pairs):
    """get(id) of every id gives its binding (the last added), and len counts distinct ids."""
    image = AclsImage.of(pairs)
    expected = dict(pairs)
    assert {acl_id: image.get(acl_id) for acl_id in expected} == expected and len(image) == len(expected)


def test_decisions_hold_as_a_resource_gains_and_loses_principals():
    """As principals are added to one topic and removed again (one group, a few, many), each is allowed exactly while it holds an ACL."""
    names = [f"User:p{i}" for i in range(12)]

    def acl(principal):
        return AclBinding.of(ResourceType.TOPIC, "t", PatternType.LITERAL, principal, "*", Op.READ,
                             AclPermissionType.ALLOW)

    image, held = AclsImage.EMPTY, []
    steps = [("add", p) for p in names] + [("remove", p) for p in reversed(names)]
    for action, principal in steps:
        delta = AclsDelta(image)
        if action == "add":
            delta.add(principal, acl(principal))
            held.append(principal)
        else:
            delta.remove(principal)
            held.remove(principal)
        image = delta.apply()
        allowed = [p for p in names if authorize(image, p, "10.0.0.1", Op.READ, ResourceType.TOPIC, "t")]
        assert allowed == held and image == AclsImage.of((p, acl(p)) for p in held)
