"""Deferred ACL images: a snapshot's image plus a large delta, each node patched when a lookup first makes it,
answers as the image a replay builds (issue 24: as_of from a checkpoint of millions of ACLs)."""

from dataclasses import replace
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scripts.bench import shapes
from secmeta.events.records import AclCreated, AclDeleted
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections import acls as acls_module
from secmeta.projections.acl_deferred import Deferred, deferred_of
from secmeta.projections.image import SecurityDelta, SecurityImage
from tests.projections.test_shape_properties import answers, calls, logs, replayed, snapshot_loaded


def _loaded(image: SecurityImage, signed: bool) -> SecurityImage:
    """``image`` as time travel reads a checkpoint file of it (signed: each node's principals listed when first read)."""
    return snapshot_loaded(image, signed=signed, principals_when_read=True)


def deferred(image: SecurityImage) -> bool:
    return deferred_of(image.acls.acls, image.acls.index) is not None


def with_changes(image: SecurityImage, events) -> SecurityImage:
    """``image`` after ``events`` in one delta, merged into a deferred image whatever their number."""
    delta = SecurityDelta(image)
    for event in events:
        delta.replay(event)
    with patch.object(acls_module, "DEFER_FROM", 1):
        return delta.apply(image.next_offset + len(events))


@settings(max_examples=10, deadline=None)
@given(logs, st.integers(0, 100), st.integers(0, 100), st.integers(0, 2**16), st.booleans())
def test_a_snapshot_image_plus_deferred_changes_answers_as_the_replayed_image(log, first, second, order, signed):
    """A snapshot of a shape's first requests, the next ones merged as a deferred delta (creations and deletions,
    nodes emptied and new ones), the next merged again, then the rest written request by request: at each step
    every authorize, authorized_operations and describe answer, every id's binding, and the image (and its
    snapshot, loaded again) equal those of a replay of the same requests.  The loaded image is asked a few calls
    first, or none: its index's maps of the types read (some nodes made) are what the first delta copies.  Snapshots
    are read as time travel reads a checkpoint file: signed (its HMAC vouching for it: each node's principals listed
    when the node is first read, a deletion's group's read alone), or unsigned (checked whole at open)."""
    shape, n, seed = log
    requests = shapes.shape_events(shape, n, seed)
    first = min(first, len(requests))
    second = min(first + second, len(requests))
    held = [b for _, b in shapes.final_pairs(shape, n, seed)]
    asked = calls(shape, n, order, held)
    image = _loaded(replayed(requests[:first]), signed)
    answers(image.acls, asked[:order % 8])  # some types' maps and nodes made before changes are deferred onto it
    from_section = bool(image.acls)  # an empty snapshot loads as the empty image, which changes apply to as ever
    for cut in (second, len(requests)):
        at = image.next_offset
        image = with_changes(image, [event for request in requests[len_of(requests, at):cut] for event in request])
        expected = replayed(requests[:cut])
        assert deferred(image) == from_section
        assert answers(image.acls, _ASKED) == answers(expected.acls, _ASKED)
        assert sorted(image.acls) == sorted(expected.acls) and len(image.acls) == len(expected.acls)
        assert all(image.acls.get(acl_id) == binding for acl_id, binding in expected.acls)
        assert image == expected == _loaded(image, signed)
    written = replayed(requests[second:], with_changes(_loaded(replayed(requests[:first]), signed),
                                                           [e for r in requests[first:second] for e in r]),
                       per_request=True)
    assert written == replayed(requests)


def len_of(requests, events: int) -> int:
    """How many requests hold the first ``events`` events."""
    total = 0
    for i, request in enumerate(requests):
        if total >= events:
            return i
        total += len(request)
    return len(requests)


def acl(name: str, principal: str = "User:a", pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding.of(ResourceType.TOPIC, name, pattern, principal, "*", AclOperation.READ,
                         AclPermissionType.ALLOW)


def test_an_id_deleted_and_created_again_and_a_node_emptied_read_as_replayed():
    """An id deleted then created again with another binding, a node whose every ACL is deleted (gone from the
    index) and a pattern new since the snapshot read as a replay gives them; a deletion of an id neither the
    snapshot nor the changes hold fails as it does on any image."""
    base = SecurityDelta(SecurityImage.EMPTY)
    base.replay(AclCreated("a", acl("orders")))
    base.replay(AclCreated("b", acl("payments")))
    image = snapshot_loaded(base.apply(2))
    events = [AclDeleted("a", acl("orders")), AclCreated("a", acl("orders", "User:b")), AclDeleted("b", acl("payments")),
              AclCreated("c", acl("pay", pattern=PatternType.PREFIXED))]
    changed = with_changes(image, events)
    replay = SecurityDelta(SecurityImage.EMPTY)
    for event in [AclCreated("a", acl("orders")), AclCreated("b", acl("payments")), *events]:
        replay.replay(event)
    expected = replay.apply(6)
    assert isinstance(deferred_of(changed.acls.acls, changed.acls.index), Deferred)
    assert changed.acls.index.node(ResourceType.TOPIC, PatternType.LITERAL, "payments") is None
    assert "payments" not in changed.acls.index.types[ResourceType.TOPIC].literal
    assert changed.acls.get("a") == acl("orders", "User:b") and changed.acls.get("b") is None
    assert changed == expected and sorted(changed.acls) == sorted(expected.acls)


_PATTERNS = [(ResourceType.TOPIC, "orders", PatternType.LITERAL), (ResourceType.TOPIC, "ord", PatternType.PREFIXED),
             (ResourceType.GROUP, "orders", PatternType.LITERAL), (ResourceType.TOPIC, "new", PatternType.LITERAL)]
_chained = st.lists(st.lists(st.tuples(st.integers(0, 11), st.integers(0, 3), st.integers(0, 3), st.booleans()),
                             max_size=12), min_size=1, max_size=5)


# Each pattern asked by each of the chained tests' principals (a prefixed pattern's name, lengthened, is asked too).
_ASKED = [(f"User:u{p}", "10.0.0.1", AclOperation.READ, t, name + "x" * (k == PatternType.PREFIXED))
          for p in range(4) for t, name, k in _PATTERNS]


def _chained_binding(pattern: int, principal: int) -> AclBinding:
    """The chained tests' binding: READ on ``_PATTERNS[pattern]`` for User:u<principal>."""
    resource_type, name, pattern_type = _PATTERNS[pattern]
    return AclBinding.of(resource_type, name, pattern_type, f"User:u{principal}", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)


def _events_of(ops, held: dict[str, AclBinding]) -> list:
    """The events of one chained delta's ``ops`` (id, pattern, principal, create): an id held is deleted first, then
    created again if ``create``; ``held`` follows them."""
    events: list = []
    for n, pattern, principal, create in ops:
        acl_id = f"id{n}"
        if acl_id in held:
            events.append(AclDeleted(acl_id, held.pop(acl_id)))
        if create:
            held[acl_id] = _chained_binding(pattern, principal)
            events.append(AclCreated(acl_id, held[acl_id]))
    return events


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 8), _chained, st.booleans())
def test_deferred_changes_applied_one_delta_after_another_read_as_replayed(loaded_ids, deltas, signed):
    """A loaded image, then several deltas merged one after another (each gathers only its own changes onto the
    image before it): ids of the file and ids added by an earlier delta deleted, re-created with another binding,
    deleted again; nodes emptied and new ones.  Every image on the way equals a replay of the same events, answers
    authorize, operations and describe as it does, and gives every id's binding back."""
    first = [AclCreated(f"id{i}", _chained_binding(i % 3, i % 4)) for i in range(loaded_ids)]
    held = {event.acl_id: event.binding for event in first}
    image = _loaded(replayed([first]), signed) if first else SecurityImage.EMPTY
    history = list(first)
    for ops in deltas:
        events = _events_of(ops, held)
        image = with_changes(image, events) if events else image
        history += events
        expected = replayed([history])
        assert image == expected
        assert sorted(image.acls) == sorted(expected.acls) and len(image.acls) == len(held)
        assert all(image.acls.get(acl_id) == b for acl_id, b in held.items())
        assert answers(image.acls, _ASKED) == answers(expected.acls, _ASKED)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8), _chained, st.booleans())
def test_each_image_of_a_chain_of_deferred_deltas_keeps_its_own_state(loaded_ids, deltas, signed):
    """Deltas merged one after another onto a loaded image, no image asked anything until the last is made: then each
    image, oldest first, still equals a replay of the events up to it, answers as it, gives its ids' bindings back and
    lists exactly its ids.  A later delta gathers onto what earlier images hold (persistent maps, node entries), so
    it must copy before it edits: time travel keeps the earlier images and makes their nodes later."""
    first = [AclCreated(f"id{i}", _chained_binding(i % 3, i % 4)) for i in range(loaded_ids)]
    held = {event.acl_id: event.binding for event in first}
    image = _loaded(replayed([first]), signed)
    history, chain = list(first), []
    for ops in deltas:
        events = _events_of(ops, held)
        image = with_changes(image, events) if events else image
        history += events
        chain.append((image, list(history), dict(held)))
    for image, events, bindings in chain:
        expected = replayed([events])
        assert sorted(image.acls.acls) == sorted(bindings)
        assert all(image.acls.get(acl_id) == b for acl_id, b in bindings.items())
        assert answers(image.acls, _ASKED) == answers(expected.acls, _ASKED)
        assert image == expected


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8), st.lists(st.tuples(st.integers(0, 11), st.integers(0, 3), st.integers(0, 3), st.booleans()),
                                   min_size=1, max_size=12), st.sampled_from(["as recorded", "rotated", "out of range"]),
       st.booleans())
def test_a_net_change_recording_where_the_table_holds_its_ids_applies_as_replayed(loaded_ids, ops, where, signed):
    """The net change of a delta onto a loaded image records, for the ids the image's table holds, where it holds them
    (position and group: what a delta checkpoint file keeps, so its apply probes no id).  Applied onto the image with
    those places as recorded, or wrong (each id given another's place, or places past the table: a file against
    another file of the same offset, or damaged but signed), the image equals a replay of the same events and
    answers as it: a place is used only where the table holds that id."""
    first = [AclCreated(f"id{i}", _chained_binding(i % 3, i % 4)) for i in range(loaded_ids)]
    held = {event.acl_id: event.binding for event in first}
    image = _loaded(replayed([first]), signed)
    events = _events_of([(0, 0, 0, False), *ops], held)  # id0 deleted first: the table holds one id changed at least
    delta = SecurityDelta(image)
    for event in events:
        delta.replay(event)
    net = delta.net()
    recorded = net.acls_held
    assert type(recorded) is dict and set(recorded) == {acl_id for acl_id in net.acls if acl_id.startswith("id")
                                                        and int(acl_id[2:]) < loaded_ids}
    places = list(recorded.values())
    if where == "rotated":
        places = places[1:] + places[:1]
    elif where == "out of range":
        places = [(position + 1000, group + 1000) for position, group in places]
    applied = SecurityDelta.of_net(image, replace(net, acls_held=dict(zip(recorded, places)))).apply(
        image.next_offset + len(events))
    expected = replayed([first + events])
    assert applied == expected
    assert sorted(applied.acls) == sorted(expected.acls)
    assert all(applied.acls.get(acl_id) == b for acl_id, b in held.items())
    assert answers(applied.acls, _ASKED) == answers(expected.acls, _ASKED)


def test_a_deferred_image_holds_what_its_estimate_says():
    """What a snapshot's image read in place holds (``table_bytes``) and what changes deferred onto it hold beyond
    it (``own_bytes``: rows, persistent maps, gathered entries, index dicts), by tracemalloc, are within the
    estimates and not below half of them: issue 24, 350 B per change counted a third of what they held."""
    import gc
    import tracemalloc

    def binding(i: int) -> AclBinding:
        return AclBinding.of(ResourceType.TOPIC, f"topic-{i % 260}", PatternType.LITERAL, f"User:u{i % 50}", "*",
                             AclOperation(3 + i % 4), AclPermissionType.ALLOW)

    ids = [f"{i:08x}-0000-4000-8000-{i:012x}" for i in range(4500)]
    base = replayed([[AclCreated(acl_id, binding(i)) for i, acl_id in enumerate(ids[:3000])]])
    gc.collect()
    tracemalloc.start()
    try:
        began = tracemalloc.get_traced_memory()[0]
        image = snapshot_loaded(base)
        gc.collect()
        loaded = tracemalloc.get_traced_memory()[0]
        events = [AclDeleted(acl_id, binding(i)) for i, acl_id in enumerate(ids[:750])]
        events += [AclCreated(acl_id, binding(i + 1)) for i, acl_id in enumerate(ids[3000:], 3000)]
        changed = with_changes(image, events)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    table, deferred = deferred_of(image.acls.acls, image.acls.index), deferred_of(changed.acls.acls, changed.acls.index)
    assert table is not None and deferred is not None
    assert table.nbytes() / 2 <= loaded - began <= table.nbytes()
    assert deferred.own_bytes() / 2 <= held - loaded <= deferred.own_bytes()


def test_an_image_read_in_place_is_freed_by_reference_counting_alone():
    """A snapshot's image and one with changes deferred onto it, once dropped (and their table's made nodes and
    groups forgotten, as time travel does when it evicts the file's lineage), free their table at once with the
    cyclic collector off (as ``paused_gc`` leaves it while images are built, and ``gc.freeze()`` for good): issue
    24, the image was a reference cycle (index -> node maps -> its node maker -> index), so evicting a checkpoint
    file's lineage freed nothing and RSS went 380 MB past the 1 GiB budget at 10M events, the estimate within it."""
    import gc
    import weakref

    base = SecurityDelta(SecurityImage.EMPTY)
    for i in range(40):
        base.replay(AclCreated(f"id-{i}", acl(f"topic-{i % 7}", f"User:u{i % 3}")))
    image = snapshot_loaded(base.apply(40))
    changed = with_changes(image, [AclDeleted("id-0", acl("topic-0", "User:u0")), AclCreated("new", acl("fresh"))])
    table = deferred_of(changed.acls.acls, changed.acls.index).table
    assert {image.acls.get("id-1"), changed.acls.get("new")} == {acl("topic-1", "User:u1"), acl("fresh")}
    assert changed.acls.index.node(ResourceType.TOPIC, PatternType.LITERAL, "topic-0") is not None  # nodes made
    assert image.acls.index.node(ResourceType.TOPIC, PatternType.LITERAL, "topic-1") is not None
    freed = weakref.ref(table)
    was = gc.isenabled()
    gc.disable()
    try:
        table.forget_made()
        del image, changed, table
        assert freed() is None
    finally:
        if was:
            gc.enable()


@pytest.mark.parametrize("built", ["replayed", "in batches"])
def test_a_replayed_image_is_freed_by_reference_counting_alone(built):
    """An image whose ACL tables a replay made (one from empty, ``AclTable.of_rows``; or one per batch of new
    patterns, as a follower's incremental apply adds them), its nodes and groups made by authorize, describe and id
    lookups, frees every table once dropped, with the cyclic collector off (as a replay's ``gc.freeze()`` leaves
    what lived past it): a table kept the nodes and groups it made, which referred back to it."""
    import gc
    import weakref

    from secmeta.core import AclBindingFilter
    from secmeta.projections.acl_index import Lazy
    from secmeta.projections.authorizer import authorize

    image = SecurityImage.EMPTY
    per_batch = 200 if built == "in batches" else 600
    for b in range(600 // per_batch):
        delta = SecurityDelta(image)
        for i in range(b * per_batch, (b + 1) * per_batch):  # new topics a batch, of several principals and hosts
            binding = AclBinding.of(ResourceType.TOPIC, f"b{b}-{i % 50}", PatternType.LITERAL, f"User:u{i % 3}",
                                    f"10.0.0.{i % 4}", AclOperation.READ, AclPermissionType.ALLOW)
            delta.replay(AclCreated(f"id-{i}", binding))
        image = delta.apply(image.next_offset + per_batch)
    for t in range(0, 600, 7):
        name = f"b{t // per_batch}-{t % 50}"
        authorize(image.acls, f"User:u{t % 3}", "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, name)
        assert image.acls.describe(AclBindingFilter.of(ResourceType.TOPIC, name, PatternType.MATCH))
        assert image.acls.get(f"id-{t}") is not None
    made = list(image.acls.selection(AclBindingFilter.of(), whole_nodes=True))
    tables = {id(node.source): weakref.ref(node.source) for node, _ in made if type(node) is Lazy}
    assert len(tables) == 600 // per_batch
    was = gc.isenabled()
    gc.disable()
    try:
        del image, delta, made
        assert [ref() for ref in tables.values()] == [None] * len(tables)
    finally:
        if was:
            gc.enable()
