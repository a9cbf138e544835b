"""AclsImage and AclsDelta: values, identity lookup, describe, structural sharing."""

import re
import sys
import threading

import pytest

from secmeta.events.types import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from secmeta.projections.acl_index import Multi
from secmeta.projections.acls import AclsDelta, AclsImage, canonical_entry
from secmeta.projections.errors import InconsistentEventError
from tests.storekit import acl

T, G = ResourceType.TOPIC, ResourceType.GROUP
L, P, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH
READ, WRITE = AclOperation.READ, AclOperation.WRITE
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def image(*bindings, base=AclsImage.EMPTY):
    delta = AclsDelta(base)
    for i, binding in enumerate(bindings):
        delta.add(f"id{len(base) + i}", binding)
    return delta.apply()


def ids(pairs):
    return sorted(acl_id for acl_id, _ in pairs)


def test_empty_image_has_no_acls():
    """EMPTY holds nothing."""
    assert len(AclsImage.EMPTY) == 0 and list(AclsImage.EMPTY) == []


def test_get_returns_added_binding():
    """An added ACL is found by its id."""
    assert image(acl()).get("id0") == acl()


def test_iteration_yields_id_and_binding():
    """Iterating an image yields (acl_id, binding) pairs."""
    assert sorted(image(acl(), acl("bar"))) == [("id0", acl()), ("id1", acl("bar"))]


def test_apply_leaves_base_image_unchanged():
    """Applying a delta does not alter the image it started from."""
    base = image(acl())
    delta = AclsDelta(base)
    delta.remove("id0")
    delta.add("id9", acl("bar"))
    delta.apply()
    assert base.get("id0") == acl() and base.get("id9") is None and len(base) == 1


def test_remove_drops_acl():
    """A removed ACL is gone from the next image and its index."""
    base = image(acl())
    delta = AclsDelta(base)
    delta.remove("id0")
    after = delta.apply()
    assert len(after) == 0 and after.find(acl()) is None and after == AclsImage.EMPTY


def test_remove_unknown_id_raises():
    """Removing an id the image does not hold raises InconsistentEventError naming the id (Kafka: AclsDelta.replay)."""
    with pytest.raises(InconsistentEventError, match="'nope'"):
        AclsDelta(AclsImage.EMPTY).remove("nope")


def test_add_then_remove_in_one_delta_is_nothing():
    """An id added and removed within one delta leaves the image as it was."""
    delta = AclsDelta(AclsImage.EMPTY)
    delta.add("x", acl())
    delta.remove("x")
    assert delta.apply() is AclsImage.EMPTY


def test_add_existing_id_replaces_binding():
    """Adding an id again replaces its binding."""
    after = image(acl(op=WRITE), base=image(acl()))
    delta = AclsDelta(after)
    delta.add("id0", acl("bar"))
    replaced = delta.apply()
    assert replaced.get("id0") == acl("bar") and replaced.find(acl()) is None


def test_match_pattern_type_cannot_be_stored():
    """Only LITERAL and PREFIXED ACLs enter an image."""
    with pytest.raises(ValueError):
        AclsDelta(AclsImage.EMPTY).add("x", acl(pattern=MATCH))


def test_adding_to_a_group_keeps_its_other_acls():
    """A second delta adding to the same resource and principal keeps the first ACLs."""
    after = image(acl(op=WRITE), base=image(acl(), acl(host="10.0.0.1")))
    assert after == AclsImage.of(
        [("id0", acl()), ("id1", acl(host="10.0.0.1")), ("id2", acl(op=WRITE))]
    )


def test_untouched_resource_type_is_shared():
    """A delta on topics reuses the group index object as it was."""
    base = image(acl(rtype=G), acl())
    after = image(acl("bar"), base=base)
    assert after.index.types[G] is base.index.types[G]


def test_untouched_resource_node_is_shared():
    """A delta on one topic reuses the index node of another."""
    base = image(acl("foo"), acl("bar"))
    after = image(acl("baz"), base=base)
    before_node = base.index.types[T].literal["foo"]
    assert after.index.types[T].literal["foo"] is before_node


def _hamt_nodes(node) -> set[str]:
    """The ids of a Multi node's persistent-map tree nodes (immutables' debugging dump)."""
    return set(re.findall(r"id=(0x[0-9a-f]+)", node.by_principal.__dump__()))


def test_write_to_a_widely_held_resource_edits_its_principal_map():
    """One ACL added on a topic held by many principals shares the untouched part of the node's map."""
    base = image(acl(principal="User:u199"), base=image(*(acl(principal=f"User:u{i}") for i in range(199))))
    before = base.index.types[T].literal["foo"]
    written = image(acl(principal="User:new"), base=base)
    after = written.index.types[T].literal["foo"]
    assert isinstance(after, Multi) and after.group("User:u7") is before.group("User:u7")
    assert len(_hamt_nodes(after) & _hamt_nodes(before)) >= len(_hamt_nodes(before)) // 2
    assert after == AclsImage.of(list(written)).index.types[T].literal["foo"]


def test_writes_to_a_widely_held_resource_of_a_bulk_image_share_its_principal_map():
    """Two writes, each adding one ACL to a topic of many principals in an image built in bulk (its nodes made
    when first used), make the node's principal map once and each edit it, sharing its untouched part."""
    base = image(*(acl(principal=f"User:u{i}") for i in range(200)))
    one, two = (image(acl(principal=f"User:new{i}"), base=base).index.types[T].literal["foo"] for i in range(2))
    assert isinstance(one, Multi) and one.group("User:u7") is two.group("User:u7")
    assert len(_hamt_nodes(one) & _hamt_nodes(two)) >= len(_hamt_nodes(one)) // 2


def test_a_widely_held_resource_shrinks_to_few_principals():
    """Removing principals from a many-principal node down to a few leaves a node of those few equal to a fresh one
    (a bulk image's node stays a view of its table: ``test_lazy_edits``)."""
    base = image(*(acl(principal=f"User:u{i}") for i in range(10)))
    delta = AclsDelta(base)
    for i in range(3):
        delta.remove(f"id{i}")
    after = delta.apply()
    node = after.index.types[T].literal["foo"]
    assert sorted(group.principal for group in node.groups()) == sorted(f"User:u{i}" for i in range(3, 10))
    assert node == AclsImage.of(list(after)).index.types[T].literal["foo"]


def test_untouched_acls_are_shared():
    """The new image holds the very group objects of untouched ACLs."""
    base = image(acl())
    after = image(acl("bar"), base=base)
    assert after.acls["id0"] is base.acls["id0"]


def test_find_identical_acl():
    """find() returns the id of the ACL equal in all seven fields."""
    assert image(acl(), acl(op=WRITE)).find(acl(op=WRITE)) == "id1"


def test_find_differs_in_one_field():
    """find() is None when only the host differs."""
    assert image(acl()).find(acl(host="10.0.0.1")) is None


def test_enum_codes_are_stored_as_members():
    """A binding built with plain int codes is stored with enum members."""
    raw = AclBinding(ResourcePattern(2, "foo", 3), AccessControlEntry("User:alice", "*", 3, 3))
    stored = image(raw).get("id0")
    assert type(stored.operation) is AclOperation and type(stored.restype) is ResourceType


def test_entries_are_shared_between_acls():
    """Two ACLs with the same principal, host, operation and permission share one entry."""
    img = image(acl("foo"), acl("bar"))
    assert img.get("id0").entry is img.get("id1").entry


def test_bindings_read_back_hold_the_canonical_entry():
    """A binding read back holds the shared entry canonical_entry gives for its fields."""
    binding = AclBinding(ResourcePattern(T, "foo", L), AccessControlEntry("User:x", "10.0.0.1", READ, ALLOW))
    assert image(binding).get("id0").entry is canonical_entry("User:x", "10.0.0.1", READ, ALLOW)


def test_image_of_equals_delta_build():
    """AclsImage.of builds the same value as one delta."""
    pairs = [("id0", acl()), ("id1", acl("bar", pattern=P))]
    assert AclsImage.of(pairs) == image(acl(), acl("bar", pattern=P))


def test_describe_by_literal_resource():
    """A LITERAL filter on a name lists the literal ACLs of that name only."""
    img = image(acl("foo"), acl("foo", pattern=P), acl("*"), acl("foobar"))
    assert ids(img.describe(AclBindingFilter.of(T, "foo", L))) == ["id0"]


def test_describe_pattern_any_lists_both_pattern_types():
    """Pattern ANY on a name lists LITERAL and PREFIXED ACLs of exactly that name."""
    img = image(acl("foo"), acl("foo", pattern=P), acl("*"), acl("fo", pattern=P))
    assert ids(img.describe(AclBindingFilter.of(T, "foo"))) == ["id0", "id1"]


def test_describe_match_lists_applying_patterns():
    """MATCH lists the literal name, literal '*' and covering prefixes."""
    img = image(acl("foo"), acl("*"), acl("fo", pattern=P), acl("foox", pattern=P), acl("bar"), acl("foo", rtype=G))
    assert ids(img.describe(AclBindingFilter.of(T, "foo", MATCH))) == ["id0", "id1", "id2"]


def test_describe_by_principal_on_resource():
    """A resource filter with a principal lists only that principal's ACLs."""
    img = image(acl(), acl(principal="User:bob"))
    assert ids(img.describe(AclBindingFilter.of(T, "foo", principal="User:bob"))) == ["id1"]


def test_describe_type_without_name():
    """A filter with a type and no name lists every ACL of that type."""
    img = image(acl(), acl("x", pattern=P), acl(rtype=G))
    assert ids(img.describe(AclBindingFilter.of(T))) == ["id0", "id1"]


def test_describe_any_with_name_spans_types():
    """Type ANY with a name finds that name under every type."""
    img = image(acl(), acl(rtype=G), acl("bar"))
    assert ids(img.describe(AclBindingFilter.of(name="foo"))) == ["id0", "id1"]


def test_describe_any_filter_lists_all():
    """The empty filter lists every ACL."""
    assert ids(image(acl(), acl(rtype=G)).describe(AclBindingFilter.any())) == ["id0", "id1"]


def test_describe_applies_entry_fields():
    """Entry fields of the filter narrow the result."""
    img = image(acl(), acl(op=WRITE, perm=DENY))
    assert ids(img.describe(AclBindingFilter.of(T, "foo", permission_type=DENY))) == ["id1"]


def test_matching_is_what_describe_lists():
    """matching() yields the pairs describe() returns."""
    img = image(acl(), acl("fo", pattern=P))
    flt = AclBindingFilter.of(T, "foo", MATCH)
    assert sorted(img.matching(flt)) == sorted(img.describe(flt))


def test_repr_is_short():
    """An image's repr names its size, not its content."""
    assert repr(image(acl())) == "AclsImage(<1 ACLs>)"


def test_entry_table_sweep_drops_unused_entries():
    """A sweep forgets entries no ACL holds and keeps those in use."""
    from secmeta.projections.acl_entries import _EntryTable

    table = _EntryTable()
    kept = table.get("User:a", "*", READ, ALLOW)
    table.get("User:b", "*", READ, ALLOW)
    table._sweep()
    assert list(table.entries.values()) == [kept]


def test_entry_table_read_by_threads_while_it_sweeps():
    """Threads interning entries at once (every binding read does) sweep the table without error or loss.

    Each thread makes thousands of short-lived entries (so sweeps run again
    and again, from several threads) and keeps some; every entry returned
    has the fields asked for, and a kept one is the table's entry after.
    """
    from secmeta.projections.acl_entries import _EntryTable

    table = _EntryTable()
    errors: list[BaseException] = []
    kept: list[list] = [[] for _ in range(4)]

    def read(worker: int) -> None:
        try:
            for i in range(30_000):
                principal = f"User:w{worker}-{i}"
                entry = table.get(principal, "*", READ, ALLOW)
                assert (entry.principal, entry.host, entry.operation, entry.permission_type) == (
                    principal, "*", READ, ALLOW)
                if i % 1000 == 0:
                    kept[worker].append(entry)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=read, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    for entries in kept:
        for entry in entries:
            assert table.get(entry.principal, "*", READ, ALLOW) is entry


def test_once_grants_are_wanted_later_writes_carry_them():
    """After a reader asks one image of a lineage for its grants, the images later writes make carry them.

    image1 was written before the reader asked image0; the write after the
    ask builds image1's grants once and image2 carries them, so image3 (one
    write on) shares the untouched principal's grant tables with image2
    instead of building its own; and they equal a fresh build's.
    """
    image0 = AclsImage.of([(f"id{i}", acl(f"t{i}", principal=f"User:u{i % 3}")) for i in range(30)])
    image1 = image(acl("x", principal="User:u0"), base=image0)
    image0.index.types[T].grants  # noqa: B018 - the reader's first use
    image2 = image(acl("y", principal="User:u1"), base=image1)
    image3 = image(acl("z", principal="User:u0"), base=image2)
    assert image3.index.types[T].grants["User:u2"] is image2.index.types[T].grants["User:u2"]
    assert image3.index.types[T].grants == AclsImage.of(list(image3)).index.types[T].grants


def test_describe_answers_each_image_with_its_own_acls_when_group_bindings_are_kept():
    """A resource's bindings are kept by index group between describes: each image still answers with its own
    ACLs after a write adds to, removes from or replaces a group, asked in any order."""
    def binding(principal: str, operation: AclOperation) -> AclBinding:
        return AclBinding.of(ResourceType.TOPIC, "*", PatternType.LITERAL, principal, "*", operation,
                             AclPermissionType.ALLOW)

    reads = [(f"r{i}", binding(f"User:u{i}", AclOperation.READ)) for i in range(6)]
    first = AclsImage.of([*reads, ("w0", binding("User:u0", AclOperation.WRITE))])
    delta = AclsDelta(first)
    delta.remove("w0")
    delta.add("d1", binding("User:u1", AclOperation.DESCRIBE))
    second = delta.apply()
    everything = AclBindingFilter.of(ResourceType.TOPIC, "orders", PatternType.MATCH)
    expected = [(first, {b for _, b in reads} | {binding("User:u0", AclOperation.WRITE)}),
                (second, {b for _, b in reads} | {binding("User:u1", AclOperation.DESCRIBE)})]
    for image, acls in expected[::-1] + expected + expected[::-1]:
        assert {b for _, b in image.describe(everything)} == acls


def test_describe_spanning_the_tables_of_a_batch_built_image_finds_every_groups_pairs_kept():
    """describe on an image whose groups come from several batch tables (a follower's) finds every whole group's
    pairs kept the second time (none cleared by another table's group) and answers as the first time."""
    from secmeta.projections import acls
    from tests.core.wire.test_hot_responses import _batch_built_image

    image, held = _batch_built_image()
    every = AclBindingFilter.of()
    first = image.describe(every)
    hits = acls._GROUP_PAIRS.hits
    assert image.describe(every) == first
    assert acls._GROUP_PAIRS.hits - hits == sum(1 for _ in image.selection(every))
    assert sorted((binding for _, binding in first), key=repr) == sorted(held, key=repr)
