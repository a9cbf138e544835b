"""Time travel: ``store.as_of(offset=N)`` of a store reopened read-only."""

from __future__ import annotations

from secmeta.core import SecurityStore
from tests.contract.images import image_of
from tests.contract.suite import GeneratedReaderContract


class TestTimeTravel(GeneratedReaderContract):
    def images(self, written, offsets):
        with SecurityStore.open(written.store_dir, written.config, keyring=written.keyring,
                                read_only=True) as store:
            return {n: image_of(store.as_of(offset=n)) for n in reversed(offsets)}
