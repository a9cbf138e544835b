"""The CLI tests' store: ``store`` is the path of a fresh store made through the API (so no command under
test creates it), with its key file and token secret set as the CLI's defaults (tests/clikit.py make_store).
A test file whose commands need data in it overrides ``store`` with its own scenario."""

from __future__ import annotations

import pytest

from tests.clikit import make_store


@pytest.fixture
def store(tmp_path, monkeypatch):
    return make_store(tmp_path, monkeypatch)
