"""Optional dependencies of the tests (the kafka and spark extras): skip without them, except in CI.

A developer without Java or pyspark still runs everything else; CI (``$CI`` set, as CI services do)
must run every test, so a missing extra there fails the run with the package to install instead of
silently skipping a whole folder.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

__all__ = ["require_extra"]


def require_extra(module: str, extra: str) -> ModuleType:
    """Import ``module`` (from the ``extra`` extra): skip the caller's tests if missing, fail if $CI is set."""
    hint = f"{module} is not installed: pip install 'secmeta[{extra}]'"
    if os.environ.get("CI"):
        try:
            return importlib.import_module(module)
        except ImportError as exc:
            raise pytest.UsageError(f"CI is set and {hint}") from exc
    return pytest.importorskip(module, reason=hint)
