"""What every API handler shares: building its response and turning failures into one.

A ``Handler`` pairs an API's ``serve(call)`` with its ``error_response(call, error)``,
the response Kafka's ``AbstractRequest.getErrorResponse`` builds for that API.  Calling
the handler serves the request; an ``ApiException`` from the store becomes
``error_response`` with its own code and message; anything else is logged (API and
exception type only, the traceback at DEBUG) and answered UNKNOWN_SERVER_ERROR, as
Kafka's RequestHandlerHelper.handleError does, so one bad request never costs the
connection.  A write API (``writes``: the store call it makes) on a node of a replicated cluster that
is not the active controller is answered NOT_CONTROLLER before the store sees it; ``refused(call)``
gives that answer, or the refusal of a requester without the write's right (the store's one rule,
``require_write_right``, asked of the published image), before the write queues for the store's lock
(the connection asks it on the event loop; the store asks the rule again under its lock).  The connection also uses ``error_response`` to refuse a request during SASL
authentication (ILLEGAL_SASL_STATE), as Kafka's SaslServerAuthenticator does.

``on_loop(call)`` says whether a request may be answered on the event loop: only reads
of the store's immutable image whose work is bounded by the request's own shape, never
a write, a PBKDF2 or a scan of the whole store (see ``secmeta.core.server.connection``).
``raw(frame, store, context, answers)``, where an API has it, answers such a read straight
from the request's bytes on a logged-in connection (the whole response frame, as the parts to write in
order), or returns
None for anything it does not answer as a success: the decoded path then answers it, its
refusals and failures included.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from secmeta.core.errors import ApiError, ApiException, ErrorCode
from secmeta.core.server.call import Call
from secmeta.core.server.controllership import not_controller
from secmeta.core.server.image_answers import ImageAnswers
from secmeta.core.types import RequestContext
from secmeta.core.wire.codec import build, response_class

__all__ = ["UNEXPECTED", "Handler", "log_failure", "request_level", "respond"]

log = logging.getLogger("secmeta.server")

UNEXPECTED = ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "Unexpected server error")


def respond(call: Call, **fields: Any) -> Any:
    """The kio response of ``call``'s API and version from plain values; never throttled."""
    return build(response_class(call.frame.api_key, call.version), throttle_time=0, **fields)


def log_failure(message: str, exc: BaseException) -> None:
    """The one way a failure is logged: ``message`` and the exception's type, never its text
    (it may quote the client's bytes); the traceback only when DEBUG is on."""
    log.error("%s: %s", message, type(exc).__name__, exc_info=log.isEnabledFor(logging.DEBUG))


def _never(call: Call) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Handler:
    """One API's handler: ``handler(call)`` is its response, whatever happens."""

    serve: Callable[[Call], Any]
    error_response: Callable[[Call, ApiError], Any]
    on_loop: Callable[[Call], bool] = _never
    writes: str | None = None   # a write API's store call: only the active controller serves it (NOT_CONTROLLER elsewhere)
    raw: Callable[[bytes, Any, RequestContext, ImageAnswers | None], tuple[bytes, ...] | None] | None = None

    def refused(self, call: Call) -> Any | None:
        """A write's answer before it queues, or None (not a write, or not refused here): NOT_CONTROLLER on a node
        that is not the active controller; the store's refusal of a requester without the write's right, or of a
        token write from a connection that may make none (``control.authz.require_write_right``)."""
        if not self.writes:
            return None
        if call.cluster is not None and not call.cluster.accepts_writes:
            return self.error_response(call, not_controller(call.cluster.node_id, call.cluster.active_id))
        try:
            call.store.require_write_right(self.writes, context=call.context)
        except ApiException as exc:
            return self.error_response(call, exc.error)
        except Exception:   # not a refusal: the write's own path decides, authorizing under the store's lock, and
            pass            # logs what fails there (logged here too, each such write was logged twice)
        return None

    def __call__(self, call: Call) -> Any:
        if self.writes and call.cluster is not None and not call.cluster.accepts_writes:
            return self.error_response(call, not_controller(call.cluster.node_id, call.cluster.active_id))
        try:
            return self.serve(call)
        except ApiException as exc:
            return self.error_response(call, exc.error)
        except Exception as exc:
            log_failure(f"{call.frame.name} v{call.version} from {call.context.host} failed", exc)
            return self.error_response(call, UNEXPECTED)


def request_level(on_error: Callable[[Call, ApiError], Any], *, on_loop: Callable[[Call], bool] = _never,
                  writes: str | None = None,
                  raw: Callable[[bytes, Any, RequestContext, ImageAnswers | None], tuple[bytes, ...] | None] | None = None,
                  ) -> Callable[[Callable[[Call], Any]], Handler]:
    """Make a ``Handler`` of the decorated function, answering failures with ``on_error(call, error)``;
    ``writes``: the store call of an API that changes the store (a node that is not the active controller
    refuses it, and ``Handler.refused`` refuses a requester without its right before it queues);
    ``raw``: its answer straight from a frame's bytes (reads only, see the module's docstring)."""
    assert raw is None or not writes, "a write is never answered from its bytes alone"

    def wrap(serve: Callable[[Call], Any]) -> Handler:
        return Handler(serve, on_error, on_loop, writes, raw)

    return wrap
