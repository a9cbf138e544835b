"""Opening a store: creation is explicit on the command line, and a writer needs every key the store still uses.

Issue 13: a mistyped --store on a write command silently created a new store. Issue 14: a keyring reduced to
its newest key opened and accepted writes, and a SCRAM login of a user sealed under the removed key raised
UnknownKeyError instead of SASL_AUTHENTICATION_FAILED.
"""

from __future__ import annotations

import pytest
import scramp

from secmeta.core import (
    KeyringError,
    NotAStoreError,
    SaslAuthenticationException,
    SecurityStore,
    StoreConfig,
)
from secmeta.core.cli import main
from secmeta.core.log import LogConfig
from secmeta.events.keyring import Keyring
from tests.storekit import ADMIN, TOKEN_SECRET, acl, upsert


def test_open_without_create_refuses_a_missing_directory_and_creates_nothing(tmp_path, keyring):
    """SecurityStore.open(create=False) on a path that is no store: NotAStoreError, and no directory appears."""
    with pytest.raises(NotAStoreError, match="not a secmeta store"):
        SecurityStore.open(tmp_path / "typo", keyring=keyring, create=False)
    assert not (tmp_path / "typo").exists()


def test_a_mistyped_store_on_a_write_command_is_refused(tmp_path, keyring, monkeypatch, capsys):
    """secmeta acls --add --store TYPO: exit 1 (a store that cannot be used) naming TYPO, nothing created; after secmeta init the same works."""
    monkeypatch.setenv("SECMETA_KEY_FILE", str(tmp_path / "keys.json"))
    add = ["acls", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders"]
    assert main([*add, "--store", str(tmp_path / "stroe")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'stroe'} is not a secmeta store" in err and not (tmp_path / "stroe").exists()
    assert main(["init", "--store", str(tmp_path / "store")]) == 0
    assert capsys.readouterr().out.startswith(f"created store {tmp_path / 'store'} (id ")
    assert main([*add, "--store", str(tmp_path / "store")]) == 0


def test_init_refuses_an_existing_store(tmp_path, keyring, monkeypatch, capsys):
    """secmeta init on a store: exit 1, nothing changed."""
    monkeypatch.setenv("SECMETA_KEY_FILE", str(tmp_path / "keys.json"))
    assert main(["init", "--store", str(tmp_path / "store")]) == 0
    assert main(["init", "--store", str(tmp_path / "store")]) == 1
    assert "is already a secmeta store; nothing was changed" in capsys.readouterr().err


CONFIG = StoreConfig(token_secret=TOKEN_SECRET, log=LogConfig(segment_bytes=1024), delete_covered_segments=True)


def rotated_store(tmp_path, keyring: Keyring) -> tuple[Keyring, Keyring]:
    """A store whose alice is sealed under the first key and bob under a second, newer one, with a snapshot
    after both and the segments it covers deleted (so the log itself needs only the newer key);
    returns (the full keyring, one holding the newer key only)."""
    config = CONFIG
    with SecurityStore.open(tmp_path / "store", config, keyring=keyring) as store:
        store.alter_user_scram_credentials([upsert("alice")], context=ADMIN)
    both = keyring.with_new_key()
    with SecurityStore.open(tmp_path / "store", config, keyring=both) as store:
        store.alter_user_scram_credentials([upsert("bob")], context=ADMIN)
        for i in range(8):  # roll the segment, so the active one holds batches linked with the new key only
            store.create_acls([acl(f"t{i}")], context=ADMIN)
        store.snapshot()
    newest = Keyring([k for k in both._keys.values() if k.id == both.newest_id])
    return both, newest


def test_a_writer_refuses_a_keyring_missing_a_key_in_use_naming_it(tmp_path, keyring):
    """Only the newest key: the writer open fails naming the first key (alice's credential and the chain need
    it) and writes nothing; with both keys it opens."""
    both, newest = rotated_store(tmp_path, keyring)
    config = CONFIG
    with SecurityStore.open(tmp_path / "store", config, keyring=both, read_only=True) as store:
        end = store.log.end_offset
    with pytest.raises(KeyringError) as info:
        SecurityStore.open(tmp_path / "store", config, keyring=newest)
    assert f"lacks key {keyring.newest_id}, which sealed live SCRAM credentials or linked" in str(info.value)
    with SecurityStore.open(tmp_path / "store", config, keyring=both) as store:
        assert store.log.end_offset == end
        store.create_acls([acl()], context=ADMIN)


def login_failure(store: SecurityStore, user: str, password: str) -> str:
    """The message of a failed SCRAM-SHA-256 login (pytest fails if it succeeds)."""
    server = store.scram_server("SCRAM-SHA-256")
    client = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
    with pytest.raises(SaslAuthenticationException) as info:
        client.set_server_first(server.first(client.get_client_first()))
        server.final(client.get_client_final())
    return str(info.value)


def test_a_login_sealed_under_a_missing_key_fails_like_any_failed_login(tmp_path, keyring):
    """Read-only with the newest key only: alice (sealed under the missing key) gets SASL_AUTHENTICATION_FAILED
    with the same message as an unknown user, not UnknownKeyError; bob still logs in."""
    _, newest = rotated_store(tmp_path, keyring)
    with SecurityStore.open(tmp_path / "store", CONFIG, keyring=newest, read_only=True) as store:
        assert login_failure(store, "alice", "pw") == login_failure(store, "nobody", "pw")
        server = store.scram_server("SCRAM-SHA-256")
        client = scramp.ScramClient(["SCRAM-SHA-256"], "bob", "pw")
        client.set_server_first(server.first(client.get_client_first()))
        client.set_server_final(server.final(client.get_client_final()))
        assert server.principal == "User:bob"
