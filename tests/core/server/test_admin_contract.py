"""The Admin contract (tests/contract/admin_suite.py) served: RemoteAdmin through ``secmeta serve`` answers as
SecurityStore does in process (tests/contract/test_admin_contract.py), scenario by scenario.

Marked ``server`` by its folder (tests/conftest.py): deselect with ``-m "not server"``.
"""

from __future__ import annotations

import pytest

from tests.contract.admin_suite import SCENARIOS, in_process, served


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_served_answers_as_in_process(tmp_path, scenario):
    """Through secmeta serve and RemoteAdmin the transcript is the one SecurityStore gives in process."""
    with in_process(tmp_path / "in-process") as backend:
        expected = scenario(backend)
    with served(tmp_path / "served") as backend:
        got = scenario(backend)
    assert got == expected
