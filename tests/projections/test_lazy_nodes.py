"""An image built in bulk makes each index node, and each principal's group in it, only when first asked for
(``Lazy`` nodes over an ``AclTable``): whatever reaches a node first (authorize reading its columns, explain
making one group, describe making them all, a write editing it), every answer equals the rules' brute-force
reading, and asking again answers the same.

ACLs pile up on few (resource, principal) pairs so groups of one ACL, a few, and more than a node reads from its
columns (``acl_table._FEW_ACLS``) all occur, with exact, CIDR and ``*`` hosts.
"""

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.acl_deferred import deferred_of
from secmeta.projections.acl_index import Lazy
from secmeta.projections.acls import AclsDelta, AclsImage
from secmeta.projections.authorizer import authorize, authorized_operations, explain
from secmeta.projections.image import SecurityImage
from tests.projections.test_authorizer_properties import brute_authorize, brute_operations
from tests.projections.test_shape_properties import snapshot_loaded

Op = AclOperation
T, G = ResourceType.TOPIC, ResourceType.GROUP

# One principal holds most ACLs, so its groups grow past what a node reads from its columns.
principals = st.sampled_from(["User:u0"] * 6 + ["User:u1", "User:u2", "User:u3", "User:*"])
hosts = st.sampled_from(["*", "10.0.0.1", "10.0.0.2", "10.0.0.0/24", "2001:db8::/32", "client-a", "10.9.0.0/16"])
bindings = st.builds(
    AclBinding.of,
    st.sampled_from([T, G]),
    st.sampled_from(["a", "ab"]),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    principals,
    hosts,
    st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER]),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)
calls = st.tuples(
    st.sampled_from(["authorize", "operations", "explain", "describe"]),
    st.sampled_from(["User:u0", "User:u1", "User:u4", "User:*"]),
    st.sampled_from(["10.0.0.1", "10.0.0.7", "2001:db8::5", "client-a", "10.9.3.3", "::1"]),
    st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER]),
    st.sampled_from([T, G]),
    st.sampled_from(["a", "ab", "abc", "b"]),
)


def answer(image: AclsImage, call: tuple):
    kind, principal, host, operation, resource_type, name = call
    if kind == "authorize":
        return authorize(image, principal, host, operation, resource_type, name)
    if kind == "operations":
        return authorized_operations(image, principal, host, resource_type, name)
    if kind == "explain":
        decision = explain(image, principal, host, operation, resource_type, name)
        return decision.allowed, sorted(acl_id for acl_id, _ in decision.acls)
    return sorted(image.describe(AclBindingFilter.of(resource_type, name, PatternType.MATCH)))


def expected(held: dict[str, AclBinding], call: tuple):
    """What the rules give, read from every held ACL (explain's ACLs as the index finds them: a second image
    built write by write, whose nodes are made whole)."""
    kind, principal, host, operation, resource_type, name = call
    acls = list(held.values())
    if kind == "authorize":
        return brute_authorize(acls, principal, host, operation, resource_type, name, set(), False)
    if kind == "operations":
        return brute_operations(acls, principal, host, resource_type, name, set(), False)
    if kind == "explain":
        return answer(written(held), call)
    return sorted((acl_id, b) for acl_id, b in held.items()
                  if b.restype == resource_type and (b.name in (name, "*") if b.resource_pattern_type
                                                      == PatternType.LITERAL else name.startswith(b.name)))


def written(held: dict[str, AclBinding]) -> AclsImage:
    """The image of these ACLs made one write at a time (every node edited, none lazy)."""
    image = AclsImage.EMPTY
    for acl_id, binding in held.items():
        delta = AclsDelta(image)
        delta.add(acl_id, binding)
        image = delta.apply()
    return image


def bulk(held: dict[str, AclBinding]) -> AclsImage:
    return AclsImage.of(held.items())


def loaded(held: dict[str, AclBinding]) -> AclsImage:
    """The image of a snapshot of these ACLs (its index read from the format-5 section: each node made from the
    section's columns on first use)."""
    image = snapshot_loaded(SecurityImage(acls=bulk(held), next_offset=1)).acls
    assert deferred_of(image.acls, image.index) is not None
    return image


def loaded_and_changed(held: dict[str, AclBinding]) -> AclsImage:
    """A loaded image of half the ACLs plus the other half merged as deferred changes: nodes the changes touch are
    patched when made, the others made from the section's columns."""
    ids = sorted(held)
    image = snapshot_loaded(SecurityImage(acls=bulk({i: held[i] for i in ids[::2]}), next_offset=1)).acls
    deferred = deferred_of(image.acls, image.index)
    assert deferred is not None
    changed = deferred.applied({i: held[i] for i in ids[1::2]})
    return AclsImage(changed.acls, changed.index)


BUILDERS = {"bulk": bulk, "loaded": loaded, "loaded_and_changed": loaded_and_changed}


acl_sets = st.lists(bindings, min_size=1, max_size=60).map(lambda bs: {f"id{i}": b for i, b in enumerate(bs)})


_WIDE_GROUP = {  # one principal's group of more ACLs than a node reads from its columns, beside others
    f"id{i}": AclBinding.of(T, "a", PatternType.LITERAL, "User:u0" if i < 12 else "User:*",
                            ["*", "10.0.0.1", "10.0.0.0/24", "client-a"][i % 4], [Op.READ, Op.WRITE, Op.ALL][i % 3],
                            AclPermissionType.DENY if i % 5 == 4 else AclPermissionType.ALLOW)
    for i in range(14)
}


@pytest.mark.parametrize("build", BUILDERS)
@settings(max_examples=40, deadline=None)
@given(acl_sets, st.lists(calls, min_size=1, max_size=30))
@example(_WIDE_GROUP, [(kind, p, h, Op.WRITE, T, "a") for kind in ("authorize", "explain", "operations")
                       for p in ("User:u0", "User:u1") for h in ("10.0.0.7", "client-a", "::1")])
def test_first_touch_answers_as_the_rules_and_as_asking_again(build, held, asked):
    """Calls of every kind in a random order on an image built in bulk, loaded from a snapshot, or loaded with
    changes merged (nodes and groups made by whichever call reaches them first) answer as the rules do, and the
    same calls asked again answer the same."""
    image = BUILDERS[build](held)
    first = [answer(image, call) for call in asked]
    assert first == [expected(held, call) for call in asked]
    assert [answer(image, call) for call in asked] == first


@pytest.mark.parametrize("build", BUILDERS)
@settings(max_examples=40, deadline=None)
@given(acl_sets, st.lists(calls, max_size=15), st.lists(st.one_of(st.integers(0, 59), bindings), max_size=8),
       st.lists(calls, min_size=1, max_size=15))
def test_writes_interleaved_with_first_touches(build, held, before, changes, after):
    """Some calls touch an image (built in bulk, loaded from a snapshot, or loaded with changes merged), a write
    removes and adds ACLs (editing touched and untouched lazy nodes), then calls on both images answer as the
    rules do for each one's ACLs, and the written image equals the one a replay of its ACLs gives."""
    image = BUILDERS[build](held)
    for call in before:
        answer(image, call)
    delta = AclsDelta(image)
    now = dict(held)
    for n, change in enumerate(changes):
        if isinstance(change, int):
            acl_id = f"id{change}"
            if acl_id in now:
                delta.remove(acl_id)
                del now[acl_id]
        else:
            now[f"new{n}"] = change
            delta.add(f"new{n}", change)
    later = delta.apply()
    assert [answer(later, call) for call in after] == [expected(now, call) for call in after]
    assert [answer(image, call) for call in after] == [expected(held, call) for call in after]
    assert later == bulk(now) == written(now)


def test_a_node_of_many_principals_is_lazy_and_an_authorize_makes_no_group():
    """In a bulk-built image, a node of several principals is Lazy: an authorize reads the ACLs of its principal
    from the table's columns and makes no group; explain then makes that principal's group only."""
    held = {f"id{i}": AclBinding.of(T, "t", PatternType.LITERAL, f"User:u{i}", "10.0.0.1", Op.READ,
                                    AclPermissionType.ALLOW) for i in range(20)}
    image = bulk(held)
    node = image.index.types[T].literal.get("t")
    assert type(node) is Lazy
    table = node.source
    assert authorize(image, "User:u3", "10.0.0.1", Op.READ, T, "t")
    assert not authorize(image, "User:u3", "10.0.0.2", Op.READ, T, "t")
    assert table._groups == {}
    assert explain(image, "User:u3", "10.0.0.1", Op.READ, T, "t").acls == (("id3", held["id3"]),)
    assert [group.principal for group in table._groups.values()] == ["User:u3"]


def _four_nodes():
    """Columns of four TOPIC LITERAL nodes, one group each: 'z' (User:a), 'u' (User:q), 't' (User:b) hold one
    DESCRIBE each; 'other' (User:c) holds two READ grants from any host (its ACLs are the last two)."""
    return dict(resource_types=bytes([T] * 4), pattern_types=bytes([PatternType.LITERAL] * 4),
                names=["z", "u", "t", "other"], group_counts=[1, 1, 1, 1],
                principals=["User:a", "User:q", "User:b", "User:c"], ids=["i0", "i1", "i2", "i3", "i4"],
                hosts=["*"] * 5, operations=bytes([Op.DESCRIBE] * 3 + [Op.READ] * 2),
                permissions=bytes([AclPermissionType.ALLOW] * 5))


def test_a_chunk_whose_group_counts_a_negative_number_of_acls_is_refused_naming_the_node():
    """Format-4 columns where node 'u''s group counts -3 ACLs (so the next group, 't''s, would start at -2 and
    read the last ACLs, User:c's grants on 'other') are refused, naming the node, never answering."""
    from secmeta.projections.acl_table import AclTable, TableError

    c = _four_nodes()
    with pytest.raises(TableError, match="a group of node TOPIC LITERAL 'u' holds no ACL"):
        AclTable(c["resource_types"], c["pattern_types"], c["names"], c["group_counts"], c["principals"],
                 [1, -3, 4, 3], c["ids"], c["hosts"], c["operations"], c["permissions"])
    with pytest.raises(TableError, match="node TOPIC LITERAL 'z' holds no principal's group"):
        AclTable(c["resource_types"], c["pattern_types"], c["names"], [-1, 3, 1, 1], c["principals"],
                 [1, 1, 1, 2], c["ids"], c["hosts"], c["operations"], c["permissions"])


@pytest.mark.parametrize(("item", "problem"), [
    (("acl_start", 2, -2), "a group of node TOPIC LITERAL 'u' holds no ACL"),  # 't''s group would read the last ACLs
    (("acl_start", 2, 7), "a group of node TOPIC LITERAL 'u' holds no ACL"),  # past the ACLs
    (("acl_start", 2, 1), "a group of node TOPIC LITERAL 'u' holds no ACL"),  # 'u''s group empty
    (("group_start", 2, -1), "node TOPIC LITERAL 'u' holds no principal's group"),
    (("group_start", 2, 9), "node TOPIC LITERAL 'u' holds no principal's group"),
    (("group_start", 3, 2), "node TOPIC LITERAL 't' holds no principal's group"),  # 't' holds none
])
def test_a_section_whose_starts_are_no_runs_is_refused_at_open_naming_the_node(item, problem):
    """Review: a run of a section's starts (a node's groups, a group's ACLs) is read unchecked on every authorize,
    so a section nothing vouches for (no keyring: a CRC anyone can compute) whose starts leave a node without groups
    or a group without ACLs, or run outside their column (another node's groups or ACLs: fail open), is refused at
    open naming the node (a signed one is vouched for by its HMAC: the next test)."""
    from secmeta.projections import acl_section
    from secmeta.projections.acl_table import TableError
    from tests.projections.test_image_snapshot import array_item

    name, index, value = item
    sound = _four_node_section()
    assert acl_section.read_section(memoryview(sound), vouched=False).position("i4") == 4
    damaged = array_item(sound, acl_section._HEADER.size, name, acl_section._LAYOUT, index, value)
    with pytest.raises(TableError, match=problem):
        acl_section.read_section(memoryview(damaged), vouched=False)


def test_a_start_changed_in_a_signed_snapshot_is_refused_by_its_hmac_at_open(tmp_path):
    """A snapshot signed under the keyring is read without checking its starts whole (its HMAC vouches that this
    secmeta wrote them, from a table whose runs were sound): a start changed in the file, to one that would read
    past its column, is refused at open."""
    from secmeta.projections import acl_section, image_snapshot
    from secmeta.projections.snapshot import CorruptSnapshotError, read_snapshot, write_snapshot
    from tests.logkit import make_keyring
    from tests.projections.test_image_snapshot import CODEC, array_item, sample_image

    keyring = make_keyring(tmp_path)
    image = sample_image()
    info = write_snapshot(tmp_path, CODEC, image, next_offset=42, link=b"\0" * 32, timestamp_ms=0, keyring=keyring)
    section = b"".join(image_snapshot._NodesRow.of(image.acls.index).section())
    data = info.path.read_bytes()
    assert data.count(section) == 1 and read_snapshot(info.path, CODEC, keyring)[1] == image
    info.path.write_bytes(data.replace(section, array_item(section, acl_section._HEADER.size, "acl_start",
                                                           acl_section._LAYOUT, 1, 5)))
    with pytest.raises(CorruptSnapshotError, match="fails its HMAC check"):
        read_snapshot(info.path, CODEC, keyring)


def _four_node_section() -> bytes:
    from secmeta.projections.acl_section import encode_section

    c = _four_nodes()
    return b"".join(encode_section(c["resource_types"], c["pattern_types"], c["names"], c["group_counts"],
                                   c["principals"], [0, 1, 2, 3], [1, 1, 1, 2], c["ids"], ["*"], [0] * 5,
                                   c["operations"], c["permissions"]))


class _CountedProbes:
    """A table's ids that count the slots a lookup probes, failing past ``limit`` (rather than looping)."""

    def __init__(self, ids, limit: int):
        self.ids, self.limit, self.probes = ids, limit, 0

    def find(self, key: bytes, at: int) -> bool:
        self.probes += 1
        assert self.probes <= self.limit, f"a lookup probed {self.probes} slots of a table of {self.limit}"
        return self.ids.find(key, at)


def test_a_lookup_by_id_in_an_id_table_with_no_empty_slot_fails_naming_it():
    """Review 26, 1.1: an id table whose every slot names an ACL (damage no HMAC caught) makes a lookup of an id it
    does not hold raise the table's error after probing each slot once, never loop for ever."""
    from secmeta.projections.acl_section import read_section
    from secmeta.projections.acl_table import TableError

    table = read_section(memoryview(bytearray(_four_node_section())))
    slots = table._slots  # a view of the section's bytes
    for at in range(len(slots)):
        slots[at] = 1
    assert table.position("i0") == 0
    table.section_ids = probes = _CountedProbes(table.section_ids, len(slots))
    with pytest.raises(TableError, match="the id table has no empty slot: it is damaged .*'absent'"):
        table.position("absent")
    assert probes.probes == len(slots)


@pytest.mark.parametrize(("layout_item", "problem"), [
    (("acl_start", 2, -2), "a group of node TOPIC LITERAL 'u' holds no ACL"),
    (("group_start", 2, 9), "node TOPIC LITERAL 'u' holds no principal's group"),
    (("id_slots", -1, 5), "the id table does not list each of the section's 5 ACLs once"),
    (("name_offsets", 2, 0), "a string column's offsets do not run from 0 to 12 without decreasing"),
])
def test_a_section_nothing_vouches_for_is_checked_whole_at_open(layout_item, problem):
    """Review 26, 1.1: a section read without a keyring (``vouched=False``: only a CRC, which anyone can compute,
    vouches for it) whose starts are no runs, whose id table names an ACL twice or whose string offsets decrease is
    refused at open, naming what is wrong; one an HMAC vouches for opens."""
    from secmeta.projections import acl_section
    from secmeta.projections.acl_table import TableError
    from tests.projections.test_image_snapshot import array_item

    sound = _four_node_section()
    assert acl_section.read_section(memoryview(sound), vouched=False).position("i4") == 4
    name, index, value = layout_item
    if name == "id_slots":  # an empty slot names ACL 5 (position 4) too
        index = list(acl_section.read_section(memoryview(sound))._slots).index(0)
    damaged = array_item(sound, acl_section._HEADER.size, name, acl_section._LAYOUT, index, value)
    acl_section.read_section(memoryview(damaged))
    with pytest.raises(TableError, match=problem):
        acl_section.read_section(memoryview(damaged), vouched=False)


@pytest.mark.parametrize("host", [0, 1])
def test_one_host_shared_by_every_acl_is_read_as_one_string_and_a_host_past_it_is_refused(host):
    """Issue 24 (snapshot open): a section whose ACLs all name its one host (``*``, the benchmarks' shape) lists it
    for every ACL without a lookup per ACL; an ACL naming a host the section does not list still fails the open."""
    from secmeta.projections import acl_section
    from secmeta.projections.acl_table import TableError
    from tests.projections.test_image_snapshot import array_item

    section = array_item(_four_node_section(), acl_section._HEADER.size, "acl_hosts", acl_section._LAYOUT, 3, host)
    if host:
        with pytest.raises(TableError, match="names a principal or host the section does not list"):
            acl_section.read_section(memoryview(section))
    else:
        assert acl_section.read_section(memoryview(section)).hosts == ["*"] * 5


def _many_nodes() -> dict[str, AclBinding]:
    """ACLs on 40 topics, two to twelve principals each (one of them 'User:*' on every fifth), hosts mixed."""
    held = {}
    for t in range(40):
        for p in range(2 + t % 11):
            principal = "User:*" if p == 0 and t % 5 == 0 else f"User:u{p}"
            held[f"id{t}-{p}"] = AclBinding.of(T, f"topic-{t}", PatternType.LITERAL if t % 3 else PatternType.PREFIXED,
                                               principal, ["*", "10.0.0.1", "10.0.0.0/24"][p % 3], Op.READ,
                                               AclPermissionType.DENY if p == 3 else AclPermissionType.ALLOW)
    return held


def test_a_loaded_image_makes_a_types_name_maps_only_when_that_type_is_first_read():
    """Issue 24: a snapshot's open hashed every node name into its type's maps before anything was asked (25-35 ms
    of the current shape's 0.15-0.18 s open at 200k ACLs); now each resource type's maps are made by its first
    reader: an authorize on a group leaves the topics' unmade, and the first on a topic makes them (the index then a
    plain one) and answers as the rules."""
    from secmeta.projections.acl_index import PendingTypeIndex, TypeIndex

    held = {**_many_nodes(), "g": AclBinding.of(G, "grp", PatternType.LITERAL, "User:u1", "*", Op.READ,
                                                AclPermissionType.ALLOW)}
    image = snapshot_loaded(SecurityImage(acls=bulk(held), next_offset=1), signed=True).acls
    types = image.index.types
    assert type(types[T]) is PendingTypeIndex and type(types[G]) is PendingTypeIndex
    assert authorize(image, "User:u1", "10.0.0.1", Op.READ, G, "grp")
    assert type(types[T]) is PendingTypeIndex and type(types[G]) is TypeIndex
    asked = [(f"User:u{p}", "10.0.0.1", Op.READ, T, f"topic-{t}x") for t in range(40) for p in range(4)]
    assert [authorize(image, *call) for call in asked] == [
        brute_authorize(list(held.values()), *call, set(), False) for call in asked]
    assert type(types[T]) is TypeIndex


def test_two_threads_first_reading_a_type_at_once_keep_one_build_of_its_maps():
    """Review 27: two threads that read a loaded type first at once each made its maps and then set the index's
    attributes one by one, so it could keep one build's literal map and the other's prefixed map.  Here both build
    at once (a barrier), and thread a is held after taking a build's first attribute until b has taken them all:
    the index holds every attribute of one build, and both threads' answers are the rules'."""
    import threading

    from secmeta.projections.acl_index import PendingTypeIndex, TypeIndex

    held = _many_nodes()
    table = snapshot_loaded(SecurityImage(acls=bulk(held), next_offset=1), signed=True).acls
    pending = table.index.types[T]
    assert type(pending) is PendingTypeIndex
    make = pending._lineage.make
    both_made, holding, second_done = threading.Barrier(2, timeout=10), threading.Event(), threading.Event()
    builds: list[TypeIndex] = []

    class Build:
        """A made index: thread a is held after taking its first attribute until b has taken all of a build's."""

        def __init__(self, made: TypeIndex):
            self.made = made

        def __getattr__(self, name: str):
            if threading.current_thread() is threads[0] and name == "prefixed":
                holding.set()
                second_done.wait(timeout=5)
            elif threading.current_thread() is threads[1] and name == "literal":
                holding.wait(timeout=5)
            return getattr(self.made, name)

    def build() -> TypeIndex:
        made = make()
        builds.append(made)
        both_made.wait()
        return Build(made)  # type: ignore[return-value]

    pending._lineage.make = build
    asked = [(f"User:u{p}", "10.0.0.1", Op.READ, T, f"topic-{t}x") for t in range(40) for p in range(4)]
    got: dict[str, list[bool]] = {}

    def read(who: str) -> None:
        pending.literal  # noqa: B018 - the first read makes the type's maps
        if who == "b":
            second_done.set()
        got[who] = [authorize(table, *call) for call in asked]

    threads = [threading.Thread(target=read, args=(who,)) for who in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 2 and type(pending) is TypeIndex
    kept = [made for made in builds if made.literal is pending.literal]
    assert len(kept) == 1 and all(getattr(pending, slot) is getattr(kept[0], slot)
                                  for slot in ("literal", "prefixed", "wildcard", "length_counts", "_lineage"))
    expected = [brute_authorize(list(held.values()), *call, set(), False) for call in asked]
    assert got == {"a": expected, "b": expected}


def test_authorizing_on_a_loaded_image_keeps_no_object_and_answers_as_the_rules():
    """Issue 24 (the first pass over a freshly loaded image): an authorize reads a node not made yet from the
    section's columns and keeps nothing (it made a view, a list and a map entry per node, 30-75% more work than the
    warm call, and ran the cyclic collector); its answers are the rules', first and again, and after describe makes
    the nodes."""
    import os
    import tracemalloc

    from secmeta.projections import acl_index

    held = _many_nodes()
    image = loaded(held)
    asked = [(f"User:u{p}", host, op, T, name) for t in range(40) for name in (f"topic-{t}", f"topic-{t}x")
             for p in range(6) for host in ("10.0.0.1", "10.0.0.9") for op in (Op.READ, Op.DESCRIBE)]
    want = [brute_authorize(list(held.values()), *call, set(), False) for call in asked]
    twin = bulk(held)  # the same calls on another image first: what is cached across images (parsed hosts, prefix cuts)
    assert [authorize(twin, *call) for call in asked] == want
    assert not authorize(image, "User:u0", "10.0.0.1", Op.READ, T, "no-node")  # the type's name maps, made once
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        first = [authorize(image, *call) for call in asked]
        kept = tracemalloc.take_snapshot().compare_to(before, "filename")
    finally:
        tracemalloc.stop()
    package = os.path.dirname(acl_index.__file__)
    grown = [stat for stat in kept if os.path.dirname(stat.traceback[0].filename) == package and stat.size_diff > 0]
    assert grown == []
    assert first == want
    assert [authorize(image, *call) for call in asked] == want
    for t in range(40):
        image.describe(AclBindingFilter.of(T, f"topic-{t}x", PatternType.MATCH))
    assert [authorize(image, *call) for call in asked] == want


def test_an_authorize_on_a_section_node_listing_its_principal_twice_fails_closed():
    """A loaded node whose groups list the asked principal twice (a column checked as a node is read) fails naming
    the node on authorize, never answering from one of the two groups (the other holds a DENY)."""
    from secmeta.projections.acl_section import encode_section, read_section
    from secmeta.projections.acl_table import TableError

    section = encode_section(bytes([T]), bytes([PatternType.LITERAL]), ["t"], [3], ["User:a", "User:b"], [0, 1, 0],
                             [1, 1, 1], ["i1", "i2", "i3"], ["*"], [0, 0, 0], bytes([Op.READ] * 3),
                             bytes([AclPermissionType.ALLOW, AclPermissionType.ALLOW, AclPermissionType.DENY]))
    table = read_section(memoryview(b"".join(section)))
    image = AclsImage(acls=AclsImage.EMPTY.acls, index=table.index())
    assert authorize(image, "User:b", "10.0.0.1", Op.READ, T, "t")
    with pytest.raises(TableError, match="node TOPIC LITERAL 't' lists a principal's group twice"):
        authorize(image, "User:a", "10.0.0.1", Op.READ, T, "t")


def test_a_signed_column_of_positions_is_refused_rather_than_read_from_the_end():
    """A section's array table may name the signed typecode ``q`` (its start columns use it); a principal or host
    column of that type could name -1, which Python reads as the table's last string: such a column is refused."""
    from array import array

    from secmeta.projections.acl_section import _listed
    from secmeta.projections.acl_table import TableError

    assert _listed(["User:a", "User:b"], memoryview(array("B", [1, 0]))) == ["User:b", "User:a"]
    with pytest.raises(TableError, match="typecode 'q'"):
        _listed(["User:a", "User:b"], memoryview(array("q", [-1])))
