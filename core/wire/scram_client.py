"""The client side of one SCRAM exchange (RFC 5802 / RFC 7677), as Kafka's ScramSaslClient does it.

``ScramClient(mechanism, username, password)``: ``first()`` gives client-first,
``final(server_first)`` checks the server's nonce and iterations and gives client-final
with the proof, ``verify(server_final)`` checks the server signature (mutual
authentication) and only then is the exchange ``complete``.

Kafka's rules followed (clients/.../security/scram/internals/ScramSaslClient.java,
ScramMessages.java, ScramFormatter.java): GS2 header ``n,,`` (no channel binding, no
authorization id), user names escaped as saslname (``=`` -> ``=3D``, ``,`` -> ``=2C``),
passwords as plain UTF-8 (no SASLprep), extensions appended to client-first-message-bare
(``n=USER,r=NONCE,tokenauth=true`` for a delegation-token login: ScramExtensions, with
the token id as user name and the base64 HMAC as password), the server nonce must start
with the client nonce, and fewer iterations than the mechanism's minimum (4096) are refused.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from enum import Enum

from secmeta.core import validation
from secmeta.core.auth.scram_crypto import (
    MIN_ITERATIONS,
    b64,
    b64decode,
    hash_digest,
    hmac_digest,
    is_printable,
    message_text,
    new_nonce,
    require_mechanism,
    salted_password,
)
from secmeta.core.errors import (
    IllegalSaslStateException,
    InvalidValueError,
    SaslAuthenticationException,
)
from secmeta.events.types import ScramMechanism

__all__ = ["ScramClient", "sasl_name", "token_login"]

GS2_HEADER = "n,,"


class _State(Enum):
    FIRST = "ready to send client-first"
    AWAIT_SERVER_FIRST = "awaiting server-first"
    AWAIT_SERVER_FINAL = "awaiting server-final"
    COMPLETE = "complete"
    FAILED = "failed"


def sasl_name(username: str) -> str:
    """A user name escaped for a SCRAM message (ScramFormatter.saslName)."""
    return username.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """One client-side SCRAM exchange; the password and derived keys never show in repr."""

    __slots__ = ("_mechanism", "_username", "_password", "_extensions", "_nonce", "_state",
                 "_client_first_bare", "_auth_message", "_salted")

    def __init__(self, mechanism: ScramMechanism | str, username: str, password: str | bytes, *,
                 extensions: Mapping[str, str] | None = None, nonce: str | None = None):
        self._mechanism = require_mechanism(mechanism)
        if not username:
            raise InvalidValueError("SCRAM user name must not be empty")
        self._username = username
        self._password = validation.secret_bytes(password, "SCRAM password", utf8=True)
        self._extensions = dict(extensions or {})
        for key, value in self._extensions.items():
            if not (key.isascii() and key.isalpha()) or "," in value:
                raise InvalidValueError(f"bad SCRAM extension name or value for {key!r}")
        self._nonce = nonce if nonce is not None else new_nonce()
        if not is_printable(self._nonce):
            raise InvalidValueError("SCRAM client nonce must be printable ASCII without ','")
        self._state = _State.FIRST
        self._client_first_bare = ""
        self._auth_message = b""
        self._salted = b""

    def __repr__(self) -> str:
        return f"ScramClient({self._mechanism.mechanism_name}, {self._username!r}, {self._state.value})"

    @property
    def mechanism(self) -> ScramMechanism:
        return self._mechanism

    @property
    def complete(self) -> bool:
        """True once the server's signature has been verified."""
        return self._state is _State.COMPLETE

    def first(self) -> str:
        """The client-first message: ``n,,n=USER,r=NONCE[,ext=value...]``."""
        self._expect(_State.FIRST, "send client-first")
        bare = f"n={sasl_name(self._username)},r={self._nonce}"
        bare += "".join(f",{k}={v}" for k, v in self._extensions.items())
        self._client_first_bare = bare
        self._state = _State.AWAIT_SERVER_FIRST
        return GS2_HEADER + bare

    def final(self, server_first: str | bytes) -> str:
        """Check server-first and return client-final (``c=biws,r=NONCE,p=PROOF``)."""
        self._expect(_State.AWAIT_SERVER_FIRST, "take server-first")
        try:
            text = message_text(server_first)
            nonce, salt, iterations = _parse_server_first(text)
            if not nonce.startswith(self._nonce) or len(nonce) <= len(self._nonce):
                raise SaslAuthenticationException("Invalid server nonce: does not start with client nonce")
            if iterations < MIN_ITERATIONS:
                raise SaslAuthenticationException(f"Requested iterations {iterations} is less than the minimum "
                            f"{MIN_ITERATIONS} for {self._mechanism.mechanism_name}")
            self._salted = salted_password(self._mechanism, self._password, salt, iterations)
            without_proof = f"c={b64(GS2_HEADER.encode())},r={nonce}"
            self._auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
            client_key = hmac_digest(self._mechanism, self._salted, b"Client Key")
            stored_key = hash_digest(self._mechanism, client_key)
            signature = hmac_digest(self._mechanism, stored_key, self._auth_message)
            proof = bytes(a ^ b for a, b in zip(client_key, signature))
        except BaseException:
            self._finish(_State.FAILED)
            raise
        self._state = _State.AWAIT_SERVER_FINAL
        return f"{without_proof},p={b64(proof)}"

    def verify(self, server_final: str | bytes) -> None:
        """Check the server's signature (``v=...``); an ``e=...`` answer or a mismatch fails."""
        self._expect(_State.AWAIT_SERVER_FINAL, "take server-final")
        try:
            text = message_text(server_final)
            if text.startswith("e="):
                raise SaslAuthenticationException(f"SCRAM authentication failed with error: {text[2:].split(',')[0]}")
            if not text.startswith("v="):
                raise SaslAuthenticationException("Invalid SCRAM server final message format")
            signature = b64decode(text[2:].split(",")[0], "server signature")
            server_key = hmac_digest(self._mechanism, self._salted, b"Server Key")
            expected = hmac_digest(self._mechanism, server_key, self._auth_message)
            if not hmac.compare_digest(signature, expected):
                raise SaslAuthenticationException("Invalid server signature in server final message")
        except BaseException:
            self._finish(_State.FAILED)
            raise
        self._finish(_State.COMPLETE)

    def _expect(self, state: _State, step: str) -> None:
        if self._state is not state:
            current = self._state
            if current is not _State.COMPLETE:
                self._finish(_State.FAILED)
            raise IllegalSaslStateException(f"SCRAM client cannot {step} when {current.value}")

    def _finish(self, state: _State) -> None:
        self._state = state
        self._salted = b""
        self._auth_message = b""


def token_login(mechanism: ScramMechanism | str, token_id: str, token_hmac: bytes | str,
                **kwargs) -> ScramClient:
    """A SCRAM client that logs in with a delegation token (KIP-48).

    ``token_hmac`` is the token's HMAC (bytes) or its base64 text; the password is the base64 text.
    """
    password = token_hmac if isinstance(token_hmac, str) else b64(token_hmac)
    return ScramClient(mechanism, token_id, password, extensions={"tokenauth": "true"}, **kwargs)


def _parse_server_first(text: str) -> tuple[str, bytes, int]:
    """(nonce, salt, iterations) of ``r=...,s=...,i=...[,ext=...]``; a mandatory extension fails."""
    attrs = text.split(",")
    if attrs and attrs[0].startswith("m="):
        raise SaslAuthenticationException("SCRAM mandatory extensions (m=) are not supported")
    if len(attrs) < 3 or not (attrs[0].startswith("r=") and attrs[1].startswith("s=")
                              and attrs[2].startswith("i=")):
        raise SaslAuthenticationException("Invalid SCRAM server first message format")
    nonce, iterations_text = attrs[0][2:], attrs[2][2:]
    if not is_printable(nonce):
        raise SaslAuthenticationException("Invalid SCRAM server first message format: bad nonce")
    if not (iterations_text.isascii() and iterations_text.isdigit()) or int(iterations_text) <= 0:
        raise SaslAuthenticationException("Invalid SCRAM server first message format: invalid iterations")
    salt = b64decode(attrs[1][2:], "salt")
    if not salt:
        raise SaslAuthenticationException("Invalid SCRAM server first message format: empty salt")
    return nonce, salt, int(iterations_text)
