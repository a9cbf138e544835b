"""tests/extras.py: a missing extra skips a developer's tests but fails CI."""

from __future__ import annotations

import pytest

from tests.extras import require_extra

MISSING = "secmeta_no_such_module"


def test_a_missing_extra_skips_outside_ci(monkeypatch):
    """Without $CI, the caller's tests are skipped with the pip command to install the extra."""
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"pip install 'secmeta\[spark\]'"):
        require_extra(MISSING, "spark")


def test_a_missing_extra_fails_in_ci(monkeypatch):
    """With $CI set, a missing extra is an error naming the module and the extra, not a skip."""
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.UsageError, match=rf"CI is set and {MISSING} is not installed: pip install 'secmeta\[kafka\]'"):
        require_extra(MISSING, "kafka")


def test_an_installed_extra_is_imported(monkeypatch):
    """An installed module is returned, in CI or not."""
    monkeypatch.setenv("CI", "true")
    assert require_extra("json", "dev").__name__ == "json"
