"""SCRAM for secmeta: credential derivation and the server side of the exchange.

The names live in ``core.scram_crypto`` (RFC 5802 derivation, ScramCredential)
and ``core.scram_server`` (ScramServer, TokenIdentity); import them from here.
"""

from core.scram_crypto import (
    DEFAULT_ITERATIONS,
    SALT_LENGTH,
    ScramCredential,
    credential_from_password,
    credential_from_salted_password,
    derive_keys,
    salted_password,
)
from core.scram_server import TOKEN_ITERATIONS, ScramServer, TokenIdentity

__all__ = [
    "DEFAULT_ITERATIONS",
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
