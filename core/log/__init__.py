"""The durable metadata log: segments of CRC'd, hash-chained Avro batches."""

from secmeta.core.log.append import AppendResult
from secmeta.core.log.config import FsyncPolicy, LogConfig
from secmeta.core.log.errors import DivergedError, LogFailedError, OffsetOutOfRangeError
from secmeta.core.log.format import Batch
from secmeta.core.log.loader import RecoveryReport
from secmeta.core.log.log import Log
from secmeta.core.log.tail import TailReader
from secmeta.core.log.verify import VerifyReport, verify_log

__all__ = [
    "AppendResult",
    "Batch",
    "DivergedError",
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
