"""Handlers of the admin APIs (ACLs, SCRAM credentials, delegation tokens): kio request -> store -> kio response."""

from __future__ import annotations

from core.server.call import Handler

#: API key -> handler; filled in by this module's handlers.
ADMIN_HANDLERS: dict[int, Handler] = {}
