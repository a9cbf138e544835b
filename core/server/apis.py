"""The dispatch table: API key -> handler, for every API in ``secmeta.core.wire.codec.ApiKey``.

SaslHandshake (17) and SaslAuthenticate (36) are answered by the connection's
``secmeta.core.server.sasl.Authenticator``, not through this table.
"""

from __future__ import annotations

from secmeta.core.server.admin_apis import ADMIN_HANDLERS
from secmeta.core.server.cluster_apis import CLUSTER_HANDLERS
from secmeta.core.server.handling import Handler
from secmeta.core.wire.codec import ApiKey

__all__ = ["AUTH_KEYS", "HANDLERS"]

AUTH_KEYS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})

HANDLERS: dict[ApiKey, Handler] = {**CLUSTER_HANDLERS, **ADMIN_HANDLERS}

