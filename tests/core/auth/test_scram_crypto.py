"""SCRAM key derivation and the stored credential."""

import base64
import dataclasses

import pytest

from secmeta.core.auth.scram import (
    SALT_LENGTH,
    credential_from_password,
    credential_from_salted_password,
    derive_keys,
    salted_password,
)
from secmeta.core.errors import UnsupportedSaslMechanismException
from secmeta.events.types import ScramMechanism

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3 (see reference/kafka-semantics.md).
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_STORED_KEY = base64.b64decode("WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=")
RFC_SERVER_KEY = base64.b64decode("wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=")


def test_rfc7677_stored_key():
    """The RFC 7677 password, salt and count give the RFC's StoredKey."""
    credential = credential_from_password(SHA256, b"pencil", 4096, salt=RFC_SALT)
    assert credential.stored_key == RFC_STORED_KEY


def test_rfc7677_server_key():
    """The RFC 7677 password, salt and count give the RFC's ServerKey."""
    credential = credential_from_password(SHA256, b"pencil", 4096, salt=RFC_SALT)
    assert credential.server_key == RFC_SERVER_KEY


def test_derive_keys_from_salted_password_matches_rfc7677():
    """salted_password then derive_keys yields the RFC's (StoredKey, ServerKey)."""
    salted = salted_password(SHA256, b"pencil", RFC_SALT, 4096)
    assert derive_keys(SHA256, salted) == (RFC_STORED_KEY, RFC_SERVER_KEY)


def test_pre_salted_credential_equals_password_credential():
    """A credential built from the pre-salted form equals one built from the password."""
    salt = b"s" * 20
    salted = salted_password(SHA512, b"secret", salt, 8192)
    assert credential_from_salted_password(SHA512, salt, salted, 8192) == (
        credential_from_password(SHA512, b"secret", 8192, salt=salt)
    )


def test_random_salt_has_the_default_length():
    """Without a salt, a fresh random salt of SALT_LENGTH bytes is used."""
    credential = credential_from_password(SHA256, b"pw", 4096)
    assert len(credential.salt) == SALT_LENGTH


def test_random_salts_differ_between_credentials():
    """Two credentials for the same password get different salts."""
    first = credential_from_password(SHA256, b"pw", 4096)
    second = credential_from_password(SHA256, b"pw", 4096)
    assert first.salt != second.salt


def test_sha512_keys_are_64_bytes():
    """SCRAM-SHA-512 credentials hold 64-byte keys."""
    credential = credential_from_password(SHA512, b"pw", 4096)
    assert (len(credential.stored_key), len(credential.server_key)) == (64, 64)


def test_password_is_not_saslprepped():
    """Passwords are used as plain UTF-8: a soft hyphen (removed by SASLprep) still counts."""
    with_hyphen = credential_from_password(SHA256, "pen\u00adcil", 4096, salt=RFC_SALT)
    assert with_hyphen.stored_key != RFC_STORED_KEY


def test_str_password_is_its_utf8_bytes():
    """A str password derives the same keys as its UTF-8 encoding."""
    as_text = credential_from_password(SHA256, "p\u00e4ss", 4096, salt=RFC_SALT)
    as_bytes = credential_from_password(SHA256, "p\u00e4ss".encode(), 4096, salt=RFC_SALT)
    assert as_text == as_bytes


def test_unknown_mechanism_is_unsupported():
    """Deriving for mechanism UNKNOWN raises UnsupportedSaslMechanismException."""
    with pytest.raises(UnsupportedSaslMechanismException):
        credential_from_password(ScramMechanism.UNKNOWN, b"pw", 4096)


def test_repr_shows_mechanism_and_iterations():
    """The credential's repr names its mechanism and iteration count."""
    text = repr(credential_from_password(SHA256, b"pw", 8192))
    assert "SCRAM_SHA_256" in text and "8192" in text


def test_repr_hides_salt_and_keys():
    """The credential's repr contains neither the salt nor the keys in any common encoding."""
    credential = credential_from_password(SHA256, b"pw", 4096)
    text = repr(credential)
    for secret in (credential.salt, credential.stored_key, credential.server_key):
        for form in (repr(secret), secret.hex(), base64.b64encode(secret).decode()):
            assert form not in text


def test_credential_is_immutable():
    """A credential cannot be modified after creation."""
    credential = credential_from_password(SHA256, b"pw", 4096)
    with pytest.raises(dataclasses.FrozenInstanceError):
        credential.iterations = 1  # type: ignore[misc]
