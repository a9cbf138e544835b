"""Servers for the protocol tests: started on 127.0.0.1 ephemeral ports over fresh stores (tests/serverkit.py)."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from tests.serverkit import running_server

ALL_LISTENERS = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One server on all four listeners (admin / ADMIN_PASSWORD), shared by a module's read-only tests."""
    with running_server(tmp_path_factory.mktemp("shared-server"), ALL_LISTENERS) as server:
        yield server


@pytest.fixture
def serve(tmp_path):
    """``serve(listeners, **running_server options)`` starts a server for this test only."""
    with ExitStack() as stack:
        count = iter(range(1000))

        def start(listeners: str = "PLAINTEXT://127.0.0.1:0", **options):
            return stack.enter_context(running_server(tmp_path / f"server-{next(count)}", listeners, **options))

        yield start
