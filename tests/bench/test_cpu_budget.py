"""The large answer's sizing (scripts/bench/cpu_budget.py): requests until a coarse CPU clock has moved a budget,
so the figure per ACL resolves small changes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scripts.bench.cpu_budget import run_for_cpu

TICK = 0.01     # /proc/PID/stat's step here


class FakeServer:
    """A server whose CPU grows by ``cost`` seconds per request, read (as /proc shows it) in whole ticks."""

    def __init__(self, cost: float):
        self.cost, self.exact, self.calls = cost, 0.0, []

    def request(self, n: int) -> None:
        self.calls.append(n)
        self.exact += self.cost

    def cpu(self) -> float:
        return int(self.exact / TICK + 1e-9) * TICK


@given(us_per_acl=st.floats(0.2, 3.0), acls=st.integers(500, 5000))
def test_a_round_of_two_seconds_reads_the_cost_per_acl_within_a_fiftieth_of_a_microsecond(us_per_acl, acls):
    """At up to 3 us per ACL (the in-process figure is ~0.8, the target 2x it) and any answer size, a 2 s round
    measures the cost per ACL to within 0.02 us, and says how finely (one tick per ACL of the requests it sent),
    having sent each request once."""
    server = FakeServer(us_per_acl * acls * 1e-6)
    sized = run_for_cpu(server.request, server.cpu, 2.0, TICK)
    assert server.calls == list(range(sized.requests))
    assert sized.cpu >= 2.0 and sized.ticks >= 199.99
    assert sized.resolution(acls) <= 0.02
    assert abs(sized.per(acls) - us_per_acl) <= sized.resolution(acls)


def test_thirty_requests_cannot_tell_one_microsecond_per_acl_from_two_thirds():
    """Why the round is sized by CPU: 30 answers of 1,000 ACLs at 0.9 us per ACL read as 0.67 us per ACL, a
    step of 0.33 us; the same cost measured for 2 s of CPU reads within 0.02 us of 0.9."""
    fixed = FakeServer(0.9e-3)
    for n in range(30):
        fixed.request(n)
    assert fixed.cpu() / 30 / 1000 * 1e6 == pytest.approx(2 / 3)
    server = FakeServer(0.9e-3)
    assert run_for_cpu(server.request, server.cpu, 2.0, TICK).per(1000) == pytest.approx(0.9, abs=0.02)


def test_a_clock_that_does_not_move_stops_at_the_wall_time_limit_with_its_ticks_shown():
    """A server that uses no CPU does not hold the bench forever: the round ends at max_seconds and shows 0 ticks."""
    idle = FakeServer(0.0)
    sized = run_for_cpu(idle.request, idle.cpu, 2.0, TICK, max_seconds=0.05)
    assert sized.requests > 0 and sized.ticks == 0


@pytest.mark.parametrize("budget, tick, batch", [(0, TICK, 10), (2.0, 0, 10), (2.0, TICK, 0)])
def test_a_budget_tick_or_batch_that_is_not_positive_is_refused_naming_it(budget, tick, batch):
    with pytest.raises(ValueError, match="budget, tick and batch"):
        run_for_cpu(lambda n: None, lambda: 0.0, budget, tick, batch=batch)
