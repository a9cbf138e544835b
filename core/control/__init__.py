"""Control functions: validate a request against an image and return the events to log.

As Kafka's control managers, they never change state: a write takes the image
it decides on (and the request, the time, the settings) and returns a
``ControlResult(events, response)`` (Kafka's ControllerResult); the store
appends the events as one batch, replays it, then answers with the response.
Reads (``describe_*``) return their answer, as Kafka's read paths do. A
request-level failure raises an ApiException subclass before any event exists.

Each name is imported on first use (events/lazy_exports.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from secmeta.events.lazy_exports import lazy_exports

if TYPE_CHECKING:  # the same names for type checkers (tests/test_packaging.py checks they are the same)
    from secmeta.core.control.acls import (
        create_acls,
        delete_acls,
        describe_acl_groups,
        describe_acls,
        may_describe_acls,
        validate_binding,
        validate_filter,
    )
    from secmeta.core.control.authz import Decider, decider_for, require_cluster
    from secmeta.core.control.result import ControlResult
    from secmeta.core.control.scram import alter_scram_credentials, describe_scram_credentials
    from secmeta.core.control.tokens import (
        create_token,
        describe_tokens,
        expire_token,
        renew_token,
        sweep_expired,
    )

__getattr__, __dir__, __all__ = lazy_exports(__name__, globals(), {
    "secmeta.core.control.acls": (
        "create_acls", "delete_acls", "describe_acl_groups", "describe_acls", "may_describe_acls", "validate_binding",
        "validate_filter",
    ),
    "secmeta.core.control.authz": ("Decider", "decider_for", "require_cluster"),
    "secmeta.core.control.result": ("ControlResult",),
    "secmeta.core.control.scram": ("alter_scram_credentials", "describe_scram_credentials"),
    "secmeta.core.control.tokens": (
        "create_token", "describe_tokens", "expire_token", "renew_token", "sweep_expired",
    ),
})
