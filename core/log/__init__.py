"""The durable metadata log: segments of CRC'd, hash-chained Avro batches."""

from core.log.format import Batch
from core.log.log import (
    AppendResult,
    FsyncPolicy,
    Log,
    LogConfig,
    LogFailedError,
    OffsetOutOfRangeError,
    RecoveryReport,
    TailReader,
)
from core.log.verify import VerifyReport, verify_log

__all__ = [
    "AppendResult",
    "Batch",
    "FsyncPolicy",
    "Log",
    "LogConfig",
    "LogFailedError",
    "OffsetOutOfRangeError",
    "RecoveryReport",
    "TailReader",
    "VerifyReport",
    "verify_log",
]
