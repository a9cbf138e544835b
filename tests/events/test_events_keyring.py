"""Keyring: loading, rotation, sealing, and keeping key material out of messages."""

from __future__ import annotations

import base64
import json
import re
import stat

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.events import keyring as keyring_module
from secmeta.events.errors import KeyringError, SealedSecretError, UnknownKeyError
from secmeta.events.keyring import Keyring, SealedSecret, open_scram, seal_scram
from secmeta.events.records import ScramCredentialUpserted
from secmeta.events.types import ScramMechanism


def key_file(tmp_path, keys, version=1, name="keys.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"version": version, "keys": keys}))
    path.chmod(0o600)
    return path


def key(key_id="k-1", material=b"\x11" * 32):
    return {"id": key_id, "created_ms": 1, "material": base64.b64encode(material).decode()}


@pytest.fixture
def ring(tmp_path) -> Keyring:
    path = tmp_path / "keys.json"
    Keyring.generate_file(path)
    return Keyring.from_file(path)


def materials(path) -> list[str]:
    return [k["material"] for k in json.loads(path.read_text())["keys"]]


def test_seal_then_open_returns_the_plaintext(ring):
    """A sealed secret opens to its plaintext with the same aad."""
    assert ring.open(ring.seal(b"secret", b"aad"), b"aad") == b"secret"


def test_sealed_secret_hides_the_plaintext(ring):
    """The ciphertext does not contain the plaintext and the nonce is 12 bytes."""
    sealed = ring.seal(b"plain-text-value", b"aad")
    assert b"plain-text-value" not in sealed.ciphertext and len(sealed.nonce) == 12


def test_sealing_twice_gives_different_ciphertexts(ring):
    """Random nonces make two seals of the same plaintext differ."""
    assert ring.seal(b"x", b"a").ciphertext != ring.seal(b"x", b"a").ciphertext


def test_wrong_aad_fails_to_open(ring):
    """A secret opened with other associated data raises SealedSecretError naming the key."""
    sealed = ring.seal(b"secret", b"scram:alice:SCRAM_SHA_256")
    with pytest.raises(SealedSecretError, match=sealed.key_id):
        ring.open(sealed, b"scram:bob:SCRAM_SHA_256")


def test_tampered_ciphertext_fails_to_open(ring):
    """Flipping a ciphertext bit raises SealedSecretError."""
    sealed = ring.seal(b"secret", b"a")
    flipped = bytes([sealed.ciphertext[0] ^ 1]) + sealed.ciphertext[1:]
    with pytest.raises(SealedSecretError):
        ring.open(SealedSecret(sealed.key_id, sealed.nonce, flipped), b"a")


def test_generate_file_creates_a_private_file_with_one_key(tmp_path):
    """A new key file has mode 0600, one key, and an id like k-YYYYMMDD-xxxxxx."""
    path = tmp_path / "keys.json"
    key_id = Keyring.generate_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert re.fullmatch(r"k-\d{8}-[0-9a-f]{6}", key_id)
    assert Keyring.from_file(path).ids == (key_id,)


def test_rotation_seals_with_the_newest_key(tmp_path):
    """After a second generate_file, new secrets are sealed under the new key."""
    path = tmp_path / "keys.json"
    first = Keyring.generate_file(path)
    second = Keyring.generate_file(path)
    ring = Keyring.from_file(path)
    assert (ring.ids, ring.newest_id, ring.seal(b"x", b"a").key_id) == (
        (first, second),
        second,
        second,
    )


def test_rotation_keeps_old_secrets_readable(tmp_path):
    """Secrets sealed before a rotation still open after it."""
    path = tmp_path / "keys.json"
    Keyring.generate_file(path)
    sealed = Keyring.from_file(path).seal(b"old", b"a")
    Keyring.generate_file(path)
    assert Keyring.from_file(path).open(sealed, b"a") == b"old"


def test_unknown_key_id_is_named_without_key_material(tmp_path):
    """Opening under a key the ring lacks names that id and the ids it has, never material."""
    path = tmp_path / "keys.json"
    own = Keyring.generate_file(path)
    ring = Keyring.from_file(path)
    with pytest.raises(UnknownKeyError) as info:
        ring.open(SealedSecret("k-gone", b"n" * 12, b"c" * 20), b"a")
    assert info.value.key_id == "k-gone" and "k-gone" in str(info.value) and own in str(info.value)
    assert not any(m in str(info.value) for m in materials(path))


def test_keyring_repr_and_str_show_no_material(tmp_path):
    """repr and str of a keyring list key ids only."""
    path = tmp_path / "keys.json"
    key_id = Keyring.generate_file(path)
    ring = Keyring.from_file(path)
    [material] = materials(path)
    assert key_id in repr(ring)
    assert material not in repr(ring) and material not in str(ring)


def test_same_id_with_other_material_fails_to_open(tmp_path):
    """A key with the right id but wrong material raises SealedSecretError."""
    sealed = Keyring.from_file(key_file(tmp_path, [key("k-1", b"\x01" * 32)])).seal(b"x", b"a")
    other = Keyring.from_file(key_file(tmp_path, [key("k-1", b"\x02" * 32)], name="other.json"))
    with pytest.raises(SealedSecretError, match="k-1"):
        other.open(sealed, b"a")


def test_key_check_detects_other_material_under_the_same_id(tmp_path):
    """key_check differs when the same id holds other material, and is stable otherwise."""
    a = Keyring.from_file(key_file(tmp_path, [key("k-1", b"\x01" * 32)], name="a.json"))
    a2 = Keyring.from_file(key_file(tmp_path, [key("k-1", b"\x01" * 32)], name="a2.json"))
    b = Keyring.from_file(key_file(tmp_path, [key("k-1", b"\x02" * 32)], name="b.json"))
    assert a.key_check("k-1") == a2.key_check("k-1") != b.key_check("k-1")


def test_chain_key_is_32_bytes_and_differs_per_key(tmp_path):
    """Each master key derives its own 32-byte chain key."""
    ring = Keyring.from_file(
        key_file(tmp_path, [key("k-1", b"\x01" * 32), key("k-2", b"\x02" * 32)])
    )
    assert len(ring.chain_key("k-1")) == 32 and ring.chain_key("k-1") != ring.chain_key("k-2")


def test_chain_key_of_unknown_id_raises_unknown_key_error(ring):
    """chain_key for an id the ring lacks raises UnknownKeyError."""
    with pytest.raises(UnknownKeyError):
        ring.chain_key("k-nope")


def test_load_prefers_the_explicit_path(tmp_path, monkeypatch):
    """Keyring.load(path) ignores the environment."""
    path = key_file(tmp_path, [key("k-explicit")])
    monkeypatch.setenv("SECMETA_KEY_FILE", str(key_file(tmp_path, [key("k-env")], name="env.json")))
    assert Keyring.load(path).ids == ("k-explicit",)


def test_load_uses_secmeta_key_file_before_secmeta_keys(tmp_path, monkeypatch):
    """SECMETA_KEY_FILE wins over SECMETA_KEYS."""
    monkeypatch.setenv("SECMETA_KEY_FILE", str(key_file(tmp_path, [key("k-file")])))
    monkeypatch.setenv("SECMETA_KEYS", json.dumps({"version": 1, "keys": [key("k-inline")]}))
    assert Keyring.load().ids == ("k-file",)


def test_load_falls_back_to_secmeta_keys(monkeypatch):
    """With no path and no SECMETA_KEY_FILE, SECMETA_KEYS is used."""
    monkeypatch.delenv("SECMETA_KEY_FILE", raising=False)
    monkeypatch.setenv("SECMETA_KEYS", json.dumps({"version": 1, "keys": [key("k-inline")]}))
    assert Keyring.load().ids == ("k-inline",)


def test_load_without_any_source_says_how_to_provide_keys(monkeypatch):
    """With nothing configured, the error tells how to pass or create a key file."""
    monkeypatch.delenv("SECMETA_KEY_FILE", raising=False)
    monkeypatch.delenv("SECMETA_KEYS", raising=False)
    with pytest.raises(KeyringError) as info:
        Keyring.load()
    message = str(info.value)
    for hint in (
        "--key-file",
        "SECMETA_KEY_FILE",
        "SECMETA_KEYS",
        "secmeta keys generate --key-file PATH",
    ):
        assert hint in message


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON"),
        (
            json.dumps({"version": 1, "keys": [{"id": "k", "created_ms": 1, "material": "@@@"}]}),
            "base64",
        ),
        (json.dumps({"version": 1, "keys": [key("k", b"short")]}), "expected 32"),
        (json.dumps({"version": 1, "keys": [key("k"), key("k")]}), "duplicate key id 'k'"),
        (json.dumps({"version": 2, "keys": [key("k")]}), "version"),
        (json.dumps({"version": 1, "keys": []}), "non-empty"),
    ],
    ids=["bad-json", "bad-base64", "wrong-length", "duplicate-id", "wrong-version", "no-keys"],
)
def test_malformed_key_file_names_the_file_and_problem(tmp_path, content, problem):
    """Each malformed key file raises KeyringError naming the file and what is wrong."""
    path = tmp_path / "broken.json"
    path.write_text(content)
    path.chmod(0o600)
    with pytest.raises(KeyringError) as info:
        Keyring.from_file(path)
    assert str(path) in str(info.value) and problem in str(info.value)


def test_missing_key_file_names_the_file(tmp_path):
    """A key file that does not exist raises KeyringError naming it."""
    with pytest.raises(KeyringError, match="absent.json"):
        Keyring.from_file(tmp_path / "absent.json")


def test_scram_secret_round_trips(ring):
    """seal_scram / open_scram return the salt, StoredKey and ServerKey."""
    sealed = seal_scram(ring, "alice", ScramMechanism.SCRAM_SHA_512, b"salt", b"s" * 64, b"k" * 64)
    event = ScramCredentialUpserted("alice", ScramMechanism.SCRAM_SHA_512, 4096, sealed)
    secret = open_scram(ring, event)
    assert (secret.salt, secret.stored_key, secret.server_key) == (b"salt", b"s" * 64, b"k" * 64)


def test_scram_secret_moved_to_another_user_fails_to_open(ring):
    """A sealed SCRAM secret copied into another user's event does not open."""
    sealed = seal_scram(ring, "alice", ScramMechanism.SCRAM_SHA_256, b"salt", b"s" * 32, b"k" * 32)
    with pytest.raises(SealedSecretError):
        open_scram(
            ring, ScramCredentialUpserted("mallory", ScramMechanism.SCRAM_SHA_256, 4096, sealed)
        )


def test_scram_secret_moved_to_another_mechanism_fails_to_open(ring):
    """A sealed SCRAM secret copied to the other mechanism does not open."""
    sealed = seal_scram(ring, "alice", ScramMechanism.SCRAM_SHA_256, b"salt", b"s" * 32, b"k" * 32)
    with pytest.raises(SealedSecretError):
        open_scram(
            ring, ScramCredentialUpserted("alice", ScramMechanism.SCRAM_SHA_512, 4096, sealed)
        )


def test_secret_reprs_show_no_bytes(ring):
    """SealedSecret shows only its key id; ScramSecret shows no bytes."""
    sealed = seal_scram(
        ring, "alice", ScramMechanism.SCRAM_SHA_256, b"SALTSALT", b"S" * 32, b"K" * 32
    )
    secret = open_scram(
        ring, ScramCredentialUpserted("alice", ScramMechanism.SCRAM_SHA_256, 4096, sealed)
    )
    assert repr(sealed) == f"SealedSecret(key_id={sealed.key_id!r})"
    assert "SALT" not in repr(secret) and "SSSS" not in repr(secret) and "KKKK" not in repr(secret)


def test_in_memory_rotation_adds_a_newest_key():
    """with_new_key returns a ring whose newest key is new and whose old keys remain."""
    ring = Keyring.generate()
    sealed = ring.seal(b"x", b"a")
    rotated = ring.with_new_key()
    assert rotated.newest_id != ring.newest_id and rotated.open(sealed, b"a") == b"x"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o666])
def test_a_key_file_others_may_read_is_refused_as_ssh_does(tmp_path, mode):
    """Group- or world-accessible key files are refused naming the mode and the fix (ssh's 'UNPROTECTED PRIVATE
    KEY FILE' rule); 0600 and 0400 load."""
    path = key_file(tmp_path, [key()])
    path.chmod(mode)
    with pytest.raises(KeyringError) as info:
        Keyring.from_file(path)
    assert f"permissions {mode:04o} are too open" in str(info.value) and f"chmod 600 {path}" in str(info.value)
    path.chmod(0o400)
    assert Keyring.from_file(path).ids == ("k-1",)


def test_an_open_key_file_loads_with_the_override(tmp_path, monkeypatch):
    """SECMETA_ALLOW_OPEN_KEY_FILE=1 is the explicit override."""
    path = key_file(tmp_path, [key()])
    path.chmod(0o644)
    monkeypatch.setenv("SECMETA_ALLOW_OPEN_KEY_FILE", "1")
    assert Keyring.from_file(path).ids == ("k-1",)


def test_require_names_every_missing_key(tmp_path):
    """Keyring.require lists the ids it lacks and says what needs them."""
    ring = Keyring.from_file(key_file(tmp_path, [key("k-2")]))
    ring.require({"k-2"}, "sealed things")
    with pytest.raises(KeyringError, match=r"lacks keys k-0, k-1, which sealed things"):
        ring.require({"k-1", "k-2", "k-0"}, "sealed things")


@pytest.mark.parametrize("content", [b'{"version": 1, "keys": [' + b"\xff", b'{"version": 1, "keys": [{"material": "'])
def test_an_unreadable_key_file_chains_nothing_holding_its_text(tmp_path, content):
    """Not UTF-8 or not JSON: KeyringError with nothing chained (a UnicodeDecodeError or JSONDecodeError holds
    the whole file, key material included)."""
    path = tmp_path / "keys.json"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(KeyringError) as info:
        Keyring.from_file(path)
    assert info.value.__context__ is None and info.value.__cause__ is None


@given(material=st.binary(min_size=32, max_size=32), info=st.binary(max_size=40))
def test_derived_keys_are_cryptographys_hkdf_sha256(material, info):
    """A key derived from a master key is HKDF-SHA256 (RFC 5869, no salt) as cryptography computes it: the
    chain, check and seal keys of every existing store stay what they were."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    expected = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(material)
    assert keyring_module._derive(material, info) == expected


def test_hkdf_sha256_gives_rfc_5869s_test_case_3():
    """RFC 5869 A.3 (SHA-256, no salt, no info), its first 32 bytes."""
    okm = keyring_module._derive(bytes.fromhex("0b" * 22), b"")
    assert okm == bytes.fromhex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d")
