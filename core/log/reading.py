"""Reading the log: the visible batches of an offset range, chain-checked, and their events."""

from __future__ import annotations

import bisect
import operator
from collections.abc import Callable, Iterator

from secmeta.core.log.chain import Chain
from secmeta.core.log.errors import OffsetOutOfRangeError
from secmeta.core.log.format import Batch
from secmeta.core.log.segment import Segment
from secmeta.core.log.state import LogState
from secmeta.events.codec import EventCodec
from secmeta.events.records import Envelope

_BASE_OFFSET = operator.attrgetter("base_offset")


class Reader:
    """Reads ``state``'s visible batches; ``refresh`` (a read-only log's) runs before each range read."""

    def __init__(self, state: LogState, chain: Chain, codec: EventCodec, refresh: Callable[[], None] | None = None):
        self.state = state
        self.chain = chain
        self.codec = codec
        self._refresh = refresh
        self._verified: tuple[Segment, list[Batch]] | None = None

    def keep_verified(self, verified: tuple[Segment, list[Batch]] | None) -> None:
        """A segment's first batches as a writer's open just read and checked them, chain links and all (the
        log's writer lock keeps them as they are): the next replay or read of batches takes them from here rather
        than reading and checking them again, and drops them (an open checks the chain once, not twice)."""
        self._verified = verified

    def batches(self, start: int = 0, end: int | None = None, *, strict: bool = False,
                verified: tuple[Segment, list[Batch]] | None = None) -> Iterator[Batch]:
        """Yield the visible batches holding offsets in [start, end).

        Offsets before the log's start (deleted by retention) are skipped, unless ``strict``: then
        they raise OffsetOutOfRangeError, for a reader that needs every event from ``start`` on
        (a replay onto an image at ``start``), checked against the segments it will read.
        ``verified``: a segment's first batches, checked already (``keep_verified``).
        """
        if self._refresh is not None:
            self._refresh()
        state = self.state
        with state.visible:
            segments = [(s, s.visible_size) for s in state.segments]
            first = max(bisect.bisect_right(state.bases, start) - 1, 0)
            stop = state.visible_end if end is None else min(end, state.visible_end)
            log_start = state.start_offset
        if strict and start < log_start:
            raise OffsetOutOfRangeError(
                f"offset {start} was asked for but the log now starts at offset {log_start}: "
                "retention deleted the events in between"
            )
        start = max(start, log_start)
        if start >= stop:
            return
        for seg, size in segments[first:]:
            if seg.base_offset >= stop:
                return
            for batch in self._chained(seg, start, size, verified):
                if batch.base_offset >= stop:
                    return
                if batch.next_offset > start:
                    yield batch

    def _chained(self, seg: Segment, start: int, size: int,
                 verified: tuple[Segment, list[Batch]] | None) -> Iterator[Batch]:
        """``seg``'s batches from the one holding ``start`` on (a few before it may come too), chain-checked: the
        ``verified`` ones as they are, the rest read and checked after them."""
        if verified is None or verified[0] is not seg:
            yield from self.chain.chained(seg, *seg.anchor_for(start), size=size)
            return
        kept = verified[1]
        at = max(bisect.bisect_right(kept, start, key=_BASE_OFFSET) - 1, 0)
        for batch in kept[at:]:
            if batch.position + batch.size > size:
                return
            yield batch
        last = kept[-1]
        end = last.position + last.size
        if end < size:  # appended since the open checked it
            yield from self.chain.chained(seg, end, last.next_offset, last.link, size=size)

    def link_at(self, next_offset: int) -> bytes | None:
        """The chain link of the batch ending at ``next_offset`` (None if no batch ends there)."""
        if next_offset == self.state.start_offset:
            return self.state.start_link
        for batch in self.batches(next_offset - 1, next_offset):
            return batch.link if batch.next_offset == next_offset else None
        return None

    def offset_for_timestamp(self, timestamp_ms: int) -> int:
        """The first offset of the first batch whose time is >= ``timestamp_ms`` (the end if none)."""
        with self.state.visible:
            segments = list(self.state.segments)
        for seg in segments:
            if seg.max_timestamp < timestamp_ms:
                continue
            for batch in self.chain.chained(seg, *seg.anchor_for(seg.offset_for_time(timestamp_ms)),
                                            size=seg.visible_size):
                if batch.timestamp_ms >= timestamp_ms:
                    return batch.base_offset
        return self.state.visible_end

    def decode(self, batch: Batch) -> list[Envelope]:
        return self.codec.decode_batch(batch.payload, batch.schema_fp, batch.base_offset)

    def _take_verified(self) -> tuple[Segment, list[Batch]] | None:
        verified, self._verified = self._verified, None
        return verified

    def read_batches(self, start: int = 0, end: int | None = None, *,
                     strict: bool = False) -> Iterator[list[Envelope]]:
        """The events in [start, end) a batch at a time (a batch cut by ``start`` or ``end`` holds only its part)."""
        for batch in self.batches(start, end, strict=strict, verified=self._take_verified()):
            events = self.decode(batch)
            if batch.base_offset < start or (end is not None and batch.next_offset > end):
                events = [e for e in events if start <= e.offset and (end is None or e.offset < end)]
            yield events

    def replay_batches(self, start: int = 0, end: int | None = None, *,
                       strict: bool = False) -> Iterator[tuple[int, list]]:
        """The events in [start, end) a batch at a time as replay reads them (``EventCodec.decode_events``:
        no envelopes, an ACL's creation as its row), each list with the offset of its first event."""
        decode = self.codec.decode_events
        for batch in self.batches(start, end, strict=strict, verified=self._take_verified()):
            events = decode(batch.payload, batch.schema_fp)
            first = batch.base_offset
            if first < start or (end is not None and batch.next_offset > end):
                cut = max(start - first, 0)
                events = events[cut:len(events) if end is None else end - first]
                first += cut
            yield first, events
