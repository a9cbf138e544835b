"""Pausing Python's cyclic garbage collector while many acyclic objects are built.

Images are persistent maps of immutable nodes and hold no cycles: reference
counting frees them when they are dropped.  The cyclic collector finds nothing
to free in them, yet every collection the new nodes trigger rescans them; on a
large replay or decode those sweeps cost more than the work itself.  Every
reader that builds images or rows (replay, snapshot load, the store's open,
time travel, the Kafka follower, the Spark sources) pauses it with
``paused_gc``, the one place that decides how.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["FREEZE_AFTER", "GcPause", "paused_gc"]

#: A replay of at least this many events leaves enough long-lived image nodes to freeze them.
FREEZE_AFTER = 1000


@dataclass(slots=True)
class GcPause:
    """A pause in progress; set ``freeze`` inside the block once it knows the result will live long."""

    freeze: bool


@contextmanager
def paused_gc(*, pause: bool = True, freeze: bool = False) -> Iterator[GcPause]:
    """Keep the cyclic collector off inside the block (when ``pause``), then restore it as it was.

    With ``freeze`` (given here or set on the yielded GcPause), everything
    alive when the block ends is moved out of the collector's generations
    (``gc.freeze()``), so later full collections do not rescan a large
    long-lived image; it is still freed by reference counting when dropped.
    A collector the caller had turned off stays off.
    """
    state = GcPause(freeze)
    stop = pause and gc.isenabled()
    if stop:
        gc.disable()
    try:
        yield state
    finally:
        if state.freeze:
            gc.freeze()
        if stop:
            gc.enable()
