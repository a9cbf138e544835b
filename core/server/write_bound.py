"""The bound on writes waiting for a write worker: a write that cannot be started in time is answered
REQUEST_TIMED_OUT, per resource, and is never run.

Writes run in a pool of their own (``ServerConfig.write_workers``); while a commit stalls (a stalled Kafka in
replicated mode) the writes behind it wait for a worker.  Kafka's controller gives each write a deadline
(ControllerApis: ``requestTimeoutMsToDeadlineNs`` from the request's ``timeoutMs`` where it has one) and its event
queue fails an event not started by its deadline with a TimeoutException (``EventQueue.appendWithDeadline``),
which a client receives as REQUEST_TIMED_OUT.  Here:

- a write that finds ``write_queue_max`` writes already waiting for or running on a worker is answered
  REQUEST_TIMED_OUT at once (Kafka's broker holds such a request unread instead, ``queued.max.requests``; a
  write that would wait behind that many could not be started in time anyway);
- a write whose worker takes it up after its deadline (the request's own ``timeout_ms`` where its API has one,
  else ``write_timeout_ms``) is answered REQUEST_TIMED_OUT by that worker without running it.

Either way the handler, so the store, never sees the write: a write answered as timed out is never committed
later.  A write a worker has started is answered with its outcome, however long its commit takes (the
replication timeout bounds that).  The count is kept on the event loop alone (``admit`` and ``release``).
"""

from __future__ import annotations

import time
from typing import Any

from secmeta.core.errors import ApiError, ErrorCode
from secmeta.core.server.call import Call
from secmeta.core.wire.codec import encode_response

__all__ = ["WriteBound"]


class WriteBound:
    """Writes waiting for or running on a write worker: at most ``max_pending``, each started by its deadline."""

    __slots__ = ("max_pending", "timeout_ms", "pending")

    def __init__(self, max_pending: int, timeout_ms: int):
        self.max_pending, self.timeout_ms = max_pending, timeout_ms
        self.pending = 0

    def admit(self, handler: Any, call: Call) -> tuple[Any, float]:
        """(None, the deadline to start by) and the write counted, or (its REQUEST_TIMED_OUT response, 0) when
        ``max_pending`` writes are pending; on the event loop. ``release()`` once an admitted write is answered."""
        if self.pending >= self.max_pending:
            return handler.error_response(call, ApiError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"{self.pending} writes already wait for the store (write_queue_max {self.max_pending}): this "
                "one cannot be started in time; nothing was written")), 0.0
        self.pending += 1
        own = getattr(call.request, "timeout_ms", None)
        timeout_ms = own if isinstance(own, int) and own >= 0 else self.timeout_ms
        return None, time.monotonic() + timeout_ms / 1000

    def release(self) -> None:
        self.pending -= 1


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
