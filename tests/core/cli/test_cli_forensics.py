"""history, diff, who-could, timeline and --as-of/--at-offset from the CLI, over simulated time."""

from __future__ import annotations

import json

import pytest

from secmeta.core import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    RequestContext,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    SecurityStore,
    StoreConfig,
    UserScramCredentialUpsertion,
)
from secmeta.core.cli import main
from secmeta.core.times import parse_time
from secmeta.events.keyring import Keyring
from tests.clikit import cli_env, run

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MINUTE = 60_000


@pytest.fixture
def store(tmp_path, monkeypatch):
    """alice gets READ on orders at T0+1min (by admin), loses it at T0+3min (by security)."""
    keys, path = cli_env(tmp_path, monkeypatch)
    now = [T0]
    cfg = StoreConfig(clock=lambda: now[0] / 1000)
    admin, security = RequestContext("User:admin", "10.0.0.1"), RequestContext("User:admin", "10.9.9.9", request_id="sec")
    grant = AclBinding.of(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    with SecurityStore.open(path, cfg, keyring=Keyring.from_file(keys)) as s:
        now[0] = T0 + MINUTE
        s.create_acls([grant], context=admin)
        now[0] = T0 + 2 * MINUTE
        s.alter_user_scram_credentials([UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256), b"pw-alice")], context=admin)
        now[0] = T0 + 3 * MINUTE
        s.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "orders", principal="User:alice")], context=security)
    return path


def test_history_lists_changes_with_actors_and_no_secrets(store, capsys):
    """history shows each change with actor and host, and never the password or sealed bytes."""
    code, out, _ = run(capsys, "history", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["event_type"] for r in rows] == ["AclCreated", "ScramCredentialUpserted", "AclDeleted"]
    assert rows[2]["actor_host"] == "10.9.9.9"
    assert "pw-alice" not in out and "ciphertext" not in out


def test_history_filters_by_resource_and_time(store, capsys):
    """--topic with MATCH semantics and --from/--to (as diff's) narrow the history."""
    _, out, _ = run(capsys, "history", "--topic", "orders", "--json")
    assert [r["event_type"] for r in json.loads(out)] == ["AclCreated", "AclDeleted"]
    _, out, _ = run(capsys, "history", "--from", "2026-01-01T00:01:30Z", "--to", str(T0 + 150_000), "--json")
    assert [r["event_type"] for r in json.loads(out)] == ["ScramCredentialUpserted"]


def test_history_table_and_json_show_times_in_iso_8601_with_z(store, capsys):
    """One time format everywhere: the table's TIME column and JSON's time are ISO-8601 UTC with Z."""
    _, out, _ = run(capsys, "history", "--limit", "1")
    assert out.splitlines()[0].split() == ["OFFSET", "TIME", "ACTOR", "HOST", "AUTH", "OPERATOR", "EVENT", "ACTION",
                                         "ENTITY", "DETAILS"]
    assert out.splitlines()[2].split()[:3] == ["0", "2026-01-01T00:01:00.000Z", "User:admin"]
    _, out, _ = run(capsys, "history", "--limit", "1", "--json")
    assert json.loads(out)[0]["time"] == "2026-01-01T00:01:00.000Z"


def test_the_old_spellings_still_work_but_are_not_offered(store, capsys):
    """--since/--until (history) and --at (who-could) are hidden aliases of --from/--to and --as-of."""
    _, out, _ = run(capsys, "history", "--since", "2026-01-01T00:01:30Z", "--until", str(T0 + 150_000), "--json")
    assert [r["event_type"] for r in json.loads(out)] == ["ScramCredentialUpserted"]
    _, out, _ = run(capsys, "who-could", "--operation", "Read", "--topic", "orders", "--at", str(T0 + 2 * MINUTE))
    assert "User:alice" in out
    with pytest.raises(SystemExit):
        main(["who-could", "--help"])
    shown = capsys.readouterr().out
    assert "--as-of TIME" in shown and "--at-offset N" in shown and "--at " not in shown


def test_list_as_of_shows_the_past(store, capsys):
    """acls --list --as-of a time between grant and revoke shows the ACL; now it is gone."""
    _, out, _ = run(capsys, "acls", "--list", "--as-of", "2026-01-01T00:02:00Z")
    assert "User:alice" in out
    code, out, _ = run(capsys, "acls", "--list")
    assert (code, out) == (0, "")  # kafka-acls.sh prints no block when no ACL matched
    _, out, _ = run(capsys, "acls", "--list", "--at-offset", "1")
    assert "User:alice" in out


def test_authorize_as_of(store, capsys):
    """authorize --as-of answers as the store did then."""
    code, out, _ = run(capsys, "authorize", "--host", "10.1.1.1", "--principal", "User:alice", "--operation", "Read", "--topic", "orders",
                       "--as-of", str(T0 + 2 * MINUTE))
    assert code == 0 and out.startswith("ALLOWED")
    code, _, _ = run(capsys, "authorize", "--host", "10.1.1.1", "--principal", "User:alice", "--operation", "Read", "--topic", "orders")
    assert code == 1


def test_authorize_json_gives_the_decision_and_the_acls_that_made_it(store, capsys):
    """authorize --json: the verdict, reason and deciding ACL as JSON; the exit code stays 0 allowed / 1 denied."""
    argv = ["authorize", "--host", "10.1.1.1", "--principal", "User:alice", "--operation", "Read", "--topic", "orders",
            "--json"]
    code, out, _ = run(capsys, *argv, "--as-of", str(T0 + 2 * MINUTE))
    answer = json.loads(out)
    assert code == 0 and answer["decision"] == "ALLOWED" and answer["operation"] == "READ"
    assert [(a["principal"], a["operation"], a["permission_type"]) for a in answer["acls"]] == [("User:alice", "READ", "ALLOW")]
    assert "READ" in answer["authorized_operations"]
    code, out, _ = run(capsys, *argv)
    assert code == 1 and json.loads(out)["decision"] == "DENIED" and json.loads(out)["acls"] == []


def test_who_could_at_a_time(store, capsys):
    """who-could --as-of (the name acls --list and authorize use) names alice while the grant existed."""
    _, out, _ = run(capsys, "who-could", "--operation", "Read", "--topic", "orders", "--as-of", str(T0 + 2 * MINUTE), "--json")
    principals = {g["principal"] for g in json.loads(out)}
    assert principals == {"User:alice", "User:admin"}
    _, out, _ = run(capsys, "who-could", "--operation", "Read", "--topic", "orders", "--json")
    assert {g["principal"] for g in json.loads(out)} == {"User:admin"}


def test_who_could_table_shows_each_acl_s_pattern(store, capsys):
    """who-could's table names each allowing ACL's pattern type and name, not only its id (issue 23)."""
    with SecurityStore.open(store, StoreConfig(), keyring=Keyring.load(None)) as s:
        s.create_acls([AclBinding.of(ResourceType.TOPIC, "ord", PatternType.PREFIXED, "User:carol", "*",
                                     AclOperation.READ, AclPermissionType.ALLOW)], context=RequestContext("User:admin", "h"))
    _, out, _ = run(capsys, "who-could", "--operation", "Read", "--topic", "orders")
    (carol,) = [line for line in out.splitlines() if line.startswith("User:carol")]
    assert "PREFIXED:ord" in carol and "ACLS (PATTERN)" in out.splitlines()[0]


def test_timeline_names_who_opened_and_closed_access(store, capsys):
    """timeline gives one interval opened by the create and closed by the delete from 10.9.9.9."""
    _, out, _ = run(capsys, "timeline", "--host", "10.1.1.1", "--principal", "User:alice", "--operation", "Read", "--topic", "orders", "--json")
    (interval,) = json.loads(out)
    assert interval["opened_by"]["event_type"] == "AclCreated" and interval["start_ms"] == T0 + MINUTE
    assert interval["closed_by"]["actor_host"] == "10.9.9.9" and interval["end_ms"] == T0 + 3 * MINUTE


def test_timeline_without_a_host_answers_for_any_host(store, capsys):
    """timeline needs no --host (issue 23): by default it is any host, so a grant from one address alone opens
    an interval, which asking as a host no ACL names ('*') does not show."""
    keys = Keyring.load(None)
    only_there = AclBinding.of(ResourceType.TOPIC, "audit", PatternType.PREFIXED, "User:bob", "10.2.0.0/16",
                               AclOperation.READ, AclPermissionType.ALLOW)
    with SecurityStore.open(store, StoreConfig(), keyring=keys) as s:
        s.create_acls([only_there], context=RequestContext("User:admin", "10.0.0.1"))
    asked = ("timeline", "--principal", "User:bob", "--operation", "Read", "--topic", "audit-eu")
    code, out, _ = run(capsys, *asked, "--json")
    assert code == 0 and [i["opened_by"]["event_type"] for i in json.loads(out)] == ["AclCreated"]
    code, out, _ = run(capsys, *asked)
    assert code == 0 and "AclCreated" in out
    _, out, _ = run(capsys, *asked, "--host", "*", "--json")
    assert json.loads(out) == []
    _, out, _ = run(capsys, *asked, "--host", "10.2.3.4", "--json")
    assert len(json.loads(out)) == 1


def test_json_times_are_iso_8601_beside_their_epoch_ms(store, capsys):
    """Issue 23: `timeline --json` carried start_ms / end_ms and `diff --json` issue_timestamp_ms in epoch ms only,
    though the README says times print as ISO-8601: each now has its ISO-8601 UTC field with Z beside it."""
    _, out, _ = run(capsys, "timeline", "--host", "10.1.1.1", "--principal", "User:alice", "--operation", "Read",
                    "--topic", "orders", "--json")
    [interval] = json.loads(out)
    assert (interval["start_ms"], interval["start_time"]) == (T0 + MINUTE, "2026-01-01T00:01:00.000Z")
    assert (interval["end_ms"], interval["end_time"]) == (T0 + 3 * MINUTE, "2026-01-01T00:03:00.000Z")
    assert interval["opened_by"]["time"] == "2026-01-01T00:01:00.000Z"
    _, out, _ = run(capsys, "history", "--json", "--event-type", "ScramCredentialUpserted")
    assert json.loads(out)[0]["payload"]["mechanism"] == "SCRAM-SHA-256"  # Kafka's name, as everywhere


def test_log_dump_names_the_mechanism_as_kafka_does(store, capsys):
    """Issue 23: `log dump` said SCRAM_SHA_256 where everything else says SCRAM-SHA-256."""
    code, out, _ = run(capsys, "log", "dump")
    assert code == 0 and "mechanism=SCRAM-SHA-256 " in out and "SCRAM_SHA" not in out


def test_diff_between_times(store, capsys):
    """diff from before the grant to after the credential shows the ACL and credential added."""
    code, out, err = run(capsys, "diff", "--from-offset", "0", "--to", "2026-01-01T00:02:30Z")
    assert not err
    assert code == 0 and "ACLs added: 1" in out and "credentials upserted: 1" in out and "ACLs removed: 0" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["acls", "--list", "--as-of", "yesterday"], "yesterday"),
        (["acls", "--list", "--as-of", "2020-01-01T00:00:00Z"], "before"),
        (["acls", "--list", "--at-offset", "99"], "99"),
        (["who-could", "--operation", "Read", "--topic", "t", "--as-of", "2999-01-01T00:00:00Z"], "future"),
        (["acls", "--add", "--allow-principal", "User:x", "--topic", "t", "--as-of", "0"], "--list only"),
    ],
)
def test_bad_points_are_clear_errors(store, capsys, argv, message):
    """Malformed, too early, future and past-the-end points exit 2 naming the problem."""
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_reads_work_beside_a_running_writer(store, capsys, tmp_path):
    """CLI reads open the store read-only, so they work while a writer holds it."""
    with SecurityStore.open(store, keyring=Keyring.from_file(tmp_path / "keys.json")):
        code, out, _ = run(capsys, "history", "--limit", "1")
        assert code == 0 and "AclCreated" in out


def test_history_of_a_principal_says_created_and_rotated_and_holds_the_wildcard_grant(tmp_path, monkeypatch, capsys):
    """history --principal User:alice: a 'User:*' grant and an ACL on USER User:alice are hers; a password set
    twice shows as created then rotated (the observation: two identical ScramCredentialUpserted rows)."""
    keys, path = cli_env(tmp_path, monkeypatch)
    admin = RequestContext("User:admin", "10.0.0.1")
    with SecurityStore.open(path, StoreConfig(clock=lambda: T0 / 1000), keyring=Keyring.from_file(keys)) as s:
        s.create_acls([AclBinding.of(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:*", "*",
                                     AclOperation.READ, AclPermissionType.ALLOW),
                       AclBinding.of(ResourceType.USER, "User:alice", PatternType.LITERAL, "User:mallory", "*",
                                     AclOperation.CREATE_TOKENS, AclPermissionType.ALLOW)], context=admin)
        for password in (b"one", b"two"):
            s.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256), password)], context=admin)
    _, out, _ = run(capsys, "history", "--principal", "User:alice", "--json")
    rows = json.loads(out)
    assert [(r["event_type"], r["action"]) for r in rows] == [
        ("AclCreated", "created"), ("AclCreated", "created"),
        ("ScramCredentialUpserted", "created"), ("ScramCredentialUpserted", "rotated")]
    assert [rows[0]["payload"]["principal"], rows[1]["payload"]["resource_type"]] == ["User:*", "USER"]
    _, out, _ = run(capsys, "history", "--principal", "User:alice")
    action = out.splitlines()[0].index("ACTION")  # the aligned table's column (OPERATOR before it has spaces)
    assert [line[action:].split()[0] for line in out.splitlines()[2:]] == ["created", "created", "created", "rotated"]


def test_a_token_created_as_mallory_for_alice_shows_in_who_could_timeline_history_diff_and_authorize(
        tmp_path, monkeypatch, capsys):
    """The observation: after `tokens --create --owner-principal User:alice --as User:mallory`, mallory holds a token
    that authenticates as alice; every forensic command now says she could act as alice through it."""
    keys, path = cli_env(tmp_path, monkeypatch)
    admin = RequestContext("User:admin", "10.0.0.1")
    with SecurityStore.open(path, StoreConfig(), keyring=Keyring.from_file(keys)) as s:
        s.create_acls([AclBinding.of(ResourceType.TOPIC, "payments", PatternType.LITERAL, "User:alice", "*",
                                     AclOperation.WRITE, AclPermissionType.ALLOW),
                       AclBinding.of(ResourceType.USER, "User:alice", PatternType.LITERAL, "User:mallory", "*",
                                     AclOperation.CREATE_TOKENS, AclPermissionType.ALLOW)], context=admin)
    code, _, err = run(capsys, "tokens", "--create", "--owner-principal", "User:alice", "--as", "User:mallory")
    assert (code, err) == (0, "")
    said = "User:mallory could act as User:alice through token"

    _, out, _ = run(capsys, "who-could", "--operation", "WRITE", "--topic", "payments")
    [line] = [line for line in out.splitlines() if line.startswith("User:mallory")]
    assert said in line and "at User:mallory's request" in line
    _, out, _ = run(capsys, "who-could", "--operation", "WRITE", "--topic", "payments", "--at-offset", "2", "--json")
    assert [g["principal"] for g in json.loads(out)] == ["User:admin", "User:alice"]  # before the token

    _, out, _ = run(capsys, "timeline", "--principal", "User:mallory", "--operation", "WRITE", "--topic", "payments",
                    "--host", "10.0.0.66", "--json")
    [interval] = json.loads(out)
    assert interval["via"]["owner"] == "User:alice" and interval["via"]["how"] == "requester"

    _, out, _ = run(capsys, "history", "--principal", "User:mallory")
    assert said in out
    _, out, _ = run(capsys, "diff", "--json")
    [issued] = json.loads(out)["tokens_issued"]
    assert issued["token_access"].startswith(said)
    for name in ("issue", "expiry", "max"):  # issue 23: epoch ms only before; now ISO-8601 Z beside it
        assert parse_time(issued[f"{name}_time"]) == issued[f"{name}_timestamp_ms"] and issued[f"{name}_time"][-1] == "Z"

    code, out, _ = run(capsys, "authorize", "--principal", "User:alice", "--host", "10.0.0.5", "--operation", "WRITE",
                       "--topic", "payments")
    assert code == 0 and "authenticated with a delegation token" in out and said in out
