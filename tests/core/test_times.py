"""The one time module (secmeta.core.times), and the store's clock as the source of every timestamp it writes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.core import AclBindingFilter, PatternType, ResourceType
from secmeta.core.errors import PointInTimeError
from secmeta.core.forensics.checkpoints import CheckpointFiles
from secmeta.core.log import LogConfig
from secmeta.core.log.anchor import read_anchor
from secmeta.core.times import (
    Point,
    datetime_to_ms,
    format_datetime,
    format_ms,
    ms_to_datetime,
    now_ms,
    parse_time,
    with_times,
)
from secmeta.events.keyring import Keyring
from secmeta.projections.image import SecurityImage
from secmeta.projections.snapshot import list_snapshots, read_snapshot_info
from tests.logkit import Clock
from tests.storekit import ADMIN, acl, store_at

# Every millisecond a datetime can hold (years 1 to 9999).
MS = st.integers(min_value=datetime_to_ms(datetime(1, 1, 1, tzinfo=UTC)),
                 max_value=datetime_to_ms(datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)))


@given(MS)
def test_milliseconds_survive_a_round_trip_through_datetimes_and_text(ms):
    """ms -> datetime -> ms and ms -> ISO text -> ms give back the same millisecond, before the epoch too."""
    assert datetime_to_ms(ms_to_datetime(ms)) == ms
    assert parse_time(format_ms(ms)) == ms


@given(MS, st.integers(min_value=-14 * 60, max_value=14 * 60))
def test_a_time_in_any_zone_is_shown_as_the_same_instant_in_utc(ms, offset_minutes):
    """An aware datetime in any zone formats as its UTC instant, ending in Z."""
    moment = ms_to_datetime(ms)
    try:
        local = moment.astimezone(timezone(timedelta(minutes=offset_minutes)))
    except OverflowError:
        return  # the instant is outside the years that zone's clock can show
    assert format_datetime(local) == format_ms(ms)
    assert format_ms(ms).endswith("Z")


def test_a_naive_datetime_is_taken_as_utc():
    """Spark hands back naive datetimes in UTC: they mean the UTC instant, when formatted and converted."""
    naive = datetime(2024, 5, 1, 14, 0, 0, 123000)
    assert format_datetime(naive) == "2024-05-01T14:00:00.123Z"
    assert datetime_to_ms(naive) == parse_time("2024-05-01T14:00:00.123Z")


def test_a_zoned_time_names_one_instant():
    """"16:00+02:00" and "14:00Z" are the same millisecond, shown in UTC."""
    assert parse_time("2024-05-01T16:00:00+02:00") == parse_time("2024-05-01T14:00:00Z") == 1_714_572_000_000
    assert format_ms(1_714_572_000_000) == "2024-05-01T14:00:00.000Z"


def test_a_time_outside_the_datetime_years_is_still_shown():
    """Milliseconds no datetime can hold (a forged or far-future expiry) show as a number, never an error."""
    assert format_ms(2**62) == f"{2**62} ms"
    assert str(Point.at_time(2**62)) == f"time {2**62} ms"


def test_a_time_without_a_zone_is_refused():
    with pytest.raises(PointInTimeError, match="no zone"):
        parse_time("2024-05-01T14:00:00")


def test_now_ms_reads_the_clock_given():
    assert now_ms(Clock(1_700_000_000.25)) == 1_700_000_000_250


# -- the store's clock stamps everything ------------------------------------------------------------


def test_a_store_with_a_fixed_clock_stamps_everything_with_its_time(tmp_path):
    """Events, the store directory's creation, key creation, checkpoints, snapshots and the retention
    anchor all carry the configured clock's time (2023-11-14), never the machine's."""
    clock = Clock(1_700_000_000.5)
    stamped = 1_700_000_000_500
    key_file = tmp_path / "keys.json"
    key_id = Keyring.generate_file(key_file, clock=clock)
    ring = Keyring.from_file(key_file)
    with store_at(tmp_path / "s", ring, clock=clock, log=LogConfig(segment_bytes=1024),
                  delete_covered_segments=True) as store:
        for i in range(30):
            store.create_acls([acl(f"t{i}")], context=ADMIN)
        store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "t0", PatternType.ANY, None)], context=ADMIN)
        files = CheckpointFiles(store.log, every=10)
        files.fill(SecurityImage.EMPTY)
        files.wait()
        events = list(store.log.read())
        history = list(store.history())
        store.snapshot()  # and, with delete_covered_segments, retention behind an anchor
        store_id = store.log.store.store_id
        anchor = read_anchor(store.log.store.log_dir, store_id, ring)
        snapshots = [read_snapshot_info(p) for p in list_snapshots(store.log.store.snapshot_dir)]
        checkpoints = [read_snapshot_info(p) for p in list_snapshots(files.directory)]
    assert {e.timestamp_ms for e in events} == {stamped}
    assert {h.timestamp_ms for h in history} == {stamped}
    assert json.loads((tmp_path / "s" / "secmeta.json").read_text())["created_ms"] == stamped
    assert [k["created_ms"] for k in json.loads(key_file.read_text())["keys"]] == [stamped]
    assert key_id.startswith("k-20231114-")
    assert checkpoints and {c.timestamp_ms for c in checkpoints} == {stamped}
    assert snapshots and {s.timestamp_ms for s in snapshots} == {stamped}
    assert anchor is not None and anchor.time_ms == stamped


@given(st.integers(min_value=0, max_value=253_402_300_799_999), st.integers(min_value=1, max_value=10**9))
def test_with_times_puts_iso_8601_beside_every_time_and_leaves_durations(ms, period):
    """Every epoch-ms time field of a JSON answer, however deep, gets its ISO-8601 Z field beside it (the ms
    field kept); a duration ending in _ms is no time and gets none."""
    answer = {"timestamp_ms": ms, "tokens": [{"issue_timestamp_ms": ms, "renew_period_ms": period}],
              "interval": {"start_ms": ms, "end_ms": None}}
    shown = with_times(answer)
    for iso in (shown["time"], shown["tokens"][0]["issue_time"], shown["interval"]["start_time"]):
        assert iso.endswith("Z") and parse_time(iso) == ms
    assert shown["interval"]["end_time"] is None and shown["tokens"][0]["renew_period_ms"] == period
    assert set(shown["tokens"][0]) == {"issue_timestamp_ms", "issue_time", "renew_period_ms"}
