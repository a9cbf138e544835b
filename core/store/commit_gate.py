"""The commit gate: where a batch is committed when the log's commit point is elsewhere (replicated mode).

The store's one write path hands each batch to its gate exactly as it will be
appended to the local log (``PendingBatch``: offsets, the frame's bytes, the
hash-chain link before and after) BEFORE the local append and before the
caller is answered. ``commit`` returns once the batch is durably committed
elsewhere (a Kafka topic, secmeta.consumers.kafka.replication) or raises. When
it raises nothing is appended locally, the write fails with that error, and the
store stops acknowledging writes (``WritesStoppedError`` for every later one)
until a new gate is set: a writer that was fenced, or cannot tell whether its
batch was committed, must not go on as if it were still the writer. When the
local append fails after a commit, the store stops acknowledging writes too and
tells the gate (``append_failed``), which gives the writer's role up.

The default is no gate: the embedded store appends to its local log, which is
then the commit point, by the same code path as ever.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from secmeta.core.errors import SecmetaError

__all__ = ["CommitGate", "CommitGateError", "GroupingGate", "NotWriterError", "NotWriterGate", "PendingBatch",
           "WritesStoppedError"]


@dataclass(frozen=True, slots=True)
class PendingBatch:
    """A batch about to be appended: offsets [base_offset, next_offset), the frame's bytes as the
    local log stores them, and the chain link it extends (``prev_link``) and its own (``link``)."""

    base_offset: int
    next_offset: int
    timestamp_ms: int
    frame: bytes = field(repr=False)
    prev_link: bytes = field(repr=False)
    link: bytes = field(repr=False)


class CommitGate(Protocol):
    """Commits a batch elsewhere before the store appends it locally and answers."""

    def commit(self, batch: PendingBatch) -> None:
        """Return once ``batch`` is durably committed; raise (CommitGateError) when it is not, or may not be.
        InvalidValueError refuses the batch itself before anything was sent (writes go on)."""
        ...

    def append_failed(self, batch: PendingBatch, error: BaseException) -> None:
        """``commit`` returned, then the local append of ``batch`` failed (``error``: a failed write or fsync):
        the batch is committed elsewhere but not here, and the local log refuses every later append. The store
        acknowledges no more writes; the gate must give the writer's role up at once."""
        ...


@runtime_checkable
class GroupingGate(CommitGate, Protocol):
    """A gate that commits several batches at once (one Kafka transaction): the store then groups the writes that
    queued while it committed (``SecurityStore._write``), each still answered only after the commit that holds it.
    A group holds at most ``max_group_batches`` batches, and the store takes no further write into it once its
    batches reach ``max_group_bytes`` (a transaction must commit well within its timeout); the rest wait for the
    next group.  The store tells a grouping gate by these members (``isinstance(gate, GroupingGate)``).  A class
    that names GroupingGate as its base inherits ``commit``: one batch is a group of one."""

    max_group_batches: int
    max_group_bytes: int

    def check(self, batch: PendingBatch) -> None:
        """Refuse ``batch`` alone before anything is sent (InvalidValueError: e.g. too large); the group goes on."""
        ...

    def commit_group(self, batches: Sequence[PendingBatch]) -> None:
        """Return once every batch (consecutive, in order) is durably committed, all together; raise
        (CommitGateError) when they are not, or may not be: then none is appended and writes stop."""
        ...

    def commit(self, batch: PendingBatch) -> None:
        """One batch alone: a group of one, checked first (the one owner of that rule)."""
        self.check(batch)
        self.commit_group([batch])


class CommitGateError(SecmetaError):
    """The gate did not commit the batch (fenced, unavailable, or unknown): nothing was appended."""


class WritesStoppedError(SecmetaError):
    """A gate failed earlier: the store acknowledges no write until it is given a gate again."""


class NotWriterError(CommitGateError):
    """This node is not the store's writer (a standby, or a node not yet elected)."""


class NotWriterGate:
    """The gate of a node that must not write (yet): every batch is refused, nothing is appended."""

    def __init__(self, why: str = "this node is not the store's writer"):
        self.why = why

    def commit(self, batch: PendingBatch) -> None:
        raise NotWriterError(f"the batch at offset {batch.base_offset} was not written: {self.why}")

    def append_failed(self, batch: PendingBatch, error: BaseException) -> None:
        """Never called: this gate commits nothing."""
