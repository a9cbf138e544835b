"""Keyed seals for the log's small side files: the high-water mark, the retention anchor, index files, and
the log topic's store record.

A sealed file is its body followed by a trailer: the id of the keyring key that
sealed it, that id's length (u8) and HMAC-SHA256 under the key's chain key over
a context and the body.  The context names what the file is and where it
belongs (its kind, the store id, the segment it indexes), so a sealed file is
neither forgeable without the key nor usable in another place or store.
"""

from __future__ import annotations

import hashlib
import hmac

from secmeta.core.errors import SecmetaError
from secmeta.events.keyring import Keyring

MAC_SIZE = 32


class BrokenSealError(SecmetaError):
    """A sealed file whose trailer is missing, names an unknown key or fails its HMAC."""


def seal(keyring: Keyring, context: bytes, body: bytes) -> bytes:
    """``body`` with a trailer authenticating it (and ``context``) under the keyring's newest key."""
    key_id = keyring.newest_id.encode()
    return body + key_id + bytes([len(key_id)]) + _mac(keyring.chain_key(keyring.newest_id), context, body)


def seal_trailer(keyring: Keyring, context: bytes, body: bytes) -> bytes:
    """The trailer ``seal`` appends to ``body``, alone: for a record that carries its body in another form
    (the log topic's store record); ``unseal(keyring, context, body + trailer)`` checks it."""
    return seal(keyring, context, body)[len(body):]


def unseal(keyring: Keyring, context: bytes, data: bytes) -> bytes:
    """The body of a sealed file; BrokenSealError if it was not sealed for ``context`` by a key we hold."""
    if len(data) < MAC_SIZE + 1:
        raise BrokenSealError("too short to carry a seal")
    klen = data[-MAC_SIZE - 1]
    if len(data) < MAC_SIZE + 1 + klen:
        raise BrokenSealError("the seal is cut short")
    end = len(data) - MAC_SIZE - 1 - klen
    key_id = data[end : end + klen].decode(errors="replace")
    if key_id not in keyring.ids:
        raise BrokenSealError(f"sealed with key id {key_id!r}, which is not in the keyring")
    body = data[:end]
    if not hmac.compare_digest(_mac(keyring.chain_key(key_id), context, body), data[-MAC_SIZE:]):
        raise BrokenSealError("the seal does not match: altered, forged or moved here from elsewhere")
    return body


def _mac(key: bytes, context: bytes, body: bytes) -> bytes:
    mac = hmac.new(key, len(context).to_bytes(4, "big") + context, hashlib.sha256)
    mac.update(body)
    return mac.digest()
