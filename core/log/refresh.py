"""A read-only log following the writer: new batches, new segments, and what retention deleted."""

from __future__ import annotations

import os

from secmeta.core.log.anchor import anchor_stamp
from secmeta.core.log.format import FrameError
from secmeta.core.log.loader import LogLoader
from secmeta.core.log.segment import Segment
from secmeta.core.log.state import LogState


def refresh(state: LogState, loader: LogLoader) -> None:
    """Pick up the batches and segments another process appended since ``state`` was read."""
    log_dir = loader.store.log_dir
    with state.visible:
        if not state.segments:
            state.take(loader.load()[0])
            return
        _follow_retention(state, loader)
        seg = state.segments[-1]
        _take_new_batches(seg)
        newer = sorted(int(p.stem) for p in log_dir.glob("*.log") if int(p.stem) > seg.base_offset)
        for base in newer:
            if base != seg.next_offset or seg.visible_size < os.fstat(seg.fd).st_size:
                break
            seg = Segment(log_dir, base, writable=False, index_interval=loader.config.index_interval_bytes)
            seg.size = seg.visible_size = 0
            state.add_segment(seg)
            _take_new_batches(seg)
        state.visible_end = state.next_offset = state.segments[-1].next_offset


def _follow_retention(state: LogState, loader: LogLoader) -> None:
    """Drop the segments the writer's retention deleted since (the caller holds ``state.visible``)."""
    stamp = anchor_stamp(loader.store.log_dir)
    if stamp is None or stamp == state.anchor_stamp:
        return
    anchor = loader.read_anchor()
    if anchor is None or anchor.next_offset <= state.start_offset:
        return
    gone = [s for s in state.segments[:-1] if s.next_offset <= anchor.next_offset]
    for seg in gone:
        seg.close()
    state.drop_first(len(gone))
    state.start_at(anchor, anchor_stamp(loader.store.log_dir))
    state.last_link = state.segments[-1].last_link or state.last_link


def _take_new_batches(seg: Segment) -> None:
    """Make a read-only segment's complete batches past its visible end visible (stop at a partial one)."""
    size = os.fstat(seg.fd).st_size
    if size <= seg.visible_size:
        return
    try:
        for batch in seg.frames(seg.visible_size, size):
            if batch.base_offset != seg.next_offset:
                break
            seg.note(batch, batch.position)
            seg.visible_size = seg.size = batch.position + batch.size
    except FrameError:
        pass  # a batch still being written: picked up next time
