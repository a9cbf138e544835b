"""``tokens --describe --as-of`` reads the store's past and shows no HMAC, so it needs no token secret
(issue 21: it failed with DELEGATION_TOKEN_AUTH_DISABLED without $SECMETA_TOKEN_SECRET)."""

from __future__ import annotations

import json

from secmeta.core import SecurityStore
from secmeta.core.times import now_ms
from tests.clikit import make_store, run


def test_describe_as_of_without_the_secret_lists_the_token(tmp_path, monkeypatch, capsys):
    """A token created with the secret is listed as of now by a process that lacks the secret."""
    path = make_store(tmp_path, monkeypatch)
    assert run(capsys, "tokens", "--create", "--owner-principal", "User:alice")[0] == 0
    monkeypatch.delenv("SECMETA_TOKEN_SECRET")
    with SecurityStore.open(path, read_only=True) as store:
        at = str(max(e.timestamp_ms for e in store.history()))
    assert int(at) <= now_ms()
    code, out, err = run(capsys, "tokens", "--describe", "--as-of", at, "--json")
    assert code == 0, err
    (token,) = json.loads(out)
    assert token["owner"] == "User:alice" and not token.get("hmac")
    assert run(capsys, "tokens", "--describe")[0] != 0  # now, as Kafka: token auth disabled without the secret
