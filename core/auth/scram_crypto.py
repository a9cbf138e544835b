"""SCRAM key derivation (RFC 5802), the credential a server keeps, and the message pieces
both sides of an exchange share (base64, nonces, UTF-8 text; secmeta.core.wire.scram_client, secmeta.core.auth.scram_server).

Passwords are taken as plain UTF-8 bytes, as Kafka does (no SASLprep).
Only the salt, StoredKey, ServerKey and iteration count are ever kept.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from secmeta.core import validation
from secmeta.core.errors import (
    InvalidValueError,
    SaslAuthenticationException,
    UnsupportedSaslMechanismException,
)
from secmeta.events.types import ScramMechanism

__all__ = [
    "DEFAULT_ITERATIONS",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "SALT_LENGTH",
    "ScramCredential",
    "b64",
    "b64decode",
    "credential_from_password",
    "credential_from_salted_password",
    "derive_keys",
    "hash_digest",
    "hmac_digest",
    "is_printable",
    "message_text",
    "new_nonce",
    "require_mechanism",
    "salted_password",
]

DEFAULT_ITERATIONS = 4096
#: Kafka's ScramMechanism.minIterations() and maxIterations(), the same for SHA-256 and SHA-512.
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
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
    parsed = validation.enum_or_unknown(ScramMechanism, mechanism)
    if parsed is ScramMechanism.UNKNOWN:
        raise UnsupportedSaslMechanismException(f"Unsupported SCRAM mechanism {mechanism!r}")
    return parsed


#: Each mechanism's hash, as hashlib's constructor and as the name hmac.digest's one-shot C path takes (a login makes
#: two hashes and four HMACs: hashlib.new and the HMAC object cost ~1-2 us more each than these).
_HASHES = {ScramMechanism.SCRAM_SHA_256: (hashlib.sha256, "sha256"),
           ScramMechanism.SCRAM_SHA_512: (hashlib.sha512, "sha512")}


def _hash_of(mechanism: ScramMechanism) -> tuple[Callable[[bytes], Any], str]:
    found = _HASHES.get(mechanism) if type(mechanism) is ScramMechanism else None
    return found if found is not None else _HASHES[require_mechanism(mechanism)]


def hash_digest(mechanism: ScramMechanism, data: bytes) -> bytes:
    """H(data) with the mechanism's hash."""
    return _hash_of(mechanism)[0](data).digest()  # type: ignore[no-any-return]


def hmac_digest(mechanism: ScramMechanism, key: bytes, data: bytes) -> bytes:
    """HMAC(key, data) with the mechanism's hash."""
    return hmac.digest(key, data, _hash_of(mechanism)[1])


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
    return hashlib.pbkdf2_hmac(name, validation.secret_bytes(password, "password", utf8=True), salt, iterations)


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


# -- message pieces both sides use ------------------------------------------------------

def b64(data: bytes) -> str:
    """Base64 text of ``data`` (salts, proofs, signatures, a token HMAC as password)."""
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str, what: str) -> bytes:
    """The bytes of base64 ``text``; a SaslAuthenticationException naming ``what`` if it is not base64."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise SaslAuthenticationException(f"Malformed SCRAM message: {what} is not valid base64") from None


def message_text(message: str | bytes) -> str:
    """A SCRAM message as text: it must be valid UTF-8 (else SaslAuthenticationException).

    A str with a lone surrogate cannot be encoded; the error never carries the message.
    """
    if not isinstance(message, str | bytes | bytearray):
        raise TypeError(f"SCRAM messages are str, not {type(message).__name__}")
    try:
        data = message.encode("utf-8") if isinstance(message, str) else bytes(message)
        return data.decode("utf-8")
    except UnicodeError:
        raise SaslAuthenticationException("Malformed SCRAM message: not UTF-8") from None


#: RFC 5802's printable: %x21-2B / %x2D-7E (one regex match: a generator over the characters cost ~3 us a nonce).
_PRINTABLE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")


def is_printable(text: str) -> bool:
    """A valid nonce: non-empty printable ASCII without ',' (RFC 5802's printable)."""
    return _PRINTABLE.fullmatch(text) is not None


def new_nonce() -> str:
    """A fresh random nonce: 192 bits, URL-safe base64 (printable, no ','; Kafka: 130 bits in base 36)."""
    return secrets.token_urlsafe(24)
