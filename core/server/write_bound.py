"""The bound on writes waiting for a write worker: a write that cannot be started in time is answered
REQUEST_TIMED_OUT, per resource, and is never run.

Writes run in a pool of their own (``ServerConfig.write_workers``); while a commit stalls (a stalled Kafka in
replicated mode) the writes behind it wait for a worker.  Kafka's controller gives each write a deadline
(ControllerApis: ``requestTimeoutMsToDeadlineNs`` from the request's ``timeoutMs`` where it has one) and its event
queue fails an event not started by its deadline with a TimeoutException (``EventQueue.appendWithDeadline``),
which a client receives as REQUEST_TIMED_OUT.  Here:

- a write that finds ``write_queue_max`` writes already waiting for or running on a worker is held (its
  connection reads nothing more, as Kafka's broker holds requests unread past ``queued.max.requests``) until one
  of them is answered; if none is by its deadline, it is answered REQUEST_TIMED_OUT;
- a write whose worker takes it up after its deadline (the request's own ``timeout_ms`` where its API has one,
  else ``write_timeout_ms``) is answered REQUEST_TIMED_OUT by that worker without running it.

Either way the handler, so the store, never sees the write: a write answered as timed out is never committed
later.  A write a worker has started is answered with its outcome, however long its commit takes (the
replication timeout bounds that).  A burst of writes on a healthy store is only held back, never refused.  The
slots are kept on the event loop alone (``admit`` and ``release``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from secmeta.core.errors import ApiError, ErrorCode
from secmeta.core.server.call import Call
from secmeta.core.wire.codec import encode_response

__all__ = ["WriteBound"]


class WriteBound:
    """Writes waiting for or running on a write worker: at most ``max_pending``, each started by its deadline."""

    __slots__ = ("max_pending", "timeout_ms", "_slots")

    def __init__(self, max_pending: int, timeout_ms: int):
        self.max_pending, self.timeout_ms = max_pending, timeout_ms
        self._slots = asyncio.Semaphore(max_pending)

    async def admit(self, call: Call) -> tuple[ApiError | None, float]:
        """(None, the deadline to start by) once the write holds a slot, or (REQUEST_TIMED_OUT, 0) when no slot
        freed by its deadline; on the event loop. ``release()`` once an admitted write is answered."""
        own = getattr(call.request, "timeout_ms", None)
        timeout_ms = own if isinstance(own, int) and own >= 0 else self.timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        if not self._slots.locked():
            await self._slots.acquire()     # a free slot: taken without suspending
            return None, deadline
        try:
            await asyncio.wait_for(self._slots.acquire(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return ApiError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"{self.max_pending} writes (write_queue_max) waited for or ran on the write workers throughout "
                f"this one's timeout ({timeout_ms} ms; a commit stalls ahead of them): it was not started; nothing "
                "was written"), 0.0
        return None, deadline

    def release(self) -> None:
        self._slots.release()

    @property
    def pending(self) -> int:
        """Writes holding a slot now (waiting for or running on a write worker)."""
        return self.max_pending - self._slots._value


def answer_write(handler: Any, call: Call, deadline: float) -> bytes:
    """A write worker's job for one admitted write: REQUEST_TIMED_OUT without running it when its deadline has
    passed, else the handler's answer."""
    late = time.monotonic() - deadline
    if late > 0:
        response = handler.error_response(call, ApiError(
            ErrorCode.REQUEST_TIMED_OUT, f"the write waited {late * 1000:.0f} ms past its timeout for a write "
                                         "worker (a commit stalls ahead of it); nothing was written"))
    else:
        response = handler(call)
    return encode_response(call.frame.correlation_id, response)
