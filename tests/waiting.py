"""A bounded wait for a condition the test cannot be told of (no event to wait on): the one helper tests share."""

from __future__ import annotations

import time

__all__ = ["wait_for"]


def wait_for(condition, timeout: float = 20.0, what: str = "condition"):
    """``condition()``'s first true value, looked at every 20 ms; AssertionError naming ``what`` after ``timeout``
    seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)
