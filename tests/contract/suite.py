"""The reader contract: one suite that every reader of the log runs (eventsourcing's tests/persistence.py style).

A reader rebuilds state from what a writer left behind: the log (store replay), a snapshot plus the
log's tail, the store's time travel, Kafka topics (the follower), Spark tables. Each test module
subclasses ``ReaderContract`` and implements ``images``: the reader's image at each offset asked for.
The suite checks it equals the image the writer published at that offset (``workloads.record``).

``ReaderContract`` runs one seeded workload (every event type, and the token expiry edges): every
offset the writer published, or for an expensive reader (``every_offset = False``, Spark) a sample of
them and the end. ``GeneratedReaderContract`` adds
Hypothesis-generated workloads, for the readers cheap enough to run many.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from secmeta.core import SecurityStore, StoreConfig
from secmeta.core.log import Log
from secmeta.core.log.recover import Recovery
from secmeta.events.entities import KINDS
from secmeta.events.keyring import Keyring
from tests.contract.images import Image
from tests.contract.workloads import Recording, Step, record, seeded, workloads
from tests.logkit import Clock
from tests.storekit import TOKEN_SECRET

__all__ = ["SEED", "GeneratedReaderContract", "ReaderContract", "Written", "write"]

SEED, STEPS = 2026, 40  # the seeded workload every reader runs
EVENT_TYPES = {name for kind in KINDS for name in kind.event_names}  # every declared kind's events
SAMPLE = 6  # offsets an expensive reader is checked at (plus the end)


@dataclass(frozen=True)
class Written:
    """A closed store that ran a workload, and what its writer published."""

    store_dir: Path
    key_file: Path
    keyring: Keyring
    config: StoreConfig
    recording: Recording


def write(directory: Path, steps: tuple[Step, ...], after=None, *, recovered: bool = False,
          rotated: bool = False) -> Written:
    """A store in ``directory`` that ran ``steps`` (``after(store)`` follows each, see ``record``), and with
    ``recovered`` then a logged repair (`log recover` at the log's end: a LogRecovered event, no state change),
    with ``rotated`` then a key rotation (`keys generate` and a writer open: a KeyRotated event, no state change)."""
    directory.mkdir(parents=True, exist_ok=True)
    key_file = directory / "keys.json"
    Keyring.generate_file(key_file)
    keyring = Keyring.from_file(key_file)
    clock = Clock()
    config = StoreConfig(token_secret=TOKEN_SECRET, clock=clock)
    with SecurityStore.open(directory / "store", config, keyring=keyring) as store:
        recording = record(store, clock, steps, after)
    if recovered:
        recording = _recover_at_end(directory / "store", keyring, config, recording)
    if rotated:
        Keyring.generate_file(key_file)
        keyring = Keyring.from_file(key_file)
        SecurityStore.open(directory / "store", config, keyring=keyring).close()  # logs the KeyRotated
        recording = _same_state_one_more(recording)
    return Written(directory / "store", key_file, keyring, config, recording)


def _recover_at_end(path: Path, keyring: Keyring, config: StoreConfig, recording: Recording) -> Recording:
    """The store after `secmeta log recover --truncate-to END --force`: one more offset, the same state."""
    end = recording.end
    with Recovery(path, end, keyring=keyring, config=config.log, clock=config.clock) as recovery:
        recovery.execute("contract: a logged repair every reader carries", force=True)
    return _same_state_one_more(recording)


def _same_state_one_more(recording: Recording) -> Recording:
    """The recording with one more offset (an event that changes no state) at its end."""
    end = recording.end
    state = replace(recording.states[end], next_offset=end + 1)
    return Recording({**recording.images, end + 1: recording.images[end]}, {**recording.states, end + 1: state},
                     end + 1)


def seeded_steps() -> tuple[Step, ...]:
    return seeded(SEED, STEPS)


class ReaderContract:
    """Subclass per reader; implement ``images``. The ``written`` fixture is the seeded workload."""

    every_offset = True

    def images(self, written: Written, offsets: list[int]) -> dict[int, Image]:
        """The reader's image after events [0, N), for each N in ``offsets`` (ascending)."""
        raise NotImplementedError

    def offsets(self, recording: Recording) -> list[int]:
        return recording.offsets if self.every_offset else recording.sample(SAMPLE)

    def check(self, written: Written) -> None:
        """The reader's image equals the writer's at each offset checked; a failure names the first offset."""
        recording = written.recording
        offsets = self.offsets(recording)
        got = self.images(written, offsets)
        assert sorted(got) == offsets, "the reader must answer every offset asked for"
        for n in offsets:
            assert got[n] == recording.images[n], f"offset {n} of {recording.end}"

    def test_the_seeded_workload_reaches_the_writers_image(self, written):
        """At every offset checked (each published one, or a sample and the end), the writer's image."""
        with Log.open(written.store_dir, keyring=written.keyring, read_only=True) as log:
            assert {e.event_type for e in log.read()} == EVENT_TYPES, "the seeded workload logs every event type"
        self.check(written)


class GeneratedReaderContract(ReaderContract):
    """A cheap reader: also every published offset of Hypothesis-generated workloads."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.test_generated_workloads_reach_the_writers_image = _generated_test()  # one Hypothesis test per reader


def _generated_test():
    # each example writes a store and reads it at every offset: a quarter of the profile's examples
    # (12 in "ci", 250 in "thorough") keeps the suite within its time
    @settings(suppress_health_check=[HealthCheck.too_slow], max_examples=max(10, settings.default.max_examples // 4))
    @given(steps=workloads())
    def test_generated_workloads_reach_the_writers_image(self, steps):
        """Generated SCRAM, ACL and token requests: the reader reaches the writer's image at each offset."""
        with tempfile.TemporaryDirectory() as tmp:
            self.check(write(Path(tmp), steps))

    return test_generated_workloads_reach_the_writers_image
