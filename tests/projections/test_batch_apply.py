"""A batch of events applied to an image (the route a follower and a write take) gives the image one write at a time
gives, and the image a replay gives.

A batch with many ACLs on patterns the image does not hold groups them into columns in bulk
(``AclTable.of_rows``, as a replay from empty does) and adds their nodes as the table's; ACLs on patterns it
holds join their nodes.  The logs are random: creations and deletions interleaved, deletions of ACLs created
earlier in the same batch, ids reused, patterns shared by many principals (one group, a few, many) and new
patterns in every batch; each is cut into random batches, and the bulk route is taken from a random threshold
(1: every batch that adds a new pattern).
"""

from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from scripts.bench import shapes
from secmeta.events.records import AclCreated, AclDeleted, Envelope, replay_form
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections import acls as acls_module
from secmeta.projections import layered_map
from secmeta.projections.authorizer import authorize
from secmeta.projections.image import SecurityDelta, SecurityImage, SecurityProjection
from tests.projections.test_shape_properties import replayed as shape_replayed
from tests.projections.test_shape_properties import snapshot_loaded

PROJECTION = SecurityProjection()
Op = AclOperation

principals = st.sampled_from([f"User:u{i}" for i in range(11)] + ["User:*"])
bindings = st.builds(
    AclBinding.of,
    st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP]),
    st.sampled_from(["a", "ab", "b", "c", "cd", "*"]),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    principals,
    st.sampled_from(["*", "*", "10.0.0.1", "10.0.0.0/8"]),
    st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE]),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)
steps = st.lists(st.one_of(st.tuples(st.just("create"), st.integers(0, 60), bindings),
                           st.tuples(st.just("delete"), st.integers(0, 1000))), min_size=1, max_size=120)


def events_of(script, *, reuse: bool = False) -> list:
    """The log of a script: a creation of an id not live (with ``reuse``, of one of 40 ids, live or not: the later
    ACL replaces the earlier, as a delta records it), or a deletion of a live ACL (picked by number)."""
    live: dict[str, AclBinding] = {}
    events = []
    for step in script:
        if step[0] == "create":
            acl_id = f"id{step[1] % 40 if reuse else step[1]}"
            if acl_id in live and not reuse:
                continue
            live[acl_id] = step[2]
            events.append(AclCreated(acl_id, step[2]))
        elif live:
            acl_id = sorted(live)[step[1] % len(live)]
            events.append(AclDeleted(acl_id, live.pop(acl_id)))
    return events


def envelopes(events) -> list[Envelope]:
    return [Envelope(offset, 1_700_000_000_000 + offset, "User:admin", "10.0.0.1", f"r{offset}", event)
            for offset, event in enumerate(events)]


def batched(log: list[Envelope], cuts) -> SecurityImage:
    """The image after the log applied in batches cut at ``cuts`` (one ``SecurityProjection.apply`` each)."""
    bounds = sorted({0, len(log), *(c for c in cuts if c < len(log))})
    image = SecurityImage.EMPTY
    for start, end in zip(bounds, bounds[1:], strict=False):
        image = PROJECTION.apply(image, log[start:end])
    return image


def replayed(events) -> SecurityImage:
    """The image a replay from empty makes (creations as the log decoder gives them: rows)."""
    delta = SecurityDelta(SecurityImage.EMPTY)
    delta.replay_events(0, list(map(replay_form, events)))
    return delta.apply(len(events))


def answers(image: SecurityImage) -> list[bool]:
    return [authorize(image.acls, principal, host, op, resource_type, name)
            for principal in ("User:u0", "User:u5", "User:u10", "User:other")
            for host in ("10.0.0.1", "10.1.2.3", "192.168.0.1")
            for op in (Op.READ, Op.WRITE, Op.DESCRIBE)
            for resource_type in (ResourceType.TOPIC, ResourceType.GROUP)
            for name in ("a", "ab", "abc", "b", "cde", "z")]


@settings(max_examples=150)
@given(steps, st.lists(st.integers(1, 120), max_size=6), st.sampled_from([1, 2, 8]), st.sampled_from([1, 4096]))
def test_batches_give_the_write_by_write_and_the_replayed_image(script, cuts, table_from, fold_floor):
    log = envelopes(events_of(script))
    with patch.object(layered_map, "_FOLD_FLOOR", fold_floor):
        with patch.object(acls_module, "TABLE_FROM", table_from):
            bulk = batched(log, cuts)
        one_by_one = batched(log, range(len(log)))
    replay = replayed([env.event for env in log])
    assert bulk == one_by_one == replay
    assert sorted(bulk.acls) == sorted(one_by_one.acls) == sorted(replay.acls)
    assert {acl_id: bulk.acls.get(acl_id) for acl_id, _ in one_by_one.acls} == dict(one_by_one.acls)
    assert answers(bulk) == answers(one_by_one) == answers(replay)


def test_a_batch_on_a_held_pattern_and_on_new_ones_gives_each_acl_its_place():
    """Many ACLs in one batch, some on a pattern the image holds (they join its node), the rest new; a deletion
    of one created in the same batch; then a write that edits a node the batch made."""
    def acl(name, principal, host="*", op=Op.READ):
        return AclBinding.of(ResourceType.TOPIC, name, PatternType.LITERAL, principal, host, op,
                             AclPermissionType.ALLOW)

    first = [AclCreated("held", acl("orders", "User:a"))]
    batch = [AclCreated(f"n{i}", acl(f"t{i % 40}", f"User:p{i % 7}", "10.0.0.1" if i % 3 else "*"))
             for i in range(200)]
    batch += [AclCreated("joins", acl("orders", "User:b")), AclDeleted("n7", batch[7].binding)]
    later = [AclCreated("edit", acl("t3", "User:p3", op=Op.WRITE)), AclDeleted("n3", batch[3].binding)]
    # (each of t0..t39 holds 5 ACLs of 5 principals: n7 is User:p0's on t7 from 10.0.0.1, n3 User:p3's on t3)
    log = envelopes(first + batch + later)
    image = batched(log, [1, 1 + len(batch)])
    assert image == batched(log, range(len(log))) == replayed([env.event for env in log])
    assert authorize(image.acls, "User:b", "10.9.9.9", Op.READ, ResourceType.TOPIC, "orders")
    assert not authorize(image.acls, "User:p0", "10.0.0.1", Op.READ, ResourceType.TOPIC, "t7")  # n7 deleted
    assert authorize(image.acls, "User:p0", "10.0.0.1", Op.READ, ResourceType.TOPIC, "t0")
    assert authorize(image.acls, "User:p3", "10.0.0.1", Op.WRITE, ResourceType.TOPIC, "t3")
    assert not authorize(image.acls, "User:p3", "10.0.0.1", Op.READ, ResourceType.TOPIC, "t3")  # n3 deleted
    assert image.acls.get("n7") is None and image.acls.get("n3") is None and len(image.acls) == 1 + 200 + 1 - 1 + 1 - 1


shape_logs = st.tuples(st.sampled_from(shapes.NAMES), st.integers(1, 300), st.integers(0, 2**16))


def rows_batched(events, base: SecurityImage, cuts) -> SecurityImage:
    """``base`` with ``events`` (following it) applied in batches cut at ``cuts``, each as the follower applies a
    batch: one delta, creations as rows."""
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    image = base
    for start, end in zip(bounds, bounds[1:], strict=False):
        delta = SecurityDelta(image)
        delta.replay_events(image.next_offset, list(map(replay_form, events[start:end])))
        image = delta.apply(image.next_offset + end - start)
    return image


@settings(max_examples=25, deadline=None)
@given(shape_logs, st.integers(0, 200), st.lists(st.integers(1, 400), max_size=5), st.sampled_from([1, 8, 64]))
def test_batches_onto_a_snapshot_loaded_image_of_every_shape_give_the_replayed_image(log, cut, cuts, table_from):
    """On the benchmark's shapes: batches applied through the route onto a snapshot-loaded image of the log's
    first events (or an empty one) give the replayed image, and so does a snapshot of the result loaded again
    (a follower's checkpoint of an image the route made)."""
    shape, n, seed = log
    events = [event for request in shapes.shape_events(shape, n, seed) for event in request]
    cut = min(cut, len(events))
    base = snapshot_loaded(shape_replayed([events[:cut]])) if cut else SecurityImage.EMPTY
    with patch.object(acls_module, "TABLE_FROM", table_from):
        image = rows_batched(events[cut:], base, cuts)
    replay = shape_replayed([events])
    assert image == replay and sorted(image.acls) == sorted(replay.acls)
    assert snapshot_loaded(image) == replay


@settings(max_examples=80)
@given(steps, st.lists(st.integers(1, 120), max_size=8))
def test_a_replay_of_many_batches_into_one_delta_gives_the_write_by_write_image(script, cuts):
    """Replay reads batch after batch into one delta (``load_state``): runs of creations recorded as they come,
    then deletions and creations of ids those runs hold, reused ids (the later ACL wins), and reads of the
    delta between batches give the image of one write at a time."""
    events = events_of(script, reuse=True)
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    delta = SecurityDelta(SecurityImage.EMPTY)
    for start, end in zip(bounds, bounds[1:], strict=False):
        delta.replay_events(start, list(map(replay_form, events[start:end])))
        if start % 3 == 1:  # a read between batches sees every ACL recorded so far
            last = events[end - 1]
            assert delta.acls_delta().get(last.acl_id) == (last.binding if isinstance(last, AclCreated) else None)
    image = delta.apply(len(events))
    one_by_one = batched(envelopes(events), range(len(events)))
    assert image == one_by_one
    assert sorted(image.acls) == sorted(one_by_one.acls)
    assert answers(image) == answers(one_by_one)
