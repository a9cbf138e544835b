"""Shared test set-up: Hypothesis profiles, Spark's worker interpreter, the markers, and the fixtures many folders use.

Markers (registered in pyproject.toml, --strict-markers): ``spark``, ``kafka`` and ``server`` are put on each
test here, by the fixtures it uses and the folder it lives in (MARKED_BY_FIXTURE, MARKED_BY_FOLDER), so no
test file repeats them (a test that starts Spark by other means writes ``spark`` itself); ``slow`` is written on the long trials themselves. The loop a developer runs every
minute: ``./scripts/test -m "not spark and not kafka"`` (add ``and not slow`` for a quicker one).

Temporary files go to /dev/shm where it exists and TMPDIR is not set (below: fsyncs wait for no disk).

Kept light on purpose: importing this module must not start Spark or Kafka or touch disk; the
session fixtures ``kafka_bootstrap`` and ``spark`` start theirs on first use (imports inside them).
Plain helpers (ADMIN, TOKEN_SECRET, acl(), upsert(), store_at()) live in tests/storekit.py.
"""

import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

from tests.jvm import use_test_jvm_options
from tests.logkit import Clock, make_keyring
from tests.storekit import store_at

# Spark workers must run the same interpreter (the venv's) as the tests.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

# Every JVM the tests start runs with tests/jvm.py's options (C1 only, a one-thread collector: less CPU).
use_test_jvm_options()

# Temporary files (tmp_path, tempfile, the CLI's subprocesses) in memory where there is a tmpfs, unless
# TMPDIR says otherwise: the code still calls every fsync it makes, but on a disk shared by parallel
# workers each one costs milliseconds of waiting (tests/core/store: 29 s -> 14 s wall, same CPU).
# SIGKILL keeps the page cache either way, and no test can cut the power.
# A small tmpfs (Docker gives containers 64 MB) would fill up: only one with room for the Spark tables.
_SHM_ROOM = 4 << 30
if ("TMPDIR" not in os.environ and os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK)
        and shutil.disk_usage("/dev/shm").free >= _SHM_ROOM):
    os.environ["TMPDIR"] = tempfile.tempdir = "/dev/shm"

# "ci" (the default): no per-example deadline, since shared CI machines stall
# unpredictably, and 50 examples per property to keep the suite quick.
# "thorough": many more examples, for a local hunt. Pick with HYPOTHESIS_PROFILE=...
settings.register_profile("ci", deadline=None, max_examples=50)
settings.register_profile("thorough", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

TESTS = Path(__file__).parent

# A test that uses one of these fixtures, directly or through another fixture, gets the marker.
MARKED_BY_FIXTURE = {
    "spark": "spark",  # the session's local SparkSession (a JVM)
    "kafka_bootstrap": "kafka",  # librdkafka's mock cluster
    "other_kafka_cluster": "kafka",  # a second mock cluster (tests/consumers/conftest.py)
    "tansu_bootstrap": "kafka",  # a Tansu broker: topic ids, deleting topics (tests/consumers/conftest.py)
    "serve": "server",  # secmeta serve on ephemeral ports (tests/core/conftest.py)
    "shared_server": "server",
}
# Every test under one of these folders (relative to tests/) gets the marker.
MARKED_BY_FOLDER = {
    ("consumers", "spark"): "spark",
    ("core", "server"): "server",
}


def markers_of(path: Path, fixturenames) -> set[str]:
    """The automatic markers of a test in file ``path`` that uses ``fixturenames`` (its fixture closure)."""
    markers = {MARKED_BY_FIXTURE[name] for name in fixturenames if name in MARKED_BY_FIXTURE}
    parts = path.relative_to(TESTS).parts
    markers.update(marker for folder, marker in MARKED_BY_FOLDER.items() if parts[: len(folder)] == folder)
    return markers


def pytest_itemcollected(item):
    # Per item as it is collected, so the markers are in place before any collection_modifyitems hook
    # (pytest-xdist's reads xdist_group there).
    markers = markers_of(item.path, getattr(item, "fixturenames", ()))
    for marker in sorted(markers):
        item.add_marker(marker)
    if "spark" in getattr(item, "fixturenames", ()):
        # Under pytest-xdist (./scripts/test runs it with --dist loadgroup) every test of the shared
        # SparkSession goes to one worker, so the run starts one JVM there and computes the shared
        # compaction once. Spark-marked tests without the session (pure Python, or a JVM of their own in
        # a subprocess) are balanced over both workers: the session's worker is the suite's longest.
        item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.fixture
def keyring(tmp_path):
    """A fresh keyring, its file in ``tmp_path``."""
    return make_keyring(tmp_path)


@pytest.fixture
def clock():
    """A settable clock (``clock.t += 60``) for StoreConfig(clock=...)."""
    return Clock()


@pytest.fixture
def store_dir(tmp_path):
    """Where ``open_store`` and ``store`` keep the test's store: ``tmp_path / "store"``."""
    return tmp_path / "store"


@pytest.fixture
def open_store(store_dir, keyring, clock):
    """open_store(**config): (re)open the store in ``store_dir`` with the ``keyring``, the ``clock``
    and a token secret (any StoreConfig field overrides); every store opened is closed at the end."""
    opened = []

    def _open(**config):
        config.setdefault("clock", clock)
        store = store_at(store_dir, keyring, **config)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store):
    """A fresh SecurityStore (the writer) in ``store_dir``: ``open_store()`` with the defaults."""
    return open_store()


@pytest.fixture(scope="session")
def kafka_bootstrap():
    """The bootstrap address of a session-wide librdkafka mock cluster (one broker)."""
    from confluent_kafka import Producer

    creator = Producer({"test.mock.num.brokers": 1, "logger": logging.getLogger("tests.kafka.mock")})
    address = creator.list_topics(timeout=10).orig_broker_name.split("/")[0]
    yield address
    creator.flush(1)
    del creator


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for every Spark test of the run, with the secmeta sources registered."""
    from tests.extras import require_extra

    require_extra("pyspark", "spark")
    from secmeta.consumers.spark import register
    from secmeta.consumers.spark.session import local_session

    session = local_session(app="secmeta-tests", master="local[2]")
    register(session)
    yield session
    session.stop()
