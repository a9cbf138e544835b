"""Write groups: with a gate that commits several batches at once (replicated mode), the writes that queue while
one group commits are decided together and committed as the next group (one Kafka transaction).

``SecurityStore._write`` queues a write (``Queued``) in the store's ``WriteQueue``; whoever takes the write lock
next takes the queue's first writes as a group, decides them in turn (``decide_group``: each on the image, and the
token HMAC index, the ones before it leave; nothing is written), commits their batches through the gate and then
answers each (``Decided.settle``).  A write whose decision or batch is refused fails alone; one refused on an image
earlier, uncommitted writes of the group left keeps its refusal until their commit's outcome is known; a failed
commit fails every write of the group (none was acknowledged).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from secmeta.core.auth.token_hmac import TokenHmacs
from secmeta.core.control import ControlResult
from secmeta.core.store.commit_gate import GroupingGate, PendingBatch
from secmeta.core.store.follower import replayed
from secmeta.core.types import RequestContext
from secmeta.events.records import Envelope, Event
from secmeta.projections.gc_pause import FREEZE_AFTER, paused_gc
from secmeta.projections.image import SecurityImage

__all__ = ["Decide", "Decided", "Queued", "WriteQueue", "decide_group"]

#: A write's control function: the image it decides on, the time, who asks and the HMAC index of the image's
#: tokens (the published one's, or within a group the one the writes before it leave) -> its events and response.
Decide = Callable[[SecurityImage, int, RequestContext, TokenHmacs], ControlResult[Any]]
#: How a decided write's events are framed: (events, who asked, the time, base offset, link before) -> its envelopes
#: and its batch, written nowhere yet.
Frame = Callable[[Sequence[Event], RequestContext, int, int, bytes], tuple[list[Envelope], PendingBatch]]


class Queued:
    """A write waiting to be committed with a group: its request, then its answer or its error."""

    __slots__ = ("context", "decide", "done", "_response", "_error")

    def __init__(self, context: RequestContext, decide: Decide):
        self.context, self.decide = context, decide
        self.done = threading.Event()
        self._response: object = None
        self._error: BaseException | None = None

    def succeed(self, response: object) -> None:
        self._response = response
        self.done.set()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self.done.set()

    def settle(self, write: Callable[[], object]) -> None:
        try:
            self.succeed(write())
        except BaseException as exc:  # noqa: BLE001 - handed to the writer's thread
            self.fail(exc)

    def outcome(self):
        self.done.wait()
        if self._error is not None:
            raise self._error
        return self._response


class WriteQueue:
    """The writes waiting for the store's write lock, first come first in a group."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: list[Queued] = []

    def __len__(self) -> int:
        return len(self._queued)

    def join(self, write: Queued) -> None:
        with self._lock:
            self._queued.append(write)

    def take(self, gate: GroupingGate | None) -> list[Queued]:
        """The next group: at most the gate's ``max_group_batches`` first writes (all of them when the gate no longer
        groups, None: each is then written alone)."""
        with self._lock:
            limit = max(1, gate.max_group_batches if gate is not None else len(self._queued))
            group, self._queued = self._queued[:limit], self._queued[limit:]
        return group

    def put_back(self, writes: Sequence[Queued]) -> None:
        """Writes a group left for the next one, first in line."""
        with self._lock:
            self._queued[:0] = writes


@dataclass(slots=True)
class Decided:
    """One write of a group as decided: its batch (None when it writes nothing), the image after it, and its
    response or its held error."""

    write: Queued
    envelopes: Sequence[Envelope]
    batch: PendingBatch | None
    image: SecurityImage
    response: object = None
    error: BaseException | None = None

    def settle(self) -> None:
        """Answer the write, once its group's commit is done."""
        if self.error is not None:
            self.write.fail(self.error)
        else:
            self.write.succeed(self.response)


def decide_group(group: Sequence[Queued], image: SecurityImage, hmacs: TokenHmacs, base: int, link: bytes,
                 gate: GroupingGate, now_ms: Callable[[], int], frame: Frame) -> tuple[list[Decided], list[Queued]]:
    """Decide ``group``'s writes in turn from the published ``image`` (its tokens' HMAC index ``hmacs``; the log
    ends at ``base`` after ``link``): each decided on the image and index the ones before it leave, framed and
    checked by the gate, written nowhere.  A write refused on the published image fails at once (its error stands
    whatever comes next).  Returns the writes decided, and those left for the next group once the batches reach
    the gate's ``max_group_bytes``."""
    published, size = image, 0
    decided: list[Decided] = []
    for n, write in enumerate(group):
        if size >= gate.max_group_bytes:
            return decided, list(group[n:])
        try:
            now = now_ms()
            result = write.decide(image, now, write.context, hmacs)
            if not result.events:      # answered with the group: it was decided on the writes before it
                decided.append(Decided(write, (), None, image, result.response))
                continue
            envelopes, batch = frame(result.events, write.context, now, base, link)
            gate.check(batch)
            with paused_gc(freeze=len(envelopes) >= FREEZE_AFTER):
                after = replayed(image, envelopes, batch.next_offset)
        except BaseException as exc:  # noqa: BLE001 - this write alone fails
            if image is published:
                write.fail(exc)
            else:
                decided.append(Decided(write, (), None, image, error=exc))
            continue
        image, hmacs = after, hmacs.advanced(result.events)
        size += len(batch.frame)
        decided.append(Decided(write, envelopes, batch, image, result.response))
        base, link = batch.next_offset, batch.link
    return decided, []
