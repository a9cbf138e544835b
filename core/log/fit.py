"""Whether a snapshot fits the log: the one rule open and ``secmeta log verify`` both apply."""

from __future__ import annotations

from collections.abc import Callable


def snapshot_misfit(next_offset: int, link: bytes, start: int, end: int, link_at: Callable[[int], bytes | None]) -> str | None:
    """Why an authenticated snapshot at ``next_offset`` with chain ``link`` does not fit the log
    holding offsets [start, end), or None when it does (``link_at`` gives the log's link at an offset)."""
    if next_offset > end:
        return f"it is at offset {next_offset}, past the log's end {end}: batches were removed from the end"
    if next_offset < start:
        return f"it is at offset {next_offset}, before the log's start {start}"
    log_link = link_at(next_offset)
    if log_link is None:
        return f"no batch of the log ends at its offset {next_offset}"
    if log_link != link:
        return f"its chain link differs from the log's at offset {next_offset}: it belongs to another history"
    return None
