"""Secrets never ride on exceptions: every failure on a path that handles a password, salt, salted password,
token HMAC or token secret is our own error without the value (issue 14, Deliver 5).

Each secret is made at run time (``secrets.token_hex``), so the test's own source lines, which a formatted
traceback quotes, never hold it; the scan covers repr(exc), exc.args, the formatted traceback and every
exception chained to it (``__cause__`` and ``__context__``).
"""

from __future__ import annotations

import io
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
from secmeta.core.auth.scram import credential_from_password, salted_password
from secmeta.core.cli import build_parser, main
from secmeta.core.validation import secret_bytes
from secmeta.core.wire.client_config import SCRAM_LOGIN_MODULE
from secmeta.core.wire.convert import alter_request_fields
from secmeta.core.wire.scram_client import ScramClient
from tests.clikit import log_end, make_store, run
from tests.storekit import ADMIN

SHA256 = ScramMechanism.SCRAM_SHA_256


def fresh(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(8)}"


def exposed(exc: BaseException) -> str:
    """Everything an error reporter could record about ``exc`` and every exception chained to it (both its
    ``__cause__`` and its ``__context__``): str, repr, args (a UnicodeError's ``object`` is one) and traceback."""
    seen, parts, pending = set(), [], [exc]
    while pending:
        exc = pending.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        parts += [str(exc), repr(exc), repr(exc.args), "".join(traceback.format_exception(exc))]
        pending += [exc.__cause__, exc.__context__]
    return "\n".join(parts)


def test_the_scan_follows_context_as_well_as_cause():
    """The scan itself: ``raise Clean() from other`` inside the handler of a UnicodeEncodeError keeps that
    error (and the secret in its ``object``) as ``__context__`` beside the ``__cause__``: found."""
    secret = fresh("hunter2")
    try:
        try:
            (secret + "\ud800").encode()
        except UnicodeEncodeError:
            raise ValueError("clean") from KeyError("also clean")
    except ValueError as exc:
        assert exc.__cause__ is not None and secret in exposed(exc)


@pytest.mark.parametrize("field", ["password", "salt", "salted password"])
def test_a_secret_with_a_lone_surrogate_is_refused_without_it(field):
    """secret_bytes: FieldError naming the field; the value is in no part of the error, and nothing is chained."""
    secret = fresh("hunter2") + "\ud800"
    with pytest.raises(FieldError) as info:
        secret_bytes(secret, field)
    assert str(info.value) == f"{field} is not valid UTF-8 (it holds a byte that is not UTF-8, or a lone surrogate)"
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


@pytest.mark.parametrize("secret", [lambda s: s, lambda s: s.encode()[:0], lambda s: s.encode()],
                         ids=["str", "empty", "short"])
def test_a_bad_token_secret_setting_is_never_shown(secret):
    """token_secret as str, empty, or under 32 bytes: InvalidValueError naming the setting, the value hidden."""
    value = secret(fresh("token-secret"))
    with pytest.raises(InvalidValueError) as info:
        StoreConfig(token_secret=value)
    assert "setting token_secret = (hidden)" in str(info.value)
    if value:
        assert (value.decode() if isinstance(value, bytes) else value) not in exposed(info.value)


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


# -- every path a password enters: a lone surrogate or an undecodable byte is refused, naming the field (issue 22)

def _bad(kind: str, secret: str) -> str | bytes:
    """``secret`` spoiled as it arrives: a lone surrogate in a str, a byte that is not UTF-8 in bytes, or (argv,
    os.fsdecode) that byte as Python decodes it, the surrogate U+DCFF."""
    return {"surrogate": secret + "\ud800", "bytes": secret.encode() + b"\xff", "argv": secret + "\udcff"}[kind]


BAD = ["surrogate", "bytes", "argv"]


@pytest.mark.parametrize("kind", BAD)
def test_scram_client_refuses_a_password_that_is_not_utf8_without_it(kind):
    """ScramClient(...) (then .first()): FieldError naming the SCRAM password; no part of it holds the password
    (a UnicodeEncodeError's args held it whole)."""
    secret = fresh("hunter2")
    with pytest.raises(FieldError, match="^SCRAM password is not valid UTF-8") as info:
        ScramClient(SHA256, "alice", _bad(kind, secret)).first()
    assert secret not in exposed(info.value)


@pytest.mark.parametrize("kind", BAD)
@pytest.mark.parametrize("derive", [
    lambda pw: salted_password(SHA256, pw, b"salt", 4096),
    lambda pw: credential_from_password(SHA256, pw, 4096),
    lambda pw: alter_request_fields([UserScramCredentialUpsertion("alice", ScramCredentialInfo(SHA256, 4096), pw)]),
], ids=["salted_password", "credential_from_password", "remote admin's request"])
def test_deriving_from_a_password_that_is_not_utf8_never_carries_it(kind, derive):
    """The derivation and the remote admin's salting (before anything is sent): FieldError naming the password."""
    secret = fresh("hunter2")
    with pytest.raises(FieldError, match="^password is not valid UTF-8") as info:
        derive(_bad(kind, secret))
    assert secret not in exposed(info.value)


def test_the_store_refuses_a_password_of_bytes_that_are_not_utf8(open_store):
    """b"hunter2-...\\xff": UNACCEPTABLE_CREDENTIAL naming the password (no Kafka client can type it), nothing
    written."""
    store = open_store()
    secret = fresh("hunter2")
    end = store.log.end_offset
    result = store.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("alice", ScramCredentialInfo(SHA256, 4096), _bad("bytes", secret))],
        context=ADMIN)["alice"]
    assert result.code == ErrorCode.UNACCEPTABLE_CREDENTIAL and "password is not valid UTF-8" in result.message
    assert secret not in repr(result) and store.log.end_offset == end


@pytest.mark.parametrize("given", ["--add-config", "--add-config-file", "stdin"])
def test_the_cli_refuses_a_password_that_is_not_utf8_as_a_usage_error(tmp_path, monkeypatch, capsys, given):
    """`secmeta configs --alter --add-config $'SCRAM-SHA-256=[iterations=8192,password=x\\xffy]'` printed a
    UnicodeEncodeError traceback: now exit 2 naming the SCRAM-SHA-256 password field, the password in neither
    output, nothing written; the same for a file's \\uD800 escape and a line on stdin."""
    path = make_store(tmp_path, monkeypatch)
    secret = fresh("hunter2")
    argv = ["configs", "--alter", "--entity-type", "users", "--entity-name", "u"]
    if given == "--add-config":
        argv += ["--add-config", f"SCRAM-SHA-256=[iterations=8192,password={_bad('argv', secret)}]"]
    elif given == "--add-config-file":
        (tmp_path / "scram.properties").write_text(f"SCRAM-SHA-256=[iterations=8192,password={secret}\\uD800]\n")
        argv += ["--add-config-file", str(tmp_path / "scram.properties")]
    else:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(_bad("bytes", secret) + b"\n")))
        argv += ["--add-config", "SCRAM-SHA-256=[iterations=8192]"]
    end = log_end(path)
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("secmeta: error: SCRAM-SHA-256 password is not valid UTF-8") and "Traceback" not in err
    assert secret not in err and log_end(path) == end


@pytest.mark.parametrize("line", ["sasl.password={pw}\\uD800",
                                  'sasl.jaas.config={module} required username="alice" password="{pw}\\uD800";'],
                         ids=["sasl.password", "sasl.jaas.config"])
def test_a_command_config_password_that_is_not_utf8_is_a_usage_error_before_connecting(tmp_path, capsys, line):
    """--command-config whose password holds a lone surrogate (a \\uD800 escape): exit 2 naming the setting, the
    password in no output; refused before any connection (the address here has no broker)."""
    password = fresh("hunter2")
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.username=alice\n"
                      + line.format(pw=password, module=SCRAM_LOGIN_MODULE) + "\n")
    code, out, err = run(capsys, "acls", "--list", "--bootstrap-server", "127.0.0.1:1", "--command-config", str(config))
    assert (code, out) == (2, "") and "not valid UTF-8" in err and password not in err
    assert ("sasl.password" if line.startswith("sasl.password") else "sasl.jaas.config") in err
