"""A delta file applied onto an image of another lineage held at its full file's offset."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core.forensics.checkpoints import CheckpointFiles
from secmeta.core.store.view import StoreView
from secmeta.projections.image import SecurityDelta
from tests.core.forensics.test_delta_checkpoints import (
    REMOVALS,
    cold,
    everything,
    keyring,
    plans,
    recreate,
)
from tests.core.forensics.test_timetravel_properties import replayed, run
from tests.logkit import Clock
from tests.storekit import acl, store_at

__all__ = ["keyring"]  # a fixture


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=25,
          deadline=None)
@given(first=plans.filter(bool), second=plans, between=plans, recreated=recreate, data=st.data())
def test_a_delta_onto_an_answer_replayed_from_an_earlier_file_answers_as_a_replay(keyring, first, second, between,
                                                                                 recreated, data):
    """Full files at A and B, delta files against B; the image at B is held from a replay of file A's image (a
    table with changes deferred onto it, not B's table).  A point past a delta, answered from that held image plus
    the delta, equals a replay from the log's start."""
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp, store_at(Path(tmp) / "store", keyring, clock=clock) as store:
        run(store, clock, [(("create", [acl("orders"), acl("orders", "User:bob"), acl("payments")]), 1), *first])
        a = store.log.end_offset
        run(store, clock, [(REMOVALS, 0), (recreated, 1), *second])
        b = store.log.end_offset
        run(store, clock, [(REMOVALS, 0), (recreated, 1), *between])
        end = store.log.end_offset
        ends = [x.next_offset for x in store.log.batches(b, end)]
        deltas = sorted(data.draw(st.sets(st.sampled_from(ends), min_size=1, max_size=2)))
        events = list(store.log.read(0, end))
        files = CheckpointFiles(store.log, deltas=0)
        files.write(replayed(events[:a]))
        n = data.draw(st.sampled_from([e for e in ends if e >= deltas[0]]))
        travel = cold(store, files)
        travel.image_at(b)  # from file A, the only file yet: held at B, file A's table with changes deferred
        assert b in travel.checkpoints
        files.write(replayed(events[:b]))
        delta, at = SecurityDelta(replayed(events[:b])), b
        for offset in deltas:
            delta.replay_all(events[at:offset])
            files.write_delta(b, delta, offset)
            at = offset
        image = travel.image_at(n)
        expected = replayed(events[:n])
        assert everything(StoreView(image, store.config), image) == everything(
            StoreView(expected, store.config), expected), n
        assert max(d for d in deltas if d <= n) in travel.checkpoints  # it came through the delta
        assert files.problems == []

