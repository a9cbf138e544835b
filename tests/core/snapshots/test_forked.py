"""secmeta.core.snapshots.forked: a call computed in a forked child, its result or failure brought back."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.core.errors import InvalidValueError
from secmeta.core.snapshots import forked
from secmeta.core.snapshots.forked import CHILD_NICENESS, ForkedCallError, call_forked, note

#: A deadline no call here comes near: the tests of the deadline itself set their own.
GENEROUS = 600


def test_the_result_is_computed_in_another_process():
    """The value comes back pickled, and the function ran in a child, not here."""
    pid, value = call_forked(lambda n: (os.getpid(), {"squares": [i * i for i in range(n)]}), 4,
                             timeout=GENEROUS)
    assert pid != os.getpid() and value == {"squares": [0, 1, 4, 9]}


def test_an_exception_in_the_child_is_raised_with_its_type_and_message():
    """The child's exception is raised here as ForkedCallError naming its type and message."""
    def fail():
        raise ValueError("no room on the device")

    with pytest.raises(ForkedCallError, match="^ValueError: no room on the device$"):
        call_forked(fail, timeout=GENEROUS)


def test_a_child_killed_by_a_signal_is_an_error_naming_it():
    """A child that dies without answering (killed, out of memory) is an error, never a None result."""
    with pytest.raises(ForkedCallError, match=f"killed by signal {signal.SIGKILL.value}"):
        call_forked(lambda: os.kill(os.getpid(), signal.SIGKILL), timeout=GENEROUS)


def test_the_child_holds_none_of_the_parents_files(tmp_path):
    """Descriptors open here (a writer lock among them) are closed in the child, so a parent that dies
    leaves nothing of its own held open by a child still writing."""
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        def still_open() -> bool:
            try:
                os.fstat(fd)
            except OSError:
                return False
            return True

        assert still_open()
        assert call_forked(still_open, timeout=GENEROUS) is False
        assert still_open()
    finally:
        os.close(fd)


def _reaped(pid: int) -> bool:
    """Whether ``pid`` is no longer a child of this process (it was waited for: no zombie is left)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def _blocked_on_a_lock_held_at_fork(pid_file: Path):
    """A call that deadlocks as a child can: on a lock another thread held when the process forked."""
    held = threading.Lock()
    holder_has_it, release = threading.Event(), threading.Event()

    def holder():
        with held:
            holder_has_it.set()
            release.wait()

    threading.Thread(target=holder, daemon=True).start()
    holder_has_it.wait()

    def call():
        pid_file.write_text(str(os.getpid()))
        with held:  # in the child no thread will ever release it
            return "unreachable"

    return call, release


def test_a_child_that_never_answers_is_killed_at_the_timeout_and_reaped(tmp_path):
    """A child deadlocked on a lock held at fork time is SIGKILLed at the deadline; the error names the timeout."""
    call, release = _blocked_on_a_lock_held_at_fork(tmp_path / "pid")
    try:
        with pytest.raises(ForkedCallError, match=r"^the forked child was killed: it timed out after 0\.5 s without progress$"):
            call_forked(call, timeout=0.5)
    finally:
        release.set()
    assert _reaped(int((tmp_path / "pid").read_text()))


class _Child:
    """A child as ``_Deadline`` sees it, on a clock the test moves: ``run(seconds, cpu)`` lets ``seconds`` pass
    while it uses ``cpu`` seconds of CPU, asking the deadline what is left at each look (as the parent's wait
    does); ``cpu=None`` reads as a machine without /proc."""

    def __init__(self, timeout: float):
        from secmeta.core.snapshots.forked import _Deadline

        self.now, self.cpu = 1000.0, 0.0
        self.readable = True
        self.deadline = _Deadline(timeout, lambda: self.cpu if self.readable else None, clock=lambda: self.now)

    def run(self, seconds: float, cpu: float | None) -> float:
        """What the deadline leaves after ``seconds`` more (0 or less: given up), looked at every 10 ms."""
        self.readable = cpu is not None
        steps = round(seconds / 0.01)
        left = self.deadline.left()
        for _ in range(steps):
            self.now += 0.01
            self.cpu += (cpu or 0.0) / steps
            left = self.deadline.left()
            if left <= 0:
                break
        return left


def test_a_child_that_keeps_working_however_slowly_is_not_given_up_at_its_timeout():
    """A child scheduled little (10 ms of CPU a second, at CHILD_NICENESS beside busy writers) runs for 10 times its
    1 s timeout and is never given up: each bit of CPU it uses moves its deadline on (issue 24)."""
    child = _Child(timeout=1.0)
    for _ in range(10):
        assert child.run(1.0, cpu=0.01) > 0


def test_a_child_that_uses_no_cpu_for_its_timeout_is_given_up_naming_the_stall():
    """A child that worked, then uses no CPU for its timeout (stuck on a lock held at fork time), is given up within
    a tenth of the timeout after it; the reason says it made no progress."""
    child = _Child(timeout=1.0)
    assert child.run(0.5, cpu=0.2) > 0
    assert child.run(0.95, cpu=0.0) > 0
    assert child.run(0.15, cpu=0.0) <= 0
    assert child.deadline.reason == "it timed out after 1 s without progress"


def test_a_child_that_works_without_end_is_given_up_at_its_cpu_limit():
    """A runaway child (a core all to itself) is given up once it has used its timeout in CPU, within a tenth of it;
    the reason says so."""
    child = _Child(timeout=1.0)
    assert child.run(0.9, cpu=0.9) > 0
    assert child.run(0.3, cpu=0.3) <= 0
    assert child.deadline.reason == "it used 1 s of CPU"


def test_without_its_cpu_time_a_child_is_given_up_its_timeout_after_the_fork():
    """Where a child's CPU time cannot be read (no /proc), the deadline is its timeout after the fork."""
    child = _Child(timeout=1.0)
    assert child.run(0.95, cpu=None) > 0
    assert child.run(0.1, cpu=None) <= 0


def test_the_cpu_time_of_a_process_is_read_from_its_proc_stat_file():
    """``_cpu_seconds`` reads a process's user + system time (this one's, as ``time.process_time`` tells it, within
    a few clock ticks), and None for a process that does not exist."""
    from secmeta.core.snapshots.forked import _TICKS, _cpu_seconds

    until = time.process_time() + 0.05
    while time.process_time() < until:
        pass
    if not Path(f"/proc/{os.getpid()}/stat").exists():
        pytest.skip("no /proc")
    before = time.process_time()
    read = _cpu_seconds(f"/proc/{os.getpid()}/stat")
    assert read is not None and abs(read - before) <= 3 / _TICKS + (time.process_time() - before)
    assert _cpu_seconds("/proc/0/stat") is None


def test_abort_kills_the_child_at_once(tmp_path):
    """Setting ``abort`` ends the wait long before the timeout: the child is killed and reaped."""
    call, release = _blocked_on_a_lock_held_at_fork(tmp_path / "pid")
    abort, outcome = threading.Event(), []

    def caller():
        try:
            call_forked(call, timeout=3600, abort=abort)
        except ForkedCallError as exc:
            outcome.append(str(exc))

    waiting = threading.Thread(target=caller, daemon=True)
    waiting.start()
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        abort.set()
        waiting.join(timeout=60)
    finally:
        release.set()
    assert not waiting.is_alive()
    assert outcome == ["the forked child was killed: the wait was aborted"]
    assert _reaped(int((tmp_path / "pid").read_text()))


# Notes of every size: empty, small, and larger than the pipe's buffer and a read's chunk (split across reads).
notes = st.lists(st.one_of(st.text(max_size=20), st.binary(max_size=8), st.integers(1, 300_000).map(bytes)),
                 max_size=6)


@settings(max_examples=20, deadline=None)  # a fork per example
@given(sent=notes, result=st.one_of(st.none(), st.text(max_size=10)))
def test_notes_reach_the_parent_whole_and_in_order_before_the_result(sent, result):
    """Whatever the call notes arrives as sent, in order, before call_forked returns its result unchanged."""
    got = []

    def call():
        for value in sent:
            note(value)
        return result, len(got)  # the parent's list as the fork left it: empty

    assert call_forked(call, timeout=GENEROUS, on_note=got.append) == (result, 0)
    assert got == sent


def test_the_notes_sent_before_the_call_fails_reach_the_parent():
    """A call that notes what it found and then fails: the notes arrive, then its failure is raised."""
    got = []

    def call():
        note("found bad: snapshot-44")
        raise OSError("disk full")

    with pytest.raises(ForkedCallError, match="^OSError: disk full$"):
        call_forked(call, timeout=GENEROUS, on_note=got.append)
    assert got == ["found bad: snapshot-44"]


def test_the_notes_sent_before_the_child_is_killed_reach_the_parent():
    """A child that notes, then hangs: aborted (here by the note itself), the note was handed on."""
    got, abort = [], threading.Event()

    def received(value):
        got.append(value)
        abort.set()

    def call():
        note("found bad: snapshot-44")
        threading.Event().wait()

    with pytest.raises(ForkedCallError, match="the wait was aborted"):
        call_forked(call, timeout=GENEROUS, abort=abort, on_note=received)
    assert got == ["found bad: snapshot-44"]


def test_a_note_still_unread_when_the_child_is_given_up_is_read_after_the_kill(monkeypatch):
    """A note the child sent just before the wait gave it up (not read yet) is read from the pipe once the child
    is dead, and handed on."""
    def given_up_once_the_note_is_in_the_pipe(fd, deadline, abort, received):
        select.select([fd], [], [], GENEROUS)
        return None

    monkeypatch.setattr(forked, "_read_all", given_up_once_the_note_is_in_the_pipe)
    got = []

    def call():
        note("found bad: snapshot-44")
        threading.Event().wait()

    with pytest.raises(ForkedCallError, match="killed"):
        call_forked(call, timeout=GENEROUS, on_note=got.append)
    assert got == ["found bad: snapshot-44"]


def test_a_note_without_on_note_is_an_error():
    """``note`` sends only to a parent that asked for notes: elsewhere, and in a call without ``on_note``, it
    raises, never drops the value."""
    with pytest.raises(RuntimeError, match="on_note"):
        note("lost")
    with pytest.raises(ForkedCallError, match="^RuntimeError: .*on_note"):
        call_forked(note, "lost", timeout=GENEROUS)


@pytest.mark.parametrize("timeout", [0, -1, float("nan")])
def test_a_timeout_that_is_not_positive_is_refused(timeout):
    """A deadline must be a positive number of seconds; the error names it and nothing forks."""
    with pytest.raises(InvalidValueError, match="timeout must be a positive number of seconds"):
        call_forked(os.getpid, timeout=timeout)


def test_the_child_runs_at_a_lower_cpu_priority():
    """The child is background work: its niceness is this process's plus CHILD_NICENESS (at most 19)."""
    assert call_forked(os.nice, 0, timeout=GENEROUS) == min(os.nice(0) + CHILD_NICENESS, 19)


_ORPHAN_SCRIPT = """
import os, sys, time
from pathlib import Path
from secmeta.core.snapshots.forked import call_forked

pid_file, release, marker = map(Path, sys.argv[1:])

def wait_then_write():
    pid_file.write_text(str(os.getpid()))
    while not release.exists():
        time.sleep(0.01)
    marker.write_text("written after the parent died")

call_forked(wait_then_write, timeout=3600)
"""


def _gone(pid: int) -> bool:
    """Whether a process has exited (reaped, or a zombie no one reaps)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_child_dies_with_its_parent(tmp_path):
    """A parent killed mid-call takes its child with it: the child writes nothing afterwards."""
    pid_file, release, marker = tmp_path / "pid", tmp_path / "release", tmp_path / "marker"
    parent = subprocess.Popen([sys.executable, "-c", _ORPHAN_SCRIPT, str(pid_file), str(release), str(marker)],
                              cwd=Path(__file__).parents[3])
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            assert parent.poll() is None, "the parent exited before its child started"
            time.sleep(0.01)
        child = int(pid_file.read_text())
    finally:
        parent.kill()
        parent.wait()
    release.touch()
    deadline = time.monotonic() + 30
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _gone(child) and not marker.exists()
