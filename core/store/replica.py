"""A new store directory that is to be a replica of another store's log (replicated mode's join).

A replica shares its store's identity: the store id binds the genesis link of the hash chain and the
context of every sealed file, so a batch appended byte for byte (``SecurityStore.append_replicated``)
checks against the replica's chain exactly as against the original's.
"""

from __future__ import annotations

import os

from secmeta.core.log.anchor import ANCHOR_FILE, Anchor, read_anchor
from secmeta.core.log.highwater import HighWater, Mark
from secmeta.core.log.loader import write_genesis_mark
from secmeta.core.store.storedir import StoreDirectory
from secmeta.events.durable import write_atomically
from secmeta.events.keyring import Keyring

__all__ = ["create_replica"]


def create_replica(path: str | os.PathLike, store_id: str, created_ms: int, keyring: Keyring,
                   key_checks: dict[str, str] | None = None, *, anchor: bytes | None = None) -> Anchor | None:
    """Make an empty store at ``path`` (a new or empty directory) with the identity of store ``store_id``,
    written with the keys of ``key_checks`` (the keyring must match them: KeyringError otherwise).

    ``anchor``: the sealed retention anchor of a log that starts after deleted segments (the file's bytes);
    it must be this store's (CorruptLogError otherwise), and the replica's log then starts where it says.
    Returns the anchor read back.
    """
    store = StoreDirectory.open(path, create=True, identity=(store_id, created_ms),
                                initialise=lambda new: write_genesis_mark(new, keyring))
    try:
        store.key_checks.update(key_checks or {})
        store.check_keyring(keyring, writer=True)
        store.save_meta()
        if anchor is None:
            return None
        write_atomically(store.log_dir / ANCHOR_FILE, anchor)
        found = read_anchor(store.log_dir, store_id, keyring)
        assert found is not None
        HighWater(store.log_dir, store_id, keyring).write(Mark(found.next_offset, found.link))
        return found
    finally:
        store.close()
