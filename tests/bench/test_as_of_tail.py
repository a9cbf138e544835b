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
