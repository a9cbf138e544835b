"""Each kafka-acls.sh option combination we take leaves the ACL set Kafka's AclCommand would leave.

The expected sets are derived by hand from Kafka's tools/src/main/java/org/apache/kafka/tools/AclCommand.java
(formerly core/src/main/scala/kafka/admin/AclCommand.scala) and written out literally:

- getResourceFilter: one pattern per --topic / --group / --transactional-id / --delegation-token /
  --user-principal value (all of them when repeated), with --resource-pattern-type (default LITERAL);
  the cluster (kafka-cluster, LITERAL) with --cluster or --idempotent; names trimmed except
  --transactional-id's.
- getAcl / getAcls / getHosts: every --allow-principal x --operation x --allow-host as ALLOW, the same for
  deny; --operation defaults to All, a host to '*' when a principal of that side is given.
- getProducerResourceFilterToAcls: WRITE, DESCRIBE, CREATE on each topic; WRITE, DESCRIBE on each
  transactional id; IDEMPOTENT_WRITE on the cluster with --idempotent.
- getConsumerResourceFilterToAcls: READ, DESCRIBE on each topic, READ on each group; with --producer too,
  the union per resource.
- removeAcls: per resource filter, one AclBindingFilter per entry (AccessControlEntry.toFilter: that exact
  principal, host, operation and permission), or every ACL of the filter when no principal is given.
"""

from __future__ import annotations

import pytest

from tests.core.cli.aclcli import AclCli


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    return AclCli(tmp_path, monkeypatch, capsys)


ADD_CASES = {
    "defaults: operation All, host *": (
        ["--topic", "t", "--allow-principal", "User:a"],
        {("TOPIC", "t", "LITERAL", "User:a", "*", "ALL", "ALLOW")},
    ),
    "repeated principals, operations and hosts: the cross product": (
        ["--topic", "t", "--allow-principal", "User:a", "--allow-principal", "User:b", "--operation", "Read",
         "--operation", "Write", "--allow-host", "10.0.0.1", "--allow-host", "10.0.0.2"],
        {("TOPIC", "t", "LITERAL", p, h, op, "ALLOW")
         for p in ("User:a", "User:b") for op in ("READ", "WRITE") for h in ("10.0.0.1", "10.0.0.2")},
    ),
    "repeated resources of two types": (
        ["--topic", "a", "--topic", "b", "--group", "g", "--allow-principal", "User:a", "--operation", "Describe"],
        {("TOPIC", "a", "LITERAL", "User:a", "*", "DESCRIBE", "ALLOW"),
         ("TOPIC", "b", "LITERAL", "User:a", "*", "DESCRIBE", "ALLOW"),
         ("GROUP", "g", "LITERAL", "User:a", "*", "DESCRIBE", "ALLOW")},
    ),
    "deny with a host": (
        ["--topic", "t", "--deny-principal", "User:a", "--deny-host", "10.0.0.9", "--operation", "Write"],
        {("TOPIC", "t", "LITERAL", "User:a", "10.0.0.9", "WRITE", "DENY")},
    ),
    "allow and deny in one command": (
        ["--topic", "t", "--allow-principal", "User:a", "--deny-principal", "User:b", "--operation", "Read"],
        {("TOPIC", "t", "LITERAL", "User:a", "*", "READ", "ALLOW"),
         ("TOPIC", "t", "LITERAL", "User:b", "*", "READ", "DENY")},
    ),
    "cluster": (
        ["--cluster", "--allow-principal", "User:a", "--operation", "ClusterAction"],
        {("CLUSTER", "kafka-cluster", "LITERAL", "User:a", "*", "CLUSTER_ACTION", "ALLOW")},
    ),
    "prefixed": (
        ["--topic", "pay-", "--resource-pattern-type", "prefixed", "--allow-principal", "User:a", "--operation", "Read"],
        {("TOPIC", "pay-", "PREFIXED", "User:a", "*", "READ", "ALLOW")},
    ),
    "delegation token and user principal resources: All is valid on every type": (
        ["--delegation-token", "tok", "--user-principal", "User:u", "--allow-principal", "User:a"],
        {("DELEGATION_TOKEN", "tok", "LITERAL", "User:a", "*", "ALL", "ALLOW"),
         ("USER", "User:u", "LITERAL", "User:a", "*", "ALL", "ALLOW")},
    ),
    "delegation token": (
        ["--delegation-token", "tok", "--allow-principal", "User:a", "--operation", "Describe"],
        {("DELEGATION_TOKEN", "tok", "LITERAL", "User:a", "*", "DESCRIBE", "ALLOW")},
    ),
    "user principal with token operations": (
        ["--user-principal", "User:u", "--allow-principal", "User:a", "--operation", "CreateTokens",
         "--operation", "describetokens"],
        {("USER", "User:u", "LITERAL", "User:a", "*", "CREATE_TOKENS", "ALLOW"),
         ("USER", "User:u", "LITERAL", "User:a", "*", "DESCRIBE_TOKENS", "ALLOW")},
    ),
    "names trimmed, but not a transactional id": (
        ["--topic", " t ", "--transactional-id", " x ", "--allow-principal", " User:a ", "--allow-host", " 10.0.0.1 ",
         "--operation", " Write "],
        {("TOPIC", "t", "LITERAL", "User:a", "10.0.0.1", "WRITE", "ALLOW"),
         ("TRANSACTIONAL_ID", " x ", "LITERAL", "User:a", "10.0.0.1", "WRITE", "ALLOW")},
    ),
    "producer": (
        ["--producer", "--topic", "t", "--allow-principal", "User:p"],
        {("TOPIC", "t", "LITERAL", "User:p", "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE")},
    ),
    "producer with transactional id and idempotent, from a host": (
        ["--producer", "--topic", "t", "--transactional-id", "tx", "--idempotent", "--allow-principal", "User:p",
         "--allow-host", "10.0.0.1"],
        {("TOPIC", "t", "LITERAL", "User:p", "10.0.0.1", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE")}
        | {("TRANSACTIONAL_ID", "tx", "LITERAL", "User:p", "10.0.0.1", op, "ALLOW") for op in ("WRITE", "DESCRIBE")}
        | {("CLUSTER", "kafka-cluster", "LITERAL", "User:p", "10.0.0.1", "IDEMPOTENT_WRITE", "ALLOW")},
    ),
    "prefixed producer: the cluster's IdempotentWrite stays literal": (
        ["--producer", "--topic", "pay-", "--resource-pattern-type", "prefixed", "--idempotent",
         "--allow-principal", "User:p"],
        {("TOPIC", "pay-", "PREFIXED", "User:p", "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE")}
        | {("CLUSTER", "kafka-cluster", "LITERAL", "User:p", "*", "IDEMPOTENT_WRITE", "ALLOW")},
    ),
    "consumer": (
        ["--consumer", "--topic", "t", "--group", "g", "--allow-principal", "User:c"],
        {("TOPIC", "t", "LITERAL", "User:c", "*", "READ", "ALLOW"),
         ("TOPIC", "t", "LITERAL", "User:c", "*", "DESCRIBE", "ALLOW"),
         ("GROUP", "g", "LITERAL", "User:c", "*", "READ", "ALLOW")},
    ),
    "consumer with two principals and two groups": (
        ["--consumer", "--topic", "t", "--group", "g1", "--group", "g2", "--allow-principal", "User:c",
         "--allow-principal", "User:d"],
        {("TOPIC", "t", "LITERAL", p, "*", op, "ALLOW") for p in ("User:c", "User:d") for op in ("READ", "DESCRIBE")}
        | {("GROUP", g, "LITERAL", p, "*", "READ", "ALLOW") for p in ("User:c", "User:d") for g in ("g1", "g2")},
    ),
    "producer and consumer: the union on the topic": (
        ["--producer", "--consumer", "--topic", "t", "--group", "g", "--transactional-id", "tx",
         "--allow-principal", "User:pc"],
        {("TOPIC", "t", "LITERAL", "User:pc", "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE", "READ")}
        | {("TRANSACTIONAL_ID", "tx", "LITERAL", "User:pc", "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE")}
        | {("GROUP", "g", "LITERAL", "User:pc", "*", "READ", "ALLOW")},
    ),
}


@pytest.mark.parametrize("argv, expected", ADD_CASES.values(), ids=ADD_CASES.keys())
def test_add_leaves_what_acl_command_adds(cli, argv, expected):
    code, _, err = cli.run("acls", "--add", *argv)
    assert (code, err) == (0, "")
    assert cli.acls() == expected


SEED = {
    ("TOPIC", "payments", "LITERAL", "User:bob", "10.0.0.1", "READ", "ALLOW"),
    ("TOPIC", "payments", "LITERAL", "User:bob", "10.0.0.2", "READ", "ALLOW"),
    ("TOPIC", "payments", "LITERAL", "User:bob", "10.0.0.1", "DESCRIBE", "ALLOW"),
    ("TOPIC", "payments", "LITERAL", "User:bob", "*", "ALL", "ALLOW"),
    ("TOPIC", "payments", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
    ("TOPIC", "payments", "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"),
    ("TOPIC", "payments", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
    ("TOPIC", "payments", "LITERAL", "User:bob", "*", "WRITE", "DENY"),
    ("TOPIC", "pay", "PREFIXED", "User:alice", "*", "READ", "ALLOW"),
    ("GROUP", "g", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
}

REMOVE_CASES = {
    "a principal alone: only its All-from-* entry": (
        ["--topic", "payments", "--allow-principal", "User:bob"],
        {("TOPIC", "payments", "LITERAL", "User:bob", "*", "ALL", "ALLOW")},
    ),
    "principal, operation and host: that one entry": (
        ["--topic", "payments", "--allow-principal", "User:bob", "--operation", "Read", "--allow-host", "10.0.0.1"],
        {("TOPIC", "payments", "LITERAL", "User:bob", "10.0.0.1", "READ", "ALLOW")},
    ),
    "repeated hosts and operations": (
        ["--topic", "payments", "--allow-principal", "User:bob", "--operation", "Read", "--operation", "Describe",
         "--allow-host", "10.0.0.1", "--allow-host", "10.0.0.2"],
        {("TOPIC", "payments", "LITERAL", "User:bob", "10.0.0.1", "READ", "ALLOW"),
         ("TOPIC", "payments", "LITERAL", "User:bob", "10.0.0.2", "READ", "ALLOW"),
         ("TOPIC", "payments", "LITERAL", "User:bob", "10.0.0.1", "DESCRIBE", "ALLOW")},
    ),
    "deny side": (
        ["--topic", "payments", "--deny-principal", "User:bob", "--operation", "Write"],
        {("TOPIC", "payments", "LITERAL", "User:bob", "*", "WRITE", "DENY")},
    ),
    "no principal: every ACL of the resource": (
        ["--topic", "payments"],
        {a for a in SEED if a[:3] == ("TOPIC", "payments", "LITERAL")},
    ),
    "two resources": (
        ["--topic", "payments", "--group", "g", "--allow-principal", "User:bob", "--operation", "Read"],
        {("TOPIC", "payments", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
         ("GROUP", "g", "LITERAL", "User:bob", "*", "READ", "ALLOW")},
    ),
    "consumer": (
        ["--consumer", "--topic", "payments", "--group", "g", "--allow-principal", "User:bob"],
        {("TOPIC", "payments", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
         ("TOPIC", "payments", "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"),
         ("GROUP", "g", "LITERAL", "User:bob", "*", "READ", "ALLOW")},
    ),
    "match: the literal and the prefixed ACL that apply to the name": (
        ["--topic", "payments", "--resource-pattern-type", "match", "--allow-principal", "User:alice",
         "--operation", "Read"],
        {("TOPIC", "payments", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
         ("TOPIC", "pay", "PREFIXED", "User:alice", "*", "READ", "ALLOW")},
    ),
    "any: every pattern type, the name exactly": (
        ["--topic", "pay", "--resource-pattern-type", "any"],
        {("TOPIC", "pay", "PREFIXED", "User:alice", "*", "READ", "ALLOW")},
    ),
    "literal (the default) leaves the prefixed ACL of the same name": (
        ["--topic", "pay"],
        set(),
    ),
}


@pytest.mark.parametrize("argv, removed", REMOVE_CASES.values(), ids=REMOVE_CASES.keys())
def test_remove_leaves_what_acl_command_leaves(cli, argv, removed):
    cli.seed(SEED)
    code, _, err = cli.run("acls", "--remove", "--force", *argv)
    assert (code, err) == (0, "")
    assert cli.acls() == SEED - removed
