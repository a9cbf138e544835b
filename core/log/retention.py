"""Retention: deleting the sealed segments a snapshot covers, behind a sealed anchor."""

from __future__ import annotations

import json
from collections.abc import Callable

from secmeta.core.errors import SecmetaError
from secmeta.core.log.anchor import Anchor, write_anchor
from secmeta.core.log.append import Appender
from secmeta.core.store.storedir import StoreDirectory
from secmeta.events.durable import fsync_dir


def retention_configured(store: StoreDirectory) -> bool:
    """Whether the store's saved settings (config.json) enable deleting covered segments."""
    try:
        return json.loads((store.path / "config.json").read_text()).get("delete_covered_segments") is True
    except (OSError, ValueError, AttributeError):
        return False


def delete_segments_before(log: Appender, offset: int, *, configured: bool, now_ms: Callable[[], int]) -> list[str]:
    """Delete sealed segments whose every event is below ``offset`` (covered by a snapshot).

    Only when retention is ``configured``.  Writes a sealed anchor first (start offset,
    chain link, the retention that produced it, stamped ``now_ms()``) so the chain still
    starts from a link nobody without the key could have written.
    """
    log.check_writable()
    if not configured:
        raise SecmetaError("deleting covered segments is not configured for this store (delete_covered_segments)")
    log.flush()  # the high-water mark must not lag behind what is deleted
    state, store = log.state, log.store
    with log.write_lock:
        log.check_in_place()
        doomed = [s for s in state.segments[:-1] if s.next_offset <= offset]
        if not doomed:
            return []
        keep_from = doomed[-1].next_offset
        last_link = log.chain.last_link_of(doomed[-1])
        names = tuple(s.name for s in doomed)
        anchor = Anchor(keep_from, last_link, offset, names, now_ms())
        write_anchor(store.log_dir, store.store_id, log.keyring, anchor)
        with state.visible:
            state.drop_first(len(doomed))
            state.start_offset = keep_from
            state.start_link = last_link
        for seg in doomed:
            seg.close()
            for p in (seg.path, seg.index_path, seg.timeindex_path):
                p.unlink(missing_ok=True)
        fsync_dir(store.log_dir)
        return list(names)
