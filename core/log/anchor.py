"""The retention anchor: where the log starts after covered segments were deleted.

Retention (``delete_covered_segments``) deletes sealed segments a snapshot
covers and first writes ``log/retention-anchor``: the offset the log now
starts at, the chain link of the last deleted batch (so verification and
replay continue the chain from there) and the retention that produced it
(the snapshot offset that covered the deletion, the segments deleted, when).
It is sealed with the chain key and bound to the store id: an anchor cannot
be forged to hide deleted history, nor moved from another store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from secmeta.core.errors import CorruptLogError
from secmeta.core.log.seal import BrokenSealError, seal, unseal
from secmeta.events.durable import write_atomically
from secmeta.events.keyring import Keyring

ANCHOR_FILE = "retention-anchor"


@dataclass(frozen=True)
class Anchor:
    next_offset: int
    link: bytes = field(repr=False)
    covered_by: int  # the snapshot offset the deletion was covered by
    deleted: tuple[str, ...]
    time_ms: int


def _context(store_id: str) -> bytes:
    return b"secmeta/retention-anchor:" + store_id.encode()


def read_anchor(log_dir: Path, store_id: str, keyring: Keyring) -> Anchor | None:
    """The store's anchor (None if no retention ran); CorruptLogError if it is not ours."""
    path = Path(log_dir) / ANCHOR_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        meta = json.loads(unseal(keyring, _context(store_id), data))
        return Anchor(int(meta["next_offset"]), bytes.fromhex(meta["link"]), int(meta["covered_by"]),
                      tuple(meta["deleted"]), int(meta["time_ms"]))
    except (BrokenSealError, ValueError, KeyError, TypeError) as exc:
        raise CorruptLogError(f"the retention anchor {path} is not valid ({exc}): it was altered or forged") from None


def write_anchor(log_dir: Path, store_id: str, keyring: Keyring, anchor: Anchor) -> None:
    body = json.dumps({
        "next_offset": anchor.next_offset, "link": anchor.link.hex(), "covered_by": anchor.covered_by,
        "deleted": list(anchor.deleted), "time_ms": anchor.time_ms,
    }).encode()
    write_atomically(Path(log_dir) / ANCHOR_FILE, seal(keyring, _context(store_id), body))


def anchor_stamp(log_dir: Path) -> tuple[int, int] | None:
    """The anchor file's (inode, mtime) now, None without one: a reader sees when retention rewrote it."""
    try:
        st = (Path(log_dir) / ANCHOR_FILE).stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns
