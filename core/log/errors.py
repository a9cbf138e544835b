"""The log's own failures (a corrupt log is secmeta.core.errors.CorruptLogError)."""

from __future__ import annotations

from secmeta.core.errors import SecmetaError


class LogFailedError(SecmetaError):
    """An fsync failed: the log's durable state is unknown, so it refuses further writes."""


class OffsetOutOfRangeError(SecmetaError):
    """A reader asked for offsets retention already deleted (Kafka's OFFSET_OUT_OF_RANGE)."""


class DivergedError(SecmetaError):
    """A batch from another copy of the log does not extend this log (another offset, or another chain link
    before it): the two logs hold different histories from ``offset`` on."""

    def __init__(self, message: str, *, offset: int):
        super().__init__(message)
        self.offset = offset
