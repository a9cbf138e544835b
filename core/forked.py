"""Running one CPU-heavy call in a forked child, off the parent's GIL.

A background thread that encodes a large immutable image (a policy snapshot
of a million ACLs) holds the GIL for seconds beside the writers: each writer
that releases it for I/O waits up to a switch interval to get it back.  A
forked child sees the same image (copy-on-write pages, nothing serialised),
runs the call on its own interpreter and core, and sends back its pickled
result; the calling thread waits for it in a system call that holds no GIL.

The child dies with its parent (Linux's parent-death signal: no snapshot of a
writer that is gone lands in a store another writer may have opened since),
closes every descriptor it inherited except the result pipe (the call must
open any file it uses itself), keeps the cyclic collector off (a collection would
touch, and so copy, every page of the image), runs at a lower CPU priority
(``CHILD_NICENESS``) so that on a busy machine the writers come first, and
leaves through ``os._exit``: no buffered file of the parent is flushed twice,
no atexit handler runs.  Where ``os.fork`` does not exist the call runs in
the calling thread.
"""

from __future__ import annotations

import ctypes
import gc
import os
import pickle
import signal
import sys
from collections.abc import Callable
from typing import TypeVar

from core.errors import SecmetaError

__all__ = ["CHILD_NICENESS", "ForkedCallError", "call_forked"]

T = TypeVar("T")
_PR_SET_PDEATHSIG = 1


def _prctl():
    """Linux libc's prctl, resolved here (a child must not load libraries: the loader's lock may be held)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()
#: The child's niceness increment: it is background work, the writers' threads come first on a busy machine.
CHILD_NICENESS = 10
_CHUNK = 1 << 16


class ForkedCallError(SecmetaError):
    """The call failed in the child (its exception's type and message), or the child died."""


def call_forked(fn: Callable[..., T], /, *args, **kwargs) -> T:
    """``fn(*args, **kwargs)`` computed in a forked child; its result must pickle.

    An exception in the child is raised here as ForkedCallError naming its
    type and message (the exception object itself stays in the child).
    """
    if not hasattr(os, "fork"):
        return fn(*args, **kwargs)
    parent = os.getpid()
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except BaseException:
        os.close(read_end)
        os.close(write_end)
        raise
    if pid == 0:  # the child: never returns
        _child(parent, write_end, fn, args, kwargs)
    os.close(write_end)
    try:
        data = _read_all(read_end)
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    return _outcome(data, status)


def _child(parent: int, write_end: int, fn, args, kwargs) -> None:
    code = 1
    try:
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            return
        gc.disable()
        os.nice(CHILD_NICENESS)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; a ^C reaches it too
        os.closerange(3, write_end)
        os.closerange(write_end + 1, os.sysconf("SC_OPEN_MAX"))
        try:
            message = pickle.dumps((True, fn(*args, **kwargs)))
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
            message = pickle.dumps((False, f"{type(exc).__name__}: {exc}"))
        view = memoryview(message)
        while view:
            view = view[os.write(write_end, view):]
        code = 0
    finally:
        os._exit(code)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, _CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def _outcome(data: bytes, status: int):
    if os.WIFSIGNALED(status):
        raise ForkedCallError(f"the forked child was killed by signal {os.WTERMSIG(status)}")
    if not data or os.WEXITSTATUS(status) != 0:
        raise ForkedCallError(f"the forked child exited with status {os.WEXITSTATUS(status)} and no result")
    ok, value = pickle.loads(data)
    if not ok:
        raise ForkedCallError(value)
    return value
