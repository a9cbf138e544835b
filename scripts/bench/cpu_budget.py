"""Requests in a loop until a CPU clock has advanced by a budget: enough work for a coarse clock to resolve a figure.

A server's CPU from ``/proc/PID/stat`` moves in ticks of 1/``SC_CLK_TCK`` s (10 ms here): 30 requests
of 1,000 ACLs at ~1 us per ACL are 3 ticks, so their CPU per ACL can only read 0, 0.33, 0.67 ... us.
``run_for_cpu`` keeps sending requests until the clock has moved ``budget`` seconds (2 s: 200 ticks), and
``Sized.resolution`` is what one tick is worth per unit of work: the step the figure moves in.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["PROC_TICK", "Sized", "run_for_cpu"]

#: The step of a process's CPU in /proc/PID/stat (utime + stime are counted in clock ticks).
PROC_TICK = 1.0 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sized:
    """``requests`` calls used ``cpu`` seconds on a clock that moves in steps of ``tick`` seconds."""

    requests: int
    cpu: float
    tick: float

    @property
    def ticks(self) -> float:
        return self.cpu / self.tick

    def per(self, units: int) -> float:
        """CPU us per unit of work (``units`` per request: ACLs in each answer)."""
        return self.cpu / self.requests / units * 1e6

    def resolution(self, units: int) -> float:
        """One tick in us per unit of work: the smallest change ``per(units)`` can show."""
        return self.tick / self.requests / units * 1e6


def run_for_cpu(call: Callable[[int], object], cpu: Callable[[], float], budget: float, tick: float, *,
                batch: int = 10, max_seconds: float = 300.0) -> Sized:
    """Call ``call(0)``, ``call(1)`` ... in batches of ``batch`` until ``cpu()`` has advanced by at least
    ``budget`` seconds (or ``max_seconds`` of wall time have passed: then fewer ticks, shown by ``ticks``)."""
    if budget <= 0 or tick <= 0 or batch <= 0:
        raise ValueError(f"budget, tick and batch must be > 0, got {budget}, {tick}, {batch}")
    deadline = time.monotonic() + max_seconds
    start = cpu()
    n = 0
    while True:
        for _ in range(batch):
            call(n)
            n += 1
        used = cpu() - start
        if used >= budget or time.monotonic() >= deadline:
            return Sized(n, used, tick)
