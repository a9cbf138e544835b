"""A forked child must not close the Spark driver's Py4J connections: they are its parent's sockets.

PySpark talks to its JVM over Py4J's pinned-thread connections, one socket per Python thread: a thread-local
holds a finalizer (``ThreadLocalConnectionFinalizer``) that drops the connection from the client's deque when the
thread ends, and the connection's own ``__del__`` then closes it with ``shutdown``.  ``os.fork`` from a thread
other than the main one (a store's snapshot and checkpoint children, core/snapshots/forked.py) clears every other
thread's state in the child before the fork returns, so the child runs those finalizers for the main thread's
connection: its ``shutdown`` acts on the socket the parent shares, and the JVM drops the connection.  The driver's
next call then fails ("Connection reset by peer", py4j's answer "x") or is sent again on a new connection.

``keep_connections_in_forked_children()`` makes both finalizers do nothing in a process other than the one that
made the connection: only the process that opened a socket closes it.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["keep_connections_in_forked_children"]

_GUARDED = "_secmeta_fork_guarded"


def keep_connections_in_forked_children() -> None:
    """Guard Py4J's connection finalizers (once per process; later calls do nothing)."""
    from py4j import clientserver

    for cls in (clientserver.ThreadLocalConnectionFinalizer, clientserver.ClientServerConnection):
        if not getattr(cls, _GUARDED, False):
            _guard(cls)


def _guard(cls: Any) -> None:
    init, finalize = cls.__init__, cls.__del__

    def __init__(self, *args, **kwargs) -> None:
        self._secmeta_pid = os.getpid()
        init(self, *args, **kwargs)

    def __del__(self) -> None:
        if getattr(self, "_secmeta_pid", None) in (None, os.getpid()):   # made before the guard: as before
            finalize(self)

    cls.__init__, cls.__del__ = __init__, __del__
    setattr(cls, _GUARDED, True)
