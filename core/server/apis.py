"""The dispatch table: API key -> handler, for every API the server answers.

SaslHandshake (17) and SaslAuthenticate (36) are answered by the connection's
``core.server.sasl.Authenticator``, not through this table; ApiVersions advertises them
with every key that has a handler here.
"""

from __future__ import annotations

from core.server.admin_apis import ADMIN_HANDLERS
from core.server.call import Handler
from core.server.cluster_apis import CLUSTER_HANDLERS

__all__ = ["AUTH_KEYS", "HANDLERS", "served_keys"]

AUTH_KEYS = frozenset({17, 36})

HANDLERS: dict[int, Handler] = {**CLUSTER_HANDLERS, **ADMIN_HANDLERS}


def served_keys() -> frozenset[int]:
    """API keys with a handler (or answered by the authenticator): what ApiVersions advertises."""
    return frozenset(HANDLERS) | AUTH_KEYS
