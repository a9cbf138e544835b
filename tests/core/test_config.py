"""Typed, fail-closed settings: StoreConfig and config.json refuse a value of the wrong type or range.

Issue 13 ("allow_everyone_if_no_acl_found": "no" made every request ALLOWED) and issue 14 (StoreConfig
accepted wrong types and checked them late or never) each observed case is one row below.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import traceback

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.core import InvalidValueError, SecurityStore, StoreConfig
from secmeta.core.cli import main
from secmeta.core.config import CONFIG_FILE
from secmeta.core.log import LogConfig
from secmeta.events.keyring import Keyring
from secmeta.events.types import ScramMechanism
from secmeta.projections.snapshot import SnapshotPolicy

BAD_SETTINGS = [
    # (setting, value, the expected type the error names)
    ("allow_everyone_if_no_acl_found", "false", "bool"),
    ("allow_everyone_if_no_acl_found", "no", "bool"),
    ("describe_tokens_include_hmac", "no", "bool"),
    ("delete_covered_segments", 1, "bool"),
    ("max_acl_changes_per_request", True, "int"),
    ("max_acl_changes_per_request", 0, "int"),
    ("token_expiry_time_ms", 2**70, "int"),
    ("token_max_lifetime_ms", "1000", "int"),
    ("token_expiry_check_interval_ms", 1.5, "int"),
    ("keep_snapshots", 0, "int"),
    ("default_principal", "admin", "str"),
    ("super_users", "User:admin", "frozenset[str]"),
    ("super_users", ["User:admin", "bob"], "frozenset[str]"),
    ("default_iterations", {ScramMechanism.SCRAM_SHA_256: 100}, "dict[ScramMechanism, int]"),
    ("log", {}, "LogConfig"),
    ("snapshot_policy", None, "SnapshotPolicy"),
    ("password_policy", "min 8", "PasswordPolicy or None"),
    ("key_file", 3, "str or PathLike or None"),
    ("clock", 3, "Callable"),
]


@pytest.mark.parametrize("setting, value, expected", BAD_SETTINGS, ids=[f"{s}={v!r}" for s, v, _ in BAD_SETTINGS])
def test_a_wrong_setting_is_refused_when_built_naming_setting_value_and_type(setting, value, expected):
    """StoreConfig(setting=value) raises InvalidValueError naming the setting, the value and the expected type."""
    with pytest.raises(InvalidValueError) as info:
        StoreConfig(**{setting: value})
    message = str(info.value)
    assert f"setting {setting} = " in message and f"expected {expected}" in message
    shown = repr(frozenset(value)) if isinstance(value, list) else repr(value)
    assert shown in message


def test_token_secret_as_str_is_refused_without_showing_it():
    """token_secret must be bytes: a str is refused at once (not at the first token), and the error hides it."""
    secret = "hunter2-" + secrets.token_hex(8)  # made here, so the test's own source never holds it
    with pytest.raises(InvalidValueError) as info:
        StoreConfig(token_secret=secret)
    shown = repr(info.value) + repr(info.value.args) + "".join(traceback.format_exception(info.value))
    assert "setting token_secret" in str(info.value) and "expected bytes or None" in str(info.value)
    assert secret not in shown


def test_collections_may_be_given_as_lists_and_mechanisms_by_name():
    """Lists become frozensets, mechanism names their enum; the result equals the typed spelling."""
    config = StoreConfig(super_users=["User:admin", "User:ops"], enabled_mechanisms=["SCRAM-SHA-256"],
                         default_iterations={"scram-sha-256": 8192}, log=LogConfig())
    assert config == StoreConfig(super_users=frozenset({"User:admin", "User:ops"}),
                                 enabled_mechanisms=frozenset({ScramMechanism.SCRAM_SHA_256}),
                                 default_iterations={ScramMechanism.SCRAM_SHA_256: 8192})


def test_with_checks_the_changed_settings_too():
    """with_() builds a new StoreConfig, so it checks the same way."""
    with pytest.raises(InvalidValueError, match="setting keep_snapshots"):
        StoreConfig().with_(keep_snapshots=-1)


def write_config(directory, **settings):
    directory.mkdir(exist_ok=True)
    (directory / CONFIG_FILE).write_text(json.dumps(settings))


@pytest.mark.parametrize("setting, value", [
    ("allow_everyone_if_no_acl_found", "no"),
    ("describe_tokens_include_hmac", "false"),
    ("token_max_lifetime_ms", "1000"),
    ("max_acl_changes_per_request", True),
    ("super_users", "User:admin"),
])
def test_config_json_is_parsed_strictly(tmp_path, setting, value):
    """A wrong type in config.json is an error naming the file, the key, the value and the type."""
    write_config(tmp_path, **{setting: value})
    with pytest.raises(InvalidValueError) as info:
        StoreConfig.load(tmp_path)
    message = str(info.value)
    assert str(tmp_path / CONFIG_FILE) in message and f"setting {setting} = {value!r}" in message


def test_config_json_round_trip(tmp_path):
    """save() then load() gives the same persisted settings."""
    config = StoreConfig(super_users=frozenset({"User:admin", "User:ops"}), allow_everyone_if_no_acl_found=True,
                         token_max_lifetime_ms=1000, token_expiry_time_ms=500)
    config.save(tmp_path)
    assert StoreConfig.load(tmp_path) == config


def test_config_json_must_be_an_object(tmp_path):
    """A JSON list is not a settings table."""
    (tmp_path / CONFIG_FILE).write_text("[]")
    with pytest.raises(InvalidValueError, match="must hold a JSON object"):
        StoreConfig.load(tmp_path)


def test_token_secret_from_the_environment_is_taken_as_bytes(tmp_path, monkeypatch):
    """$SECMETA_TOKEN_SECRET is read as bytes: bytes that are not UTF-8 neither fail nor ride on an error."""
    monkeypatch.setenv("SECMETA_TOKEN_SECRET", "s3cret, a token secret of 32 bytes or more-\udcff")  # the environment holds b"s3cret, a token secret of 32 bytes or more-\xff"
    assert StoreConfig.load(tmp_path).token_secret == b"s3cret, a token secret of 32 bytes or more-\xff"


@pytest.mark.parametrize("setting, value", [("allow_everyone_if_no_acl_found", "no"), ("token_max_lifetime_ms", "1000")])
def test_cli_refuses_a_store_with_a_bad_config_json_in_one_line(tmp_path, monkeypatch, capsys, setting, value):
    """The CLI exits 1 (a store that cannot be used) with one error line naming the key (no traceback), and
    decides nothing: fail closed."""
    keys, store = tmp_path / "keys.json", tmp_path / "store"
    Keyring.generate_file(keys)
    monkeypatch.setenv("SECMETA_KEY_FILE", str(keys))
    SecurityStore.open(store, keyring=Keyring.from_file(keys)).close()
    write_config(store, **{setting: value})
    code = main(["authorize", "--store", str(store), "--principal", "User:bob", "--host", "10.0.0.1",
                 "--operation", "Read", "--topic", "orders"])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.startswith("secmeta: error: ") and f"setting {setting} = {value!r}" in err
    assert len(err.strip().splitlines()) == 1


_SECRETS = st.one_of(st.binary(max_size=40), st.text(max_size=4), st.none(), st.integers(), st.just(bytearray(b"x")),
                     st.lists(st.integers(0, 255), max_size=2))


@given(_SECRETS)
def test_the_plain_token_secret_check_accepts_only_what_pydantic_accepts(value):
    """The token secret is checked without pydantic when plainly valid (non-empty bytes, as
    $SECMETA_TOKEN_SECRET gives it): whatever the plain check accepts, the strict schema accepts too,
    and anything else is refused as before, naming the setting and hiding the value."""
    from pydantic import ValidationError

    from secmeta.core.config import _PLAINLY_VALID, _model
    try:
        _model(frozenset({"token_secret"})).model_validate({"token_secret": value})
        schema_accepts = True
    except ValidationError:
        schema_accepts = False
    if _PLAINLY_VALID["token_secret"](value):
        assert schema_accepts
    try:
        StoreConfig(token_secret=value)
    except InvalidValueError as exc:
        assert not schema_accepts and "token_secret = (hidden)" in str(exc)
    else:
        assert schema_accepts


def test_a_config_with_its_own_snapshot_policy_and_log_settings_needs_no_pydantic():
    """A program's (or benchmark's) own SnapshotPolicy and LogConfig are checked by their type alone, as the
    schema's InstanceOf does: building the config never imports pydantic (it cost every such open 0.1 s of CPU)."""
    code = ("import sys\n"
            "from secmeta.core.config import StoreConfig\n"
            "from secmeta.core.log import LogConfig\n"
            "from secmeta.projections.snapshot import SnapshotPolicy\n"
            "config = StoreConfig(snapshot_policy=SnapshotPolicy(every_events=None, every_bytes=None), log=LogConfig())\n"
            "assert config.snapshot_policy.every_events is None\n"
            "print('pydantic' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


class _OtherPolicy(SnapshotPolicy):
    pass


@given(st.sampled_from(["snapshot_policy", "log"]),
       st.sampled_from([SnapshotPolicy(), SnapshotPolicy(every_events=None), _OtherPolicy(), LogConfig(), None, 1,
                        "policy", object()]))
def test_the_plain_instance_checks_accept_only_what_pydantic_accepts(setting, value):
    """Whatever the plain check of an InstanceOf setting accepts, the strict schema accepts; anything else is
    still decided by pydantic (a refusal names the setting)."""
    from pydantic import ValidationError

    from secmeta.core.config import _PLAINLY_VALID, _model
    try:
        _model(frozenset({setting})).model_validate({setting: value})
        schema_accepts = True
    except ValidationError:
        schema_accepts = False
    if _PLAINLY_VALID[setting](value):
        assert schema_accepts
    try:
        StoreConfig(**{setting: value})
    except InvalidValueError as exc:
        assert not schema_accepts and f"setting {setting} = " in str(exc)
    else:
        assert schema_accepts


def test_a_token_secret_that_its_published_fingerprint_gives_away_is_refused(tmp_path):
    """The log names the token secret by ``delegation.token.secret.fingerprint``, HMAC-SHA256(secret, a fixed label):
    one fast hash, carried wherever logged events go (the Kafka history and state topics, the Spark history table,
    ``config --describe``, audit lines). A reader of any of them can test guesses of the secret offline, and the
    secret is all it takes to compute any token's HMAC (its password, from the token id, which the same events
    carry) and log in as the token's owner. So a secret weak enough to be guessed must not be accepted: here a
    dictionary word, found in a handful of guesses from what the history shows."""
    import base64
    import hmac

    from scramp import ScramClient

    from secmeta.core import RequestContext
    from secmeta.events.records import DelegationTokenIssued, SecuritySettingAltered
    from tests.logkit import make_keyring

    weak = b"kafka"
    try:
        config = StoreConfig(token_secret=weak)
    except InvalidValueError:
        return                      # refused before anything is logged
    with SecurityStore.open(tmp_path / "store", config, keyring=make_keyring(tmp_path)) as store:
        store.log_initial_settings(RequestContext("User:admin", "127.0.0.1"))
        store.create_delegation_token(context=RequestContext("User:admin", "127.0.0.1", tls=True))
        logged = [envelope.event for envelope in store.log.read(0, store.log.end_offset)]   # what the topics carry
        fingerprint = next(e.setting_value for e in logged if isinstance(e, SecuritySettingAltered)
                           and e.setting_name == "delegation.token.secret.fingerprint")
        token_id = next(e.token_id for e in logged if isinstance(e, DelegationTokenIssued))
        label = b"secmeta delegation token secret fingerprint v1"   # documented: a fixed label, public
        found = next(guess for guess in (b"secret", b"changeme", b"password", b"kafka", b"admin")
                     if hmac.new(guess, label, "sha256").hexdigest() == fingerprint)
        password = base64.b64encode(hmac.new(found, token_id.encode(), "sha512").digest()).decode()
        client, server = ScramClient(["SCRAM-SHA-256"], token_id, password), store.scram_server("SCRAM-SHA-256")
        first = client.get_client_first() + ",tokenauth=true"
        client.client_first_bare = first[3:]
        client.set_server_first(server.first(first))
        server.final(client.get_client_final())
        pytest.fail(f"token secret {weak!r} was accepted; from the history alone it was guessed and {server.principal} "
                    "logged in with a forged token password")


def _short_secret() -> str:
    return secrets.token_hex(15) + "-"   # 31 bytes, made here so the test's source never holds it


def test_a_short_token_secret_in_code_is_refused_naming_the_setting_and_the_minimum():
    """StoreConfig(token_secret=...) under 32 bytes: InvalidValueError naming the setting and the minimum, the
    value never quoted (nor chained); 32 bytes are enough."""
    secret = _short_secret().encode()
    with pytest.raises(InvalidValueError) as info:
        StoreConfig(token_secret=secret)
    message = str(info.value)
    assert "setting token_secret" in message and "at least 32 bytes" in message
    assert secret.decode() not in repr(info.value) + "".join(traceback.format_exception(info.value))
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert StoreConfig(token_secret=secret + b"x").token_secret == secret + b"x"


def test_a_short_token_secret_from_the_environment_is_refused_naming_the_variable(tmp_path, monkeypatch):
    """$SECMETA_TOKEN_SECRET under 32 bytes: the error names the variable (not config.json) and the minimum."""
    secret = _short_secret()
    monkeypatch.setenv("SECMETA_TOKEN_SECRET", secret)
    with pytest.raises(InvalidValueError) as info:
        StoreConfig.load(tmp_path)
    assert "$SECMETA_TOKEN_SECRET" in str(info.value) and "at least 32 bytes" in str(info.value)
    assert CONFIG_FILE not in str(info.value) and secret not in repr(info.value)


def test_the_cli_refuses_a_short_token_secret_and_creates_no_store(tmp_path, monkeypatch, capsys):
    """`secmeta init` with a short $SECMETA_TOKEN_SECRET exits 2 (a bad value) with one line naming the variable
    and the minimum, never the value, and creates nothing (fail closed)."""
    keys, store = tmp_path / "keys.json", tmp_path / "store"
    Keyring.generate_file(keys)
    secret = _short_secret()
    monkeypatch.setenv("SECMETA_KEY_FILE", str(keys))
    monkeypatch.setenv("SECMETA_TOKEN_SECRET", secret)
    code = main(["init", "--store", str(store)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "SECMETA_TOKEN_SECRET" in err and "at least 32 bytes" in err and secret not in err
    assert not store.exists() or not any(store.iterdir())
