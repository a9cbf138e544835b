"""A local write names who made it: the asserted principal (--as, --from-host) beside the operating-system
user, host name and process that wrote it (issue 21: every local write looked like User:admin from 127.0.0.1)."""

from __future__ import annotations

import getpass
import json
import os
import socket

from secmeta.core import SecurityStore
from secmeta.core.types import RequestContext
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.clikit import make_store, run

ADD = ["acls", "--add", "--allow-principal", "User:mallory", "--operation", "Alter", "--cluster",
       "--as", "User:admin", "--from-host", "10.9.9.9"]
ME = {"user": getpass.getuser(), "host": socket.gethostname(), "pid": os.getpid()}


def test_a_local_write_records_the_operator_and_that_its_principal_was_asserted(tmp_path, monkeypatch, capsys):
    """history --json shows --as / --from-host as asserted, and the OS user, host name and pid that wrote it."""
    make_store(tmp_path, monkeypatch)
    assert run(capsys, *ADD)[0] == 0
    code, out, _ = run(capsys, "history", "--json")
    assert code == 0
    (entry,) = json.loads(out)
    assert (entry["actor_principal"], entry["actor_host"], entry["actor_asserted"]) == ("User:admin", "10.9.9.9", True)
    assert {k: entry["operator"][k] for k in ME} == ME
    assert entry["operator"]["program"]


def test_history_and_log_dump_tables_show_asserted_and_the_operator(tmp_path, monkeypatch, capsys):
    """The text of history and log dump says 'asserted' and names user@host pid N."""
    make_store(tmp_path, monkeypatch)
    assert run(capsys, *ADD)[0] == 0
    for command in (["history"], ["log", "dump"]):
        code, out, _ = run(capsys, *command)
        assert code == 0
        header, _, row = out.splitlines()[:3]
        assert "AUTH" in header and "OPERATOR" in header
        assert "asserted" in row.split() and f"{ME['user']}@{ME['host']}" in row.split() and str(ME["pid"]) in row


def test_the_history_index_keeps_the_operator_across_reopens(tmp_path, monkeypatch):
    """history answered from the index after a reopen shows the same operator and assertion as when written."""
    path = make_store(tmp_path, monkeypatch)
    binding = AclBinding.of(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:bob", "*", AclOperation.READ,
                            AclPermissionType.ALLOW)
    with SecurityStore.open(path) as store:
        store.create_acls([binding], context=RequestContext("User:admin", "10.0.0.2", asserted=False))
        written = [e.to_dict() for e in store.history()]
    with SecurityStore.open(path, read_only=True) as store:
        assert [e.to_dict() for e in store.history(principal="User:admin")] == written
    assert written[0]["actor_asserted"] is False and written[0]["operator"]["pid"] == os.getpid()
