"""Master keys and secret sealing (AES-256-GCM under HKDF-derived keys).

A keyring holds one or more 32-byte master keys, each with an id; the newest
(last added) seals new secrets, every key still opens what it sealed. Key
material never appears in a repr, a str or an error message.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import stat
import struct
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from secmeta.events.durable import write_atomically

from .errors import KeyringError, SealedSecretError, UnknownKeyError
from .types import ScramMechanism

if TYPE_CHECKING:  # cryptography is imported when a key is first used, not with the records that name a SealedSecret
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from .records import ScramCredentialUpserted

__all__ = [
    "KEYS_ENV",
    "KEY_FILE_ENV",
    "OPEN_KEY_FILE_ENV",
    "Keyring",
    "MasterKey",
    "ScramSecret",
    "SealedSecret",
    "open_scram",
    "scram_aad",
    "seal_scram",
]

KEY_FILE_ENV = "SECMETA_KEY_FILE"
OPEN_KEY_FILE_ENV = "SECMETA_ALLOW_OPEN_KEY_FILE"
KEYS_ENV = "SECMETA_KEYS"
KEY_SIZE = 32
NONCE_SIZE = 12
_FORMAT_VERSION = 1
_CHECK_LABEL = b"secmeta key check v1"
_HOW_TO_PROVIDE = (
    f"pass --key-file, or set {KEY_FILE_ENV} or {KEYS_ENV}; "
    "create one with `secmeta keys generate --key-file PATH`"
)


@dataclass(frozen=True, slots=True)
class SealedSecret:
    """Ciphertext sealed under the keyring key ``key_id``; only the id shows in its repr."""

    key_id: str
    nonce: bytes = field(repr=False)
    ciphertext: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class MasterKey:
    """One master key of a keyring: an id, when it was created, 32 bytes of material."""

    id: str
    created_ms: int
    material: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class ScramSecret:
    """The secret part of a SCRAM credential; its repr shows no bytes."""

    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)


def _derive(material: bytes, info: bytes) -> bytes:
    """HKDF-SHA256 (RFC 5869) of a master key, no salt, a KEY_SIZE key for ``info``: the standard library's HMAC,
    as cryptography's HKDF computes it (whose import cost every process about 8 ms of its first store open)."""
    prk = hmac.digest(bytes(hashlib.sha256().digest_size), material, "sha256")  # extract: no salt = HashLen zeros
    okm, block = b"", b""
    for counter in range(1, -(-KEY_SIZE // len(prk)) + 1):  # expand
        block = hmac.digest(prk, block + info + bytes((counter,)), "sha256")
        okm += block
    return okm[:KEY_SIZE]


class Keyring:
    """An ordered set of master keys; the last one is the newest and seals new secrets."""

    __slots__ = ("_keys", "_aead", "_source")

    def __init__(self, keys: Iterable[MasterKey], *, source: str = "keyring") -> None:
        ordered: dict[str, MasterKey] = {}
        for key in keys:
            if not key.id:
                raise KeyringError(f"{source}: a key has an empty id")
            if key.id in ordered:
                raise KeyringError(f"{source}: duplicate key id {key.id!r}")
            if len(key.material) != KEY_SIZE:
                raise KeyringError(
                    f"{source}: key {key.id!r} has {len(key.material)} bytes of material,"
                    f" expected {KEY_SIZE}"
                )
            ordered[key.id] = key
        if not ordered:
            raise KeyringError(f"{source}: the keyring holds no keys")
        self._keys = ordered
        self._aead: dict[str, AESGCM] = {}
        self._source = source

    # -- construction -----------------------------------------------------

    @classmethod
    def generate(cls, *, clock: Callable[[], float] = time.time) -> Keyring:
        """An in-memory keyring with one fresh key (for tests and tools), created at ``clock``'s time."""
        return cls([_new_key((), clock)], source="generated keyring")

    def with_new_key(self, *, clock: Callable[[], float] = time.time) -> Keyring:
        """A copy of this keyring with one more, newest, fresh key (in-memory rotation)."""
        return Keyring([*self._keys.values(), _new_key(self._keys, clock)], source=self._source)

    @classmethod
    def from_json(cls, text: str, *, source: str) -> Keyring:
        """Parse the keyring JSON format; errors name ``source`` and the problem."""
        return cls(_parse_keys(text, source), source=source)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Keyring:
        """Load a key file: {"version": 1, "keys": [{"id", "created_ms", "material": base64}]}.

        As ssh does with private keys, a key file that its group or others may read or write is
        refused (chmod 600 it), unless $SECMETA_ALLOW_OPEN_KEY_FILE is 1.
        """
        source = f"key file {os.fspath(path)}"
        try:
            with open(path, "rb") as f:
                mode = os.fstat(f.fileno()).st_mode
                data = f.read()
        except OSError as exc:
            raise KeyringError(f"{source}: cannot read: {exc.strerror or exc}") from None
        if mode & 0o077 and os.environ.get(OPEN_KEY_FILE_ENV) != "1":
            raise KeyringError(
                f"{source}: permissions {stat.S_IMODE(mode):04o} are too open: the keys must be readable by "
                f"their owner only (chmod 600 {os.fspath(path)}; {OPEN_KEY_FILE_ENV}=1 loads it anyway)")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is None:  # raised outside the except: the UnicodeDecodeError holds the file, keys included
            raise KeyringError(f"{source}: not UTF-8 text")
        return cls.from_json(text, source=source)

    @classmethod
    def from_env(cls) -> Keyring:
        """Load the keyring JSON held in the environment variable SECMETA_KEYS."""
        text = os.environ.get(KEYS_ENV)
        if not text:
            raise KeyringError(f"{KEYS_ENV} is not set; {_HOW_TO_PROVIDE}")
        return cls.from_json(text, source=f"environment variable {KEYS_ENV}")

    @classmethod
    def load(cls, key_file: str | os.PathLike[str] | None = None) -> Keyring:
        """Load from key_file, else $SECMETA_KEY_FILE, else $SECMETA_KEYS; else raise KeyringError."""
        if key_file is not None:
            return cls.from_file(key_file)
        env_file = os.environ.get(KEY_FILE_ENV)
        if env_file:
            return cls.from_file(env_file)
        if os.environ.get(KEYS_ENV):
            return cls.from_env()
        raise KeyringError(f"no keyring given: {_HOW_TO_PROVIDE}")

    @staticmethod
    def given(key_file: str | os.PathLike[str] | None = None) -> bool:
        """Whether ``load(key_file)`` has a keyring to load (a file named, or one in the environment)."""
        return key_file is not None or bool(os.environ.get(KEY_FILE_ENV)) or bool(os.environ.get(KEYS_ENV))

    @classmethod
    def generate_file(cls, path: str | os.PathLike[str], *, clock: Callable[[], float] = time.time) -> str:
        """Create a key file (mode 0600) or add a newest key to it, created at ``clock``'s time; return its id."""
        path = Path(path)
        try:
            with _locked(path):  # two rotations at once must not lose a key
                existing: list[MasterKey] = []
                if path.exists():
                    existing = list(cls.from_file(path)._keys.values())
                key = _new_key((k.id for k in existing), clock)
                _write_key_file(path, [*existing, key])
        except OSError as exc:
            raise KeyringError(f"key file {path}: cannot write: {exc.strerror or exc}") from None
        return key.id

    # -- queries ----------------------------------------------------------

    @property
    def newest_id(self) -> str:
        """The id of the newest key, the one new secrets are sealed under."""
        return next(reversed(self._keys))

    @property
    def ids(self) -> tuple[str, ...]:
        """Every key id, oldest first."""
        return tuple(self._keys)

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._keys

    def require(self, key_ids: Iterable[str], what: str) -> None:
        """Raise KeyringError naming every id in ``key_ids`` this keyring lacks (``what`` says what needs them)."""
        missing = sorted(set(key_ids) - set(self._keys))
        if missing:
            raise KeyringError(
                f"the {self._source} lacks key{'s' if len(missing) > 1 else ''} {', '.join(missing)}, "
                f"which {what}; add {'them' if len(missing) > 1 else 'it'} back to the keyring")

    def __repr__(self) -> str:
        return f"Keyring(ids={list(self._keys)!r}, newest={self.newest_id!r})"

    def __reduce__(self):
        """Pickled as its keys (its ciphers are rebuilt): for a process handing the keyring to its own
        child over a private channel (secmeta serve's serving processes), never for storage."""
        return _keyring, (tuple(self._keys.values()), self._source)

    __str__ = __repr__

    # -- sealing ----------------------------------------------------------

    def seal(self, plaintext: bytes, aad: bytes) -> SealedSecret:
        """Encrypt under the newest key; ``aad`` binds the secret to its record."""
        key_id = self.newest_id
        nonce = os.urandom(NONCE_SIZE)
        ciphertext = self._cipher(key_id).encrypt(nonce, bytes(plaintext), bytes(aad))
        return SealedSecret(key_id, nonce, ciphertext)

    def open(self, sealed: SealedSecret, aad: bytes) -> bytes:
        """Decrypt a sealed secret with the key it names and the same ``aad`` it was sealed with."""
        from cryptography.exceptions import InvalidTag

        cipher = self._cipher(sealed.key_id)
        try:
            return cipher.decrypt(bytes(sealed.nonce), bytes(sealed.ciphertext), bytes(aad))
        except (InvalidTag, ValueError):
            raise SealedSecretError(
                f"sealed secret under key {sealed.key_id!r} failed to open: wrong key material"
                " for that id, tampered data, or a secret bound to another record"
            ) from None

    def chain_key(self, key_id: str) -> bytes:
        """The HMAC key for the log's hash chain, derived from master key ``key_id``."""
        return _derive(self._material(key_id), b"secmeta/chain")

    def key_check(self, key_id: str) -> str:
        """A hex check value that differs when key ``key_id`` has different material."""
        check_key = _derive(self._material(key_id), b"secmeta/check")
        return hmac.new(check_key, _CHECK_LABEL, hashlib.sha256).hexdigest()

    def _material(self, key_id: str) -> bytes:
        key = self._keys.get(key_id)
        if key is None:
            raise UnknownKeyError(key_id, self._keys)
        return key.material

    def _cipher(self, key_id: str) -> AESGCM:
        cipher = self._aead.get(key_id)
        if cipher is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            cipher = AESGCM(_derive(self._material(key_id), b"secmeta/seal"))
            self._aead[key_id] = cipher
        return cipher


def _new_key(taken: Iterable[str], clock: Callable[[], float]) -> MasterKey:
    """A fresh key created at ``clock``'s time (seconds since the epoch; events cannot import core's clock)."""
    taken = set(taken)
    created_ms = int(clock() * 1000)
    day = time.strftime("%Y%m%d", time.gmtime(created_ms // 1000))
    while True:
        key_id = f"k-{day}-{secrets.token_hex(3)}"
        if key_id not in taken:
            return MasterKey(key_id, created_ms, secrets.token_bytes(KEY_SIZE))


def _parse_keys(text: str, source: str) -> list[MasterKey]:
    try:
        doc, bad_line = json.loads(text), None
    except ValueError as exc:
        doc, bad_line = None, getattr(exc, "lineno", "?")
    if bad_line is not None:  # raised outside the except: a JSONDecodeError holds the whole text, keys included
        raise KeyringError(f"{source}: not valid JSON (line {bad_line})")
    if not isinstance(doc, dict):
        raise KeyringError(f"{source}: expected a JSON object with 'version' and 'keys'")
    if doc.get("version") != _FORMAT_VERSION:
        raise KeyringError(
            f"{source}: unsupported version {doc.get('version')!r}, expected {_FORMAT_VERSION}"
        )
    entries = doc.get("keys")
    if not isinstance(entries, list) or not entries:
        raise KeyringError(f"{source}: 'keys' must be a non-empty list")
    keys: list[MasterKey] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"{source}: keys[{index}]"
        if not isinstance(entry, dict):
            raise KeyringError(f"{where}: expected an object")
        key_id = entry.get("id")
        if not isinstance(key_id, str) or not key_id:
            raise KeyringError(f"{where}: 'id' must be a non-empty string")
        where = f"{source}: key {key_id!r}"
        if key_id in seen:
            raise KeyringError(f"{source}: duplicate key id {key_id!r}")
        seen.add(key_id)
        created = entry.get("created_ms")
        if not isinstance(created, int) or isinstance(created, bool):
            raise KeyringError(f"{where}: 'created_ms' must be an integer")
        encoded = entry.get("material")
        if not isinstance(encoded, str):
            raise KeyringError(f"{where}: 'material' must be a base64 string")
        try:
            material = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise KeyringError(f"{where}: 'material' is not valid base64") from None
        if len(material) != KEY_SIZE:
            raise KeyringError(f"{where}: material is {len(material)} bytes, expected {KEY_SIZE}")
        keys.append(MasterKey(key_id, created, material))
    return keys


@contextmanager
def _locked(path: Path):
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_key_file(path: Path, keys: list[MasterKey]) -> None:
    doc = {
        "version": _FORMAT_VERSION,
        "keys": [
            {
                "id": k.id,
                "created_ms": k.created_ms,
                "material": base64.b64encode(k.material).decode("ascii"),
            }
            for k in keys
        ],
    }
    data = (json.dumps(doc, indent=2) + "\n").encode("utf-8")
    write_atomically(path, data, mode=0o600)


# -- SCRAM secrets ------------------------------------------------------------


def scram_aad(user: str, mechanism: ScramMechanism) -> bytes:
    """The associated data that binds a sealed SCRAM secret to its user and mechanism."""
    return f"scram:{user}:{ScramMechanism(mechanism).name}".encode()


def seal_scram(
    keyring: Keyring,
    user: str,
    mechanism: ScramMechanism,
    salt: bytes,
    stored_key: bytes,
    server_key: bytes,
) -> SealedSecret:
    """Seal a credential's salt, StoredKey and ServerKey, bound to (user, mechanism)."""
    parts = (bytes(salt), bytes(stored_key), bytes(server_key))
    plaintext = b"".join(struct.pack(">H", len(p)) + p for p in parts)
    return keyring.seal(plaintext, scram_aad(user, mechanism))


def open_scram(keyring: Keyring, event: ScramCredentialUpserted) -> ScramSecret:
    """Open the sealed secret of a ScramCredentialUpserted event."""
    plaintext = keyring.open(event.secret, scram_aad(event.user, event.mechanism))
    parts: list[bytes] = []
    pos = 0
    while pos + 2 <= len(plaintext) and len(parts) < 3:
        (size,) = struct.unpack_from(">H", plaintext, pos)
        pos += 2
        parts.append(plaintext[pos : pos + size])
        pos += size
    if len(parts) != 3 or pos != len(plaintext):
        raise SealedSecretError(
            f"sealed SCRAM secret under key {event.secret.key_id!r} has an unexpected layout"
        )
    return ScramSecret(*parts)


def _keyring(keys: tuple[MasterKey, ...], source: str) -> Keyring:
    return Keyring(keys, source=source)
