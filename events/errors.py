"""Exceptions raised by the events package (codec, keyring, sealing)."""

from __future__ import annotations

from collections.abc import Iterable


class EventsError(Exception):
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
