"""A directory that is not a store but keeps one for readers (a follower's: ``secmeta-local-store`` names it)."""

from __future__ import annotations

import pytest

from secmeta.core import AclBindingFilter, NotAStoreError, SecurityStore, StoreConfig
from secmeta.core.store.storedir import LOCAL_STORE_FILE
from tests.storekit import ADMIN, acl


@pytest.fixture
def kept(tmp_path, keyring):
    """``tmp_path/f`` holding a store of one ACL in ``f/store``, named by its LOCAL_STORE_FILE."""
    with SecurityStore.open(tmp_path / "f" / "store", StoreConfig(), keyring=keyring) as store:
        store.create_acls([acl("orders")], context=ADMIN)
    (tmp_path / "f" / LOCAL_STORE_FILE).write_text("store\n")
    return tmp_path / "f"


def test_a_read_only_open_reads_the_store_kept_in_the_directory(kept, keyring):
    with SecurityStore.open(kept, StoreConfig(), keyring=keyring, read_only=True, create=False) as store:
        assert [b.name for b in store.describe_acls(AclBindingFilter.any(), context=ADMIN)] == ["orders"]


def test_a_writer_is_refused_and_writes_nothing(kept, keyring):
    with pytest.raises(NotAStoreError, match="follower's directory"):
        SecurityStore.open(kept, StoreConfig(), keyring=keyring)
    assert sorted(p.name for p in kept.iterdir()) == sorted([LOCAL_STORE_FILE, "store"])


@pytest.mark.parametrize("name", ["", "..", "../elsewhere", "/tmp"])
def test_a_name_outside_the_directory_is_refused(kept, keyring, name):
    (kept / LOCAL_STORE_FILE).write_text(name)
    with pytest.raises(NotAStoreError, match="must name a subdirectory"):
        SecurityStore.open(kept, StoreConfig(), keyring=keyring, read_only=True, create=False)
