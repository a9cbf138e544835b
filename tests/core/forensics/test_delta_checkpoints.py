"""Delta checkpoint files: the net change from a full checkpoint's image to a later offset, checked as a full file is."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core import AclBindingFilter, PatternType, ResourceType
from secmeta.core.forensics.checkpoints import CheckpointFiles
from secmeta.core.forensics.timetravel import TimeTravel
from secmeta.core.store.view import StoreView
from secmeta.projections.delta_snapshot import DeltaState, SecurityDeltaSnapshot
from secmeta.projections.image import SecurityDelta, SecurityImage
from secmeta.projections.snapshot import snapshot_path, write_snapshot
from tests.core.forensics.test_timetravel_properties import answers, replayed, run
from tests.core.forensics.test_timetravel_properties import requests as store_requests
from tests.logkit import Clock, make_keyring
from tests.storekit import ADMIN, acl, store_at
from tests.storekit import replayed as replayed_store

# Every kind of state: the requests of the time-travel properties, and quotas and settings set and removed.
more_requests = st.one_of(
    store_requests,
    st.tuples(st.just("quota"), st.sampled_from(["alice", "bob"]), st.sampled_from([None, 1024.0, 2048.0])),
    st.tuples(st.just("setting"), st.sampled_from([None, "true", "false"])),
)
plans = st.lists(st.tuples(more_requests, st.sampled_from([0, 1, 2])), max_size=8)
# Between the full file and the delta: the ACLs on "orders" created before the full file removed, then one created
# again on it (another id), with whatever else the plan asks.
recreate = st.tuples(st.just("create"), st.lists(st.builds(acl, st.just("orders"), st.sampled_from(
    ["User:alice", "User:bob"])), min_size=1, max_size=2))
REMOVALS = ("delete", [AclBindingFilter.of(ResourceType.TOPIC, "orders", PatternType.ANY, None)])


def everything(view, image: SecurityImage) -> tuple:
    """What a reader can ask a view, the quotas and settings as the image holds them, and each token by id."""
    return (answers(view), dict(image.quotas), dict(image.settings),
            {t.token_id: t for t in image.tokens}, sorted(image.acls))


def cold(store, files: CheckpointFiles) -> TimeTravel:
    """A new process's TimeTravel, where replaying an event costs a second (any file is worth loading)."""
    travel = TimeTravel(store.log, interval=1, files=files)
    travel.replay_rate.seconds = 1.0
    return travel


def write_files(store, files: CheckpointFiles, full: int, deltas: list[int], read_back: bool = False) -> None:
    """The full file at ``full`` and delta files against it at ``deltas``: against its image as replayed, or with
    ``read_back`` against the file read back in place, as the fill writes them (then they record where the file's
    table holds the ACLs they remove or replace; the others record none, as files written before that did)."""
    events = list(store.log.read(0, store.log.end_offset))
    image = replayed(events[:full])
    files.write(image)
    if read_back:
        image = files.load(full)
        assert image is not None
    delta, at = SecurityDelta(image), full
    for offset in deltas:
        delta.replay_all(events[at:offset])
        files.write_delta(full, delta, offset)
        at = offset


@pytest.fixture(scope="module")
def keyring(tmp_path_factory):
    return make_keyring(tmp_path_factory.mktemp("keys"))


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=25,
          deadline=None)  # each file is written by a forked child
@given(before=plans.filter(bool), between=plans, after=plans, recreated=recreate, data=st.data())
def test_as_of_through_a_full_and_a_delta_file_answers_as_a_replay(keyring, before, between, after, recreated,
                                                                    data):
    """A full file at a batch end, delta files against it at later batch ends, and a cold process answering at every
    batch end from the first delta on: each answer (ACLs, SCRAM users, tokens, quotas, settings) is a replay's from
    the log's start, and it started from the newest delta at or before the point, whichever deltas exist; the ACLs
    created before the full file are removed and one is created again between it and the deltas.  The deltas are
    written against the full file read back (recording where its table holds the ACLs they remove) or against its
    image as replayed (recording none)."""
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        with store_at(Path(tmp) / "store", keyring, clock=clock) as store:
            run(store, clock, [(("create", [acl("orders"), acl("orders", "User:bob")]), 1), *before])
            full = store.log.end_offset
            run(store, clock, [(REMOVALS, 0), (recreated, 1), *between])
            middle = store.log.end_offset
            run(store, clock, after)
            end = store.log.end_offset
            ends = [b.next_offset for b in store.log.batches(full, end)]
            deltas = sorted(data.draw(st.sets(st.sampled_from([e for e in ends if e >= middle]), min_size=1,
                                              max_size=3)))
            files = CheckpointFiles(store.log, deltas=0)
            write_files(store, files, full, deltas, read_back=data.draw(st.booleans(), label="read back"))
            assert files.delta_offsets(full) == deltas
            events = list(store.log.read(0, end))
            for n in sorted({*ends, *(d + 1 for d in deltas if d < end)}):
                if n < deltas[0]:
                    continue
                travel = cold(store, files)
                image = travel.image_at(n)
                expected = replayed(events[:n])
                assert everything(StoreView(image, store.config), image) == everything(
                    StoreView(expected, store.config), expected), n
                assert max(d for d in deltas if d <= n) in travel.checkpoints  # it came through that delta
            assert files.problems == []


@pytest.fixture
def store(tmp_path, keyring):
    """12 requests of ACLs created (one kept per request) and deleted, 132 events."""
    clock = Clock()
    with store_at(tmp_path / "s", keyring, clock=clock) as s:
        for i in range(12):
            s.create_acls([acl(f"t{i}")] + [acl(f"c{i}-{j}") for j in range(5)], context=ADMIN)
            s.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, f"c{i}-{j}", PatternType.ANY, None)
                           for j in range(5)], context=ADMIN)
            clock.t += 1
        yield s


def test_a_fill_writes_delta_files_between_full_ones(store):
    """A fill leaves ``deltas`` delta files between two full files, ``delta_spacing`` events apart, each at a batch
    end and against the full file before it; a point past one starts from it."""
    files = CheckpointFiles(store.log, every=40, deltas=3)
    files.fill(SecurityImage.EMPTY)
    files.wait()
    fulls = files.offsets()
    assert fulls and all(store.log.link_at(o) is not None for o in fulls)
    step = files.delta_spacing(files.fill_spacing())
    for base, following in zip(fulls, [*fulls[1:], store.log.end_offset], strict=True):
        deltas = files.delta_offsets(base)
        assert bool(deltas) == (following - base >= step), base  # none past a full file at the log's end
        assert all(base < d < following or (d == following == store.log.end_offset) for d in deltas)
        assert all(b - a >= step for a, b in zip([base, *deltas], deltas, strict=False))
        assert all(store.log.link_at(d) is not None for d in deltas)
    n = files.delta_offsets(fulls[0])[-1] + 1
    travel = cold(store, files)
    assert travel.image_at(n) == replayed_store(store, n)
    assert files.delta_offsets(fulls[0])[-1] in travel.checkpoints


def test_delta_files_are_written_as_the_log_grows(store):
    """A live image a delta spacing past the newest file runs the fill, which writes the delta from the newest full
    file; a reopened store whose files cover its log writes none."""
    files = CheckpointFiles(store.log, every=40, deltas=3)
    files.fill(SecurityImage.EMPTY)
    files.wait()
    written = (files.offsets(), files.delta_offsets(files.offsets()[-1]))
    files.write_in_background(store.image)
    files.wait()
    assert (files.offsets(), files.delta_offsets(files.offsets()[-1])) == written  # nothing due
    store.create_acls([acl(f"late-{i}") for i in range(12)], context=ADMIN)
    assert files.delta_due()
    files.write_in_background(store.image)
    files.wait()
    assert files.delta_offsets(files.offsets()[-1])[-1] == store.log.end_offset
    travel = cold(store, files)
    assert travel.image_at(store.log.end_offset) == replayed_store(store, store.log.end_offset)


def test_thinning_a_full_file_deletes_its_delta_files_first(store):
    """Past ``max_files`` the full file thinned goes with its delta directory; a directory left without its full
    file (a process stopped between the two) is deleted by the next fill."""
    files = CheckpointFiles(store.log, every=5, max_files=3, deltas=2)
    write_files(store, files, 11, [22])
    write_files(store, files, 33, [44])
    write_files(store, files, 55, [66])
    assert files.delta_directory(33).exists()
    files.write(replayed_store(store, 77))  # 4 files: removing 11 leaves the smallest gap (0 -> 33)
    assert files.offsets() == [33, 55, 77]
    assert not files.delta_directory(11).exists() and files.delta_offsets(33) == [44]
    snapshot_path(files.directory, 33).unlink()
    files.fill(None)
    files.wait()
    assert not files.delta_directory(33).exists() and files.delta_offsets(55) == [66]


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("damage", ["flip", "truncate", "other key", "other base", "other offset"])
def test_a_bad_delta_file_is_reported_once_deleted_and_not_served(store, tmp_path, damage):
    """A delta file that is tampered with, cut short, signed under another key, holds the change from another
    base or sits at another offset is reported once and deleted; the point is built from the full file."""
    files = CheckpointFiles(store.log, deltas=0)
    write_files(store, files, 22, [66])
    path = snapshot_path(files.delta_directory(22), 66)
    if damage == "flip":
        _flip(path)
    elif damage == "truncate":
        _truncate(path)
    elif damage == "other key":
        net = SecurityDelta(replayed_store(store, 22))
        net.replay_all(store.log.read(22, 66))
        write_snapshot(path.parent, SecurityDeltaSnapshot(), DeltaState(22, 66, net.net()), next_offset=66,
                       link=store.log.link_at(66), timestamp_ms=0, keyring=make_keyring(tmp_path, "other.json"))
    elif damage == "other base":  # the change from 22, filed as the change from 11 (the full file there, not at 22)
        write_files(store, files, 11, [])
        files.delta_directory(11).mkdir()
        path = path.rename(snapshot_path(files.delta_directory(11), 66))
        snapshot_path(files.directory, 22).unlink()
    else:  # the change to 66, filed as the change to 77
        path = path.rename(snapshot_path(path.parent, 77))
    at = 88
    travel = cold(store, files)
    assert travel.image_at(at) == replayed_store(store, at)
    assert len(files.problems) == 1 and files.problems[0].startswith(path.name), files.problems
    assert not path.exists()
    assert all(o not in travel.checkpoints for o in (66, 77))
    assert cold(store, files).image_at(at - 1) == replayed_store(store, at - 1)
    assert len(files.problems) == 1  # reported once



def _another_stores_delta(tmp_path, keyring, rounds: int, offset: int):
    """The delta file at ``offset`` (on its full file at 22) of another store under the same key, whose ``rounds``
    rounds of one kept and five removed ACLs make a longer log than ``store``'s."""
    with store_at(tmp_path / "other", keyring, clock=Clock()) as other:
        for i in range(rounds):
            other.create_acls([acl(f"x{i}")] + [acl(f"y{i}-{j}") for j in range(5)], context=ADMIN)
            other.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, f"y{i}-{j}", PatternType.ANY, None)
                               for j in range(5)], context=ADMIN)
        theirs = CheckpointFiles(other.log, deltas=0)
        write_files(other, theirs, 22, [offset])
    return snapshot_path(theirs.delta_directory(22), offset)


def test_a_delta_file_past_the_logs_end_does_not_fit(store, tmp_path, keyring):
    """A delta file of a longer log of another store (same key) at an offset this log also ends a batch at: its link
    is not this log's, so it is refused as a full file would be."""
    source = _another_stores_delta(tmp_path, keyring, 12, 66)
    ours = CheckpointFiles(store.log, deltas=0)
    write_files(store, ours, 22, [])
    ours.delta_directory(22).mkdir()
    (ours.delta_directory(22) / source.name).write_bytes(source.read_bytes())
    travel = cold(store, ours)
    assert travel.image_at(70) == replayed_store(store, 70)
    [problem] = ours.problems
    assert problem.startswith(source.name) and "chain link differs" in problem
    assert not (ours.delta_directory(22) / source.name).exists()


def test_log_verify_checks_delta_files(store, keyring):
    """``secmeta log verify`` checks a delta file as it does a full one (CRC, HMAC, the link at its offset) and
    reports a damaged one."""
    from secmeta.core.cli.log_cmd import verify_store

    files = CheckpointFiles(store.log, deltas=0)
    write_files(store, files, 22, [66])
    report, checked, problems = verify_store(str(files.directory.parent), keyring)
    assert report.ok and checked == 2 and problems == []
    path = snapshot_path(files.delta_directory(22), 66)
    _flip(path)
    report, checked, problems = verify_store(str(files.directory.parent), keyring)
    assert checked == 1 and len(problems) == 1 and path.name in problems[0] and "delta" in problems[0]


def test_a_delta_of_a_files_net_change_replayed_further_applies_as_a_replay(store):
    """A delta made of a delta file's net change (``SecurityDelta.of_net``) onto the full file's image, then fed more
    events (among them the removal of an ACL the full file holds and the delta file does not name), applies to the
    image a replay from the log's start gives: what the file says of the ids the base holds is not taken for the
    ids recorded since."""
    store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "t0", PatternType.LITERAL, None)], context=ADMIN)
    files = CheckpointFiles(store.log, deltas=0)
    write_files(store, files, 22, [66])
    delta = SecurityDelta.of_net(files.load(22), files.load_delta(22, 66))
    end = store.log.end_offset
    delta.replay_all(store.log.read(66, end))
    assert "t0" not in {binding.pattern.name for _, binding in delta.apply(end).acls}
    assert delta.apply(end) == replayed_store(store, end)


def test_a_delta_file_past_a_held_answer_is_taken(store):
    """An answer held just past a full file does not hide that file's delta nearer a later point: the later point
    applies the delta onto the held file's image and replays from the delta's offset."""
    files = CheckpointFiles(store.log, deltas=0)
    write_files(store, files, 22, [66])
    travel = cold(store, files)
    assert travel.image_at(33) == replayed_store(store, 33)
    assert 66 not in travel.checkpoints
    assert travel.image_at(88) == replayed_store(store, 88)
    assert 66 in travel.checkpoints


def test_a_delta_file_past_the_logs_end_does_not_stop_the_fill(store, tmp_path, keyring):
    """A delta file past the log's end (another, longer history's, same key) names no point the fill has passed: the
    fill still writes the files the log is due; the file itself is refused when a point reaches it."""
    source = _another_stores_delta(tmp_path, keyring, 14, 143)
    files = CheckpointFiles(store.log, every=40, deltas=3)
    write_files(store, files, 22, [])
    files.delta_directory(22).mkdir()
    (files.delta_directory(22) / source.name).write_bytes(source.read_bytes())
    files.fill(None)
    files.wait()
    assert [d for d in files.delta_offsets(22) if d <= store.log.end_offset] and len(files.offsets()) > 1


def test_the_fill_replays_and_writes_in_a_forked_child(store, tmp_path, monkeypatch):
    """The fill's load, replay and delta files run off the writers' interpreter (issue 24: in a thread they held the
    GIL for a second a delta at 10M events): every event the fill replays is replayed in another process, and the
    files it writes are served."""
    import os

    from secmeta.core.forensics import checkpoints

    record = tmp_path / "pids"
    record.write_text("")
    original = checkpoints.SecurityDelta.replay_events

    def replay_events(self, first, events):
        with record.open("a") as out:
            out.write(f"{os.getpid()}\n")
        return original(self, first, events)

    monkeypatch.setattr(checkpoints.SecurityDelta, "replay_events", replay_events)
    files = CheckpointFiles(store.log, every=40, deltas=3)
    files.fill(SecurityImage.EMPTY)
    files.wait()
    pids = set(record.read_text().split())
    assert pids and str(os.getpid()) not in pids
    assert files.offsets() and files.delta_offsets(files.offsets()[0]) and files.problems == []
    n = files.delta_offsets(files.offsets()[0])[-1] + 1
    assert cold(store, files).image_at(n) == replayed_store(store, n)


def test_a_failed_fill_child_is_reported_and_records_nothing(store, monkeypatch, caplog):
    """A fill child that fails while writing a file (here after leaving its temporary file half written) is
    reported, leaves no partial file and no file that counts, and a later fill writes the files."""
    from secmeta.core.forensics import checkpoints
    from secmeta.projections.snapshot import partial_snapshot_path

    def failing(directory, codec, state, *, next_offset, **kwargs):
        Path(directory).mkdir(parents=True, exist_ok=True)
        partial_snapshot_path(Path(directory), next_offset).write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoints, "write_snapshot", failing)
    files = CheckpointFiles(store.log, every=40, deltas=3)
    with caplog.at_level("WARNING", logger="secmeta.checkpoints"):
        files.fill(SecurityImage.EMPTY)
        files.wait()
    assert any("not written" in r.getMessage() and "disk full" in r.getMessage() for r in caplog.records)
    assert files.offsets() == [] and not list(files.directory.rglob("*.tmp")) and not list(
        files.directory.rglob("*.avro"))
    monkeypatch.undo()
    files.fill(SecurityImage.EMPTY)
    files.wait()
    assert files.offsets() and files.problems == []


def test_a_fill_stopped_by_close_warns_nothing_and_leaves_no_file(store, monkeypatch, caplog):
    """Closing the files while a fill child runs kills the child (a CLI command's store closes at its end): that is
    no failure, so nothing is logged at WARNING (a CLI command printed it on stderr), and no partial file is left."""
    import time

    from secmeta.core.forensics import checkpoints

    def slow(directory, codec, state, *, next_offset, **kwargs):
        time.sleep(60)  # the child is killed by the close long before

    monkeypatch.setattr(checkpoints, "write_snapshot", slow)
    files = CheckpointFiles(store.log, every=40, deltas=3)
    with caplog.at_level("WARNING", logger="secmeta.checkpoints"):
        files.fill(SecurityImage.EMPTY)
        time.sleep(0.5)  # the child started (what it does then does not matter: it sleeps until killed)
        files.close()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert files.offsets() == [] and not list(files.directory.rglob("*.tmp"))


@pytest.mark.parametrize("held", [True, False], ids=["image there held", "nothing held"])
def test_a_policy_snapshot_at_a_full_files_offset_does_not_hide_the_files_delta(store, held):
    """A policy snapshot and a full checkpoint file at the same offset B, a delta file against B at D: the point D
    comes through the delta (no event replayed), whether the image at B is held already or not, and whichever of the
    two files at B is listed first (the policy snapshot has no delta files). Cost only: the answer is a replay's
    either way."""
    from secmeta.projections.image_snapshot import SecurityImageSnapshot

    end = store.log.end_offset
    ends = [b.next_offset for b in store.log.batches(0, end)]
    b, d = ends[6], ends[-2]
    events = list(store.log.read(0, end))
    write_snapshot(store.log.store.snapshot_dir, SecurityImageSnapshot(), replayed(events[:b]), next_offset=b,
                   link=store.log.link_at(b), timestamp_ms=0, keyring=store.log.keyring)
    files = CheckpointFiles(store.log, deltas=0)
    write_files(store, files, b, [d])
    travel = cold(store, files)
    if held:
        travel.image_at(b)
        assert b in travel.checkpoints
    replays: list[tuple[int, int]] = []
    replay = travel._replay

    def counted(image, start, n, lineage):
        replays.append((start, n))
        return replay(image, start, n, lineage)

    travel._replay = counted  # type: ignore[method-assign]
    image = travel.image_at(d)
    assert sum(n - start for start, n in replays) == 0, replays
    assert d in travel.checkpoints  # it came through the delta
    expected = replayed(events[:d])
    assert everything(StoreView(image, store.config), image) == everything(StoreView(expected, store.config),
                                                                            expected)
