"""Where the history index lives and how its meta row is authenticated.

Kept apart from the index itself (secmeta.core.forensics.history_index) so the log's open
check (secmeta.core.log.evidence) can read the end an authentic index records without
depending on the index: an index that ends past the log's end is evidence of truncation.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
from pathlib import Path

from secmeta.events.keyring import Keyring

__all__ = ["INDEX_DIR", "INDEX_FILE", "index_key", "meta_mac", "recorded_end"]

INDEX_DIR = "history"
INDEX_FILE = "index.sqlite"
_MAC_LABEL = b"secmeta/history-index"


def index_key(keyring: Keyring, key_id: str) -> bytes:
    """The key the index's meta row and file digest are authenticated with (derived from ``key_id``'s chain key)."""
    return hashlib.blake2b(keyring.chain_key(key_id), digest_size=32, person=b"secmeta-hindex").digest()


def meta_mac(key: bytes, meta: dict[str, str]) -> str:
    """The HMAC of a meta row (every entry but ``mac`` itself)."""
    body = json.dumps({k: v for k, v in meta.items() if k != "mac"}, sort_keys=True).encode()
    return hmac.new(key, _MAC_LABEL + body, hashlib.sha256).hexdigest()


def recorded_end(store_path: Path, store_id: str, keyring: Keyring) -> tuple[Path, int] | None:
    """(file, end offset) of the store's history index when its meta row is authentic under a key of
    ``keyring`` and names this store; None when there is none, or it proves nothing (unreadable, forged)."""
    path = Path(store_path) / INDEX_DIR / INDEX_FILE
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            meta = dict(db.execute("SELECT k, v FROM meta"))
        finally:
            db.close()
        key_id = meta.get("key_id")
        if key_id not in keyring.ids or meta.get("store_id") != store_id:
            return None
        if not hmac.compare_digest(meta.get("mac", ""), meta_mac(index_key(keyring, key_id), meta)):
            return None
        return path, int(meta["end"])
    except (sqlite3.Error, KeyError, ValueError):
        return None
