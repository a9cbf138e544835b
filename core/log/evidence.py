"""Rollback evidence: a derived file that records a point beyond the log's end.

Snapshots, time-travel checkpoints (full and delta) and the history index are derived from the log and
authenticated with the keyring; each records the offset it reached.  One that records an
offset past the log's end was written when the log was longer: the log was cut (or the
whole store put back with newer derived files left in place).  That is never a stale file
to rebuild: every open refuses, naming the file, both offsets and the repair that records
the cut (``secmeta log recover``, which moves such files to the quarantine).  Files that
fail their authentication prove nothing (anyone can write them) and are left to their
owners, which reject and rebuild them.  The high-water mark is the log's own record of its
end and is checked by the loader (secmeta.core.log.loader) with the same wording.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from secmeta.core.errors import CorruptLogError
from secmeta.core.forensics.index_seal import recorded_end
from secmeta.core.log.extent import log_extent
from secmeta.core.log.highwater import HighWater
from secmeta.core.log.pending_recovery import cut_span
from secmeta.core.store.storedir import StoreDirectory
from secmeta.events.keyring import Keyring
from secmeta.projections.snapshot import SnapshotError, list_snapshots, read_snapshot_info

__all__ = ["Evidence", "TruncationEvidenceError", "derived_files_beyond", "refuse_evidence", "truncation_message"]


@dataclass(frozen=True)
class Evidence:
    """``path`` (authentic) records offset ``offset``."""

    path: Path
    offset: int


class TruncationEvidenceError(CorruptLogError):
    """A derived file records a point beyond the log's end: the log was truncated or rolled back."""


def truncation_message(what: str, recorded: int, end: int) -> str:
    """The one wording of a refusal for evidence of truncation (a derived file or the high-water mark)."""
    return (f"{what} records offset {recorded} (written when the log held the offsets below it) but "
            f"{log_extent(end)}: evidence that the log was "
            f"truncated or rolled back, batches were removed from the end (missing: {cut_span(end, recorded)}). "
            f"Nothing was changed and nothing is rebuilt; `secmeta log recover --truncate-to {end} --reason TEXT` "
            "records the cut in the log (and moves the file to the quarantine), after which the store opens")


def derived_files_beyond(store: StoreDirectory, keyring: Keyring, end: int, *,
                         live: HighWater | None = None) -> list[Evidence]:
    """Every authentic derived file of ``store`` that records an offset past ``end``, highest first.

    ``live``: the log was read beside a running writer (a read-only open, verify), which may have
    appended and written derived files since: a file no further than the high-water mark read
    after them records acknowledged batches, not a cut (a rollback puts back an older mark too).
    """
    found = _beyond(store, keyring, end)
    if found and live is not None:
        try:
            mark = live.read()
        except CorruptLogError:
            mark = None
        if mark is not None:
            found = [e for e in found if e.offset > mark.next_offset]
    return found


def _beyond(store: StoreDirectory, keyring: Keyring, end: int) -> list[Evidence]:
    found = []
    for directory in (store.snapshot_dir, store.checkpoint_dir, *store.checkpoint_delta_dirs()):
        for path in list_snapshots(directory):
            if int(path.stem.rsplit("-", 1)[-1]) <= end:  # the name is cheap to read; only those past the end
                continue  # are authenticated (a forged name proves nothing either way)
            try:
                info = read_snapshot_info(path, keyring)
            except (SnapshotError, OSError):
                continue
            if info.next_offset > end:
                found.append(Evidence(path, info.next_offset))
    index = recorded_end(store.path, store.store_id, keyring)
    if index is not None and index[1] > end:
        found.append(Evidence(*index))
    return sorted(found, key=lambda e: -e.offset)


def refuse_evidence(store: StoreDirectory, keyring: Keyring, end: int, *, live: HighWater | None = None) -> None:
    """TruncationEvidenceError naming the derived file that records the highest point past ``end``, if any."""
    found = derived_files_beyond(store, keyring, end, live=live)
    if found:
        first = found[0]
        others = f" ({len(found) - 1} more derived file(s) past the end)" if len(found) > 1 else ""
        raise TruncationEvidenceError(truncation_message(str(first.path), first.offset, end) + others, offset=end)
