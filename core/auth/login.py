"""The SCRAM login backend: what a store's published image offers a ScramServer.

``ScramLogin(keyring, config, image)`` answers a login's two lookups over whichever image
``image()`` returns at that moment (the store passes its live image):

- a user's credential, unsealed with the keyring.  An unknown user unseals a decoy, a sealed
  credential of a real one's size, so a known and an unknown name cost the same work and timing
  tells nothing; a credential that cannot be unsealed fails as an unknown user does.
- a delegation token's identity (owner, HMAC) while tokens are enabled and it is not expired.

Unknown names are shown stand-ins (``secmeta.core.auth.stand_in``) keyed by a key derived from the
keyring, so stable across restarts, in the shapes of the image's real credentials: the ``Population``
of a mechanism is built once per change of the image's credentials (each credential unsealed once, its
shape kept while it stays), and is the configured default count with 32-byte salts while there are none.
Whether client-final may carry librdkafka < 2.6.1's doubled client nonce is the setting in force.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
from collections.abc import Callable

from secmeta.core import validation
from secmeta.core.auth.scram_crypto import (
    DEFAULT_ITERATIONS,
    SALT_LENGTH,
    ScramCredential,
    hash_digest,
)
from secmeta.core.auth.scram_server import ScramServer, TokenIdentity, UserLookup
from secmeta.core.auth.stand_in import CredentialShape, Population, shape_of
from secmeta.core.auth.token_hmac import token_hmac
from secmeta.core.config import StoreConfig
from secmeta.core.errors import DelegationTokenDisabledException
from secmeta.core.settings import in_force, require_token_secret
from secmeta.events.errors import KeyringError, SealedSecretError
from secmeta.events.keyring import Keyring, open_scram, seal_scram
from secmeta.events.records import ScramCredentialUpserted
from secmeta.events.types import ScramMechanism
from secmeta.projections.image import SecurityImage
from secmeta.projections.scram import ScramEntry, ScramImage

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
        self._decoys: dict[ScramMechanism, tuple[str, ScramEntry]] = {}   # made by the first server(): a
        # store that serves no login (the CLI's reads) never seals them (nor loads the AEAD cipher for it)
        self._populations: dict[ScramMechanism, tuple[ScramImage, Population]] = {}
        self._shapes: dict[tuple[str, ScramEntry], CredentialShape | None] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "<ScramLogin>"

    def server(self, mechanism: ScramMechanism | str) -> ScramServer:
        """A server-side SCRAM exchange for users and (with tokenauth=true) delegation tokens."""
        mechanism = validation.enum_value(ScramMechanism, mechanism, "SCRAM mechanism")
        if not self._decoys:  # before any lookup, known user or not: both cost the same from the first login on
            with self._lock:
                self._decoys = self._decoys or {m: _decoy(self._keyring, m) for m in _MECHANISMS}
        image = self._image()
        settings = in_force(self._config, image)
        default = CredentialShape(settings.default_iterations.get(mechanism, DEFAULT_ITERATIONS), SALT_LENGTH)
        return ScramServer(mechanism, self._user_lookup(mechanism), token_lookup=self.token_identity,
                           fake_salt_key=self._fake_salt_key,
                           population=self._population(mechanism, image.scram, default),
                           accept_doubled_client_nonce=settings.accept_doubled_client_nonce)

    def _population(self, mechanism: ScramMechanism, scram: ScramImage, default: CredentialShape) -> Population:
        """The shapes of ``scram``'s credentials for ``mechanism`` (rebuilt when its credentials changed)."""
        with self._lock:
            cached = self._populations.get(mechanism)
            if cached is None or cached[0] is not scram:
                kept = {k: v for k, v in self._shapes.items() if k[1].mechanism is not mechanism}
                for user, entry in scram:
                    if entry.mechanism is mechanism:
                        kept[(user, entry)] = self._shapes.get((user, entry), None) or self._shape(user, entry)
                self._shapes = kept
                population = Population.of(s for (_, e), s in kept.items() if e.mechanism is mechanism and s)
                self._populations[mechanism] = cached = (scram, population)
        population = cached[1]
        return population if population.counts else Population((), default)

    def _shape(self, user: str, entry: ScramEntry) -> CredentialShape | None:
        """What server-first shows of ``user``'s credential (None: it cannot be unsealed, so it logs nobody in)."""
        try:
            secret = open_scram(self._keyring, ScramCredentialUpserted(user, entry.mechanism, entry.iterations,
                                                                       entry.secret))
        except (KeyringError, SealedSecretError):
            return None
        return shape_of(entry.iterations, secret.salt)

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
