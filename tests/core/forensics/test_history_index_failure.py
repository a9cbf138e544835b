"""secmeta.core.forensics.history_index: a background build that fails leaves history to a log scan, and no one waiting."""

from __future__ import annotations

import shutil
import threading

from secmeta.core.forensics.history_index import INDEX_DIR
from tests.logkit import make_keyring
from tests.storekit import ADMIN, acl, store_at


def test_wait_returns_false_at_once_after_a_failed_build_and_history_scans_the_log(tmp_path):
    """An index that cannot be built (its directory is a file) makes wait() -- even with no timeout -- answer
    False instead of blocking for ever; history is still answered, from the log."""
    keyring = make_keyring(tmp_path)
    store = store_at(tmp_path / "s", keyring)
    store.create_acls([acl("t0", "User:p0")], context=ADMIN)
    store.close()
    shutil.rmtree(tmp_path / "s" / INDEX_DIR)
    (tmp_path / "s" / INDEX_DIR).write_text("not a directory")
    store = store_at(tmp_path / "s", keyring)
    try:
        answers = []
        waiting = threading.Thread(target=lambda: answers.append(store.timetravel.index.wait()), daemon=True)
        waiting.start()
        waiting.join(timeout=60)
        assert not waiting.is_alive() and answers == [False]
        store.create_acls([acl("t1", "User:p1")], context=ADMIN)
        assert [e.offset for e in store.history(principal="User:p1")] == [1]
    finally:
        store.close()
