"""The SCRAM login backend: what a store's published image offers a ScramServer.

``ScramLogin(keyring, config, image)`` answers a login's two lookups over whichever image
``image()`` returns at that moment (the store passes its live image):

- a user's credential, unsealed with the keyring.  An unknown user unseals a decoy, a sealed
  credential of a real one's size, so a known and an unknown name cost the same work and timing
  tells nothing; a credential that cannot be unsealed fails as an unknown user does.
- a delegation token's identity (owner, HMAC) while tokens are enabled and it is not expired.

Unknown names get salts keyed by a key derived from the keyring (``ScramServer``'s fake salt),
announced with the configured default iterations for the mechanism.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable

from secmeta.core import validation
from secmeta.core.auth.scram_crypto import (
    DEFAULT_ITERATIONS,
    SALT_LENGTH,
    ScramCredential,
    hash_digest,
)
from secmeta.core.auth.scram_server import ScramServer, TokenIdentity, UserLookup
from secmeta.core.auth.token_hmac import token_hmac
from secmeta.core.config import StoreConfig
from secmeta.core.errors import DelegationTokenDisabledException
from secmeta.core.settings import in_force, require_token_secret
from secmeta.events.errors import KeyringError, SealedSecretError
from secmeta.events.keyring import Keyring, open_scram, seal_scram
from secmeta.events.records import ScramCredentialUpserted
from secmeta.events.types import ScramMechanism
from secmeta.projections.image import SecurityImage
from secmeta.projections.scram import ScramEntry

__all__ = ["ScramLogin"]

_log = logging.getLogger(__name__)
_DECOY_USER = "secmeta-decoy"
_MECHANISMS = (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)


class ScramLogin:
    """SCRAM exchanges for users and delegation tokens over the image ``image()`` returns."""

    def __init__(self, keyring: Keyring, config: StoreConfig, image: Callable[[], SecurityImage]):
        self._keyring = keyring
        self._config = config
        self._image = image
        self._fake_salt_key = hmac.new(keyring.chain_key(keyring.ids[0]), b"secmeta/fake-salt",
                                       hashlib.sha256).digest()
        self._decoys = {m: _decoy(keyring, m) for m in _MECHANISMS}

    def __repr__(self) -> str:
        return "<ScramLogin>"

    def server(self, mechanism: ScramMechanism | str) -> ScramServer:
        """A server-side SCRAM exchange for users and (with tokenauth=true) delegation tokens."""
        mechanism = validation.enum_value(ScramMechanism, mechanism, "SCRAM mechanism")
        return ScramServer(mechanism, self._user_lookup(mechanism), token_lookup=self.token_identity,
                           fake_salt_key=self._fake_salt_key,
                           fake_iterations=in_force(self._config, self._image()).default_iterations.get(
                               mechanism, DEFAULT_ITERATIONS))

    def _user_lookup(self, mechanism: ScramMechanism) -> UserLookup:
        def lookup(user: str) -> ScramCredential | None:
            entry = self._image().scram.get(user, mechanism)
            owner, sealed = self._decoys[mechanism] if entry is None else (user, entry)
            try:
                secret = open_scram(self._keyring, ScramCredentialUpserted(owner, mechanism, sealed.iterations,
                                                                           sealed.secret))
            except (KeyringError, SealedSecretError) as exc:  # fails as an unknown user does, same message
                _log.warning("SCRAM credential of user %r cannot be opened: %s", user, exc)
                return None
            credential = ScramCredential(mechanism, secret.salt, secret.stored_key, secret.server_key,
                                         sealed.iterations)
            return None if entry is None else credential

        return lookup

    def token_identity(self, token_id: str) -> TokenIdentity | None:
        """The owner and HMAC of a live token (None: unknown, expired, or tokens disabled)."""
        image = self._image()
        try:
            secret = require_token_secret(in_force(self._config, image))
        except DelegationTokenDisabledException as exc:  # another secret than the logged one: no token logs in
            _log.warning("token login refused: %s", exc)
            return None
        info = image.tokens.get(token_id)
        if info is None or secret is None or info.is_expired(self._config.now_ms()):
            return None
        return TokenIdentity(info.owner, token_hmac(secret, token_id))


def _decoy(keyring: Keyring, mechanism: ScramMechanism) -> tuple[str, ScramEntry]:
    """(user, entry): a sealed credential of a real one's size, unsealed on lookups of unknown users."""
    key = hash_digest(mechanism, b"")
    secret = seal_scram(keyring, _DECOY_USER, mechanism, bytes(SALT_LENGTH), key, key)
    return _DECOY_USER, ScramEntry(mechanism, DEFAULT_ITERATIONS, secret)
