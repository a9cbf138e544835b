"""The event loop ``secmeta serve`` runs on: uvloop's (libuv, in C) where it can, else asyncio's.

A served request is a few system calls and the answer's own Python; around them asyncio's own loop
runs Python frames per readiness event (its selector, its transport's read and write callbacks).
uvloop runs the same asyncio protocols, transports, timers and tasks from C: measured on this
project's 2-core machine, the server's CPU per small request fell by about a third (ApiVersions
~28 -> ~19 us, a DescribeAcls of a new filter ~72 -> ~58 us).

``choice(listeners)`` is "uvloop" when uvloop is installed, ``SECMETA_EVENT_LOOP=asyncio`` does not
decline it, and no listener uses TLS: uvloop starts reading an accepted socket as soon as its
protocol has seen the connection, even if the protocol paused it, so the bytes of a TLS client's
hello would reach the connection's reader before the server could hand the socket to TLS (a server
with a TLS listener stays on asyncio's loop, which keeps a pause).  The server uses only asyncio's
public interfaces, so both loops serve it alike; the test suite runs both (TLS listeners on asyncio's).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

__all__ = ["ENV", "LOOPS", "choice", "run"]

ENV = "SECMETA_EVENT_LOOP"
LOOPS = ("asyncio", "uvloop")
T = TypeVar("T")


def _uvloop() -> Any:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop


def choice(listeners: Iterable[Any]) -> str:
    """The loop a server of ``listeners`` (``secmeta.core.server.listeners.Listener``) runs on: "uvloop" or "asyncio"."""
    if os.environ.get(ENV, "").strip().lower() == "asyncio" or _uvloop() is None:
        return "asyncio"
    return "asyncio" if any(listener.protocol.tls for listener in listeners) else "uvloop"


def run(main: Coroutine[Any, Any, T], loop: str) -> T:
    """``asyncio.run(main)`` on the loop named ``loop`` (``choice``'s; a new loop, closed at the end)."""
    if loop not in LOOPS:
        raise ValueError(f"event loop must be one of {', '.join(LOOPS)}, not {loop!r}")
    uvloop = _uvloop() if loop == "uvloop" else None
    if uvloop is None:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
