"""The as_of tail benchmark writes its checkpoint files where a store's own fill would."""

from __future__ import annotations

from scripts.bench.as_of_tail import file_offsets
from secmeta.core import AclBindingFilter, PatternType, ResourceType
from secmeta.core.forensics.checkpoints import CheckpointFiles
from secmeta.projections.image import SecurityImage
from tests.logkit import Clock
from tests.storekit import ADMIN, acl, store_at


def test_the_files_the_bench_writes_are_at_the_offsets_the_fill_writes(tmp_path, keyring):
    """The benchmark writes only the last files of a long log, at offsets it asks ``CheckpointFiles`` for (it
    re-derived the fill's spacing, which a change to the fill would have left measuring other points)."""
    clock = Clock()
    with store_at(tmp_path / "s", keyring, clock=clock) as store:
        for i in range(12):  # batches of 6 and 5 events: 132 events
            store.create_acls([acl(f"t{i}")] + [acl(f"c{i}-{j}") for j in range(5)], context=ADMIN)
            store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, f"c{i}-{j}", PatternType.ANY, None)
                               for j in range(5)], context=ADMIN)
            clock.t += 1
        files = CheckpointFiles(store.log, every=5, max_files=5)
        planned = file_offsets(files, 2)
        files.fill(SecurityImage.EMPTY)
        files.wait()
        assert len(files.offsets()) >= 3
        assert files.offsets()[-2:] == planned


def test_the_bench_writes_the_delta_files_the_fill_writes(tmp_path, monkeypatch):
    """Past the first full file it writes, the benchmark writes the delta files a store's fill writes there, at the
    same offsets against the same full files (so it measures the points a user's store answers)."""
    import shutil

    from scripts.bench import as_of_tail
    from secmeta.core.forensics import checkpoints
    from tests.logkit import make_keyring

    keyring = make_keyring(tmp_path)

    class Small(CheckpointFiles):
        def __init__(self, log):
            super().__init__(log, every=5, max_files=5)

    clock = Clock()
    with store_at(tmp_path / "s", keyring, clock=clock) as store:
        for i in range(12):  # batches of 6 and 5 events: 132 events
            store.create_acls([acl(f"t{i}")] + [acl(f"c{i}-{j}") for j in range(5)], context=ADMIN)
            store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, f"c{i}-{j}", PatternType.ANY, None)
                               for j in range(5)], context=ADMIN)
            clock.t += 1
    shutil.copytree(tmp_path / "s", tmp_path / "fill")
    with store_at(tmp_path / "fill", keyring) as store:
        files = Small(store.log)
        files.fill(SecurityImage.EMPTY)
        files.wait()
        fulls = files.offsets()[-2:]
        written = {base: files.delta_offsets(base) for base in fulls}
    assert any(written.values())
    monkeypatch.setattr(checkpoints, "CheckpointFiles", Small)
    out = as_of_tail.prepare(tmp_path / "s", tmp_path / "keys.json", fulls)
    assert {base: [d["offset"] for d in out["deltas"] if d["base"] == base] for base in fulls} == written
    with store_at(tmp_path / "s", keyring) as store:
        assert {base: Small(store.log).delta_offsets(base) for base in fulls} == written
