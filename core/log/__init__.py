"""The durable metadata log: segments of CRC'd, hash-chained Avro batches."""

from secmeta.core.log.format import Batch
from secmeta.core.log.log import (
    AppendResult,
    FsyncPolicy,
    Log,
    LogConfig,
    LogFailedError,
    OffsetOutOfRangeError,
    RecoveryReport,
    TailReader,
)
from secmeta.core.log.verify import VerifyReport, verify_log

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
