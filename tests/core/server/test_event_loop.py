"""secmeta.core.server.event_loop: uvloop serves a server without TLS listeners, asyncio's loop any other."""

from __future__ import annotations

import asyncio

import pytest

from secmeta.core.server import event_loop
from secmeta.core.server.listeners import parse_listeners

PLAIN = parse_listeners("PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0")
WITH_TLS = parse_listeners("SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0")


async def _loop_type() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


def test_a_server_without_tls_runs_on_uvloop_and_one_with_tls_on_asyncios_loop(monkeypatch):
    """uvloop (installed with secmeta) serves plaintext listeners; a TLS listener keeps asyncio's loop, whose pause of
    an accepted socket holds until the server hands it to TLS."""
    monkeypatch.delenv(event_loop.ENV, raising=False)
    assert event_loop.choice(PLAIN) == "uvloop"
    assert event_loop.choice(WITH_TLS) == "asyncio"
    assert event_loop.run(_loop_type(), event_loop.choice(PLAIN)) == "uvloop"
    assert event_loop.run(_loop_type(), event_loop.choice(WITH_TLS)) == "asyncio"


def test_the_environment_may_decline_uvloop(monkeypatch):
    """SECMETA_EVENT_LOOP=asyncio keeps every server on asyncio's own loop."""
    monkeypatch.setenv(event_loop.ENV, "asyncio")
    assert event_loop.choice(PLAIN) == "asyncio"


def test_an_unknown_loop_name_is_refused_naming_the_choices():
    """A serving process told of a loop it does not know refuses to start, naming the ones it knows."""
    main = _loop_type()
    with pytest.raises(ValueError, match="asyncio, uvloop"):
        event_loop.run(main, "trio")
    main.close()
