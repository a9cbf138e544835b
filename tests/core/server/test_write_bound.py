"""The write bound's deadline: a request's own timeout where its API has one, else the server's."""

from __future__ import annotations

import time
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from secmeta.core.errors import ErrorCode
from secmeta.core.server.write_bound import WriteBound


def _call(**request):
    return SimpleNamespace(request=SimpleNamespace(**request))


class _Handler:
    def error_response(self, call, error):
        return error


@given(own=st.one_of(st.none(), st.integers(-5, 10_000_000)), server_ms=st.integers(1, 10_000_000))
def test_a_write_must_start_by_its_own_timeout_or_else_the_servers(own, server_ms):
    """The deadline is the request's ``timeout_ms`` when it has a non-negative one, else ``write_timeout_ms``."""
    bound = WriteBound(1, server_ms)
    before = time.monotonic()
    refused, deadline = bound.admit(_Handler(), _call() if own is None else _call(timeout_ms=own))
    after = time.monotonic()
    expected_ms = own if own is not None and own >= 0 else server_ms
    assert refused is None and before + expected_ms / 1000 <= deadline <= after + expected_ms / 1000


def test_a_full_bound_refuses_with_request_timed_out_until_a_write_is_released():
    """``max_pending`` writes admitted: the next is REQUEST_TIMED_OUT naming the limit; a release admits one."""
    bound = WriteBound(2, 1000)
    assert bound.admit(_Handler(), _call())[0] is None and bound.admit(_Handler(), _call())[0] is None
    refused, _ = bound.admit(_Handler(), _call())
    assert refused.code == ErrorCode.REQUEST_TIMED_OUT and "write_queue_max 2" in refused.message
    bound.release()
    assert bound.admit(_Handler(), _call())[0] is None
