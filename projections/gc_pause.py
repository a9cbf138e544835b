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
import os
import threading
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


class _Pauses:
    """The pauses in progress in this process, across threads: the collector is off while any is, and comes back
    on when the last ends only if it was on when the first began (a count under a lock, not per block: a thread
    must not turn it back on inside another thread's pause)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.restore = False

    def begin(self) -> None:
        with self.lock:
            if self.count == 0:
                self.restore = gc.isenabled()
            self.count += 1
            gc.disable()

    def end(self) -> None:
        with self.lock:
            self.count -= 1
            if self.count == 0 and self.restore:
                gc.enable()

    def after_fork(self) -> None:
        """In a forked child: a new lock (another thread may have held the parent's at the fork). The pauses of the
        parent's other threads never end in the child, so its collector stays off while they count."""
        self.lock = threading.Lock()


_PAUSES = _Pauses()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_PAUSES.after_fork)


@contextmanager
def paused_gc(*, pause: bool = True, freeze: bool = False) -> Iterator[GcPause]:
    """Keep the cyclic collector off inside the block (when ``pause``), then restore it as it was.

    Pauses nest, within a thread and across threads: the collector comes back on only when the last pause in
    progress ends, and only if it was on when the first began (``_Pauses``).
    With ``freeze`` (given here or set on the yielded GcPause), everything
    alive when the block ends is moved out of the collector's generations
    (``gc.freeze()``), so later full collections do not rescan a large
    long-lived image; it is still freed by reference counting when dropped.
    A collector the caller had turned off stays off.
    """
    state = GcPause(freeze)
    if pause:
        _PAUSES.begin()
    try:
        yield state
    finally:
        if state.freeze:
            gc.freeze()
        if pause:
            _PAUSES.end()
