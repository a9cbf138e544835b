"""A connection's read deadline: when the client must have sent what the connection waits for.

``asyncio.timeout`` costs a timer per use (a heap push, a reschedule, a cancel); a connection
waits twice per request (the size, then the body), so that was a large share of a small
request's time.  Here ``expect(seconds, what)`` only records the due time, and one timer per
connection checks it: armed at most ``period`` ahead (the shortest wait there is), and re-armed
at ``min(due, now + period)`` whenever it fires early.  Any due time is at least ``period`` after
it is set, so the timer, which was armed no later than ``period`` before that, never fires after
it: a wait ends at its due time, as exactly as asyncio's timer would end it.  Expiry calls
``on_expiry(what)`` once (the connection cancels its task and closes, naming ``what``).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

__all__ = ["Deadline"]


class Deadline:
    """One connection's deadline for its current wait on the client; ``close()`` when the connection ends."""

    __slots__ = ("_loop", "_period", "_on_expiry", "_due", "_what", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, period: float, on_expiry: Callable[[str], None]):
        self._loop, self._period, self._on_expiry = loop, period, on_expiry
        self._due, self._what = math.inf, ""
        self._timer: asyncio.TimerHandle | None = loop.call_at(loop.time() + period, self._check)

    def expect(self, seconds: float, what: str) -> None:
        """The current wait must end within ``seconds`` (at least ``period``), else it expires as ``what``."""
        self._due, self._what = self._loop.time() + seconds, what

    def clear(self) -> None:
        """Not waiting on the client now."""
        self._due = math.inf

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        now = self._loop.time()
        if now >= self._due:
            self._timer, self._due = None, math.inf
            self._on_expiry(self._what)
            return
        self._timer = self._loop.call_at(min(self._due, now + self._period), self._check)
