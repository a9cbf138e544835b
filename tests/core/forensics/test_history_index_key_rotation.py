"""A key rotation is routine, not tampering: the history index written under an older key the keyring still
holds is accepted and resealed under the newest key (issue 21: the next open warned it "was altered or
written under another key")."""

from __future__ import annotations

import logging
import sqlite3

from secmeta.core import SecurityStore
from secmeta.core.forensics.history_index import INDEX_DIR, INDEX_FILE, index_problem
from secmeta.core.types import RequestContext
from secmeta.events.keyring import Keyring
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.clikit import run

ADMIN = RequestContext()


def binding(i: int) -> AclBinding:
    return AclBinding.of(ResourceType.TOPIC, f"t{i}", PatternType.LITERAL, "User:bob", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)


def index_key_id(path) -> str:
    db = sqlite3.connect(path / INDEX_DIR / INDEX_FILE)
    try:
        return db.execute("SELECT v FROM meta WHERE k = 'key_id'").fetchone()[0]
    finally:
        db.close()


def test_an_index_sealed_under_a_rotated_out_key_is_accepted_and_resealed(tmp_path, caplog, capsys):
    """After `keys generate` adds a key: no warning, the same history, log verify OK, the index under the new key."""
    keys, path = tmp_path / "keys.json", tmp_path / "store"
    Keyring.generate_file(keys)
    with SecurityStore.open(path, keyring=Keyring.load(keys)) as store:
        store.create_acls([binding(i) for i in range(3)], context=ADMIN)
        assert store.timetravel.index.wait()
        before = [e.to_dict() for e in store.history()]
    old_key = index_key_id(path)
    assert run(capsys, "keys", "generate", "--key-file", str(keys))[0] == 0
    with caplog.at_level(logging.INFO, logger="secmeta.history_index"):
        with SecurityStore.open(path, keyring=Keyring.load(keys)) as store:
            index = store.timetravel.index
            assert index.wait() and index.problem is None
            after = [e.to_dict() for e in store.history()]
            assert after[:-1] == before and after[-1]["event_type"] == "KeyRotated"
            store.create_acls([binding(9)], context=ADMIN)
            assert index.catch_up() == store.log.end_offset
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert index_key_id(path) == Keyring.load(keys).newest_id != old_key
    with SecurityStore.open(path, keyring=Keyring.load(keys), read_only=True) as store:
        assert index_problem(path / INDEX_DIR / INDEX_FILE, store.log, against_log=True) is None
    code, out, _ = run(capsys, "log", "verify", "--store", str(path), "--key-file", str(keys))
    assert code == 0 and "another key" not in out


def test_an_index_under_a_key_the_keyring_lacks_is_still_rebuilt(tmp_path, caplog):
    """Fail closed: an index whose key the keyring does not hold is not trusted (rebuilt, with the warning)."""
    keys, path = tmp_path / "keys.json", tmp_path / "store"
    Keyring.generate_file(keys)
    with SecurityStore.open(path, keyring=Keyring.load(keys)) as store:
        store.create_acls([binding(0)], context=ADMIN)
        assert store.timetravel.index.wait()
    db = sqlite3.connect(path / INDEX_DIR / INDEX_FILE)
    with db:
        db.execute("UPDATE meta SET v = 'k-forged' WHERE k = 'key_id'")
    db.close()
    with caplog.at_level(logging.WARNING, logger="secmeta.history_index"):
        with SecurityStore.open(path, keyring=Keyring.load(keys)) as store:
            assert store.timetravel.index.wait()
            assert "another key" in store.timetravel.index.problem


def test_a_key_rotation_is_logged_once_as_the_first_batch_under_the_new_key(tmp_path):
    """The writer open after `keys generate` logs KeyRotated(new, previous) (key ids only); the next open does not."""
    keys, path = tmp_path / "keys.json", tmp_path / "store"
    first = Keyring.generate_file(keys)
    with SecurityStore.open(path, keyring=Keyring.load(keys)) as store:
        store.create_acls([binding(0)], context=ADMIN)
    second = Keyring.generate_file(keys)
    for _ in range(2):
        with SecurityStore.open(path, keyring=Keyring.load(keys)) as store:
            rotations = [e for e in store.history() if e.event_type == "KeyRotated"]
    assert [(e.entity_key, e.payload, e.actor_principal) for e in rotations] == [
        (f"key:{second}", {"key_id": second, "previous_key_id": first}, "System:keyring")]
    with SecurityStore.open(path, keyring=Keyring.load(keys), read_only=True) as store:
        (batch,) = list(store.log.batches(rotations[0].offset, rotations[0].offset + 1))
        assert batch.key_id == second
