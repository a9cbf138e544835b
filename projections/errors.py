"""Errors the projections raise while replaying events."""

from __future__ import annotations

from secmeta.events.errors import SecmetaError

__all__ = ["InconsistentEventError"]


class InconsistentEventError(SecmetaError):
    """An event that does not fit the state before it: the removal, renewal or expiry of something absent.

    A log that holds one is a bug to surface, never to swallow (Kafka's AclsDelta
    and ScramControlManager.replay throw too). ``offset`` is the event's log offset
    when it is known.
    """

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.offset = offset
        self.detail = message
        super().__init__(message if offset is None else f"the log is inconsistent at offset {offset}: {message}")

    def at(self, offset: int) -> InconsistentEventError:
        """The same error, naming the offset of the event that caused it."""
        return InconsistentEventError(self.detail, offset)
