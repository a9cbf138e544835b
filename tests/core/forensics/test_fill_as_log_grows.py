"""The real fill (forked children, thinning, deltas, growth) against a replay from the log's start."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core.forensics.checkpoints import CheckpointFiles
from secmeta.core.store.view import StoreView
from secmeta.projections.image import SecurityImage
from tests.core.forensics.test_delta_checkpoints import cold, everything, keyring, more_requests
from tests.core.forensics.test_timetravel_properties import replayed, run
from tests.logkit import Clock
from tests.storekit import acl, store_at

__all__ = ["keyring"]

rounds = st.lists(st.lists(st.tuples(more_requests, st.sampled_from([0, 1])), min_size=2, max_size=8),
                  min_size=3, max_size=8)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=20,
          deadline=None)
@given(plan=rounds, every=st.integers(2, 8), max_files=st.integers(2, 4), deltas=st.integers(1, 3))
def test_the_fill_as_the_log_grows_answers_every_point_as_a_replay(keyring, plan, every, max_files, deltas):
    """The fill (forked children) at open and as the log grows, with few files (thinned) and 1-3 deltas between
    them: a cold process answers every offset as a replay from the log's start, and no file is found bad."""
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp, store_at(Path(tmp) / "store", keyring, clock=clock) as store:
        files = CheckpointFiles(store.log, every=every, max_files=max_files, deltas=deltas)
        run(store, clock, [(("create", [acl("orders"), acl("orders", "User:bob")]), 1)])
        files.fill(SecurityImage.EMPTY)
        files.wait()
        for requests in plan:
            run(store, clock, requests)
            files.write_in_background(store.image)
            files.wait()
        end = store.log.end_offset
        events = list(store.log.read(0, end))
        points = range(1, end + 1)
        for n in points:
            image = cold(store, files).image_at(n)
            expected = replayed(events[:n])
            assert everything(StoreView(image, store.config), image) == everything(
                StoreView(expected, store.config), expected), (n, files.offsets(),
                                                             {b: files.delta_offsets(b) for b in files.offsets()})
        assert files.problems == []
