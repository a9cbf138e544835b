"""What an open log holds: its segments, where it starts and ends, and the chain at both ends.

The loader builds it, the appender extends it, retention and a read-only refresh cut
its front; readers take a consistent copy of the segment list under ``visible``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from secmeta.core.log.anchor import Anchor
from secmeta.core.log.format import genesis_link
from secmeta.core.log.segment import Segment


@dataclass(eq=False)
class LogState:
    """Segments and offsets; ``next_offset``/``last_link`` are what was written, ``visible_end`` what readers see."""

    store_id: str
    segments: list[Segment] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)
    start_offset: int = 0
    start_link: bytes = field(default=b"", repr=False)
    next_offset: int = 0
    visible_end: int = 0
    last_link: bytes = field(default=b"", repr=False)
    anchor_stamp: tuple[int, int] | None = None  # the anchor file's (inode, mtime) when it was read
    visible: threading.Condition = field(default_factory=lambda: threading.Condition(threading.Lock()), repr=False)

    def __post_init__(self) -> None:
        if not self.start_link:
            self.start_link = self.last_link = genesis_link(self.store_id)

    def start_at(self, anchor: Anchor | None, stamp: tuple[int, int] | None) -> None:
        """Start the log where ``anchor`` says (at offset 0 from the genesis link without one)."""
        self.anchor_stamp = stamp
        if anchor is not None:
            self.start_offset, self.start_link = anchor.next_offset, anchor.link
        else:
            self.start_offset, self.start_link = 0, genesis_link(self.store_id)
        self.last_link = self.start_link

    def add_segment(self, seg: Segment) -> None:
        seg.prev_link = self.segments[-1].last_link if self.segments else self.start_link
        self.segments.append(seg)
        self.bases.append(seg.base_offset)

    def drop_first(self, count: int) -> None:
        """Forget the first ``count`` segments (deleted by retention); the caller closes them."""
        self.segments, self.bases = self.segments[count:], self.bases[count:]

    def take(self, other: LogState) -> None:
        """Become ``other`` (a fresh load), keeping this state's lock and its waiters."""
        for name in ("segments", "bases", "start_offset", "start_link", "next_offset", "visible_end",
                     "last_link", "anchor_stamp"):
            setattr(self, name, getattr(other, name))

    def publish(self, seg: Segment, size: int, end: int) -> None:
        """Let readers see ``seg`` up to byte ``size`` and the log up to offset ``end``."""
        with self.visible:
            if size > seg.visible_size:
                seg.visible_size = size
            if end > self.visible_end:
                self.visible_end = end
            self.visible.notify_all()

    def wait_past(self, offset: int, timeout: float | None) -> None:
        """Wait (up to ``timeout``) for an append to make ``offset`` visible."""
        with self.visible:
            if self.visible_end <= offset:
                self.visible.wait(timeout)

    def close(self) -> None:
        for seg in self.segments:
            seg.close()
