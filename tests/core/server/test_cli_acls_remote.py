"""``secmeta acls --bootstrap-server``: kafka-acls.sh's behaviour over the wire is the local store's.

The commands of issue 13's ACL items run against a store directory and against a running server
seeded with the same ACLs; output and exit code match, and the server's log moves only when the
command changes something (AclCommand: addAcls describes first, removeAcls deletes the given entries).
"""

from __future__ import annotations

import pytest

from tests.clientkit import client_properties, write_command_config
from tests.core.cli.aclcli import AclCli
from tests.serverkit import ADMIN_PASSWORD

SEED = ["acls", "--add", "--topic", "payments", "--allow-principal", "User:bob", "--operation", "Read",
        "--operation", "Describe", "--allow-host", "10.0.0.1", "--allow-host", "10.0.0.2"]

# (argv, exit code, what stdout shows, events written)
COMMANDS = [
    (SEED, 0, "already exists.", 0),
    (["acls", "--add", "--topic", "payments", "--allow-principal", "User:bob"], 0, "Adding ACLs for resource", 1),
    (["acls", "--remove", "--principal", "User:bob", "--force"], 2, "", 0),
    (["acls", "--remove", "--force", "--topic", "payments", "--allow-principal", "User:bob"], 0, "Removed", 1),
    (["acls", "--remove", "--force", "--topic", "payments", "--allow-principal", "User:bob"], 0, "No ACLs matched", 0),
    (["acls", "--add", "--producer", "--idempotent", "--topic", "t", "--allow-principal", "User:p"], 0,
     "operation=IDEMPOTENT_WRITE", 4),
    (["acls", "--add", "--cluster", "--operation", "Read", "--allow-principal", "User:p"], 2, "", 0),
    (["acls", "--list", "--json", "--principal", "User:p"], 0, '"operation": "CREATE"', 0),
]


@pytest.fixture
def both(tmp_path, monkeypatch, capsys, serve):
    """The local store (AclCli) and the args that send the same command to a server, both seeded with SEED."""
    local = AclCli(tmp_path, monkeypatch, capsys)
    server = serve("SASL_SSL://127.0.0.1:0", users={"admin": ADMIN_PASSWORD})
    config = write_command_config(tmp_path, client_properties(server, "SASL_SSL", "admin"))
    remote = ["--bootstrap-server", server.bootstrap("SASL_SSL"), "--command-config", str(config)]
    assert local.run(*SEED)[0] == 0 and local.run(*SEED, *remote)[0] == 0
    return local, server, remote


def test_each_acl_command_over_the_wire_prints_and_writes_as_on_a_store(both):
    local, server, remote = both
    for argv, code, shown, writes in COMMANDS:
        local_end, server_end = local.end_offset(), server.log_end()
        here = local.run(*argv)
        there = local.run(*argv, *remote)
        assert there == here, argv
        assert here[0] == code and shown in here[1], argv
        assert (local.end_offset() - local_end, server.log_end() - server_end) == (writes, writes), argv
