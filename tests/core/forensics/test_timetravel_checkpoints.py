"""Persistent time-travel checkpoints: a cold process starts from the nearest file; bad files are never served."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core import AclBindingFilter, PatternType, ResourceType
from secmeta.core.errors import PointInTimeError
from secmeta.core.forensics.checkpoints import CheckpointFiles
from secmeta.core.forensics.timetravel import TimeTravel
from secmeta.core.log import LogConfig
from secmeta.projections.acls import AclsImage
from secmeta.projections.image import SecurityImage
from secmeta.projections.snapshot import SnapshotPolicy
from tests.logkit import Clock
from tests.storekit import ADMIN, acl, decoded_batches, replayed, store_at


@pytest.fixture
def store(tmp_path, keyring):
    clock = Clock()
    with store_at(tmp_path / "s", keyring, clock=clock) as s:
        for i in range(12):  # 11 events per step (one ACL kept, five created and deleted): 132 events
            s.create_acls([acl(f"t{i}")] + [acl(f"c{i}-{j}") for j in range(5)], context=ADMIN)
            s.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, f"c{i}-{j}", PatternType.ANY, None)
                           for j in range(5)], context=ADMIN)
            clock.t += 1
        yield s


def filled(store, every: int = 40, deltas: int = 0) -> CheckpointFiles:
    """Checkpoint files every ``every`` events, written by a fill (no delta files unless ``deltas``)."""
    files = CheckpointFiles(store.log, every=every, deltas=deltas)
    files.fill(SecurityImage.EMPTY)
    files.wait()
    return files


def cold(store, files: CheckpointFiles) -> TimeTravel:
    """A new process's TimeTravel, on a machine where replaying an event costs a second (so any file is worth loading)."""
    travel = TimeTravel(store.log, interval=2, files=files)
    travel.replay_rate.seconds = 1.0
    return travel


def test_fill_writes_a_checkpoint_file_every_few_events(store):
    """Opening leaves files about every ``every`` events, each at the end of a batch."""
    offsets = filled(store).offsets()
    assert [b - a >= 40 for a, b in zip([0, *offsets], offsets, strict=False)] == [True] * len(offsets)
    assert all(store.log.link_at(o) is not None for o in offsets)  # batch ends
    assert store.log.end_offset - offsets[-1] < 40


def test_a_cold_process_starts_from_the_nearest_file(store, monkeypatch):
    """A new TimeTravel answers as_of(N) as a replay of [0, N) does, decoding only the events after the file."""
    files = filled(store)
    expected = dict(replayed(store, 120).acls)
    seen = decoded_batches(store, monkeypatch)
    travel = cold(store, files)
    assert dict(travel.image_at(120).acls) == expected
    assert min(seen) >= max(o for o in files.offsets() if o <= 120)  # the nearest file, then a short replay


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_file_is_reported_once_deleted_and_not_served(store, monkeypatch, damage):
    """A flipped byte or a cut-short file fails its CRC/HMAC: reported, deleted, the answer still right."""
    files = filled(store)
    path = files.directory / f"snapshot-{max(o for o in files.offsets() if o <= 120):020d}.avro"
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x01
    else:
        del data[len(data) // 2:]
    path.write_bytes(bytes(data))
    travel = cold(store, files)
    assert dict(travel.image_at(120).acls) == dict(replayed(store, 120).acls)
    assert len(files.problems) == 1 and files.problems[0].startswith(path.name)
    assert not path.exists()
    assert dict(cold(store, files).image_at(119).acls) == dict(replayed(store, 119).acls)
    assert len(files.problems) == 1  # reported once


def test_a_file_of_another_store_does_not_fit_the_chain(store, tmp_path, keyring):
    """A checkpoint copied from another store (same key) does not fit this log's chain and is deleted."""
    clock = Clock()
    with store_at(tmp_path / "other", keyring, clock=clock) as other:
        for i in range(66):
            other.create_acls([acl(f"x{i}")], context=ADMIN)
            other.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, f"x{i}", PatternType.ANY, None)], context=ADMIN)
        theirs = filled(other)
        source = theirs.directory / f"snapshot-{theirs.offsets()[-1]:020d}.avro"
        files = CheckpointFiles(store.log, every=40)
        files.directory.mkdir(exist_ok=True)
        (files.directory / source.name).write_bytes(source.read_bytes())
    travel = cold(store, files)
    assert dict(travel.image_at(131).acls) == dict(replayed(store, 131).acls)
    assert len(files.problems) == 1 and files.problems[0].startswith(source.name)


def test_files_are_spaced_by_events_whatever_the_image_holds(store):
    """Files are ``every`` events apart, or a ``max_files``-th of the log when that is more, however many ACLs
    the image holds (a format-5 file loads without work per ACL: a large image is no reason to space them out)."""
    files = CheckpointFiles(store.log, every=40, max_files=2)
    small = SecurityImage(acls=AclsImage.of((f"id-{i}", acl(f"t{i}")) for i in range(60)), next_offset=40)
    large = SecurityImage(acls=AclsImage.of((f"id-{i}", acl(f"t{i}")) for i in range(1000)), next_offset=40)
    longer = SecurityImage(acls=small.acls, next_offset=99)
    assert (files.spacing(small), files.spacing(large), files.spacing(longer)) == (40, 40, 49)
    assert files.due(small) and files.due(large)


def test_past_max_files_the_nearest_file_is_deleted(store):
    """The disk holds at most ``max_files`` images: the file whose removal leaves the smallest gap goes,
    never the newest; every file kept still serves."""
    files = CheckpointFiles(store.log, every=5, max_files=4)
    for n in (11, 28, 33, 99, 110):  # batch ends
        files.write(replayed(store, n))
    assert files.offsets() == [11, 33, 99, 110]  # removing 28 leaves the smallest gap (11 -> 33)
    travel = cold(store, files)
    assert dict(travel.image_at(34).acls) == dict(replayed(store, 34).acls)
    assert files.problems == []


def test_a_fill_writes_no_more_than_max_files(store):
    """On open, files over a long log are spaced so that no more than ``max_files`` are written."""
    files = CheckpointFiles(store.log, every=5, max_files=4)
    files.fill(SecurityImage.EMPTY)
    files.wait()
    assert 1 <= len(files.offsets()) <= 4


def test_a_reopened_store_whose_files_cover_its_log_loads_none_of_them(store, tmp_path):
    """A process opening a store whose newest file is less than a spacing from the log's end has nothing to
    write, so it does not load that file (a whole image, in the background of every cold open)."""
    written = filled(store).offsets()
    record = tmp_path / "loaded"  # the fill runs in a forked child: it records its loads in a file
    record.write_text("")
    reopened = CheckpointFiles(store.log, every=40)
    original = reopened.load

    def load(offset):
        with record.open("a") as out:
            out.write(f"{offset}\n")
        return original(offset)

    reopened.load = load
    loaded = lambda: [int(line) for line in record.read_text().split()]  # noqa: E731
    reopened.fill(None)
    reopened.wait()
    assert loaded() == [] and reopened.offsets() == written
    store.create_acls([acl(f"late-{i}") for i in range(40)], context=ADMIN)  # a file is due again: it loads one
    reopened.fill(None)
    reopened.wait()
    # it goes on from the newest file (read in place rather than held whole), and loads none once the log is covered
    assert loaded() == [written[-1]] and reopened.offsets() == [*written, store.log.end_offset]


# -- retention moving the log's start under a replay ----------------------------------------


@pytest.fixture
def truncating(tmp_path, keyring):
    """60 one-ACL requests in 1 KB segments, with covered segments deleted on snapshot (none taken yet)."""
    clock = Clock()
    with store_at(tmp_path / "t", keyring, clock=clock, log=LogConfig(segment_bytes=1024),
                  delete_covered_segments=True, snapshot_policy=SnapshotPolicy(every_events=None, every_bytes=None)) as s:
        for i in range(60):
            s.create_acls([acl(f"t{i}")], context=ADMIN)
            clock.t += 1
        s.timetravel.files.wait()
        yield s


def test_a_fill_from_a_base_retention_cut_off_writes_nothing(truncating, caplog):
    """A fill handed the empty image while the log started at 0, run after retention moved the start: it
    stops and says why once; it writes no file (a file from the retained events alone would pass its
    HMAC and chain checks, its link being the log's, and serve an image missing the deleted events)."""
    files = CheckpointFiles(truncating.log, every=10)
    truncating.snapshot()
    start = truncating.log.start_offset
    assert start > 0
    files.fill(SecurityImage.EMPTY)
    files.wait()
    assert files.offsets() == []
    [warning] = [r.getMessage() for r in caplog.records if r.name == "secmeta.checkpoints"]
    assert f"offset 0 was asked for but the log now starts at offset {start}" in warning


def test_a_query_whose_file_retention_cuts_off_is_refused(truncating):
    """Retention runs right after a cold query loaded its starting file: the replay from it would skip
    deleted events, so the query fails with a PointInTimeError naming its offset instead of answering."""

    class RetentionAfterLoad(CheckpointFiles):
        def load(self, offset):
            image = super().load(offset)
            truncating.snapshot()
            return image

    filled(truncating, every=10)
    files = RetentionAfterLoad(truncating.log, every=10, deltas=0)
    n = 57
    with pytest.raises(PointInTimeError, match=rf"offset {n} cannot be built.*retention"):
        cold(truncating, files).image_at(n)
    assert truncating.log.start_offset > max(o for o in files.offsets() if o <= n)  # it did cut the replay off


# -- format 5: checkpoint images read in place, later changes deferred onto them -----------------


@pytest.fixture(scope="module")
def diverse_store(tmp_path_factory):
    """The diverse shape's log (creations and deletions, address-restricted, mixed patterns): 1,500 ACLs in
    ~1,600 events, with checkpoint files ~500 events apart written by a fill."""
    from scripts.bench import shapes
    from tests.logkit import make_keyring

    home = tmp_path_factory.mktemp("diverse")
    keyring = make_keyring(home)
    shapes.write_log(home / "s", keyring, "diverse", 1500, seed=3)
    with store_at(home / "s", keyring) as s:
        files = CheckpointFiles(s.log, every=500)
        files.fill(SecurityImage.EMPTY)
        files.wait()
        yield s, files


def asked(image: SecurityImage, rng) -> list:
    """authorize, authorized_operations and describe about a few resources (held ones and others)."""
    from secmeta.core import AclOperation
    from secmeta.projections.authorizer import authorize, authorized_operations

    bindings = sorted((binding for _, binding in image.acls), key=repr) or [acl("none")]
    out = []
    for _ in range(8):
        b = rng.choice(bindings)
        name = b.pattern.name + ("-x" if rng.random() < 0.5 else "")
        host = b.entry.host if "/" not in b.entry.host and b.entry.host != "*" else "10.0.0.1"
        out.append(authorize(image.acls, b.entry.principal, host, AclOperation.READ, b.pattern.resource_type, name))
        out.append(authorized_operations(image.acls, b.entry.principal, host, b.pattern.resource_type, name))
        out.append(sorted(image.acls.describe(AclBindingFilter.of(b.pattern.resource_type, name, PatternType.MATCH)),
                          key=repr))
    return out


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_as_of_from_a_checkpoint_file_answers_as_a_replay(diverse_store, data):
    """A cold process's image at any point (a checkpoint file's offset, just past one, between two) answers
    authorize, authorized_operations, describe and ids as a replay of the log to that point, with the changes
    after the file deferred onto its image (however few: DEFER_FROM patched to 1)."""
    import random
    from unittest.mock import patch

    from secmeta.projections import acls as acls_module
    from secmeta.projections.acl_deferred import deferred_of

    store, files = diverse_store
    offsets = files.offsets()
    ends = [b.next_offset for b in store.log.batches(0, store.log.end_offset)]
    file = data.draw(st.sampled_from(offsets))
    n = data.draw(st.sampled_from([file, *(e for e in ends if file < e <= file + 1100)]))
    travel = cold(store, files)
    with patch.object(acls_module, "DEFER_FROM", 1):
        image = travel.image_at(n)
    expected = replayed(store, n)
    assert deferred_of(image.acls.acls, image.acls.index) is not None  # read in place, not built whole
    assert asked(image, random.Random(n)) == asked(expected, random.Random(n))
    assert sorted(image.acls) == sorted(expected.acls) and image == expected


# -- format 6: tokens read from the section too ----------------------------------------------------------


@pytest.fixture(scope="module")
def mixed_store(tmp_path_factory):
    """The history benchmark's mixed log (ACLs with UUID ids created and deleted, SCRAM credentials, tokens
    issued, renewed and removed): 4,000 events in batches of 100-1,000, checkpoint files ~600 events apart."""
    from scripts.bench.history import build_log
    from tests.logkit import make_keyring

    home = tmp_path_factory.mktemp("mixed")
    keyring = make_keyring(home)
    build_log(home / "s", keyring, 4000, seed=5)
    with store_at(home / "s", keyring, snapshot_policy=SnapshotPolicy(every_events=None, every_bytes=None)) as s:
        files = CheckpointFiles(s.log, every=600)
        files.fill(SecurityImage.EMPTY)
        files.wait()
        yield s, files


def test_as_of_at_and_between_format_6_files_equals_a_replay(mixed_store):
    """A cold process's image at every checkpoint file's offset and at every batch end between files equals a
    replay of the log to that point: ACLs, credentials and tokens (read from the file's section, then renewed,
    removed and issued by the events after it), each token by id."""
    from secmeta.projections.snapshot import read_snapshot_info

    store, files = mixed_store
    offsets = files.offsets()
    assert len(offsets) >= 4 and {read_snapshot_info(p).format for p in files.directory.glob("*.avro")} == {6}
    ends = [b.next_offset for b in store.log.batches(0, store.log.end_offset)]
    for n in sorted({*offsets, *ends}):
        travel = cold(store, files)
        image, expected = travel.image_at(n), replayed(store, n)
        assert image == expected, n
        assert {t.token_id: t for t in image.tokens} == {t.token_id: t for t in expected.tokens}
        if n in offsets:
            assert len(image.tokens) > 0


def test_a_replay_from_a_file_holds_the_file_and_the_answer_only(mixed_store, monkeypatch):
    """A cold process's as_of several batches past a file (many ``interval``s) holds the file's image and the
    answer, no checkpoint between (each would gather every change since the file again), and answers as a
    replay."""
    store, files = mixed_store
    travel = cold(store, files)
    file = files.offsets()[0]
    only_the_first = [(offset, path) for offset, path in travel._files_at_or_before(file) if offset == file]
    monkeypatch.setattr(travel, "_files_at_or_before", lambda n: only_the_first)
    ends = [b.next_offset for b in store.log.batches(file, store.log.end_offset)]
    n = ends[4]  # five batches past the file
    assert travel.image_at(n) == replayed(store, n)
    assert [offset for offset in travel.checkpoints if offset] == [file, n]  # and the empty image


def test_points_asked_one_after_another_in_one_process_equal_a_replay(mixed_store):
    """One cold process asked points at, just before, just past and between the files in a shuffled order (each
    answer replayed from the nearest image held: a file's, or an earlier answer with its changes deferred onto the
    file's image, the new changes gathered onto it) gets at every point the image of a replay of the log to it."""
    import random
    from unittest.mock import patch

    from secmeta.projections import acls as acls_module

    store, files = mixed_store
    offsets = files.offsets()
    ends = [b.next_offset for b in store.log.batches(0, store.log.end_offset)]
    near = {e for o in offsets for e in ends if abs(e - o) <= 1200 and e >= offsets[0]}
    points = sorted(near)
    random.Random(11).shuffle(points)
    travel = cold(store, files)
    with patch.object(acls_module, "DEFER_FROM", 1):
        for n in points[:10]:
            assert travel.image_at(n) == replayed(store, n), n


def test_room_is_made_for_a_file_before_it_is_loaded(mixed_store, monkeypatch):
    """With a budget that holds a file's image or the next load but not both, a point at another file evicts what
    is held before the load, so what is held plus the file's estimated image stay within the budget during the
    load (the peak), and the answer is the file's image."""
    from secmeta.core.forensics.timetravel import load_bytes

    store, files = mixed_store
    first, second = files.offsets()[:2]
    size = (files.directory / f"snapshot-{second:020d}.avro").stat().st_size
    travel = cold(store, files)
    travel.image_at(first)
    held = travel.held_bytes()
    assert held > 0  # the first file's image
    travel.memory_bytes = held + load_bytes(size) - 1  # it fits, and so does the next load, but not both
    during: list[int] = []
    real_load = travel._load

    def load(offset, path, nbytes):
        during.append(travel.held_bytes() + load_bytes(nbytes))
        return real_load(offset, path, nbytes)

    monkeypatch.setattr(travel, "_load", load)
    assert travel.image_at(second) == replayed(store, second)
    assert during and all(peak <= travel.memory_bytes for peak in during)


def test_an_answer_a_few_events_past_another_stays_read_in_place(mixed_store):
    """A point one batch (fewer changes than ``DEFER_FROM``) past an answer read in place from a file is that answer
    plus the batch deferred too, not an image rebuilt node by node: issue 24, at 10M events such a point took
    1-6 s of CPU and every later point replayed from it did too.  Each equals a replay."""
    from secmeta.projections.acl_deferred import deferred_of

    store, files = mixed_store
    file = files.offsets()[0]
    ends = [b.next_offset for b in store.log.batches(file, store.log.end_offset)]
    travel = cold(store, files)
    for n in ends[2:5]:  # each one batch past the one before
        image = travel.image_at(n)
        assert deferred_of(image.acls.acls, image.acls.index) is not None, n
        assert image == replayed(store, n)


def test_an_evicted_file_image_frees_its_table_without_the_collector(mixed_store):
    """A point past a file, answered (its nodes made), then a point at another file whose load evicts the first
    file's images: the first file's table is freed by reference counting alone, the cyclic collector off (a
    replay's ``paused_gc`` freezes what lives past it out of the collector's reach).  Issue 24: an image read in
    place and its table were reference cycles, so at 10M events an evicted file's image stayed resident and RSS
    went 380 MB past the budget while the estimate stayed within it."""
    import gc
    import random
    import weakref

    from secmeta.core.forensics.timetravel import load_bytes
    from secmeta.projections.acl_deferred import deferred_of

    store, files = mixed_store
    first, second = files.offsets()[:2]
    travel = cold(store, files)
    was = gc.isenabled()
    gc.disable()
    try:
        image = travel.image_at(first + 1 if first + 1 < second else first)
        asked(image, random.Random(1))
        table = weakref.ref(deferred_of(image.acls.acls, image.acls.index).table)
        del image
        size = (files.directory / f"snapshot-{second:020d}.avro").stat().st_size
        travel.memory_bytes = travel.held_bytes() + load_bytes(size) - 1  # the next load evicts the first file's
        assert travel.image_at(second) == replayed(store, second)
        assert table() is None
    finally:
        if was:
            gc.enable()


def test_an_evicted_replayed_image_frees_its_tables_without_the_collector(mixed_store):
    """A point built by a full replay (no checkpoint file: its ACL tables are the replay's own, ``AclTable.of_rows``,
    not a file's), answered (nodes and groups made), then evicted by an earlier point's replay (from the empty image: it shares
    nothing with the first): each of its tables is
    freed by reference counting alone, the cyclic collector off (the replay's ``paused_gc`` froze what lived past it
    out of the collector's reach). Before, a table kept the nodes it made, which refer back to it, so an evicted
    replayed image stayed resident."""
    import gc
    import random
    import weakref

    from secmeta.core import AclBindingFilter
    from secmeta.projections.acl_index import Lazy
    from secmeta.projections.acl_table import AclTable

    store, _ = mixed_store
    end = store.log.end_offset
    travel = TimeTravel(store.log, interval=10 ** 9, memory_bytes=1 << 30)  # no files: every point a replay
    was = gc.isenabled()
    gc.disable()
    try:
        image = travel.image_at(end)
        asked(image, random.Random(2))
        image.acls.get(next(iter(image.acls))[0])  # an id's group
        made = list(image.acls.selection(AclBindingFilter.of(), whole_nodes=True))
        tables = {id(node.source): weakref.ref(node.source) for node, _ in made if type(node) is Lazy}
        assert tables and all(isinstance(ref(), AclTable) for ref in tables.values())
        del image, made
        travel.memory_bytes = 1  # the next image kept evicts every other (the empty one costs nothing)
        assert travel.image_at(end // 2) == replayed(store, end // 2)
        assert [ref() for ref in tables.values()] == [None] * len(tables)
    finally:
        if was:
            gc.enable()
