"""The demo's events lie in the past, so every point of its timeline can be queried with --as-of
(issue 21: the demo stamped events hours in the future and --as-of inside them was refused)."""

from __future__ import annotations

import json

from secmeta.consumers.demo import build_store
from secmeta.core import SecurityStore
from secmeta.core.times import now_ms
from tests.clikit import run


def test_as_of_the_demos_first_and_last_event_times_answers(tmp_path, capsys, monkeypatch):
    """history and acls --list --as-of at the demo store's first and last event times exit 0 with answers."""
    store_dir, keys = tmp_path / "demo", tmp_path / "demo.keys.json"
    config, keyring, _ = build_store(store_dir, keys, users=3, acls=20)
    with SecurityStore.open(store_dir, config, keyring=keyring, read_only=True) as store:
        times = [e.timestamp_ms for e in store.history()]
    assert max(times) < now_ms()  # every event lies in the past
    capsys.readouterr()
    where = ["--store", str(store_dir), "--key-file", str(keys)]
    monkeypatch.setenv("SECMETA_TOKEN_SECRET", "unused-token-secret, 32 bytes or more")
    for at in (str(min(times)), str(max(times))):
        code, out, err = run(capsys, "history", "--json", "--to", at, *where)
        assert code == 0, err
        assert json.loads(out)[-1]["timestamp_ms"] == int(at)
        code, out, err = run(capsys, "acls", "--list", "--as-of", at, *where)
        assert code == 0 and "future" not in err, err
