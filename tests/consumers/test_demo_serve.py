"""The demo's `secmeta serve` step: real librdkafka clients over SASL_SSL, and the log entries they made."""

from __future__ import annotations

from secmeta.consumers.demo import serve
from secmeta.core import SecurityStore, StoreConfig
from tests.extras import require_extra
from tests.logkit import make_keyring

require_extra("confluent_kafka", "kafka")


def _table_after(out: str, heading: str) -> list[list[str]]:
    """The rows of the table printed after the line containing ``heading`` (header and rule skipped)."""
    lines = out[out.index(heading):].splitlines()[1:]
    assert lines[0].startswith("OFFSET") and set(lines[1]) <= {"-", " "}
    rows = []
    for line in lines[2:]:
        if not line.strip() or line.startswith(" "):
            break
        rows.append(line.split())
    return rows


def test_demo_serve_step_logs_the_clients_principal_and_address(tmp_path, capsys):
    """AdminClient (as admin) creates a user and two ACLs, the new user logs in at once and is refused a
    write; the printed log entries are the admin's three changes, each naming User:admin and 127.0.0.1."""
    with SecurityStore.open(tmp_path / "store", StoreConfig(token_secret=b"demo-test-token-secret, 32 bytes or more"),
                            keyring=make_keyring(tmp_path)) as store:
        start = store.log.end_offset
        serve(store)
        logged = list(store.log.read(start))
    out = capsys.readouterr().out
    assert "secmeta serve on SASL_SSL://127.0.0.1:" in out
    assert "dora may: DESCRIBE" in out                      # dora's login worked, as User:dora
    assert "CLUSTER_AUTHORIZATION_FAILED" in out
    rows = _table_after(out, "the log entries they produced")
    assert [row[4] for row in rows] == ["ScramCredentialUpserted", "AclCreated", "AclCreated"]
    assert all(row[1] == "User:admin" and row[2] == "127.0.0.1" for row in rows)
    assert "User:dora" in rows[1] and "User:dora" in rows[2]
    # the table is the log: the admin's in-process credential, then exactly these three entries
    wire = [e for e in logged if e.actor_host == "127.0.0.1"]
    assert [str(e.offset) for e in wire] == [row[0] for row in rows]
    assert len(logged) == len(wire) + 1
