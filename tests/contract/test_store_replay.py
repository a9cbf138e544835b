"""Store replay: the log replayed from the start (``secmeta.core.store.state.load_state``, what SecurityStore.open runs)."""

from __future__ import annotations

from secmeta.core import SecurityStore
from secmeta.core.log import Log
from secmeta.core.store.state import load_state
from secmeta.projections.image import SecurityProjection
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from tests.contract.images import image_of
from tests.contract.suite import GeneratedReaderContract


class TestStoreReplay(GeneratedReaderContract):
    def images(self, written, offsets):
        end = written.recording.end
        with Log.open(written.store_dir, keyring=written.keyring, read_only=True) as log:
            images = {n: image_of(load_state(log, SecurityProjection(), SecurityImageSnapshot(), end=n).state)
                      for n in offsets if n != end}
        with SecurityStore.open(written.store_dir, written.config, keyring=written.keyring,
                                read_only=True) as store:
            assert store.loaded.snapshot is None and store.loaded.replayed_events == end
            images[end] = image_of(store.image)
        return images
