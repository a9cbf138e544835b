"""Points in time: as_of by offset and by time, checkpoints, snapshots, the cache and bad input."""

from __future__ import annotations

import inspect

import pytest

from secmeta.core import (
    AclBindingFilter,
    AclOperation,
    ResourceType,
    SecmetaError,
    SecurityStore,
)
from secmeta.core.errors import PointInTimeError
from secmeta.core.forensics.timetravel import TimeTravel
from secmeta.core.log import LogConfig
from secmeta.core.times import Point, as_point, parse_offset, parse_time
from secmeta.projections.snapshot import SnapshotPolicy
from tests.logkit import Clock
from tests.storekit import ADMIN, acl, decoded_batches

T0 = 1_800_000_000_000


def names(view) -> list[str]:
    return sorted(b.name for b in view.describe_acls(AclBindingFilter.any(), context=ADMIN))


def fill(store: SecurityStore, clock: Clock, requests: int, per_request: int = 1) -> None:
    """``requests`` create requests one second apart, ACLs named t0, t1, ..."""
    n = 0
    for _ in range(requests):
        store.create_acls([acl(f"t{n + i}") for i in range(per_request)], context=ADMIN)
        n += per_request
        clock.t += 1


# -- as_of by offset ----------------------------------------------------------------------


def test_as_of_offset_shows_the_first_n_events(open_store, clock):
    """as_of(offset=N) holds exactly the ACLs created by events [0, N)."""
    store = open_store()
    fill(store, clock, 5)
    assert names(store.as_of(offset=3)) == ["t0", "t1", "t2"]


def test_as_of_offset_zero_is_empty(open_store, clock):
    """as_of(offset=0) is the empty store."""
    store = open_store()
    fill(store, clock, 2)
    assert names(store.as_of(offset=0)) == []


def test_as_of_the_end_offset_is_the_live_image(open_store, clock):
    """as_of at the log's end returns the published image itself."""
    store = open_store()
    fill(store, clock, 2)
    assert store.as_of(offset=store.log.end_offset).image is store.image


def test_as_of_offset_inside_a_batch_cuts_the_batch(open_store, clock):
    """An offset in the middle of a request's batch includes only the events before it."""
    store = open_store()
    fill(store, clock, 1, per_request=4)
    assert names(store.as_of(offset=2)) == ["t0", "t1"]


def test_as_of_view_reports_its_offset_and_time(open_store, clock):
    """A view knows how many events it holds and the time of the last one."""
    store = open_store()
    fill(store, clock, 3)
    view = store.as_of(offset=2)
    assert (view.offset, view.timestamp_ms) == (2, T0 + 1000)


def test_as_of_authorize_answers_as_the_store_did(open_store, clock):
    """authorize on a past view answers from the ACLs of that time."""
    store = open_store()
    fill(store, clock, 1)
    store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "t0")], context=ADMIN)
    args = ("User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "t0")
    assert store.as_of(offset=1).authorize(*args) and not store.authorize(*args)


# -- as_of by time -----------------------------------------------------------------------


def test_as_of_time_includes_every_event_at_or_before_it(open_store, clock):
    """as_of(timestamp_ms=T) includes the events stamped T and none stamped later."""
    store = open_store()
    fill(store, clock, 4)
    assert names(store.as_of(timestamp_ms=T0 + 2000)) == ["t0", "t1", "t2"]


def test_as_of_time_between_events_is_the_earlier_state(open_store, clock):
    """A time between two commits shows the state after the earlier one."""
    store = open_store()
    fill(store, clock, 3)
    assert names(store.as_of(timestamp_ms=T0 + 1500)) == ["t0", "t1"]


def test_as_of_time_now_is_the_current_state(open_store, clock):
    """The clock's current time shows every event."""
    store = open_store()
    fill(store, clock, 3)
    assert names(store.as_of(timestamp_ms=int(clock.t * 1000))) == ["t0", "t1", "t2"]


def test_as_of_time_between_creation_and_first_event_is_empty(open_store, clock):
    """A time after the store began but before its first event shows the empty store."""
    store = open_store()
    clock.t = store.log.store.created_ms / 1000 + 100
    fill(store, clock, 1)
    assert names(store.as_of(timestamp_ms=store.log.store.created_ms + 1)) == []


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("point", [
    {"offset": 1, "timestamp_ms": T0},
    {},
])
def test_as_of_needs_exactly_one_point(open_store, point):
    """Giving both an offset and a time, or neither, is a PointInTimeError."""
    store = open_store()
    with pytest.raises(PointInTimeError, match="exactly one"):
        store.as_of(**point)


def test_as_of_takes_its_point_by_keyword_only(open_store, clock):
    """Review 28, finding 9: the signature says what as_of accepts. A bare positional argument (which one would it
    be?) is a TypeError before anything is read; by keyword, either form answers the same view."""
    store = open_store()
    fill(store, clock, 2)
    with pytest.raises(TypeError):
        store.as_of(1)
    assert {p.name: p.kind for p in inspect.signature(SecurityStore.as_of).parameters.values() if p.name != "self"} \
        == {"offset": inspect.Parameter.KEYWORD_ONLY, "timestamp_ms": inspect.Parameter.KEYWORD_ONLY}
    by_offset = store.as_of(offset=1)
    assert store.as_of(timestamp_ms=by_offset.timestamp_ms).offset == by_offset.offset == 1


def test_as_of_offset_past_the_end_is_refused(open_store, clock):
    """An offset beyond the log's end names the end in its error."""
    store = open_store()
    fill(store, clock, 2)
    with pytest.raises(PointInTimeError, match="past the end of the log \\(2 events\\)"):
        store.as_of(offset=3)


def test_as_of_negative_offset_is_refused(open_store):
    """A negative offset is a PointInTimeError."""
    store = open_store()
    with pytest.raises(PointInTimeError, match="negative"):
        store.as_of(offset=-1)


def test_as_of_non_integer_offset_is_refused(open_store):
    """An offset that is not an int is a PointInTimeError, not a TypeError."""
    store = open_store()
    with pytest.raises(PointInTimeError, match="integer"):
        store.as_of(offset="3")  # type: ignore[arg-type]


def test_as_of_time_before_the_store_began_is_refused(open_store, clock):
    """A time before the store's creation and first event is a PointInTimeError."""
    store = open_store()
    fill(store, clock, 1)
    with pytest.raises(PointInTimeError, match="before the store began"):
        store.as_of(timestamp_ms=1000)


def test_as_of_time_in_the_future_is_refused(open_store, clock):
    """A time after the clock's now is a PointInTimeError."""
    store = open_store()
    with pytest.raises(PointInTimeError, match="in the future"):
        store.as_of(timestamp_ms=int(clock.t * 1000) + 1)


def test_point_in_time_errors_are_secmeta_and_value_errors():
    """PointInTimeError is caught by SecmetaError and ValueError handlers alike."""
    assert issubclass(PointInTimeError, SecmetaError) and issubclass(PointInTimeError, ValueError)


# -- points and parsing --------------------------------------------------------------------


def test_as_point_accepts_an_int_a_point_and_a_mapping():
    """Offsets, Points and {"timestamp_ms": T} all name points."""
    assert as_point(5) == Point.at_offset(5)
    assert as_point(Point.at_time(7)) == Point(timestamp_ms=7)
    assert as_point({"timestamp_ms": 7}) == Point.at_time(7)


def test_as_point_refuses_unknown_mapping_keys():
    """A mapping with another key is refused with the key named."""
    with pytest.raises(PointInTimeError, match="when"):
        as_point({"when": 3})


def test_as_point_refuses_a_float():
    """A float is not a point."""
    with pytest.raises(PointInTimeError):
        as_point(1.5)


@pytest.mark.parametrize("text, ms", [
    ("1700000000000", 1_700_000_000_000),
    ("2024-05-01T14:00:00Z", 1_714_572_000_000),
    ("2024-05-01T16:00:00+02:00", 1_714_572_000_000),
    ("2024-05-01T14:00:00.250Z", 1_714_572_000_250),
    (" 42 ", 42),
])
def test_parse_time_reads_iso_with_zone_and_epoch_ms(text, ms):
    """parse_time reads ISO-8601 with a zone and epoch milliseconds."""
    assert parse_time(text) == ms


def test_parse_time_refuses_a_time_without_zone():
    """An ISO time without a zone is ambiguous and refused."""
    with pytest.raises(PointInTimeError, match="no zone"):
        parse_time("2024-05-01T14:00:00")


@pytest.mark.parametrize("text", ["yesterday", "2024-13-01T00:00:00Z", "", "-5", "1.5"])
def test_parse_time_refuses_malformed_text(text):
    """Malformed times raise PointInTimeError naming the accepted forms."""
    with pytest.raises(PointInTimeError, match="ISO-8601"):
        parse_time(text)


def test_parse_offset_refuses_negative_and_text():
    """parse_offset accepts digits only."""
    assert parse_offset("12") == 12
    for bad in ("-1", "x", "1e3"):
        with pytest.raises(PointInTimeError):
            parse_offset(bad)


# -- checkpoints, snapshots, cache -------------------------------------------------------------


def test_replay_leaves_checkpoints_every_interval(open_store, clock):
    """The first long replay leaves a checkpoint about every ``interval`` events (and holds its answer)."""
    store = open_store()
    fill(store, clock, 10)
    travel = TimeTravel(store.log, interval=3)
    travel.image_at(10)
    assert travel.checkpoints == [0, 3, 6, 9, 10]


def test_image_at_from_a_checkpoint_equals_a_replay_from_the_start(open_store, clock):
    """An image built from a checkpoint holds the same ACLs as one replayed from the start."""
    store = open_store()
    fill(store, clock, 12)
    travel = TimeTravel(store.log, interval=4)
    travel.image_at(12)
    fresh = TimeTravel(store.log, interval=100)
    assert dict(travel.image_at(11).acls) == dict(fresh.image_at(11).acls)


def test_live_commits_become_checkpoints(open_store, clock):
    """The store keeps its published image as a checkpoint every interval events."""
    store = open_store()
    store.timetravel.interval = 2
    fill(store, clock, 5)
    assert store.timetravel.checkpoints == [0, 2, 4]


def test_a_recent_image_is_the_starting_point_for_a_later_one(open_store, clock, monkeypatch):
    """After image_at(5), image_at(7) replays only events 5 and 6."""
    store = open_store()
    fill(store, clock, 10)
    travel = TimeTravel(store.log, interval=100)
    travel.image_at(5)
    decoded = decoded_batches(store, monkeypatch)
    assert names_of(travel.image_at(7)) == [f"t{i}" for i in range(7)]
    assert decoded == [5, 6]


def test_recent_images_are_cached(open_store, clock):
    """Asking for the same point twice returns the same image object."""
    store = open_store()
    fill(store, clock, 3)
    assert store.as_of(offset=1).image is store.as_of(offset=1).image


def test_a_snapshot_serves_as_a_starting_point(open_store, clock, monkeypatch):
    """When replaying from the nearest image in memory is estimated to cost more than loading the newest
    snapshot before the point and replaying from there, the snapshot is loaded instead."""
    store = open_store(snapshot_policy=SnapshotPolicy(every_events=5, every_bytes=None))
    fill(store, clock, 7)
    store.wait_for_snapshots()
    travel = TimeTravel(store.log, interval=1)
    travel.replay_rate.seconds = 1.0  # replaying an event costs a second, loading a byte 0.1 us
    decoded = decoded_batches(store, monkeypatch)
    assert names_of(travel.image_at(6)) == [f"t{i}" for i in range(6)]
    assert travel.checkpoints == [0, 5, 6]
    assert decoded == [5]


def test_a_near_image_in_memory_is_preferred_to_a_snapshot(open_store, clock, monkeypatch):
    """When loading the snapshot is estimated to cost more than replaying from the empty image, it is not read."""
    store = open_store(snapshot_policy=SnapshotPolicy(every_events=5, every_bytes=None))
    fill(store, clock, 7)
    store.wait_for_snapshots()
    travel = TimeTravel(store.log, interval=1)
    travel.load_rate.seconds = 1.0  # loading a byte costs a second
    decoded = decoded_batches(store, monkeypatch)
    assert names_of(travel.image_at(6)) == [f"t{i}" for i in range(6)]
    assert decoded == list(range(6))


def names_of(image) -> list[str]:
    return sorted(b.name for _, b in image.acls)


def test_deleted_history_is_refused(open_store, clock):
    """An offset before a truncated log's start (segments deleted after a snapshot) is a PointInTimeError."""
    store = open_store(log=LogConfig(segment_bytes=1024), delete_covered_segments=True,
                       snapshot_policy=SnapshotPolicy(every_events=None, every_bytes=None))
    fill(store, clock, 30)
    store.snapshot()
    assert store.log.start_offset > 1
    with pytest.raises(PointInTimeError, match="before the log's start"):
        store.as_of(offset=1)


def test_the_log_start_without_an_image_there_is_refused_saying_so(open_store, clock):
    """Retention moved the start to a segment's base, short of the snapshot that covered the deletion: the
    image at the start itself cannot be rebuilt, and the error says that nothing exactly there holds it
    (not that the offset is before the start)."""
    store = open_store(log=LogConfig(segment_bytes=1024), delete_covered_segments=True,
                       snapshot_policy=SnapshotPolicy(every_events=None, every_bytes=None))
    fill(store, clock, 30)
    store.snapshot()
    start = store.log.start_offset
    assert 0 < start < 30
    with pytest.raises(PointInTimeError, match=rf"offset {start} cannot be built: retention deleted the events "
                                               rf"before offset {start}.* exactly at the log's start"):
        TimeTravel(store.log).image_at(start)
    with pytest.raises(PointInTimeError, match=rf"between the log's start \(offset {start}\) and offset {start + 1}"):
        TimeTravel(store.log).image_at(start + 1)


def test_truncated_log_is_served_from_its_snapshot(open_store, clock):
    """After segments are deleted, points after the log's start are rebuilt from the snapshot."""
    store = open_store(log=LogConfig(segment_bytes=1024), delete_covered_segments=True,
                       snapshot_policy=SnapshotPolicy(every_events=None, every_bytes=None))
    fill(store, clock, 30)
    store.snapshot()
    store.create_acls([acl("late")], context=ADMIN)
    travel = TimeTravel(store.log)
    assert names_of(travel.image_at(31)) == sorted([f"t{i}" for i in range(30)] + ["late"])
