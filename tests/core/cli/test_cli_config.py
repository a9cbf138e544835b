"""``secmeta config`` and the settings ``secmeta init`` logs, run as a user would (issue 21's observations)."""

from __future__ import annotations

import json

from tests.clikit import cli_env, log_end, run


def _init(tmp_path, monkeypatch, capsys):
    _, path = cli_env(tmp_path, monkeypatch)
    code, _, err = run(capsys, "init", "--store", str(path))
    assert (code, err) == (0, "")
    return path


def _settings(capsys, *options):
    code, out, err = run(capsys, "config", "--describe", "--json", *options)
    assert (code, err) == (0, "")
    return {row["name"]: (row["value"], row["source"]) for row in json.loads(out)}


def test_init_logs_the_settings_first_and_describe_shows_them(tmp_path, monkeypatch, capsys):
    path = _init(tmp_path, monkeypatch, capsys)
    settings = _settings(capsys)
    assert settings["super.users"] == ("User:admin", "log")
    assert settings["allow.everyone.if.no.acl.found"] == ("false", "log")
    assert settings["delegation.token.secret.fingerprint"][1] == "log"  # $SECMETA_TOKEN_SECRET was set
    code, out, _ = run(capsys, "history", "--json")
    assert {row["event_type"] for row in json.loads(out)} == {"SecuritySettingAltered"} and log_end(path) > 0


def test_edited_config_json_is_refused_and_alter_is_the_way(tmp_path, monkeypatch, capsys):
    """Adding mallory to super_users in config.json: every command refuses the store, naming the setting and the
    command; `config --alter` logs the change, and who-could as of before it does not list her."""
    path = _init(tmp_path, monkeypatch, capsys)
    before = log_end(path)
    (path / "config.json").write_text(json.dumps({"super_users": ["User:admin", "User:mallory"]}))
    code, out, err = run(capsys, "who-could", "--operation", "Alter", "--topic", "payments")
    assert code != 0 and out == "" and "super.users" in err and "secmeta config --alter" in err
    (path / "config.json").unlink()
    code, out, err = run(capsys, "config", "--alter", "--add-config", "super.users=User:admin;User:mallory")
    assert (code, err) == (0, "") and "super.users" in out
    code, out, _ = run(capsys, "who-could", "--operation", "Alter", "--topic", "payments", "--at-offset", str(before),
                       "--json")
    assert "User:mallory" not in out and "User:admin" in out
    code, out, _ = run(capsys, "who-could", "--operation", "Alter", "--topic", "payments", "--json")
    assert "User:mallory" in out


def test_a_bad_alter_names_the_setting_and_writes_nothing(tmp_path, monkeypatch, capsys):
    path = _init(tmp_path, monkeypatch, capsys)
    end = log_end(path)
    for add, named in (("super.users=mallory", "super.users"), ("allow.everyone.if.no.acl.found=yes",
                                                                 "allow.everyone.if.no.acl.found"),
                       ("no.such.setting=1", "no.such.setting")):
        code, out, err = run(capsys, "config", "--alter", "--add-config", add)
        assert (code, out) == (1, "") and named in err
    code, out, err = run(capsys, "config", "--alter", "--add-config", "super.users=User:x", "--as", "User:bob")
    assert code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in err
    assert log_end(path) == end


def test_tokens_under_another_secret_are_refused_naming_it(tmp_path, monkeypatch, capsys):
    """`tokens --create` and `--renew` under a different SECMETA_TOKEN_SECRET: refused, naming the variable
    (before: --create succeeded, --renew said 'No delegation token has this HMAC'); describe --as-of needs none."""
    path = _init(tmp_path, monkeypatch, capsys)
    code, out, err = run(capsys, "tokens", "--create")
    assert code == 0
    hmac = out.splitlines()[3].split()[1]
    monkeypatch.setenv("SECMETA_TOKEN_SECRET", "another-token-secret, 32 bytes or more")
    for argv in (("tokens", "--create"), ("tokens", "--renew", "--hmac", hmac)):
        code, out, err = run(capsys, *argv)
        assert (code, out) == (1, "") and "SECMETA_TOKEN_SECRET" in err, argv
    monkeypatch.delenv("SECMETA_TOKEN_SECRET")
    code, out, err = run(capsys, "tokens", "--describe", "--at-offset", str(log_end(path)))
    assert (code, err) == (0, "") and "Total number of tokens : 1" in out


def test_quota_tooling_right_alone_cannot_alter_super_users_from_the_cli(tmp_path, monkeypatch, capsys):
    """Review 28, finding 1, as a user sees it: User:ops granted ALTER_CONFIGS on the cluster (what `configs
    --alter` for quotas needs) may tune a token lifetime, but `config --alter super.users` is refused with exit 1,
    naming the setting and ALTER, and nothing is written."""
    path = _init(tmp_path, monkeypatch, capsys)
    code, _, err = run(capsys, "acls", "--add", "--allow-principal", "User:ops", "--operation", "AlterConfigs",
                       "--cluster")
    assert (code, err) == (0, "")
    end = log_end(path)
    code, out, err = run(capsys, "config", "--alter", "--add-config", "super.users=User:admin;User:ops",
                         "--as", "User:ops")
    assert (code, out) == (1, "") and "CLUSTER_AUTHORIZATION_FAILED" in err
    assert "super.users" in err and "ALTER on the cluster" in err
    assert log_end(path) == end and _settings(capsys)["super.users"] == ("User:admin", "log")
    code, out, err = run(capsys, "config", "--alter", "--add-config", "delegation.token.expiry.time.ms=3600000",
                         "--as", "User:ops")
    assert (code, err) == (0, "") and "delegation.token.expiry.time.ms" in out
