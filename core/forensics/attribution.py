"""Who changed the state, from where, by which request, when, at which offset: one record for every forensic answer.

``HistoryEntry`` (history), ``Change`` (access_timeline) and the history index's rows are
attributed changes: each extends ``Attribution`` with what changed, so its fields are
declared here once, in the envelope's order, and serialised by one ``to_dict``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from secmeta.events.records import Envelope, Operator

__all__ = ["Attribution", "attributed"]


@dataclass(frozen=True, slots=True)
class Attribution:
    """Where a logged change sits and who made it: offset, commit time, actor principal and host, request id,
    whether the actor was asserted (a local caller's claim, ``--as``) or authenticated (by ``secmeta serve``),
    and the operator: the OS user, host name and process that wrote it."""

    offset: int
    timestamp_ms: int
    actor_principal: str
    actor_host: str
    request_id: str
    actor_asserted: bool
    operator: Operator

    @property
    def actor(self) -> str:
        """The actor as people read it: ``User:alice from 10.0.0.1 (asserted|authenticated)``."""
        how = "asserted" if self.actor_asserted else "authenticated"
        return f"{self.actor_principal} from {self.actor_host} ({how})"

    def to_dict(self) -> dict[str, Any]:
        operator = self.operator
        return {"offset": self.offset, "timestamp_ms": self.timestamp_ms, "actor_principal": self.actor_principal,
                "actor_host": self.actor_host, "request_id": self.request_id, "actor_asserted": self.actor_asserted,
                "operator": {"user": operator.user, "host": operator.host, "pid": operator.pid,
                             "program": operator.program}}


def attributed(envelope: Envelope) -> tuple[int, int, str, str, str, bool, Operator]:
    """The envelope's attribution fields, in ``Attribution``'s order (the leading fields of every subclass)."""
    return (envelope.offset, envelope.timestamp_ms, envelope.actor_principal, envelope.actor_host, envelope.request_id,
            envelope.actor_asserted, envelope.operator)
