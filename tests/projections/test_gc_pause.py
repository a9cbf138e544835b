"""paused_gc: the one way readers pause Python's cyclic collector while building images or rows."""

from __future__ import annotations

import contextlib
import gc
import os
import queue
import signal
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.projections.gc_pause import paused_gc


@pytest.fixture(autouse=True)
def _collector_on():
    gc.enable()
    yield
    gc.enable()


def test_collector_is_off_inside_and_back_on_after():
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collector_is_back_on_after_an_exception():
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off():
    gc.disable()
    with paused_gc():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_pause_false_leaves_the_collector_running():
    with paused_gc(pause=False):
        assert gc.isenabled()


def test_nested_pauses_restore_only_at_the_outer_end():
    with paused_gc():
        with paused_gc():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def _frozen_by(freeze_given: bool, freeze_set: bool | None) -> int:
    """How many more objects are frozen after a block that built 100 lists (still alive)."""
    before = gc.get_freeze_count()
    with paused_gc(freeze=freeze_given) as pause:
        kept = [[] for _ in range(100)]
        if freeze_set is not None:
            pause.freeze = freeze_set
    frozen = gc.get_freeze_count() - before
    assert len(kept) == 100
    return frozen


@pytest.mark.parametrize(("given", "set_inside", "frozen"), [
    (False, None, False),
    (True, None, True),
    (False, True, True),  # decided inside the block, once the size of the result is known
    (True, False, False),
])
def test_freeze_moves_what_is_alive_out_of_the_collectors_generations(given, set_inside, frozen):
    assert (_frozen_by(given, set_inside) >= 100) is frozen


class _Pauser:
    """A real thread that enters or leaves a ``paused_gc`` block when told, and reports the collector's state after
    each step (the main thread waits for it: the interleaving is the test's, not the scheduler's)."""

    def __init__(self):
        self._orders: queue.Queue[str] = queue.Queue()
        self._done: queue.Queue[bool | BaseException] = queue.Queue()
        self.inside = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        stack = contextlib.ExitStack()
        while (order := self._orders.get()) != "stop":
            try:
                if order == "enter":
                    stack.enter_context(paused_gc())
                else:
                    stack.close()  # leaves every block this thread is in, innermost first
                self._done.put(gc.isenabled())
            except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
                self._done.put(exc)
        stack.close()

    def do(self, order: str) -> bool:
        self._orders.put(order)
        result = self._done.get(timeout=10)
        if isinstance(result, BaseException):
            raise result
        self.inside = self.inside + 1 if order == "enter" else 0
        return result

    def stop(self):
        self._orders.put("stop")
        self._thread.join(10)


def test_a_thread_leaving_its_pause_does_not_turn_the_collector_on_inside_another_threads():
    """Thread A pauses, thread B pauses, A leaves: B is still inside its block, so the collector stays off until B
    leaves too (it was turned back on under B)."""
    a, b = _Pauser(), _Pauser()
    try:
        a.do("enter")
        b.do("enter")
        assert a.do("leave") is False
        assert b.do("leave") is True
    finally:
        a.stop()
        b.stop()


@settings(max_examples=60, deadline=None)
@given(initially_on=st.booleans(),
       steps=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["enter", "leave"])), min_size=1, max_size=20))
def test_the_collector_is_off_while_any_thread_pauses_it_and_as_before_once_none_does(initially_on, steps):
    """Three threads entering (nested) and leaving pauses in any interleaving: while any block is open the collector
    is off; once none is, it is as it was before the first (off stays off)."""
    (gc.enable if initially_on else gc.disable)()
    threads = [_Pauser() for _ in range(3)]
    try:
        for who, order in steps:
            enabled = threads[who].do(order)
            if any(t.inside for t in threads):
                assert enabled is False
            else:
                assert enabled is initially_on
        for thread in threads:
            thread.do("leave")
        assert gc.isenabled() is initially_on
    finally:
        for thread in threads:
            thread.stop()
        gc.enable()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_another_thread_holds_the_pause_lock_can_still_pause():
    """The count is under a lock; a child forked while another thread held it (a forked snapshot writer beside a
    reader's pause) gets a fresh one, so its own pauses do not hang."""
    from secmeta.projections import gc_pause

    held, release = threading.Event(), threading.Event()

    def hold():
        with gc_pause._PAUSES.lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        pid = os.fork()
        if pid == 0:  # the child: pause, then report
            try:
                with paused_gc():
                    pass
            finally:
                os._exit(0)
        deadline = time.monotonic() + 20
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        if done[0] == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung in paused_gc on the lock another thread held at the fork")
        assert os.waitstatus_to_exitcode(done[1]) == 0
    finally:
        release.set()
        holder.join(10)
