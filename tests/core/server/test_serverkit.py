"""The test servers' own hygiene (tests/serverkit.py): nothing a test leaves behind outlives its server."""

from __future__ import annotations

import gc

from confluent_kafka.admin import AdminClient

from tests.serverkit import running_server


def _live_clients() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is AdminClient)


def test_a_client_left_in_a_reference_cycle_is_freed_before_its_server_stops(tmp_path):
    """A librdkafka client that a test leaves unreachable in a reference cycle (as a failed Future's traceback
    holds the test's frame) is freed when the server stops, not left reconnecting to the closed port."""
    enabled = gc.isenabled()
    gc.disable()        # no collection but the one under test: the cycle stays until then
    try:
        before = _live_clients()
        with running_server(tmp_path) as server:
            cycle: dict = {"client": AdminClient(server.confluent_config("PLAINTEXT"))}
            cycle["self"] = cycle
            del cycle
            assert _live_clients() == before + 1
        assert _live_clients() == before
    finally:
        if enabled:
            gc.enable()
