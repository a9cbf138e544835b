"""The server side of one SCRAM exchange (RFC 5802), for users and delegation tokens.

Storage is reached only through the two lookups passed in.  An unknown user
(or one without a credential for the mechanism) is answered with a stand-in
credential (``secmeta.core.auth.stand_in``: the count and salt shape of the
store's real credentials, keyed by the name), an unknown token with a keyed
salt as every token gets; both fail at the final step with the same error as a
wrong password, so names cannot be probed.

The client-final nonce must be the server-first one.  librdkafka before 2.6.1
(its issue 4895) sends the client nonce twice (``r=<cnonce><cnonce><snonce>``)
and signs that message; Kafka 3.8.1-3.9.x accept it (ScramSaslServer checks that
the nonce ends with server-first's), Kafka 4 refuses it.  ``accept_doubled_client_nonce``
accepts exactly that form (the logged setting
``secmeta.scram.accept.doubled.client.nonce``); the proof is still checked over
the client-final as sent, so it binds the server's nonce.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from secmeta.core.auth.scram_crypto import (
    SALT_LENGTH,
    ScramCredential,
    b64,
    b64decode,
    credential_from_password,
    hash_digest,
    hmac_digest,
    is_printable,
    message_text,
    new_nonce,
    require_mechanism,
)
from secmeta.core.auth.stand_in import Population, keyed_bytes, stand_in
from secmeta.core.errors import (
    IllegalSaslStateException,
    InvalidValueError,
    SaslAuthenticationException,
)
from secmeta.events.types import ScramMechanism

__all__ = ["TOKEN_ITERATIONS", "ScramServer", "TokenIdentity"]

TOKEN_ITERATIONS = 4096
_SUPPORTED_EXTENSIONS = frozenset({"tokenauth"})


@dataclass(frozen=True, slots=True)
class TokenIdentity:
    """A delegation token as SCRAM sees it: its owner principal and its HMAC (the password)."""

    owner: str
    hmac: bytes = field(repr=False)


UserLookup = Callable[[str], ScramCredential | None]
TokenLookup = Callable[[str], TokenIdentity | None]


class _State(Enum):
    AWAIT_FIRST = "awaiting client-first"
    AWAIT_FINAL = "awaiting client-final"
    COMPLETE = "complete"
    FAILED = "failed"


def _unescape_name(escaped: str, what: str) -> str:
    """Undo the saslname escaping ('=3D' for '=', '=2C' for ',')."""
    parts = escaped.split("=")
    out = [parts[0]]
    for part in parts[1:]:
        if part[:2] == "3D":
            out.append("=" + part[2:])
        elif part[:2] == "2C":
            out.append("," + part[2:])
        else:
            raise SaslAuthenticationException(f"Malformed SCRAM message: bad '=' escape in the {what}")
    name = "".join(out)
    if not name or "\x00" in name:
        raise SaslAuthenticationException(f"Malformed SCRAM message: the {what} is empty or contains NUL")
    return name


@dataclass(frozen=True, slots=True)
class _ClientFirst:
    gs2_header: str
    bare: str
    username: str
    nonce: str
    token: bool


def _parse_client_first(message: str) -> _ClientFirst:
    parts = message.split(",")
    if len(parts) < 4:
        raise SaslAuthenticationException("Malformed SCRAM client-first message")
    flag, authz, user_attr, nonce_attr, *extension_attrs = parts
    if flag.startswith("p="):
        raise SaslAuthenticationException("SCRAM channel binding (p=) is not supported")
    if flag not in ("n", "y"):
        raise SaslAuthenticationException("Malformed SCRAM client-first message: bad GS2 channel binding flag")
    if user_attr.startswith("m="):
        raise SaslAuthenticationException("SCRAM mandatory extensions (m=) are not supported")
    if not user_attr.startswith("n=") or not nonce_attr.startswith("r="):
        raise SaslAuthenticationException("Malformed SCRAM client-first message: expected n= then r=")
    username = _unescape_name(user_attr[2:], "user name")
    if authz:
        if not authz.startswith("a="):
            raise SaslAuthenticationException("Malformed SCRAM client-first message: bad authorization id")
        if _unescape_name(authz[2:], "authorization id") != username:
            raise SaslAuthenticationException("SCRAM authorization id must be empty or equal the user name")
    nonce = nonce_attr[2:]
    if not is_printable(nonce):
        raise SaslAuthenticationException("Malformed SCRAM client-first message: bad client nonce")
    extensions: dict[str, str] = {}
    for attr in extension_attrs:
        key, sep, value = attr.partition("=")
        if not sep or not key.isascii() or not key.isalnum() or key in extensions:
            raise SaslAuthenticationException("Malformed SCRAM client-first message: bad extension")
        extensions[key] = value
    unsupported = sorted(set(extensions) - _SUPPORTED_EXTENSIONS)
    if unsupported:
        raise SaslAuthenticationException(f"Unsupported SCRAM extensions: {', '.join(unsupported)}")
    token = extensions.get("tokenauth", "").lower() == "true"
    bare = ",".join(parts[2:])
    return _ClientFirst(f"{flag},{authz},", bare, username, nonce, token)


class ScramServer:
    """One server-side SCRAM exchange: ``first()``, ``final()``, then ``principal``.

    ``lookup(username)`` returns the user's credential for this mechanism or
    None; ``token_lookup(token_id)`` returns a live token or None (expired
    tokens must read as None).  ``fake_salt_key`` keys what unknown names are shown;
    ``population`` counts the shapes of the store's real credentials for the mechanism
    (with the default shape for a store without any), which unknown names are shown.
    ``accept_doubled_client_nonce`` accepts librdkafka < 2.6.1's client-final nonce.
    Any error before completion ends the exchange as failed.
    """

    def __init__(
        self,
        mechanism: ScramMechanism | str,
        lookup: UserLookup,
        *,
        token_lookup: TokenLookup | None = None,
        fake_salt_key: bytes,
        population: Population | None = None,
        accept_doubled_client_nonce: bool = True,
        nonce_factory: Callable[[], str] | None = None,
    ):
        self._mechanism = require_mechanism(mechanism)
        if not isinstance(fake_salt_key, bytes) or not fake_salt_key:
            raise InvalidValueError("fake_salt_key must be non-empty bytes")
        self._lookup = lookup
        self._token_lookup = token_lookup
        self._fake_salt_key = fake_salt_key
        self._population = population or Population(())
        self._accept_doubled = accept_doubled_client_nonce
        self._nonce_factory = nonce_factory or new_nonce
        self._state = _State.AWAIT_FIRST
        self._principal: str | None = None
        self._token = False
        self._clear()

    def __repr__(self) -> str:
        return f"ScramServer({self._mechanism.mechanism_name}, {self._state.value})"

    @property
    def mechanism(self) -> ScramMechanism:
        return self._mechanism

    @property
    def complete(self) -> bool:
        """True once ``final()`` has accepted the client's proof."""
        return self._state is _State.COMPLETE

    @property
    def principal(self) -> str:
        """The authenticated principal: 'User:<name>', or the token owner's principal."""
        self._require_complete()
        assert self._principal is not None
        return self._principal

    @property
    def token_authenticated(self) -> bool:
        """True when the client authenticated with a delegation token."""
        self._require_complete()
        return self._token

    def first(self, client_first: str) -> str:
        """Take the client-first message and return the server-first message."""
        self._enter(_State.AWAIT_FIRST, "client-first")
        try:
            server_first = self._first(client_first)
        except BaseException:
            self._finish(_State.FAILED)
            raise
        self._state = _State.AWAIT_FINAL
        return server_first

    def final(self, client_final: str) -> str:
        """Check the client-final message's proof and return the server-final message."""
        self._enter(_State.AWAIT_FINAL, "client-final")
        try:
            server_final = self._final(client_final)
        except BaseException:
            self._finish(_State.FAILED)
            raise
        self._finish(_State.COMPLETE)
        return server_final

    # -- steps ---------------------------------------------------------------

    def _first(self, client_first: str) -> str:
        parsed = _parse_client_first(message_text(client_first))
        if parsed.token:
            credential, known, principal = self._token_credential(parsed.username)
        else:
            # Derived for known users too: the same work either way, so timing tells nothing.
            fake = stand_in(self._fake_salt_key, self._mechanism, parsed.username, self._population)
            credential = self._lookup(parsed.username)
            known = credential is not None and credential.mechanism is self._mechanism
            if not known:
                credential = fake
            principal = f"User:{parsed.username}"
        assert credential is not None
        server_nonce = self._nonce_factory()
        if not is_printable(server_nonce):
            raise InvalidValueError("nonce_factory must return printable ASCII without ','")
        nonce = parsed.nonce + server_nonce
        server_first = f"r={nonce},s={b64(credential.salt)},i={credential.iterations}"
        self._gs2_header = parsed.gs2_header
        self._auth_prefix = f"{parsed.bare},{server_first},"
        self._nonce = nonce
        self._client_nonce = parsed.nonce
        self._credential = credential
        self._known = known
        self._pending_principal = principal
        self._token = parsed.token
        return server_first

    def _final(self, client_final: str) -> str:
        without_proof, sep, proof_text = message_text(client_final).rpartition(",p=")
        attrs = without_proof.split(",") if sep else []
        if len(attrs) < 2 or not attrs[0].startswith("c=") or not attrs[1].startswith("r="):
            raise SaslAuthenticationException("Malformed SCRAM client-final message")
        if any("=" not in attr[1:] for attr in attrs[2:]):
            raise SaslAuthenticationException("Malformed SCRAM client-final message: bad extension")
        binding = b64decode(attrs[0][2:], "channel binding")
        if not hmac.compare_digest(binding, self._gs2_header.encode("utf-8")):
            raise SaslAuthenticationException("SCRAM channel binding does not match the client-first message")
        if not self._nonce_matches(attrs[1][2:]):
            raise SaslAuthenticationException("SCRAM nonce does not match the server-first message")
        proof = b64decode(proof_text, "client proof")
        credential = self._credential
        assert credential is not None
        auth_message = (self._auth_prefix + without_proof).encode("utf-8")
        signature = hmac_digest(self._mechanism, credential.stored_key, auth_message)
        same_length = len(proof) == len(signature)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=False))
        matches = hmac.compare_digest(
            hash_digest(self._mechanism, client_key), credential.stored_key
        )
        if not (matches and same_length and self._known):
            raise SaslAuthenticationException(
                f"Authentication with SASL mechanism {self._mechanism.mechanism_name} "
                "failed: the credentials are not valid"
            )
        self._principal = self._pending_principal
        server_signature = hmac_digest(self._mechanism, credential.server_key, auth_message)
        return f"v={b64(server_signature)}"

    def _nonce_matches(self, nonce: str) -> bool:
        """The server-first nonce; or, if accepted, librdkafka < 2.6.1's: the client nonce, then it again."""
        if hmac.compare_digest(nonce.encode(), self._nonce.encode()):
            return True
        doubled = self._client_nonce + self._nonce
        return self._accept_doubled and hmac.compare_digest(nonce.encode(), doubled.encode())

    # -- credentials for tokens ----------------------------------------------------

    def _keyed(self, purpose: bytes, kind: bytes, name: str) -> bytes:
        data = b"\x00".join(
            (self._mechanism.mechanism_name.encode(), purpose, kind, name.encode("utf-8"))
        )
        return keyed_bytes(self._fake_salt_key, data, SALT_LENGTH)

    def _token_credential(self, token_id: str) -> tuple[ScramCredential, bool, str | None]:
        if self._token_lookup is None:
            raise SaslAuthenticationException("Delegation token authentication is not enabled")
        identity = self._token_lookup(token_id)
        # Known and unknown tokens get the same salt recipe and the same PBKDF2 work.
        salt = self._keyed(b"salt", b"token", token_id)
        if identity is None:
            password = b64(self._keyed(b"secret", b"token", token_id)).encode("ascii")
        else:
            password = b64(identity.hmac).encode("ascii")
        credential = credential_from_password(self._mechanism, password, TOKEN_ITERATIONS, salt)
        owner = identity.owner if identity is not None else None
        return credential, identity is not None, owner

    # -- state ---------------------------------------------------------------

    def _enter(self, expected: _State, step: str) -> None:
        if self._state is not expected:
            state = self._state
            if state is not _State.COMPLETE:
                self._finish(_State.FAILED)
            raise IllegalSaslStateException(
                f"SCRAM exchange cannot take a {step} message when {state.value}"
            )

    def _require_complete(self) -> None:
        if self._state is not _State.COMPLETE:
            raise IllegalSaslStateException(
                f"SCRAM exchange has not completed (it is {self._state.value})"
            )

    def _finish(self, state: _State) -> None:
        self._state = state
        if state is _State.FAILED:
            self._principal = None
            self._token = False
        self._clear()

    def _clear(self) -> None:
        self._gs2_header = ""
        self._auth_prefix = ""
        self._nonce = ""
        self._client_nonce = ""
        self._credential: ScramCredential | None = None
        self._known = False
        self._pending_principal: str | None = None
