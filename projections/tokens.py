"""The immutable delegation-token image and the delta that derives the next one.

Tokens are kept by token id, without their HMAC (it is recomputed from the
token secret, never stored).  ``TokensDelta(image)`` records issues, expiry
changes and removals (of a token that does not exist: InconsistentEventError);
``apply()`` returns a new image sharing the untouched tokens, or the same image
when nothing changed. ``TokenInfo.is_expired`` is the one expiry rule.

A token's fields are ``DelegationTokenIssued``'s (``TOKEN_FIELDS``): ``TokenInfo.of`` reads
them from the event, from a redacted payload or any mapping, and ``TokenInfo.issued``
gives the event that opens the token as it stands; nothing else spells the list out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Self

import immutables

from secmeta.events.records import DelegationTokenIssued
from secmeta.projections.errors import InconsistentEventError
from secmeta.projections.layered_map import LayeredMap

__all__ = ["TOKEN_FIELDS", "TokenInfo", "TokensDelta", "TokensImage"]

#: A token's fields, in order: those of the event that issues it (and of ``TokenInfo``).
TOKEN_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(DelegationTokenIssued))


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A delegation token's metadata (no HMAC)."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int

    @classmethod
    def of(cls, source: DelegationTokenIssued | Mapping[str, Any], **more: Any) -> Self:
        """The token an issue event, a redacted payload or a row of ``TOKEN_FIELDS`` describes
        (``more``: the fields a subclass adds)."""
        get = source.__getitem__ if isinstance(source, Mapping) else source.__getattribute__
        values = {name: get(name) for name in TOKEN_FIELDS}
        values["renewers"] = tuple(values["renewers"] or ())
        return cls(**values, **more)

    def issued(self) -> DelegationTokenIssued:
        """The event that issues this token as it stands (its current expiry included)."""
        return DelegationTokenIssued(*(getattr(self, name) for name in TOKEN_FIELDS))

    def is_expired(self, now_ms: int) -> bool:
        """Kafka's rule: expired once now is past the expiry or the max timestamp."""
        return now_ms > self.expiry_timestamp_ms or now_ms > self.max_timestamp_ms


@dataclass(frozen=True, slots=True, repr=False)
class TokensImage:
    """Every delegation token, by token id."""

    # token_id -> TokenInfo; a LayeredMap when loaded from a snapshot's section (each token made when first read)
    tokens: immutables.Map | LayeredMap = immutables.Map()
    EMPTY: ClassVar[TokensImage]

    def __repr__(self) -> str:
        return f"TokensImage(<{len(self.tokens)} tokens>)"

    def get(self, token_id: str) -> TokenInfo | None:
        return self.tokens.get(token_id)

    def __iter__(self) -> Iterator[TokenInfo]:
        """Every token, in no particular order."""
        return iter(self.tokens.values())

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token_id: object) -> bool:
        return token_id in self.tokens

    def expired(self, now_ms: int) -> list[TokenInfo]:
        """The tokens expired at ``now_ms``, by token id."""
        found = [t for t in self.tokens.values() if t.is_expired(now_ms)]
        found.sort(key=lambda t: t.token_id)
        return found


TokensImage.EMPTY = TokensImage()


class TokensDelta:
    """Changes to a TokensImage: token_id -> new info, or None for removed."""

    __slots__ = ("image", "_changes")

    def __init__(self, image: TokensImage):
        self.image = image
        self._changes: dict[str, TokenInfo | None] = {}

    def get(self, token_id: str) -> TokenInfo | None:
        """A token as the delta stands (image plus changes)."""
        if token_id in self._changes:
            return self._changes[token_id]
        return self.image.tokens.get(token_id)

    def issue(self, info: TokenInfo) -> None:
        """Add a token (replacing one with the same id)."""
        self._changes[info.token_id] = info

    def set_expiry(self, token_id: str, expiry_timestamp_ms: int) -> None:
        """Change a token's expiry; an unknown token raises InconsistentEventError."""
        current = self._existing(token_id, "expiry change")
        self._changes[token_id] = replace(current, expiry_timestamp_ms=expiry_timestamp_ms)

    def remove(self, token_id: str) -> None:
        """Remove a token; an unknown token raises InconsistentEventError."""
        self._existing(token_id, "removal")
        self._changes[token_id] = None

    def net(self) -> dict[str, TokenInfo | None]:
        """The net change to the base image: token id -> the token as it stands, or None (removed)."""
        return dict(self._changes)

    @classmethod
    def of_net(cls, image: TokensImage, net: Mapping[str, TokenInfo | None]) -> TokensDelta:
        """A delta onto ``image`` holding ``net`` (what ``net`` gave for a delta onto the same image)."""
        delta = cls(image)
        delta._changes = dict(net)
        return delta

    def _existing(self, token_id: str, change: str) -> TokenInfo:
        current = self.get(token_id)
        if current is None:
            raise InconsistentEventError(f"{change} of delegation token {token_id!r}, which does not exist")
        return current

    def apply(self) -> TokensImage:
        """The image with the changes; the base image itself if none had an effect."""
        base = self.image.tokens
        mutation = None
        for token_id, info in self._changes.items():
            if base.get(token_id) == info:
                continue
            if mutation is None:
                mutation = base.mutate()
            if info is None:
                del mutation[token_id]
            else:
                mutation[token_id] = info
        if mutation is None:
            return self.image
        return TokensImage(mutation.finish())

