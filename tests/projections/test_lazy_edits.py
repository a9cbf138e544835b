"""A write to a node of a few principals that an image holds as a ``Lazy`` view (a table's node: a bulk build, a
batch added as a table, a snapshot's section, a loaded image with changes merged) edits it as a view again: the
groups the write touches are made, the others still read from the table's columns.  A follower applies thousands
of such writes in rounds (issue 24: making the node's every group for each cost a third of a diverse round).

Whatever the order of writes, calls and snapshots, every answer equals the rules' reading of the ACLs held, the
image equals a bulk build of them, and a snapshot of it loads as it.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.acl_index import Lazy
from secmeta.projections.acls import AclsDelta, AclsImage
from secmeta.projections.authorizer import authorize
from secmeta.projections.image import SecurityImage
from tests.projections.test_lazy_nodes import (
    BUILDERS,
    acl_sets,
    answer,
    bindings,
    bulk,
    calls,
    expected,
)
from tests.projections.test_shape_properties import snapshot_loaded

T = ResourceType.TOPIC

# A round: ACL ids to remove (of those held when it runs) and ACLs to add, then calls, then maybe a snapshot of the
# image, loaded back, which the next rounds go on from.
rounds = st.lists(
    st.tuples(st.lists(st.integers(0, 200), max_size=6), st.lists(bindings, max_size=6),
              st.lists(calls, max_size=6), st.booleans()),
    min_size=1, max_size=6)


def _images(build: str, held: dict[str, AclBinding], plan: list) -> None:
    image = BUILDERS[build](held)
    now = dict(held)
    for r, (removals, additions, asked, snapshot) in enumerate(plan):
        delta = AclsDelta(image)
        ids = sorted(now)
        for k in removals:
            if ids and ids[k % len(ids)] in now:
                acl_id = ids[k % len(ids)]
                delta.remove(acl_id)
                del now[acl_id]
        for n, binding in enumerate(additions):
            now[f"r{r}n{n}"] = binding
            delta.add(f"r{r}n{n}", binding)
        before, image = image, delta.apply()
        assert [answer(image, call) for call in asked] == [expected(now, call) for call in asked]
        assert image == bulk(now)
        if snapshot:
            image = snapshot_loaded(SecurityImage(acls=image, next_offset=1)).acls
            assert image == bulk(now)
        del before


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(BUILDERS)), acl_sets, rounds)
def test_writes_in_rounds_onto_lazy_nodes_answer_as_the_rules(build, held, plan):
    """Rounds of removals and additions onto an image built in bulk, loaded, or loaded with changes merged (each
    round's write editing views edited by the rounds before), with calls and snapshots between them: every answer
    is the rules' and every image equals a bulk build of its ACLs."""
    _images(build, held, plan)


def _node(image: AclsImage, name: str):
    return image.index.node(int(T), int(PatternType.LITERAL), name)


def _binding(name: str, principal: str, host: str = "10.0.0.1") -> AclBinding:
    return AclBinding.of(T, name, PatternType.LITERAL, principal, host, AclOperation.READ, AclPermissionType.ALLOW)


def test_a_write_to_a_lazy_node_makes_only_the_groups_it_touches():
    """Removing one principal's ACL from a node of ten principals built in bulk leaves a Lazy node: the other nine
    groups are not made (their table makes none), and an authorize of each answers as before."""
    held = {f"id{p}": _binding("orders", f"User:p{p}") for p in range(10)}
    image = AclsImage.of(held.items())
    node = _node(image, "orders")
    assert type(node) is Lazy
    table = node.source
    delta = AclsDelta(image)
    delta.remove("id3")
    later = delta.apply()
    edited = _node(later, "orders")
    assert type(edited) is Lazy
    assert sorted(table._groups) == [3]  # only the removed ACL's group, looked up by its id
    for p in range(10):
        assert authorize(later, f"User:p{p}", "10.0.0.1", AclOperation.READ, T, "orders") == (p != 3)
    assert sorted(table._groups) == [3]  # the authorizes read the other groups from the columns


def test_a_snapshot_of_a_loaded_image_whose_changed_node_was_made_loads_as_it():
    """A loaded image with many changes merged (deferred), one of whose changed nodes an authorize made, is written
    as a snapshot and loads as the same image (the changed node copied as its groups, not as a table's columns)."""
    held = {f"id{r}-{p}": _binding(f"t{r}", f"User:p{p}") for r in range(150) for p in range(10)}
    loaded = snapshot_loaded(SecurityImage(acls=AclsImage.of(held.items()), next_offset=1))
    delta = AclsDelta(loaded.acls)
    for r in range(1100):
        delta.add(f"new{r}", _binding(f"t{r % 150}", "User:newbie", f"10.0.{r // 150}.1"))
    changed = delta.apply()
    assert authorize(changed, "User:p1", "10.0.0.1", AclOperation.READ, T, "t5")  # makes node t5, patched
    assert type(_node(changed, "t5")) is Lazy
    again = snapshot_loaded(SecurityImage(acls=changed, next_offset=1)).acls
    assert again == changed
    assert dict(iter(again)) == dict(iter(changed))
