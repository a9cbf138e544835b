"""The acls and authorize commands, run as a user would (configs and tokens: test_cli_configs.py, test_cli_tokens.py;
kafka-acls.sh fidelity: test_cli_acls.py, test_cli_acls_kafka.py)."""

from __future__ import annotations

import pytest

from secmeta.core.cli import main
from tests.clikit import cli_env, run


@pytest.fixture
def store(tmp_path, monkeypatch):
    _, path = cli_env(tmp_path, monkeypatch)
    assert main(["init"]) == 0  # only `secmeta init` creates a store
    return path


def test_acls_add_list_remove(store, capsys):
    """kafka-acls style add, list and remove round trip."""
    code, out, _ = run(capsys, "acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
                       "--operation", "Describe", "--topic", "orders", "--group", "etl")
    assert code == 0 and out.count("Adding ACLs for resource") == 2 and out.count("Current ACLs for resource") == 2
    assert out.count("principal=User:alice") == 8  # added, then listed as AclCommand.addAcls does
    code, out, _ = run(capsys, "acls", "--list", "--topic", "orders")
    assert code == 0 and "User:alice" in out and "READ" in out and "DESCRIBE" in out and "etl" not in out
    code, out, _ = run(capsys, "acls", "--remove", "--force", "--topic", "orders", "--allow-principal", "User:alice",
                       "--operation", "Read")
    assert code == 0 and out.count("Removed ") == 1
    _, out, _ = run(capsys, "acls", "--list")
    assert "READ" in out and out.count("User:alice") == 3


def test_acls_add_prefixed_with_cidr_host(store, capsys):
    """--resource-pattern-type prefixed and a CIDR --allow-host are stored as given."""
    run(capsys, "acls", "--add", "--allow-principal", "User:bob", "--allow-host", "10.0.0.0/8",
        "--topic", "pay-", "--resource-pattern-type", "prefixed", "--operation", "Write")
    _, out, _ = run(capsys, "acls", "--list", "--topic", "pay-eu", "--resource-pattern-type", "match")
    assert "PREFIXED" in out and "10.0.0.0/8" in out


def test_acting_principal_without_permission_is_refused(store, capsys):
    """--as a principal lacking ALTER on CLUSTER gets CLUSTER_AUTHORIZATION_FAILED."""
    code, _, err = run(capsys, "acls", "--add", "--as", "User:eve", "--allow-principal", "User:eve", "--topic", "t")
    assert code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in err  # refused, not a usage error


def test_authorize_prints_decision_and_deciding_acls(store, capsys):
    """authorize explains the decision with the ACL that made it; exit code 0/1 for allow/deny."""
    run(capsys, "acls", "--add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", "t")
    run(capsys, "acls", "--add", "--allow-principal", "User:alice", "--operation", "All", "--topic", "t")
    code, out, _ = run(capsys, "authorize", "--host", "10.1.1.1", "--principal", "User:alice", "--operation", "Write", "--topic", "t")
    assert code == 1 and out.startswith("DENIED") and "DENY" in out and "denied by ACL" in out
    code, out, _ = run(capsys, "authorize", "--host", "10.1.1.1", "--principal", "User:alice", "--operation", "Read", "--topic", "t")
    assert code == 0 and out.startswith("ALLOWED") and "ALL" in out


def test_authorize_needs_exactly_one_resource(store, capsys):
    """authorize without a resource is a clear error."""
    code, _, err = run(capsys, "authorize", "--host", "10.1.1.1", "--principal", "User:a", "--operation", "Read")
    assert code == 2 and "exactly one resource" in err


def test_demo_refuses_a_store_it_did_not_create(store, capsys, tmp_path):
    """The demo never deletes a real store."""
    run(capsys, "acls", "--add", "--allow-principal", "User:a", "--topic", "t")
    code, _, err = run(capsys, "demo", "--dir", str(store))
    assert code == 1 and "not created by the demo" in err  # a directory it cannot use: 1
    assert (store / "secmeta.json").exists()
