"""Time travel's memory: images held in a byte-sized LRU, and the background fill that covers the log."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core import AclBindingFilter, InvalidValueError, PatternType, ResourceType, StoreConfig
from secmeta.core.forensics.timetravel import TimeTravel, step_bytes
from tests.logkit import Clock, make_keyring
from tests.storekit import ADMIN, acl, decoded_batches, replayed, store_at


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """120 events in 24 batches of 5: each batch creates four ACLs and deletes the third of them."""
    directory = tmp_path_factory.mktemp("memory")
    clock = Clock()
    with store_at(directory / "s", make_keyring(directory), clock=clock) as s:
        for i in range(24):
            s.create_acls([acl(f"t{i}-{j}") for j in range(4)], context=ADMIN)
            s.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, f"t{i}-2", PatternType.LITERAL)], context=ADMIN)
            clock.t += 1
        yield s


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=30)
@given(points=st.lists(st.integers(0, 120), min_size=1, max_size=12), budget=st.integers(0, 40_000))
def test_held_images_stay_within_the_byte_budget(store, points, budget):
    """Whatever is asked, the answers are replays of the prefix and the estimate of what is held stays in the budget."""
    travel = TimeTravel(store.log, interval=7, memory_bytes=budget)
    for n in points:
        assert dict(travel.image_at(n).acls) == dict(replayed(store, n).acls)
        assert travel.held_bytes() <= budget


def test_a_zero_budget_holds_only_the_empty_image(store):
    """memory_bytes=0 keeps nothing but the empty image (it costs nothing), and still answers."""
    travel = TimeTravel(store.log, interval=7, memory_bytes=0)
    assert dict(travel.image_at(100).acls) == dict(replayed(store, 100).acls)
    assert travel.checkpoints == [0]


def test_the_least_recently_used_image_goes_first(store):
    """With the budget full, a new answer evicts the image asked least recently, not one just used again."""
    travel = TimeTravel(store.log, interval=1000)
    travel.image_at(50)
    travel.image_at(100)
    travel.image_at(50)  # used again: now the most recent
    travel.memory_bytes = travel.held_bytes()
    travel.image_at(60)
    assert travel.checkpoints == [0, 50, 60]
    assert travel.held_bytes() <= travel.memory_bytes


def test_the_fill_leaves_a_checkpoint_every_interval_across_the_log(store, monkeypatch):
    """After the first answer, a background replay leaves checkpoints so that every point is a short replay away."""
    travel = TimeTravel(store.log, interval=10, fill=True)
    travel.image_at(33)
    travel.wait()
    held = travel.checkpoints
    assert held[0] == 0 and store.log.end_offset - held[-1] < 10 + 5  # an interval plus at most a batch
    assert max(b - a for a, b in zip(held, held[1:], strict=False)) < 10 + 5
    expected = dict(replayed(store, 117).acls)
    decoded = decoded_batches(store, monkeypatch)
    assert dict(travel.image_at(117).acls) == expected
    assert min(decoded) >= 117 - 15


def test_the_fill_stops_at_the_budget(store):
    """A fill that would pass the budget stops: what is held stays within it, and later points are still answered."""
    whole = TimeTravel(store.log, interval=10, fill=True)
    whole.image_at(1)
    whole.wait()
    budget = whole.held_bytes() // 3
    travel = TimeTravel(store.log, interval=10, fill=True, memory_bytes=budget)
    travel.image_at(1)
    travel.wait()
    assert travel.held_bytes() <= budget
    assert travel.checkpoints[-1] < whole.checkpoints[-1]
    assert dict(travel.image_at(119).acls) == dict(replayed(store, 119).acls)


def test_a_store_holds_past_images_within_its_configured_budget(tmp_path):
    """StoreConfig.time_travel_memory_bytes bounds the store's time travel; closing the store stops its fill."""
    clock = Clock()
    with store_at(tmp_path / "s", make_keyring(tmp_path), clock=clock, time_travel_memory_bytes=8000) as s:
        for i in range(30):
            s.create_acls([acl(f"t{i}")], context=ADMIN)
        for n in (12, 25):  # each image alone fits; both do not
            assert sorted(b.name for b in s.as_of(offset=n).describe_acls(AclBindingFilter.any(), context=ADMIN)) == \
                sorted(f"t{i}" for i in range(n))
        assert s.timetravel.held_bytes() <= 8000
        assert s.timetravel.checkpoints == [0, 25]
    assert s.timetravel._filler is None or not s.timetravel._filler.is_alive()


@pytest.mark.parametrize("value", [-1, True, "1000"])
def test_a_bad_memory_budget_is_refused_naming_the_setting(value):
    with pytest.raises(InvalidValueError, match="time_travel_memory_bytes"):
        StoreConfig(time_travel_memory_bytes=value)


def test_a_negative_budget_is_refused(store):
    with pytest.raises(InvalidValueError, match="at least 0 bytes"):
        TimeTravel(store.log, memory_bytes=-1)


def test_the_fill_spaces_checkpoints_as_densely_as_the_budget_allows(store):
    """With room for the whole log at ``interval``, that spacing; with less, a doubled one; never denser,
    and never sparser than 8 intervals (the fill then covers what fits from the start)."""
    assert TimeTravel(store.log, interval=10).fill_spacing(120) == 10
    assert TimeTravel(store.log, interval=10, memory_bytes=10).fill_spacing(120) == 80
    assert TimeTravel(store.log, interval=10, memory_bytes=10).fill_spacing(30) == 40
    budget = 120 // 20 * step_bytes(20, None)  # room for checkpoints every 20 events, not every 10
    assert TimeTravel(store.log, interval=10, memory_bytes=budget).fill_spacing(120) == 20


def test_with_a_fill_a_query_leaves_no_checkpoints_of_its_own(store):
    """Where the background fill leaves checkpoints, a query's replay keeps only its answer (no index
    update per interval on the way)."""
    travel = TimeTravel(store.log, interval=10, fill=True)
    travel.close()  # a closed TimeTravel starts no fill
    assert dict(travel.image_at(117).acls) == dict(replayed(store, 117).acls)
    assert travel.checkpoints == [0, 117]
