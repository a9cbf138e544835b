"""The backend a store's forensic queries use: the history index where it answers, else the log scan."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from secmeta.core.forensics.backend import Change, Diff, HistoryEntry, HistoryQuery
from secmeta.core.forensics.history_index import HistoryIndex
from secmeta.core.forensics.scan import LogScan
from secmeta.events.types import AclBinding, ResourceType

if TYPE_CHECKING:
    from secmeta.core.forensics.timetravel import TimeTravel

__all__ = ["IndexOrScan"]


class IndexOrScan:
    """A ``HistoryBackend`` that asks time travel's history index when it is ready and holds the rows a
    question needs, and the log scan otherwise (the index is derived and optional; the answers are equal)."""

    def __init__(self, travel: TimeTravel):
        self.travel = travel
        self.scan = LogScan(travel)

    def _answering(self, hi: int, state_at: int | None = None) -> HistoryIndex | LogScan:
        """The index if it covers offsets below ``hi`` (and, for a ``state_at`` a point, holds every row
        from offset 0: a state there is folded from the rows before it), else the scan."""
        index = self.travel.index
        if index is None:
            return self.scan
        if state_at is not None and (index.first_offset != 0 or state_at < self.travel.log.start_offset):
            return self.scan
        return index if index.covered(hi) else self.scan

    def entries(self, query: HistoryQuery) -> Iterator[HistoryEntry]:
        return self._answering(query.hi).entries(query)

    def acl_changes(self, lo: int, hi: int, resource_type: ResourceType, name: str) -> Iterator[Change]:
        return self._answering(hi).acl_changes(lo, hi, resource_type, name)

    def acls_at(self, n: int, resource_type: ResourceType, name: str) -> list[tuple[str, AclBinding]]:
        return self._answering(n, state_at=n).acls_at(n, resource_type, name)

    def diff(self, a: int, b: int) -> Diff:
        return self._answering(b, state_at=a).diff(a, b)
