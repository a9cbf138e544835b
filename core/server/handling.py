"""What every admin handler shares: building its response and turning failures into one.

``request_level(on_error)`` wraps a handler so that a request-level failure becomes
the response Kafka's ``AbstractRequest.getErrorResponse`` builds for that API:
``on_error(call, ApiError)`` returns it.  An ``ApiException`` from the store carries
its own code and message; anything else is logged (type and API only) and answered
UNKNOWN_SERVER_ERROR, as Kafka's RequestHandlerHelper.handleError does, so one bad
request never costs the connection.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from core.errors import ApiError, ApiException, ErrorCode
from core.server.call import Call, Handler
from core.wire.codec import build, response_class

__all__ = ["UNEXPECTED", "request_level", "respond"]

log = logging.getLogger("secmeta.server")

UNEXPECTED = ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "Unexpected server error")


def respond(call: Call, **fields: Any) -> Any:
    """The kio response of ``call``'s API and version from plain values; never throttled."""
    return build(response_class(call.frame.api_key, call.version), throttle_time=0, **fields)


def request_level(on_error: Callable[[Call, ApiError], Any]) -> Callable[[Handler], Handler]:
    """Answer a request-level failure of the wrapped handler with ``on_error(call, error)``."""

    def wrap(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def handle(call: Call) -> Any:
            try:
                return handler(call)
            except ApiException as exc:
                return on_error(call, exc.error)
            except Exception as exc:
                log.error("%s v%d from %s failed: %s", call.frame.name, call.version, call.context.host,
                          type(exc).__name__, exc_info=log.isEnabledFor(logging.DEBUG))
                return on_error(call, UNEXPECTED)

        return handle

    return wrap
