"""Snapshot load + tail: a snapshot of the writer's image at S, then the log replayed from S to N.

Each offset N is read from a snapshot at the offset published before it (a tail of one request), and
the end from snapshots at a sample of earlier offsets (longer tails) through SecurityStore.open, which
must say it loaded that snapshot.
"""

from __future__ import annotations

from secmeta.core import SecurityStore
from secmeta.core.log import Log
from secmeta.core.store.state import Snapshotter, load_state
from secmeta.projections.image import SecurityProjection
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import SnapshotPolicy, list_snapshots
from tests.contract.images import image_of
from tests.contract.suite import SAMPLE, GeneratedReaderContract

CODEC = SecurityImageSnapshot()


def _snapshot_only(log: Log, state, offset: int) -> None:
    """Leave exactly one snapshot in the store: ``state`` at ``offset``, written as the store writes one."""
    for path in list_snapshots(log.store.snapshot_dir):
        path.unlink()
    Snapshotter(log, CODEC, SnapshotPolicy(), keep=1).snapshot(state, offset)


class TestSnapshotThenTail(GeneratedReaderContract):
    def images(self, written, offsets):
        recording = written.recording
        published = recording.offsets
        images = {}
        # The snapshots are written as the store's writer writes them: through a writer's log.
        with Log.open(written.store_dir, keyring=written.keyring) as log:
            for n in offsets:
                start = published[max(0, published.index(n) - 1)]
                _snapshot_only(log, recording.states[start], start)
                loaded = load_state(log, SecurityProjection(), CODEC, end=n)
                assert (loaded.snapshot.next_offset, loaded.next_offset) == (start, n)
                images[n] = image_of(loaded.state)
        for start in recording.sample(SAMPLE):
            with Log.open(written.store_dir, keyring=written.keyring) as log:
                _snapshot_only(log, recording.states[start], start)
            with SecurityStore.open(written.store_dir, written.config, keyring=written.keyring,
                                    read_only=True) as store:
                assert store.loaded.snapshot.next_offset == start
                assert store.loaded.replayed_events == recording.end - start
                assert image_of(store.image) == recording.images[recording.end], f"snapshot at {start}"
        return images
