"""The operator of a write: the operating-system process that makes it (OS user, host name, pid, program).

A local caller asserts its principal (``--as``) and host (``--from-host``); what the writing process
observes of itself is recorded beside them, so every logged change names the account and machine that
made it. ``local_operator()`` is the one place that reads them; the store's write path calls it.
"""

from __future__ import annotations

import functools
import getpass
import os
import socket
import sys
from pathlib import Path

from secmeta.events.records import Operator

__all__ = ["local_operator"]


def local_operator() -> Operator:
    """This process as the operator of a write (the pid is read each time: a forked child is another process)."""
    user, host, program = _identity()
    return Operator(user, host, os.getpid(), program)


@functools.cache
def _identity() -> tuple[str, str, str]:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry: the numeric uid still names the account
        user = f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else Path(sys.executable).name
    return user, socket.gethostname(), program or "python"
