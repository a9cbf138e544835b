"""The write bound's deadline: a request's own timeout where its API has one, else the server's."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from secmeta.core.errors import ErrorCode
from secmeta.core.server.write_bound import WriteBound


def _call(**request):
    return SimpleNamespace(request=SimpleNamespace(**request))


@given(own=st.one_of(st.none(), st.integers(-5, 10_000_000)), server_ms=st.integers(1, 10_000_000))
def test_a_write_must_start_by_its_own_timeout_or_else_the_servers(own, server_ms):
    """The deadline is the request's ``timeout_ms`` when it has a non-negative one, else ``write_timeout_ms``."""
    bound = WriteBound(1, server_ms)
    before = time.monotonic()
    refused, deadline = asyncio.run(bound.admit(_call() if own is None else _call(timeout_ms=own)))
    after = time.monotonic()
    expected_ms = own if own is not None and own >= 0 else server_ms
    assert refused is None and before + expected_ms / 1000 <= deadline <= after + expected_ms / 1000


def test_a_full_bound_holds_a_write_until_a_slot_frees_and_times_it_out_at_its_deadline():
    """``max_pending`` writes admitted: the next waits; a release admits it; with none released by its own
    timeout it is REQUEST_TIMED_OUT naming the limit and its timeout."""
    async def scenario():
        bound = WriteBound(2, 60_000)
        assert (await bound.admit(_call()))[0] is None
        assert (await bound.admit(_call()))[0] is None
        held = asyncio.ensure_future(bound.admit(_call()))
        await asyncio.sleep(0)
        assert not held.done()                       # held back while both slots are taken
        bound.release()
        assert (await held)[0] is None               # a slot freed: admitted
        refused, _ = await bound.admit(_call(timeout_ms=0))
        assert refused.code == ErrorCode.REQUEST_TIMED_OUT
        assert "write_queue_max" in refused.message and "(0 ms" in refused.message
    asyncio.run(scenario())
