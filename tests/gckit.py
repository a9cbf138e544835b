"""Counting the cyclic collector's runs around a block (tests that a builder keeps it paused)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collections_seen() -> Iterator[list[int]]:
    """After a full collection, the generation of every collection that starts inside the block, in order."""
    seen: list[int] = []

    def started(phase, info):
        if phase == "start":
            seen.append(info["generation"])

    gc.collect()
    gc.callbacks.append(started)
    try:
        yield seen
    finally:
        gc.callbacks.remove(started)
