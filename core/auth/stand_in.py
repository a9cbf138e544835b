"""The stand-in credential server-first shows for a name without one: no field tells it from a real one.

Server-first shows three things of a credential: its iteration count, its salt's length and the
alphabet its salt is drawn from (random bytes from secmeta and librdkafka; Kafka's Java AdminClient
sends a base-36 number below 2^130, ``ScramFormatter.secureRandomBytes``).  A ``CredentialShape`` is
those three; a ``Population`` counts how many of a mechanism's real credentials have each shape.

``stand_in(key, mechanism, name, population)`` picks a shape for ``name`` with probability
proportional to its count (weighted rendezvous hashing keyed by ``key``), so over many unknown names
the counts and salts seen follow the store's real ones, and the pick for one name is stable across
attempts and restarts and moves only when the population changes under it.  The salt is derived from
``key`` and the name in that shape, and the keys behind it from ``key`` too (so its proof never
matches).  All of it is a few HMACs: no PBKDF2, so it costs what a known user's step costs.
"""

from __future__ import annotations

import hmac
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from secmeta.core.auth.scram_crypto import (
    DEFAULT_ITERATIONS,
    SALT_LENGTH,
    ScramCredential,
    derive_keys,
)
from secmeta.events.types import ScramMechanism

__all__ = ["CredentialShape", "Population", "SaltAlphabet", "keyed_bytes", "shape_of", "stand_in"]

_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_JAVA_SALT_BITS = 130  # Kafka's ScramFormatter.secureRandomString: new BigInteger(130, random).toString(36)


class SaltAlphabet(Enum):
    """What a salt's bytes are drawn from."""

    BYTES = "bytes"                  # any byte (secmeta, librdkafka, kafka-python)
    JAVA_BASE36 = "java-base36"      # a base-36 number below 2^130 in ASCII (Kafka's Java AdminClient)
    PRINTABLE = "printable"          # printable ASCII, '!' to '~'


@dataclass(frozen=True, slots=True)
class CredentialShape:
    """What server-first shows of a credential: its iteration count and its salt's length and alphabet."""

    iterations: int
    salt_length: int
    salt_alphabet: SaltAlphabet = SaltAlphabet.BYTES

    def __lt__(self, other: CredentialShape) -> bool:  # Enum has no order: sort by its value
        return self._key() < other._key()

    def _key(self) -> tuple[int, int, str]:
        return (self.iterations, self.salt_length, self.salt_alphabet.value)


def _java_salt(salt: bytes) -> bool:
    if not salt or salt[:1] == b"0" or any(c not in _BASE36.encode() for c in salt):
        return False
    return int(salt, 36) < 1 << _JAVA_SALT_BITS


def shape_of(iterations: int, salt: bytes) -> CredentialShape:
    """The shape of a credential with ``iterations`` and ``salt``: the narrowest alphabet its salt fits."""
    if _java_salt(salt):
        alphabet = SaltAlphabet.JAVA_BASE36
    elif all(0x21 <= c <= 0x7E for c in salt):
        alphabet = SaltAlphabet.PRINTABLE
    else:
        alphabet = SaltAlphabet.BYTES
    return CredentialShape(iterations, len(salt), alphabet)


@dataclass(frozen=True, slots=True)
class Population:
    """How many real credentials of a mechanism have each shape; ``default`` stands in while there are none."""

    counts: tuple[tuple[CredentialShape, int], ...]
    default: CredentialShape = CredentialShape(DEFAULT_ITERATIONS, SALT_LENGTH)

    @classmethod
    def of(cls, shapes: Iterable[CredentialShape], default: CredentialShape | None = None) -> Population:
        """The population of ``shapes`` (one per credential)."""
        counted = tuple(sorted(Counter(shapes).items()))
        return cls(counted) if default is None else cls(counted, default)

    def as_dict(self) -> Mapping[CredentialShape, int]:
        return dict(self.counts)


def keyed_bytes(key: bytes, label: bytes, n: int) -> bytes:
    """``n`` bytes of HMAC-SHA512(key, label || counter) blocks: stable for (key, label), unpredictable without key."""
    out = bytearray()
    block = 0
    while len(out) < n:
        out += hmac.digest(key, label + block.to_bytes(4, "big"), "sha512")
        block += 1
    return bytes(out[:n])


def _label(purpose: bytes, mechanism: ScramMechanism, name: str, extra: bytes = b"") -> bytes:
    return b"\x00".join((b"secmeta stand-in", purpose, mechanism.mechanism_name.encode(), name.encode("utf-8"),
                         extra)) + b"\x00"


def _shape_key(shape: CredentialShape) -> bytes:
    return f"{shape.iterations}/{shape.salt_length}/{shape.salt_alphabet.value}".encode()


def _pick(key: bytes, mechanism: ScramMechanism, name: str, population: Population) -> CredentialShape:
    """Weighted rendezvous: each shape draws an exponential race time keyed by (name, shape) divided by
    its count; the earliest wins, so a shape wins with probability count / total."""
    best, best_time = population.default, math.inf
    for shape, count in population.counts:
        extra = _shape_key(shape)
        draw = int.from_bytes(hmac.digest(key, _label(b"pick", mechanism, name, extra), "sha256")[:8], "big")
        race = -math.log((draw + 0.5) / 2.0**64) / count
        if race < best_time:
            best, best_time = shape, race
    return best


def _salt(key: bytes, mechanism: ScramMechanism, name: str, shape: CredentialShape) -> bytes:
    # keyed by the shape too: when the population moves a name to another shape its salt changes with it,
    # as a real credential's does (a new count comes with a new password and salt), never a kept prefix
    label = _label(b"salt", mechanism, name, _shape_key(shape))
    n = shape.salt_length
    if shape.salt_alphabet is SaltAlphabet.BYTES:
        return keyed_bytes(key, label, n)
    if shape.salt_alphabet is SaltAlphabet.JAVA_BASE36:  # a number of n base-36 digits below 2^130
        low, high = (36 ** (n - 1) if n > 1 else 1), min(36**n, 1 << _JAVA_SALT_BITS)
        number = low + int.from_bytes(keyed_bytes(key, label, 32), "big") % (high - low)
        digits = []
        while number:
            number, digit = divmod(number, 36)
            digits.append(_BASE36[digit])
        return "".join(reversed(digits)).encode("ascii")
    stream = keyed_bytes(key, label, 2 * n)  # two bytes a character: no visible modulo bias
    return bytes(0x21 + int.from_bytes(stream[2 * i:2 * i + 2], "big") % 94 for i in range(n))


def stand_in(key: bytes, mechanism: ScramMechanism, name: str, population: Population) -> ScramCredential:
    """The credential server-first shows for ``name`` when it has none for ``mechanism``: a shape of
    ``population`` picked by keyed hash of the name, a keyed salt of that shape, keys no password matches."""
    shape = _pick(key, mechanism, name, population)
    stored_key, server_key = derive_keys(mechanism, keyed_bytes(key, _label(b"secret", mechanism, name), 64))
    return ScramCredential(mechanism, _salt(key, mechanism, name, shape), stored_key, server_key, shape.iterations)
