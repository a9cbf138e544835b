"""How the log writes: segment size, fsync policy, index density."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from secmeta.core.errors import InvalidValueError


class FsyncPolicy(StrEnum):
    ALWAYS = "always"
    INTERVAL = "interval"
    NEVER = "never"


@dataclass(frozen=True)
class LogConfig:
    """How the log writes: segment size, fsync policy, index density."""

    segment_bytes: int = 64 * 1024 * 1024
    fsync: FsyncPolicy | str = FsyncPolicy.ALWAYS
    fsync_interval_ms: int = 100
    index_interval_bytes: int = 4096

    def __post_init__(self):
        try:
            object.__setattr__(self, "fsync", FsyncPolicy(self.fsync))
        except ValueError:
            raise InvalidValueError(f"fsync policy must be always, interval or never, not {self.fsync!r}") from None
        if self.segment_bytes < 1024:
            raise InvalidValueError(f"segment_bytes must be at least 1024, not {self.segment_bytes}")
        if self.fsync_interval_ms <= 0:
            raise InvalidValueError(f"fsync_interval_ms must be positive, not {self.fsync_interval_ms}")
