"""SCRAM for secmeta: credential derivation and the server side of the exchange.

The names live in ``secmeta.core.auth.scram_crypto`` (RFC 5802 derivation, ScramCredential)
and ``secmeta.core.auth.scram_server`` (ScramServer, TokenIdentity); import them from here.
"""

from secmeta.core.auth.scram_crypto import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SALT_LENGTH,
    ScramCredential,
    credential_from_password,
    credential_from_salted_password,
    derive_keys,
    salted_password,
)
from secmeta.core.auth.scram_server import TOKEN_ITERATIONS, ScramServer, TokenIdentity

__all__ = [
    "DEFAULT_ITERATIONS",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "SALT_LENGTH",
    "TOKEN_ITERATIONS",
    "ScramCredential",
    "ScramServer",
    "TokenIdentity",
    "credential_from_password",
    "credential_from_salted_password",
    "derive_keys",
    "salted_password",
]
