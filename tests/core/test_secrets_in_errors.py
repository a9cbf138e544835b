"""Secrets never ride on exceptions: every failure on a path that handles a password, salt, salted password,
token HMAC or token secret is our own error without the value (issue 14, Deliver 5).

Each secret is made at run time (``secrets.token_hex``), so the test's own source lines, which a formatted
traceback quotes, never hold it; the scan covers repr(exc), exc.args, the formatted traceback and every
exception chained to it (``__cause__`` and ``__context__``).
"""

from __future__ import annotations

import re
import secrets
import traceback

import pytest

from secmeta.core import (
    ApiException,
    ErrorCode,
    FieldError,
    InvalidValueError,
    PasswordPolicy,
    ScramCredentialInfo,
    ScramMechanism,
    StoreConfig,
    UserScramCredentialUpsertion,
)
from secmeta.core.cli import build_parser, main
from secmeta.core.validation import secret_bytes
from tests.storekit import ADMIN

SHA256 = ScramMechanism.SCRAM_SHA_256


def fresh(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(8)}"


def exposed(exc: BaseException) -> str:
    """Everything an error reporter could record about ``exc`` and the exceptions chained to it."""
    seen, parts = set(), []
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts += [repr(exc), repr(exc.args), "".join(traceback.format_exception(exc))]
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


@pytest.mark.parametrize("field", ["password", "salt", "salted password"])
def test_a_secret_with_a_lone_surrogate_is_refused_without_it(field):
    """secret_bytes: FieldError naming the field; the value is in no part of the error, and nothing is chained."""
    secret = fresh("hunter2") + "\ud800"
    with pytest.raises(FieldError) as info:
        secret_bytes(secret, field)
    assert str(info.value) == f"{field} is not valid UTF-8 (it holds a lone surrogate)"
    assert secret[:-1] not in exposed(info.value)
    assert info.value.__context__ is None and info.value.__cause__ is None


def test_a_secret_of_the_wrong_type_names_only_its_type():
    password = fresh("hunter2")
    with pytest.raises(FieldError, match="password must be bytes, not list") as info:
        secret_bytes([password], "password")
    assert password not in exposed(info.value)


@pytest.mark.parametrize("field", ["password", "salted_password", "salt"])
def test_the_store_refuses_an_unencodable_secret_per_user_without_it(open_store, field):
    """alter_user_scram_credentials with "hunter2-...\\ud800": UNACCEPTABLE_CREDENTIAL naming the field only."""
    store = open_store()
    secret = fresh("hunter2") + "\ud800"
    values = {"password": None, "salt": b"salt", "salted_password": None} | {field: secret}
    if field == "salt":
        values["salted_password"] = b"x" * 32
    elif field == "salted_password":
        values["salt"] = b"salt"
    else:
        values["salt"] = None
    item = UserScramCredentialUpsertion("alice", ScramCredentialInfo(SHA256, 4096), **values)
    end = store.log.end_offset
    result = store.alter_user_scram_credentials([item], context=ADMIN)["alice"]
    assert result.code == ErrorCode.UNACCEPTABLE_CREDENTIAL and field.replace("_", " ") in result.message
    assert secret[:-1] not in repr(result) and secret[:-1] not in repr(item)
    assert store.log.end_offset == end


def test_a_password_refused_by_the_policy_is_not_quoted(open_store):
    store = open_store(password_policy=PasswordPolicy.min_length(64))
    password = fresh("short").encode()
    result = store.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("alice", ScramCredentialInfo(SHA256, 4096), password)], context=ADMIN)["alice"]
    assert result.code == ErrorCode.UNACCEPTABLE_CREDENTIAL and password.decode() not in repr(result)


@pytest.mark.parametrize("call", ["renew_delegation_token", "expire_delegation_token"])
@pytest.mark.parametrize("hmac_of", [lambda s: s, lambda s: s.encode()], ids=["str", "unknown bytes"])
def test_a_bad_or_unknown_token_hmac_is_never_quoted(open_store, call, hmac_of):
    """An HMAC given as str (INVALID_REQUEST) or one no token has (DELEGATION_TOKEN_NOT_FOUND): never in the error."""
    store = open_store()
    store.create_delegation_token(context=ADMIN)
    hmac = fresh("hmac")
    with pytest.raises(ApiException) as info:
        getattr(store, call)(hmac_of(hmac), context=ADMIN)
    assert info.value.error.code in (ErrorCode.INVALID_REQUEST, ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
    assert hmac not in exposed(info.value)


@pytest.mark.parametrize("secret", [lambda s: s, lambda s: s.encode()[:0]], ids=["str", "empty"])
def test_a_bad_token_secret_setting_is_never_shown(secret):
    """token_secret as str, or empty: InvalidValueError naming the setting, the value hidden."""
    value = secret(fresh("token-secret"))
    with pytest.raises(InvalidValueError) as info:
        StoreConfig(token_secret=value)
    assert "setting token_secret = (hidden)" in str(info.value)
    if value:
        assert value not in exposed(info.value)


@pytest.mark.parametrize("content", [
    lambda pw: f"SCRAM-SHA-256=[password={pw}]\n".encode() + b"caf\xe9\n",
    lambda pw: f"SCRAM-SHA-256=[password={pw}\\uZZ9x]\n".encode(),
], ids=["not UTF-8", "bad escape"])
def test_an_unreadable_add_config_file_is_refused_without_its_contents(tmp_path, capsys, content):
    """`secmeta configs --alter --add-config-file F`, F not UTF-8 or with a bad \\u escape: the error names the
    option and the file, and neither it, nor anything chained to it, nor the output holds the password."""
    password = fresh("hunter2")
    path = tmp_path / "scram.properties"
    path.write_bytes(content(password))
    argv = ["configs", "--store", str(tmp_path / "store"), "--alter", "--user", "alice",
            "--add-config-file", str(path)]
    args = build_parser().parse_args(argv)
    with pytest.raises(InvalidValueError, match=f"--add-config-file {re.escape(repr(str(path)))}") as info:
        args.func(args)
    assert password not in exposed(info.value)
    assert info.value.__context__ is None and info.value.__cause__ is None  # a UnicodeDecodeError holds the bytes
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and password not in err and "--add-config-file" in err
