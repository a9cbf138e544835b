"""The delegation-token HMAC (the token's password) and the index that finds a token by it.

The HMAC is HMAC-SHA512 keyed by the token secret over the token id (KIP-48).
It is never stored: every part of secmeta that needs one calls ``token_hmac``.
``TokenHmacs`` maps HMACs back to token ids for the tokens of one image; it is
an immutable value advanced with each batch's events, so a lookup is O(1) and
nothing is rebuilt under the store's write lock.
"""

from __future__ import annotations

import hashlib
import hmac as _hmac
from collections.abc import Iterable
from dataclasses import dataclass, field

import immutables

from secmeta.events.records import DelegationTokenIssued, DelegationTokenRemoved, Event
from secmeta.projections.tokens import TokensImage

__all__ = ["TokenHmacs", "token_hmac"]


def token_hmac(secret: bytes, token_id: str) -> bytes:
    """HMAC-SHA512 keyed by the token secret over the token id (the token's password)."""
    return _hmac.new(bytes(secret), token_id.encode("utf-8"), hashlib.sha512).digest()


@dataclass(frozen=True, slots=True, repr=False)
class TokenHmacs:
    """Token ids by HMAC for the tokens of one image (empty while tokens are disabled)."""

    secret: bytes | None = field(default=None, repr=False)
    ids: immutables.Map = immutables.Map()  # HMAC -> token id

    def __repr__(self) -> str:
        return f"TokenHmacs(<{len(self.ids)} tokens>)"

    @classmethod
    def of(cls, tokens: TokensImage, secret: bytes | None) -> TokenHmacs:
        """The index of every token in ``tokens``."""
        if secret is None:
            return cls()
        return cls(secret, immutables.Map((token_hmac(secret, info.token_id), info.token_id) for info in tokens))

    def advanced(self, events: Iterable[Event]) -> TokenHmacs:
        """The index after ``events`` (issued tokens added, removed ones dropped)."""
        if self.secret is None:
            return self
        mutation = None
        for event in events:
            if isinstance(event, DelegationTokenIssued | DelegationTokenRemoved):
                if mutation is None:
                    mutation = self.ids.mutate()
                key = token_hmac(self.secret, event.token_id)
                if isinstance(event, DelegationTokenIssued):
                    mutation[key] = event.token_id
                else:
                    mutation.pop(key, None)
        return self if mutation is None else TokenHmacs(self.secret, mutation.finish())

    def token_id(self, hmac: object) -> str | None:
        """The id of the token whose HMAC is ``hmac``, or None (also for anything not bytes)."""
        if not isinstance(hmac, bytes | bytearray) or not hmac:
            return None
        return self.ids.get(bytes(hmac))
