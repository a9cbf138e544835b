"""SCRAM key derivation (RFC 5802) and the credential a server keeps.

Passwords are taken as plain UTF-8 bytes, as Kafka does (no SASLprep).
Only the salt, StoredKey, ServerKey and iteration count are ever kept.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

from core.errors import InvalidValueError, UnsupportedSaslMechanismException
from events.types import ScramMechanism

__all__ = [
    "DEFAULT_ITERATIONS",
    "SALT_LENGTH",
    "ScramCredential",
    "credential_from_password",
    "credential_from_salted_password",
    "derive_keys",
    "hash_digest",
    "hmac_digest",
    "require_mechanism",
    "salted_password",
]

DEFAULT_ITERATIONS = 4096
SALT_LENGTH = 32


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """One user's stored SCRAM credential for one mechanism; repr shows no secrets."""

    mechanism: ScramMechanism
    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


def require_mechanism(mechanism: ScramMechanism | str | int) -> ScramMechanism:
    """The ScramMechanism named by ``mechanism``; UNKNOWN or unrecognised names are unsupported."""
    try:
        parsed = ScramMechanism.parse(mechanism)
    except ValueError:
        parsed = ScramMechanism.UNKNOWN
    if parsed is ScramMechanism.UNKNOWN:
        raise UnsupportedSaslMechanismException(f"Unsupported SCRAM mechanism {mechanism!r}")
    return parsed


def hash_digest(mechanism: ScramMechanism, data: bytes) -> bytes:
    """H(data) with the mechanism's hash."""
    return hashlib.new(require_mechanism(mechanism).hash_name, data).digest()


def hmac_digest(mechanism: ScramMechanism, key: bytes, data: bytes) -> bytes:
    """HMAC(key, data) with the mechanism's hash."""
    return hmac.new(key, data, require_mechanism(mechanism).hash_name).digest()


def _as_bytes(password: bytes | str) -> bytes:
    if isinstance(password, str):
        return password.encode("utf-8")
    if isinstance(password, bytes | bytearray | memoryview):
        return bytes(password)
    raise TypeError(f"password must be bytes or str, not {type(password).__name__}")


def _check_salt_and_iterations(salt: bytes, iterations: int) -> None:
    if not isinstance(salt, bytes) or not salt:
        raise InvalidValueError("salt must be non-empty bytes")
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 1:
        raise InvalidValueError(f"iterations must be a positive int, got {iterations!r}")


def salted_password(
    mechanism: ScramMechanism, password: bytes | str, salt: bytes, iterations: int
) -> bytes:
    """SaltedPassword = Hi(password, salt, iterations): one block of PBKDF2-HMAC."""
    _check_salt_and_iterations(salt, iterations)
    name = require_mechanism(mechanism).hash_name
    return hashlib.pbkdf2_hmac(name, _as_bytes(password), salt, iterations)


def derive_keys(mechanism: ScramMechanism, salted: bytes) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) from a salted password."""
    client_key = hmac_digest(mechanism, salted, b"Client Key")
    stored_key = hash_digest(mechanism, client_key)
    server_key = hmac_digest(mechanism, salted, b"Server Key")
    return stored_key, server_key


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The credential for a password the client already salted (KIP-554's wire form)."""
    mechanism = require_mechanism(mechanism)
    _check_salt_and_iterations(salt, iterations)
    stored_key, server_key = derive_keys(mechanism, salted)
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def credential_from_password(
    mechanism: ScramMechanism,
    password: bytes | str,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    """The credential for ``password``, salted with ``salt`` or SALT_LENGTH fresh random bytes."""
    if salt is None:
        salt = secrets.token_bytes(SALT_LENGTH)
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)
