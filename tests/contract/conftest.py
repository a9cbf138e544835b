"""The seeded workload every reader of the contract runs, written once per test module."""

from __future__ import annotations

import pytest

from tests.contract.suite import seeded_steps, write


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    return write(tmp_path_factory.mktemp("contract"), seeded_steps(), recovered=True, rotated=True)
