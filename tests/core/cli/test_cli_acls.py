"""``secmeta acls`` as an admin with kafka-acls.sh in muscle memory sees it (issue 13's ACL items).

Each test asserts what the user sees: stdout, stderr, the exit code (0 done, 1 refused or failed,
2 usage), and the store's log end offset before and after (a refused command writes nothing).  Kafka's
behaviour is from tools/src/main/java/org/apache/kafka/tools/AclCommand.java (checkArgs, confirmAction,
addAcls, validateOperation) and clients/.../common/utils/SecurityUtils.java (operation names).
"""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.core.cli.security import operation
from secmeta.core.errors import InvalidValueError
from tests.core.cli.aclcli import AclCli

REPO = Path(__file__).resolve().parents[3]

BOB = {
    ("TOPIC", "payments", "LITERAL", "User:bob", "10.0.0.1", "READ", "ALLOW"),
    ("TOPIC", "payments", "LITERAL", "User:bob", "10.0.0.2", "READ", "ALLOW"),
    ("TOPIC", "payments", "LITERAL", "User:bob", "10.0.0.1", "DESCRIBE", "ALLOW"),
    ("TOPIC", "payments", "LITERAL", "User:bob", "10.0.0.2", "DESCRIBE", "ALLOW"),
    ("GROUP", "etl", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
}
PAYMENTS = "ResourcePattern(resourceType=TOPIC, name=payments, patternType=LITERAL)"
# What AclCommand's addAcls and removeAcls end with (listAcls of the resources named): BOB's ACLs on payments.
BOB_PAYMENTS = (f"Current ACLs for resource `{PAYMENTS}`: \n"
                " \t(principal=User:bob, host=10.0.0.1, operation=READ, permissionType=ALLOW)\n"
                "\t(principal=User:bob, host=10.0.0.1, operation=DESCRIBE, permissionType=ALLOW)\n"
                "\t(principal=User:bob, host=10.0.0.2, operation=READ, permissionType=ALLOW)\n"
                "\t(principal=User:bob, host=10.0.0.2, operation=DESCRIBE, permissionType=ALLOW) \n\n")


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    return AclCli(tmp_path, monkeypatch, capsys)


def test_remove_with_principal_is_refused_and_writes_nothing(cli):
    """--principal is for --list only (AclCommandOptions.checkArgs); --remove --principal User:bob deletes nothing."""
    cli.seed(BOB)
    end = cli.end_offset()
    for extra in ([], ["--force"], ["--topic", "payments", "--force"]):
        code, out, err = cli.run("acls", "--remove", "--principal", "User:bob", *extra)
        assert (code, out) == (2, "")
        assert err.startswith("secmeta: error: The --principal option is only available if --list is set")
    assert cli.end_offset() == end and cli.acls() == BOB


@pytest.mark.parametrize("answer, removed, code", [("y\n", True, 0), ("n\n", False, 0), ("", False, 1)])
def test_remove_reads_its_answer_from_standard_input_that_is_no_terminal(cli, monkeypatch, answer, removed, code):
    """Issue 23: `echo y | secmeta acls --remove ...` gave "no terminal to answer on".  AclCommand.confirmAction
    (AclCommand.scala: ``println(msg); StdIn.readLine().equalsIgnoreCase("y")``) reads standard input whatever
    it is: a piped 'y' removes, 'n' keeps (exit 0), the end of input is no answer (nothing removed, exit 1)."""
    cli.seed(BOB)
    end = cli.end_offset()
    monkeypatch.setattr("sys.stdin", io.StringIO(answer))
    code_, out, err = cli.run("acls", "--remove", "--topic", "payments", "--allow-principal", "User:bob",
                              "--operation", "Read", "--allow-host", "10.0.0.1")
    assert out.startswith("Are you sure you want to remove ACLs: \n"
                          " \t(principal=User:bob, host=10.0.0.1, operation=READ, permissionType=ALLOW) \n"
                          f" from resource filter `{PAYMENTS}`? (y/n)\n")
    gone = ("TOPIC", "payments", "LITERAL", "User:bob", "10.0.0.1", "READ", "ALLOW")
    assert code_ == code and ("end of input" in err) == (answer == "")
    assert cli.acls() == (BOB - {gone} if removed else BOB) and cli.end_offset() == end + removed


def _remove_on_a_terminal(cli: AclCli, answer: bytes, *argv: str) -> tuple[int, str]:
    """Run ``secmeta acls --remove`` in a child whose stdin is a terminal, type ``answer``; its code and stdout."""
    controller, terminal = pty.openpty()
    env = {**os.environ, "SECMETA_STORE": str(cli.path), "SECMETA_KEY_FILE": str(cli.keys)}
    with subprocess.Popen([sys.executable, "-m", "secmeta.core.cli", "acls", "--remove", *argv], stdin=terminal,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env) as child:
        os.close(terminal)
        os.write(controller, answer)
        out, err = child.communicate(timeout=60)
    os.close(controller)
    assert err == b""
    return child.returncode, out.decode()


@pytest.mark.parametrize("answer, removed", [(b"y\n", True), (b"Y\n", True), (b"n\n", False), (b"yes\n", False)])
def test_remove_asks_on_a_terminal_and_only_y_removes(cli, answer, removed):
    """confirmAction: the answer 'y' in any case removes; any other answer keeps the ACLs and exits 0."""
    cli.seed(BOB)
    end = cli.end_offset()
    code, out = _remove_on_a_terminal(cli, answer, "--topic", "payments", "--allow-principal", "User:bob",
                                      "--operation", "Describe", "--allow-host", "10.0.0.2")
    gone = ("TOPIC", "payments", "LITERAL", "User:bob", "10.0.0.2", "DESCRIBE", "ALLOW")
    assert code == 0 and out.startswith("Are you sure you want to remove ACLs: \n")
    assert cli.acls() == (BOB - {gone} if removed else BOB)
    assert cli.end_offset() == end + removed
    if removed:
        assert ("\nRemoved (pattern=" + PAYMENTS + ", entry=(principal=User:bob, host=10.0.0.2, "
                "operation=DESCRIBE, permissionType=ALLOW))\n" + f"Current ACLs for resource `{PAYMENTS}`: \n") in out


def test_remove_without_a_principal_asks_to_delete_all_of_the_resource(cli):
    """No principal: AclCommand asks to delete all ACLs of the resource filter; 'y' deletes them."""
    cli.seed(BOB)
    code, out = _remove_on_a_terminal(cli, b"y\n", "--topic", "payments")
    assert code == 0
    assert out.startswith(f"Are you sure you want to delete all ACLs for resource filter `{PAYMENTS}`? (y/n)\n")
    assert cli.acls() == {("GROUP", "etl", "LITERAL", "User:bob", "*", "READ", "ALLOW")}


def test_remove_of_a_principal_removes_only_the_matching_entry(cli):
    """--allow-principal User:bob on --remove is (User:bob, *, All, Allow): bob's per-host Read/Describe stay."""
    everything = BOB | {("TOPIC", "payments", "LITERAL", "User:bob", "*", "ALL", "ALLOW")}
    cli.seed(everything)
    end = cli.end_offset()
    code, out, err = cli.run("acls", "--remove", "--force", "--topic", "payments", "--allow-principal", "User:bob")
    assert (code, err) == (0, "")
    assert out == (f"Removed (pattern={PAYMENTS}, entry=(principal=User:bob, host=*, operation=ALL, "
                   "permissionType=ALLOW))\n" + BOB_PAYMENTS)
    assert cli.acls() == BOB and cli.end_offset() == end + 1


def test_remove_that_matches_nothing_says_so_and_writes_nothing(cli):
    cli.seed(BOB)
    end = cli.end_offset()
    code, out, _ = cli.run("acls", "--remove", "--force", "--topic", "payments", "--allow-principal", "User:bob")
    assert code == 0 and out == f"No ACLs matched resource filter `{PAYMENTS}`\n" + BOB_PAYMENTS
    assert cli.end_offset() == end


KAFKA_NAMES = {"Read": "READ", "Write": "WRITE", "Create": "CREATE", "Delete": "DELETE", "Alter": "ALTER",
               "Describe": "DESCRIBE", "ClusterAction": "CLUSTER_ACTION", "DescribeConfigs": "DESCRIBE_CONFIGS",
               "AlterConfigs": "ALTER_CONFIGS", "IdempotentWrite": "IDEMPOTENT_WRITE", "CreateTokens": "CREATE_TOKENS",
               "DescribeTokens": "DESCRIBE_TOKENS", "All": "ALL"}
RESOURCE_FOR = {"READ": ["--topic", "t"], "WRITE": ["--topic", "t"], "DELETE": ["--topic", "t"],
                "CLUSTER_ACTION": ["--cluster"], "IDEMPOTENT_WRITE": ["--cluster"],
                "CREATE_TOKENS": ["--user-principal", "User:u"], "DESCRIBE_TOKENS": ["--user-principal", "User:u"]}


@pytest.mark.parametrize("spelling, op", [(f(name), op) for name, op in KAFKA_NAMES.items()
                                          for f in (str, str.lower, str.upper)]
                         + [("IDEMPOTENT_WRITE", "IDEMPOTENT_WRITE"), ("idempotent-write", "IDEMPOTENT_WRITE"),
                            ("cluster_action", "CLUSTER_ACTION"), ("Describe-Configs", "DESCRIBE_CONFIGS")])
def test_operation_names_as_kafka_acls_takes_them(cli, spelling, op):
    """Kafka's names (SecurityUtils.operationName: IdempotentWrite), any case, and the enum's spelling add that ACL."""
    resource = RESOURCE_FOR.get(op, ["--cluster"] if op in ("CREATE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS",
                                                             "ALTER_CONFIGS", "ALL") else ["--topic", "t"])
    code, _, err = cli.run("acls", "--add", "--allow-principal", "User:a", "--operation", spelling, *resource)
    assert (code, err) == (0, "")
    assert {a[5] for a in cli.acls()} == {op}


def test_authorize_takes_the_same_operation_names(cli):
    """authorize parses --operation as acls does: IdempotentWrite, any case."""
    cli.run("acls", "--add", "--allow-principal", "User:p", "--operation", "IdempotentWrite", "--cluster")
    for spelling in ("IdempotentWrite", "idempotentwrite", "IDEMPOTENT_WRITE"):
        code, out, _ = cli.run("authorize", "--principal", "User:p", "--host", "10.0.0.1", "--operation", spelling,
                               "--cluster")
        assert code == 0 and out.startswith("ALLOWED: User:p from 10.0.0.1 to IDEMPOTENT_WRITE CLUSTER:kafka-cluster")
    code, out, err = cli.run("authorize", "--principal", "User:p", "--host", "10.0.0.1", "--operation", "Any",
                             "--cluster")
    assert (code, out) == (2, "") and "unknown operation 'Any'" in err


@pytest.mark.parametrize("name", ["Fly", "Any", "Unknown", ""])
def test_an_unknown_operation_is_refused_naming_the_valid_ones(cli, name):
    end = cli.end_offset()
    code, out, err = cli.run("acls", "--add", "--allow-principal", "User:a", "--operation", name, "--topic", "t")
    assert (code, out) == (2, "")
    assert err == (f"secmeta: error: unknown operation {name!r} (valid operation names: All, Read, Write, Create, "
                   "Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, "
                   "CreateTokens, DescribeTokens)\n")
    assert cli.end_offset() == end


@pytest.mark.parametrize("resource, op, message", [
    (["--cluster"], "Read", "ResourceType CLUSTER only supports operations [CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, "
                            "ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE, ALL], not READ"),
    (["--group", "g"], "Write", "ResourceType GROUP only supports operations [READ, DESCRIBE, DELETE, "
                                "DESCRIBE_CONFIGS, ALTER_CONFIGS, ALL], not WRITE"),
    (["--delegation-token", "d"], "Write", "ResourceType DELEGATION_TOKEN only supports operations [DESCRIBE, ALL], "
                                           "not WRITE"),
    (["--user-principal", "User:u"], "Describe", "ResourceType USER only supports operations [CREATE_TOKENS, "
                                                 "DESCRIBE_TOKENS, ALL], not DESCRIBE"),
    (["--transactional-id", "x"], "Read", "ResourceType TRANSACTIONAL_ID only supports operations [DESCRIBE, WRITE, "
                                          "ALL], not READ"),
    (["--topic", "t"], "IdempotentWrite", "ResourceType TOPIC only supports operations [READ, WRITE, CREATE, DESCRIBE, "
                                          "DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS, ALL], not IDEMPOTENT_WRITE"),
])
@pytest.mark.parametrize("action", ["--add", "--remove"])
def test_an_operation_the_resource_type_lacks_is_refused(cli, action, resource, op, message):
    """AclCommand.validateOperation (AclEntry.supportedOperations plus All), on --add and --remove alike."""
    cli.seed(BOB)
    end = cli.end_offset()
    code, out, err = cli.run("acls", action, "--force", "--allow-principal", "User:bob", "--operation", op,
                             "--topic", "payments", *resource)
    assert (code, out, err) == (2, "", f"secmeta: error: {message}\n")
    assert cli.end_offset() == end and cli.acls() == BOB


def test_adding_an_existing_acl_says_it_already_exists(cli):
    """addAcls describes the resource first: an existing binding is 'already exists', only the new one is added."""
    cli.run("acls", "--add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t")
    end = cli.end_offset()
    code, out, err = cli.run("acls", "--add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t")
    read = ("(pattern=ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL), entry=(principal=User:a, "
            "host=*, operation=READ, permissionType=ALLOW))")
    block = ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n"
             " \t(principal=User:a, host=*, operation=READ, permissionType=ALLOW)")
    assert (code, out, err) == (0, f"Acl {read} already exists.\n{block} \n\n", "")
    assert cli.end_offset() == end
    code, out, _ = cli.run("acls", "--add", "--allow-principal", "User:a", "--operation", "Read", "--operation",
                           "Write", "--topic", "t")
    assert code == 0 and out == (
        f"Acl {read} already exists.\n"
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n"
        " \t(principal=User:a, host=*, operation=WRITE, permissionType=ALLOW) \n\n"
        f"{block}\n\t(principal=User:a, host=*, operation=WRITE, permissionType=ALLOW) \n\n")
    assert cli.end_offset() == end + 1


def test_repeated_options_use_every_value(cli):
    """--principal, --topic, --operation and hosts given twice use both values, as AclCommand's valuesOf."""
    code, out, _ = cli.run("acls", "--add", "--topic", "a", "--topic", "b", "--allow-principal", "User:x",
                           "--allow-principal", "User:y", "--operation", "Read", "--operation", "Write",
                           "--allow-host", "10.0.0.1", "--allow-host", "10.0.0.2")
    assert code == 0 and out.count("Adding ACLs for resource") == 2 and len(cli.acls()) == 16
    cli.run("acls", "--add", "--topic", "a", "--allow-principal", "User:z", "--operation", "Read")
    code, out, _ = cli.run("acls", "--list", "--json", "--topic", "a", "--topic", "b", "--principal", "User:x",
                           "--principal", "User:z")
    rows = json.loads(out)
    assert code == 0 and {(r["name"], r["principal"]) for r in rows} == {("a", "User:x"), ("b", "User:x"), ("a", "User:z")}
    assert len(rows) == 9


def test_list_principal_selects_that_principal_only(cli):
    """--list --principal User:bob: bob's ACLs, not bobby's nor Group:bob's; the value is trimmed as AclCommand's
    getPrincipals does (SecurityUtils.parseKafkaPrincipal(s.trim)), and given twice lists once."""
    cli.seed({("TOPIC", "t", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
              ("TOPIC", "t", "LITERAL", "User:bobby", "*", "READ", "ALLOW"),
              ("GROUP", "g", "LITERAL", "Group:bob", "*", "READ", "ALLOW")})
    code, out, _ = cli.run("acls", "--list", "--json", "--principal", " User:bob ", "--principal", "User:bob")
    assert code == 0 and [(r["name"], r["principal"]) for r in json.loads(out)] == [("t", "User:bob")]


KAFKA_SEED = {("TOPIC", "t", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
              ("TOPIC", "t", "LITERAL", "User:bob", "10.0.0.1", "WRITE", "DENY"),
              ("GROUP", "g", "PREFIXED", "User:alice", "*", "READ", "ALLOW")}
# AclCommand.scala, printResourceAcls: println(s"Current ACLs for resource `$resource`: $Newline
# ${acls.map("\t" + _).mkString(Newline)} $Newline"), with ResourcePattern.toString and AccessControlEntry.toString.
T_BLOCK = ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n"
           " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
           "\t(principal=User:bob, host=10.0.0.1, operation=WRITE, permissionType=DENY) \n\n")
G_BLOCK = ("Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g, patternType=PREFIXED)`: \n"
           " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n\n")


def test_list_prints_kafka_acls_blocks_by_default(cli):
    """Issue 23: `acls --list` printed a column table where kafka-acls.sh prints one "Current ACLs for resource"
    block per resource pattern (AclCommand.scala listAcls / printResourceAcls); scripts written for Kafka's
    output read ours."""
    cli.seed(KAFKA_SEED)
    assert cli.run("acls", "--list") == (0, T_BLOCK + G_BLOCK, "")
    assert cli.run("acls", "--list", "--topic", "t") == (0, T_BLOCK, "")


def test_list_principal_prints_acls_for_principal_headers(cli):
    """AclCommand.scala listAcls with --principal: per principal, println(s"ACLs for principal `$principal`"),
    then the blocks of the resources holding its ACLs (and nothing for a principal without any)."""
    cli.seed(KAFKA_SEED)
    code, out, err = cli.run("acls", "--list", "--principal", "User:alice", "--principal", "User:carol")
    assert (code, err) == (0, "")
    assert out == ("ACLs for principal `User:alice`\n"
                   "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n"
                   " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n\n" + G_BLOCK
                   + "ACLs for principal `User:carol`\n")


@pytest.mark.parametrize("value", ["bob", "User:", ":bob", ""])
def test_list_principal_that_is_no_principal_is_refused(cli, value):
    """--principal bob listed nothing before; AclCommand refuses it (parseKafkaPrincipal: "expected a string in
    format principalType:principalName"): exit 2 naming the option and the value, nothing on stdout."""
    cli.seed({("TOPIC", "t", "LITERAL", "User:bob", "*", "READ", "ALLOW")})
    code, out, err = cli.run("acls", "--list", "--principal", value)
    assert (code, out) == (2, "")
    assert err == f"secmeta: error: --principal {value!r} is not of the form Type:Name\n"


def test_list_json_is_every_acl_as_an_object(cli):
    """--list --json: one object per ACL, enum values by name; --output table is a table."""
    cli.seed({("TOPIC", "t", "LITERAL", "User:a", "*", "READ", "ALLOW"),
              ("CLUSTER", "kafka-cluster", "LITERAL", "User:b", "10.0.0.1", "IDEMPOTENT_WRITE", "DENY")})
    code, out, _ = cli.run("acls", "--list", "--json")
    assert code == 0 and json.loads(out) == [
        {"resource_type": "TOPIC", "name": "t", "pattern_type": "LITERAL", "principal": "User:a", "host": "*",
         "operation": "READ", "permission_type": "ALLOW"},
        {"resource_type": "CLUSTER", "name": "kafka-cluster", "pattern_type": "LITERAL", "principal": "User:b",
         "host": "10.0.0.1", "operation": "IDEMPOTENT_WRITE", "permission_type": "DENY"},
    ]
    code, out, _ = cli.run("acls", "--list", "--output", "table")
    assert code == 0 and out.splitlines()[0].split() == ["RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST",
                                                         "OPERATION", "PERMISSION"]
    code, out, _ = cli.run("acls", "--list", "--json", "--topic", "nothing-here")
    assert (code, out) == (0, "[]\n")


def test_list_defaults_to_literal_as_acl_command(cli):
    """--resource-pattern-type defaults to literal for --list too; match shows the prefixed ACL that applies."""
    cli.seed({("TOPIC", "pay", "PREFIXED", "User:a", "*", "READ", "ALLOW")})
    assert json.loads(cli.run("acls", "--list", "--json", "--topic", "payments")[1]) == []
    rows = json.loads(cli.run("acls", "--list", "--json", "--topic", "payments", "--resource-pattern-type", "match")[1])
    assert [r["name"] for r in rows] == ["pay"]


REFUSED = {
    # AclCommandOptions.checkArgs
    "--list with --allow-principal": (["--list", "--allow-principal", "User:a"], "--allow-principal cannot be used with --list"),
    "--producer without a topic": (["--add", "--producer", "--allow-principal", "User:a", "--group", "g"],
                                   "With --producer you must specify a --topic"),
    "--idempotent without --producer": (["--add", "--idempotent", "--topic", "t", "--allow-principal", "User:a"],
                                        "The --idempotent option is only available if --producer is set"),
    "--consumer without a group": (["--add", "--consumer", "--topic", "t", "--allow-principal", "User:a"],
                                   "With --consumer you must specify a --topic and a --group"),
    "--consumer with --cluster": (["--add", "--consumer", "--topic", "t", "--group", "g", "--cluster",
                                   "--allow-principal", "User:a"], "no --cluster or --transactional-id"),
    "--producer with --operation": (["--add", "--producer", "--topic", "t", "--operation", "Read",
                                     "--allow-principal", "User:a"], "--operation cannot be used with --producer"),
    "--consumer with --deny-principal": (["--add", "--consumer", "--topic", "t", "--group", "g",
                                          "--deny-principal", "User:a"], "--deny-principal cannot be used with --consumer"),
    # AclCommand.getResourceToAcls / getResourceFilter
    "--add without a principal": (["--add", "--topic", "t"], "You must specify one of: --allow-principal, --deny-principal"),
    "--add with pattern type match": (["--add", "--topic", "t", "--allow-principal", "User:a",
                                       "--resource-pattern-type", "match"],
                                      "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
    "--remove without a resource": (["--remove", "--force", "--allow-principal", "User:bob"],
                                    "You must provide at least one resource"),
    "--remove with no option at all": (["--remove", "--force"], "You must provide at least one resource"),
    "unknown pattern type": (["--list", "--topic", "t", "--resource-pattern-type", "glob"], "'glob'"),
    # options AclCommand would silently ignore
    "--remove --operation without a principal": (["--remove", "--force", "--topic", "payments", "--operation", "Read"],
                                                 "--operation on --remove needs --allow-principal or --deny-principal"),
    "--remove --consumer without a principal": (["--remove", "--force", "--consumer", "--topic", "payments", "--group", "etl"],
                                                "--consumer on --remove needs --allow-principal or --deny-principal"),
    "--allow-host without --allow-principal": (["--add", "--topic", "t", "--deny-principal", "User:a",
                                                "--allow-host", "10.0.0.1"], "--allow-host needs --allow-principal"),
    "--deny-host without --deny-principal": (["--remove", "--topic", "t", "--allow-principal", "User:a",
                                              "--deny-host", "10.0.0.1"],
                                             "--deny-host needs --deny-principal: it is the host that principal is "
                                             "denied from"),
    "--list --operation": (["--list", "--operation", "Read"], "--operation cannot be used with --list"),
    "--producer with a group": (["--add", "--producer", "--topic", "t", "--group", "g", "--allow-principal", "User:a"],
                                "--producer uses no GROUP resource"),
    "--cluster with a prefixed pattern": (["--add", "--cluster", "--allow-principal", "User:a",
                                           "--resource-pattern-type", "prefixed"], "--cluster is the literal resource"),
    "--output without --list": (["--add", "--output", "table", "--topic", "t", "--allow-principal", "User:a"],
                                "--output applies to --list only"),
    "--output with --json": (["--list", "--output", "table", "--json"], "--output and --json cannot be used together"),
}


@pytest.mark.parametrize("argv, message", REFUSED.values(), ids=REFUSED.keys())
def test_refused_option_combinations_exit_2_and_write_nothing(cli, argv, message):
    cli.seed(BOB)
    end = cli.end_offset()
    code, out, err = cli.run("acls", *argv)
    assert (code, out) == (2, "") and message in err and err.startswith("secmeta: error: ")
    assert cli.end_offset() == end and cli.acls() == BOB


@pytest.mark.parametrize("action", ["--add", "--remove"])
def test_a_principal_without_a_type_is_refused_before_anything_is_printed(cli, action):
    """Issue 23: `--add --allow-principal alice` printed "Adding ACLs..." and then failed with exit 1, where
    `--list --principal alice` exits 2 before printing.  AclCommand parses every principal first
    (getPrincipals: SecurityUtils.parseKafkaPrincipal): exit 2 naming the option, nothing printed or written."""
    cli.seed(BOB)
    end = cli.end_offset()
    code, out, err = cli.run("acls", action, "--force", "--allow-principal", "alice", "--operation", "Read",
                             "--topic", "payments") if action == "--remove" else \
        cli.run("acls", action, "--allow-principal", "alice", "--operation", "Read", "--topic", "payments")
    assert (code, out) == (2, "")
    assert err == "secmeta: error: --allow-principal 'alice' is not of the form Type:Name\n"
    assert cli.end_offset() == end and cli.acls() == BOB


WORDS = {op: op.split("_") for op in KAFKA_NAMES.values()}


@given(st.sampled_from(sorted(WORDS)), st.data())
def test_any_case_and_separator_of_an_operation_parses_to_it(op, data):
    """Each word of the name in any case, joined by nothing, '_' or '-': that operation (acls and authorize)."""
    words = [data.draw(st.sampled_from([w.lower(), w.upper(), w.capitalize()])) for w in WORDS[op]]
    spelling = data.draw(st.sampled_from(["", "_", "-"])).join(words)
    assert operation(spelling).name == op


NOT_A_NAME = st.characters(blacklist_categories=("Lu", "Ll", "Lt", "Lm", "Lo", "Zs", "Zl", "Zp", "Cc"),
                           blacklist_characters="_-")


@given(st.text(max_size=10), NOT_A_NAME, st.text(max_size=10))
def test_a_name_with_a_character_no_operation_name_has_is_refused(before, odd, after):
    """A character that is no letter, '_' or '-' inside the text: no operation's name, refused naming the text."""
    text = f"{before}{odd}{after}"
    with pytest.raises(InvalidValueError, match="unknown operation") as info:
        operation(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("text", ["", "Any", "ANY", "unknown", "Reads", "Writ", "Idempotent Write", "DescribeToken",
                                  "CreateToken", "AllOperations", "Read,Write", "Cluster"])
def test_a_name_no_operation_has_is_refused(text):
    """Any and Unknown name no operation an ACL can have; near misses of a name are refused naming them."""
    with pytest.raises(InvalidValueError, match="unknown operation") as info:
        operation(text)
    assert repr(text) in str(info.value)
