"""Tailing the log: waiting for offsets to become visible, and a reader that follows the log."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from secmeta.core.log.errors import OffsetOutOfRangeError
from secmeta.events.records import Envelope

if TYPE_CHECKING:
    from secmeta.core.log.log import Log

READ_ONLY_POLL_S = 0.02  # how often a read-only log looks for the writer's new batches while waiting


def wait_for(log: Log, offset: int, timeout: float | None) -> bool:
    """Block until ``log.end_offset > offset`` or the timeout passes; True if it did."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while log.end_offset <= offset:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        if log.read_only:
            time.sleep(min(READ_ONLY_POLL_S, remaining) if remaining is not None else READ_ONLY_POLL_S)
            log.refresh()
        else:
            log.state.wait_past(offset, remaining)
    return True


class TailReader:
    """Follows the log from an offset: ``poll`` returns new events as they become visible."""

    def __init__(self, log: Log, start: int = 0):
        self.log = log
        self.position = start

    def poll(self, timeout: float | None = 1.0, max_events: int | None = None) -> list[Envelope]:
        """Events from ``position`` on (waiting up to ``timeout`` for some).

        Raises OffsetOutOfRangeError when retention deleted offsets this reader had not read yet.
        """
        self.log.refresh()
        ready = self.log.wait_for(self.position, timeout)
        if self.position < self.log.start_offset:
            raise OffsetOutOfRangeError(
                f"this reader is at offset {self.position} but the log now starts at offset "
                f"{self.log.start_offset}: retention deleted the events in between before they were read"
            )
        if not ready:
            return []
        out: list[Envelope] = []
        for batch in self.log.batches(self.position, strict=True):  # retention may run after the check
            for env in self.log.decode(batch):
                if env.offset >= self.position:
                    out.append(env)
            self.position = batch.next_offset
            if max_events is not None and len(out) >= max_events:
                break
        return out

    def __iter__(self) -> Iterator[Envelope]:
        while not self.log.closed:
            yield from self.poll(timeout=0.5)
