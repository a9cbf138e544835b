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

A call may also send values to the parent as it goes (``note``, with ``call_forked``'s ``on_note``): each
is handed on as it arrives, and those sent before a child fails, is killed or hangs are handed on too, so
what a child found (a bad file it deletes) is never lost with it.

The process forks while other threads run: a lock one of them held at that
moment (inside OpenSSL, another C library, the import system) stays held for
ever in the child, so a child can hang however correct its call.  The parent
therefore waits with a deadline (``timeout``) and an ``abort`` event, and past
either SIGKILLs and reaps the child.  The deadline ends a child that is stuck (no
CPU used for ``timeout`` seconds) or runs away (``timeout`` seconds of CPU used),
not one that works slowly because a busy machine schedules it little.
"""

from __future__ import annotations

import ctypes
import gc
import os
import pickle
import select
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from secmeta.core.errors import InvalidValueError, SecmetaError

__all__ = ["ABORT_CHECK_S", "CHILD_NICENESS", "ForkedCallError", "call_forked", "note"]

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
#: How often a wait looks at its ``abort`` event (a blocking poll on the pipe in between, never a spin).
ABORT_CHECK_S = 0.05
# What a child writes to the pipe: its notes, each _NOTE and its pickle's size (u32) then the pickle, and last
# _RESULT then its result's pickle, up to the end of the pipe.
_NOTE, _RESULT = b"N", b"R"
_NOTE_HEADER = struct.Struct(">cI")
_notes = threading.local()  # .send: where ``note`` sends in this thread's call (the child's pipe; inline, on_note)


class ForkedCallError(SecmetaError):
    """The call failed in the child (its exception's type and message), or the child died."""


def call_forked(fn: Callable[..., T], /, *args, timeout: float, abort: threading.Event | None = None,
                on_note: Callable[[Any], None] | None = None, **kwargs) -> T:
    """``fn(*args, **kwargs)`` computed in a forked child; its result must pickle.

    With ``on_note``, the call may ``note`` values (each must pickle): each is handed to ``on_note``, in the
    calling thread, as it arrives, before the call's outcome, also when the child then fails or is killed.

    An exception in the child is raised here as ForkedCallError naming its
    type and message (the exception object itself stays in the child).  A child
    that has used no CPU for ``timeout`` seconds or has used ``timeout`` seconds
    of it (``_Deadline``), or when ``abort``
    is set (looked at every ABORT_CHECK_S), is SIGKILLed and reaped, and
    ForkedCallError says so.  Whatever the call writes is then left as the kill
    found it: the caller removes partial files.  (Where ``os.fork`` does not
    exist neither limit applies: the call runs here.)
    """
    if not timeout > 0:
        raise InvalidValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if not hasattr(os, "fork"):
        _notes.send = on_note
        try:
            return fn(*args, **kwargs)
        finally:
            _notes.send = None
    parent = os.getpid()
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except BaseException:
        os.close(read_end)
        os.close(write_end)
        raise
    if pid == 0:  # the child: never returns
        _child(parent, write_end, fn, args, kwargs, notes=on_note is not None)
    os.close(write_end)
    status = None
    deadline = _Deadline(timeout, partial(_cpu_seconds, f"/proc/{pid}/stat"))
    received = _Received(on_note)
    try:
        data = _read_all(read_end, deadline, abort, received)
        if data is not None:  # the child closed the pipe: it is exiting
            _, status = os.waitpid(pid, 0)
    finally:
        try:
            if status is None:  # timed out, aborted, or this thread was interrupted: the child must not outlive the wait
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                received.add(_ready(read_end))  # the notes it sent before it died
        finally:
            os.close(read_end)
    if data is None:
        reason = "the wait was aborted" if abort is not None and abort.is_set() else deadline.reason
        raise ForkedCallError(f"the forked child was killed: {reason}")
    return _outcome(data, status)


def note(value: Any) -> None:
    """Send ``value`` to the parent now, from a call ``call_forked`` runs with ``on_note`` (RuntimeError elsewhere):
    once this returns, the parent hands it to ``on_note`` whatever becomes of the call."""
    send = getattr(_notes, "send", None)
    if send is None:
        raise RuntimeError("note() sends only from a call that call_forked runs with on_note")
    send(value)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _send_note(fd: int, value: Any) -> None:
    data = pickle.dumps(value)
    _write_all(fd, _NOTE_HEADER.pack(_NOTE, len(data)) + data)


def _child(parent: int, write_end: int, fn, args, kwargs, *, notes: bool) -> None:
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
        _notes.send = partial(_send_note, write_end) if notes else None
        try:
            message = pickle.dumps((True, fn(*args, **kwargs)))
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
            message = pickle.dumps((False, f"{type(exc).__name__}: {exc}"))
        _write_all(write_end, _RESULT)
        _write_all(write_end, message)
        code = 0
    finally:
        os._exit(code)


class _Deadline:
    """When a child is given up: once it has used no CPU for ``timeout`` seconds (stuck: on a lock held at fork
    time, on a stalled disk), or has used ``timeout`` seconds of CPU.  A child that works, however slowly it is
    scheduled (at CHILD_NICENESS beside busy writers it may get a hundredth of a core), is not ended: its
    deadline moves on while its CPU time grows (issue 24: a checkpoint child under load hit a fixed 60 s
    deadline at 2M events, which stopped the whole fill).  Where the child's CPU time cannot be read
    (no /proc: ``cpu_seconds`` returns None), the deadline is ``timeout`` seconds after the fork.

    ``cpu_seconds``: the child's CPU time so far (``_cpu_seconds`` of its /proc stat file); ``clock``: seconds, as
    ``time.monotonic`` (tests give both)."""

    def __init__(self, timeout: float, cpu_seconds: Callable[[], float | None],
                 clock: Callable[[], float] = time.monotonic):
        self._cpu_seconds, self._clock = cpu_seconds, clock
        self._timeout = timeout
        self._look_every = min(timeout / 10, 1.0)  # how late a stall or the CPU limit may be noticed
        self._cpu = 0.0
        self._progressed = self._looked = clock()
        self.reason = f"it timed out after {timeout:g} s without progress"

    def left(self) -> float:
        """Seconds until the child is given up (at most until the next look at its CPU time); <= 0 when it is."""
        now = self._clock()
        if now - self._looked >= self._look_every or now - self._progressed >= self._timeout:  # a last look first
            self._looked = now
            cpu = self._cpu_seconds()
            if cpu is not None and cpu > self._cpu:
                self._cpu, self._progressed = cpu, now
            if self._cpu >= self._timeout:
                self.reason = f"it used {self._timeout:g} s of CPU"
                return 0.0
        return min(self._progressed + self._timeout - now, self._looked + self._look_every - now)


def _cpu_seconds(stat_path: str) -> float | None:
    """A process's user and system CPU time so far, from its /proc stat file, or None when it cannot be read."""
    try:
        with open(stat_path, "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # after the command name, which may hold spaces
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, IndexError, ValueError):
        return None


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class _Received:
    """What a child wrote so far: its notes handed to ``on_note`` as each is whole, the rest kept (the result's
    chunks as read: a large result is copied once, when joined)."""

    def __init__(self, on_note: Callable[[Any], None] | None):
        self._on_note = on_note
        self._head = bytearray()  # what is not yet a whole note
        self._result: list[bytes] = []  # once the result has begun: its chunks

    def add(self, chunk: bytes) -> None:
        if self._result:
            self._result.append(chunk)
            return
        self._head += chunk
        while self._head[:1] == _NOTE and len(self._head) >= _NOTE_HEADER.size:
            end = _NOTE_HEADER.size + _NOTE_HEADER.unpack_from(self._head)[1]
            if len(self._head) < end:
                return
            value = pickle.loads(self._head[_NOTE_HEADER.size:end])
            del self._head[:end]
            if self._on_note is not None:
                self._on_note(value)
        if self._head[:1] == _RESULT:
            self._result.append(bytes(self._head))
            self._head.clear()

    def rest(self) -> bytes:
        """What followed the notes (the result, when the child finished)."""
        return b"".join(self._result) if self._result else bytes(self._head)


def _ready(fd: int) -> bytes:
    """What the pipe holds now, read without waiting."""
    chunks = []
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while poller.poll(0) and (chunk := os.read(fd, _CHUNK)):
        chunks.append(chunk)
    return b"".join(chunks)


def _read_all(fd: int, deadline: _Deadline, abort: threading.Event | None, received: _Received) -> bytes | None:
    """Everything the child writes until it closes the pipe but its notes (handed on by ``received`` as they
    come); None once ``deadline`` gives it up or ``abort`` is set."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        left = deadline.left()
        if left <= 0 or (abort is not None and abort.is_set()):
            wait = 0.0  # one last look: a child that has answered is not killed
        else:
            wait = left if abort is None else min(left, ABORT_CHECK_S)
        if not poller.poll(wait * 1000):
            if wait == 0:
                return None
            continue
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return received.rest()
        received.add(chunk)


def _outcome(data: bytes, status: int):
    if os.WIFSIGNALED(status):
        raise ForkedCallError(f"the forked child was killed by signal {os.WTERMSIG(status)}")
    if data[:1] != _RESULT or os.WEXITSTATUS(status) != 0:
        raise ForkedCallError(f"the forked child exited with status {os.WEXITSTATUS(status)} and no result")
    ok, value = pickle.loads(memoryview(data)[1:])
    if not ok:
        raise ForkedCallError(value)
    return value
