"""Time in secmeta: clocks, milliseconds since the epoch, and the points users name.

A clock is a callable returning seconds since the epoch (``time.time`` is the wall
clock); every timestamp secmeta writes is ``now_ms(clock)`` of the store's clock
(StoreConfig.clock), so a store given a fixed clock stamps everything with its time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]

wall_clock: Clock = time.time


def now_ms(clock: Clock = wall_clock) -> int:
    """The clock's time now, in milliseconds since the epoch."""
    return int(clock() * 1000)
