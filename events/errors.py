"""secmeta's error root, and the exceptions raised by the events package (codec, keyring, sealing).

``SecmetaError`` lives here, on the lowest floor, so that every package's errors
can derive from it without importing a higher one; ``core`` re-exports it
(``from core import SecmetaError``). Catching ``SecmetaError`` catches every
error secmeta raises on purpose.
"""

from __future__ import annotations

from collections.abc import Iterable


class SecmetaError(Exception):
    """Base of every error secmeta raises on purpose; the message says what was wrong."""


class InvalidValueError(SecmetaError, ValueError):
    """A value secmeta was given that it cannot use (a setting, a name, an argument); the message names it."""


class EventsError(SecmetaError):
    """Base class of every error the events package raises."""


class KeyringError(EventsError):
    """The keyring could not be found, read or used."""


class UnknownKeyError(KeyringError):
    """A key id the keyring does not hold; ``key_id`` names it."""

    def __init__(self, key_id: str, known_ids: Iterable[str] = ()) -> None:
        self.key_id = key_id
        self.known_ids = tuple(known_ids)
        known = ", ".join(self.known_ids) or "none"
        super().__init__(f"key id {key_id!r} is not in the keyring (it holds: {known})")


class SealedSecretError(EventsError):
    """A sealed secret failed to open: wrong key material, tampering, or bound to another record."""


class EventSchemaError(EventsError):
    """An event does not fit its Avro schema, or a schema file is invalid."""


class UnknownSchemaError(EventsError):
    """A writer schema fingerprint the codec has not been given; ``fingerprint`` holds it."""

    def __init__(self, fingerprint: bytes, what: str = "writer schema") -> None:
        self.fingerprint = bytes(fingerprint)
        super().__init__(
            f"unknown {what} fingerprint {self.fingerprint.hex()}: register the writer schema first"
        )


class MalformedEventError(EventsError):
    """Encoded bytes are not a well-formed event or batch (bad marker, truncated, trailing bytes)."""
