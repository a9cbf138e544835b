"""Progress of a long command, on stderr, so stdout stays the command's answer.

On a terminal: one line that updates in place (rich), with the count, the rate and the time
left.  Otherwise (a log file, a pipe, CI): a plain line at most every ``every`` seconds, and a
last one when the job ends, so a log shows the job moving without a line per item.
``note(text)`` prints one line of its own (a stage: "starting Spark (local[2])...", a batch).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported when a command shows progress, not when the CLI starts
    from rich.progress import Progress as _Live

__all__ = ["Progress"]


class Progress:
    """How far one job is: ``update(done, total)`` as it goes, ``close()`` (or ``with``) at the end."""

    def __init__(self, what: str, *, unit: str = "events", every: float = 10.0, stream=None,
                 clock: Callable[[], float] = time.monotonic, terminal: bool | None = None):
        from rich.console import Console

        self.what, self.unit, self.every, self.clock = what, unit, every, clock
        self.stream = stream or sys.stderr
        self.console = Console(file=self.stream, stderr=stream is None, force_terminal=terminal,
                               highlight=False, soft_wrap=True)
        self.done, self.total = 0, None
        self._first: tuple[float, int] | None = None  # when and where counting began: the rate's base
        self._printed_at: float | None = None
        self._printed_done: int | None = None
        self._live: _Live | None = None
        self._task = None

    @property
    def on_terminal(self) -> bool:
        return self.console.is_terminal

    def update(self, done: int, total: int | None = None) -> None:
        """``done`` of ``total`` (None: unknown, or unchanged) units are finished."""
        now = self.clock()
        if self._first is None:
            self._first = (now, done)
        self.done = done
        if total is not None:
            self.total = total
        if self.on_terminal:
            self._show_live()
        elif self._printed_at is None and now - self._first[0] >= self.every or (
                self._printed_at is not None and now - self._printed_at >= self.every):
            self._print_line(now)

    def note(self, text: str) -> None:
        """A line of its own: a stage of the job, or something the user should know now."""
        self.console.print(f"{self.what}: {text}", markup=False)

    def close(self) -> None:
        """End the updating line, or print the last plain line if the job made progress."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        elif self._first is not None and self.done > self._first[1] and self.done != self._printed_done:
            self._print_line(self.clock())

    def line(self, now: float) -> str:
        """The plain progress line: count, share, rate and time left."""
        count = f"{self.done:,}" if self.total is None else f"{self.done:,}/{self.total:,}"
        share = f" ({100 * self.done // self.total}%)" if self.total else ""
        text = f"{self.what}: {count} {self.unit}{share}"
        rate = self._rate(now)
        if rate is not None:
            text += f", {rate:,.0f} {self.unit}/s"
            if self.total is not None and rate > 0 and self.done < self.total:
                text += f", about {_duration((self.total - self.done) / rate)} left"
        return text

    def _rate(self, now: float) -> float | None:
        if self._first is None:
            return None
        since, base = self._first
        return None if now <= since else (self.done - base) / (now - since)

    def _print_line(self, now: float) -> None:
        self._printed_at, self._printed_done = now, self.done
        self.console.print(self.line(now), markup=False)

    def _show_live(self) -> None:
        if self._live is None:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as _Live

            self._live = _Live(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                               TextColumn(f"{{task.fields[rate]}} {self.unit}/s"), TimeRemainingColumn(),
                               console=self.console, transient=False, redirect_stdout=False,
                               redirect_stderr=False, get_time=self.clock)
            self._task = self._live.add_task(self.what, total=self.total, rate="-")
            self._live.start()
        rate = self._rate(self.clock())
        self._live.update(self._task, completed=self.done, total=self.total,
                          rate="-" if rate is None else f"{rate:,.0f}")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
