"""The audit job's alert rules over envelopes, and rules files (no Kafka)."""

from __future__ import annotations

import json
import secrets

import pytest

from secmeta.consumers.audit_rules import (
    Alert,
    AuditRules,
    MassDeletion,
    RulesFileError,
    load_rules,
    parse_rules,
)
from secmeta.core.settings import LOGGED
from secmeta.events.keyring import SealedSecret
from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    Envelope,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
    SecuritySettingAltered,
    TokenRemovalReason,
)
from secmeta.events.redact import redacted
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)

HOUR_MS = 3_600_000
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def envelope(event, *, offset=0, ts=10 * HOUR_MS, actor="User:admin", host="10.0.0.1"):
    return Envelope(offset, ts, actor, host, "req-1", event)


def binding(
    resource=ResourceType.TOPIC,
    name="orders",
    pattern=PatternType.LITERAL,
    principal="User:alice",
    operation=AclOperation.READ,
    permission=ALLOW,
):
    return AclBinding.of(resource, name, pattern, principal, "*", operation, permission)


def created(**kw):
    return AclCreated("acl-1", binding(**kw))


def deleted(acl_id="acl-1", **kw):
    return AclDeleted(acl_id, binding(**kw))


def cluster(**kw):
    return created(resource=ResourceType.CLUSTER, name="kafka-cluster", **kw)


def upserted(user="admin", ciphertext=b"ciphertext"):
    return ScramCredentialUpserted(
        user, ScramMechanism.SCRAM_SHA_256, 4096, SealedSecret("k1", b"n" * 12, ciphertext)
    )


def issued(owner="User:alice", requester="User:alice"):
    return DelegationTokenIssued("tok-1", owner, requester, (), 0, 1000, 2000)


def fired(rules, env):
    return [a.rule for a in rules.evaluate(env)]


def only(name, **params):
    return parse_rules({n: ({**params} if n == name else {"enabled": False}) for n in NAMES})


NAMES = AuditRules.defaults().names


# -- cluster_admin_grant ------------------------------------------------------------


def test_cluster_admin_grant_fires_on_allow_all_on_cluster():
    """ALLOW ALL on CLUSTER raises cluster_admin_grant."""
    assert fired(only("cluster_admin_grant"), envelope(cluster(operation=AclOperation.ALL))) == [
        "cluster_admin_grant"
    ]


def test_cluster_admin_grant_fires_on_allow_alter_on_cluster():
    """ALLOW ALTER on CLUSTER raises cluster_admin_grant."""
    assert fired(only("cluster_admin_grant"), envelope(cluster(operation=AclOperation.ALTER)))


def test_cluster_admin_grant_ignores_describe_on_cluster():
    """ALLOW DESCRIBE on CLUSTER is not an admin grant."""
    assert not fired(
        only("cluster_admin_grant"), envelope(cluster(operation=AclOperation.DESCRIBE))
    )


def test_cluster_admin_grant_ignores_deny():
    """DENY ALL on CLUSTER grants nothing."""
    env = envelope(cluster(operation=AclOperation.ALL, permission=DENY))
    assert not fired(only("cluster_admin_grant"), env)


def test_cluster_admin_grant_ignores_all_on_a_topic():
    """ALLOW ALL on a topic is not a cluster grant."""
    assert not fired(only("cluster_admin_grant"), envelope(created(operation=AclOperation.ALL)))


# -- wildcard_principal_grant -------------------------------------------------------


@pytest.mark.parametrize("operation", [AclOperation.READ, AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.ALL])
def test_any_grant_to_the_wildcard_principal_raises_wildcard_principal_grant_by_default(operation):
    """A User:* grant of any operation (READ included: issue 23) raises wildcard_principal_grant among the
    default rules, once, and wildcard_grant (about resources) does not repeat it."""
    env = envelope(created(principal="User:*", operation=operation))
    assert fired(AuditRules.defaults(), env) == ["wildcard_principal_grant"]


def test_wildcard_principal_grant_ignores_deny_and_named_principals():
    """DENY to User:* restricts; a grant to a named principal is not everyone's."""
    assert not fired(only("wildcard_principal_grant"),
                     envelope(created(principal="User:*", operation=AclOperation.READ, permission=DENY)))
    assert not fired(only("wildcard_principal_grant"), envelope(created(operation=AclOperation.ALL)))


# -- wildcard_grant ----------------------------------------------------------------


def test_wildcard_grant_fires_on_wildcard_resource_all():
    """ALL on the literal resource '*' raises wildcard_grant."""
    env = envelope(created(name="*", operation=AclOperation.ALL))
    assert fired(only("wildcard_grant"), env) == ["wildcard_grant"]


def test_wildcard_grant_fires_on_prefixed_write():
    """WRITE on a PREFIXED resource raises wildcard_grant."""
    env = envelope(created(name="app-", pattern=PatternType.PREFIXED, operation=AclOperation.WRITE))
    assert fired(only("wildcard_grant"), env) == ["wildcard_grant"]


def test_wildcard_grant_ignores_prefixed_read():
    """READ on a PREFIXED resource is below the WRITE/ALL bar."""
    env = envelope(created(name="app-", pattern=PatternType.PREFIXED, operation=AclOperation.READ))
    assert not fired(only("wildcard_grant"), env)


def test_wildcard_grant_ignores_literal_named_write():
    """WRITE for a named principal on a named literal topic is ordinary."""
    assert not fired(only("wildcard_grant"), envelope(created(operation=AclOperation.WRITE)))


def test_wildcard_grant_ignores_deny_to_wildcard_principal():
    """DENY WRITE to User:* restricts rather than grants."""
    env = envelope(created(principal="User:*", operation=AclOperation.WRITE, permission=DENY))
    assert not fired(only("wildcard_grant"), env)


def test_wildcard_grant_can_leave_out_prefixed_resources():
    """include_prefixed = false stops prefixed WRITE from alerting."""
    env = envelope(created(name="app-", pattern=PatternType.PREFIXED, operation=AclOperation.WRITE))
    assert not fired(only("wildcard_grant", include_prefixed=False), env)


# -- super_user_change -------------------------------------------------------------


def test_super_user_change_fires_on_cluster_acl_by_untrusted_actor():
    """A CLUSTER ACL created by an untrusted actor raises super_user_change."""
    env = envelope(cluster(operation=AclOperation.DESCRIBE), actor="User:bob")
    assert fired(only("super_user_change"), env) == ["super_user_change"]


def test_super_user_change_fires_on_cluster_acl_deleted_by_untrusted_actor():
    """Deleting a CLUSTER ACL by an untrusted actor raises super_user_change."""
    event = deleted(resource=ResourceType.CLUSTER, name="kafka-cluster", permission=DENY)
    assert fired(only("super_user_change"), envelope(event, actor="User:bob"))


def test_super_user_change_ignores_trusted_actor():
    """The trusted admin changing CLUSTER ACLs does not raise super_user_change."""
    env = envelope(cluster(operation=AclOperation.ALL), actor="User:admin")
    assert not fired(only("super_user_change"), env)


def test_super_user_change_ignores_topic_acl_by_untrusted_actor():
    """An untrusted actor changing a topic ACL is not a cluster change."""
    assert not fired(only("super_user_change"), envelope(created(), actor="User:bob"))


def test_super_user_change_trusts_configured_actors():
    """trusted_actors replaces the default trusted list."""
    rules = only("super_user_change", trusted_actors=["User:ops"])
    assert fired(rules, envelope(cluster(), actor="User:admin"))


def test_untrusted_cluster_admin_grant_raises_both_rules():
    """An untrusted actor granting ALL on CLUSTER raises cluster_admin_grant and super_user_change."""
    env = envelope(cluster(operation=AclOperation.ALL), actor="User:bob")
    assert fired(AuditRules.defaults(), env) == ["cluster_admin_grant", "super_user_change"]


# -- protected_credential_change ------------------------------------------------------


def test_protected_credential_upsert_fires():
    """Replacing admin's SCRAM credential raises protected_credential_change."""
    assert fired(only("protected_credential_change"), envelope(upserted("admin")))


def test_protected_credential_delete_fires():
    """Deleting admin's SCRAM credential raises protected_credential_change."""
    event = ScramCredentialDeleted("admin", ScramMechanism.SCRAM_SHA_512)
    assert fired(only("protected_credential_change"), envelope(event))


def test_unprotected_credential_change_is_ignored():
    """Another user's credential change raises nothing."""
    assert not fired(only("protected_credential_change"), envelope(upserted("alice")))


def test_protected_users_accept_principal_form():
    """A configured 'User:svc' protects the SCRAM user 'svc'."""
    rules = only("protected_credential_change", users=["User:svc"])
    assert fired(rules, envelope(upserted("svc")))


def test_credential_alert_carries_no_secret():
    """An alert about a credential change holds no sealed bytes."""
    (alert,) = only("protected_credential_change").evaluate(
        envelope(upserted(ciphertext=b"S3CRET"))
    )
    text = json.dumps(alert.to_dict())
    assert "S3CRET" not in text and "nnnn" not in text


# -- token_for_other_owner --------------------------------------------------------------


def test_token_for_other_owner_fires():
    """A token whose requester is not its owner raises token_for_other_owner."""
    env = envelope(issued(owner="User:alice", requester="User:bob"))
    assert fired(only("token_for_other_owner"), env) == ["token_for_other_owner"]


def test_token_for_self_is_ignored():
    """A token requested by its owner raises nothing."""
    assert not fired(only("token_for_other_owner"), envelope(issued()))


# -- outside_allowed_hours --------------------------------------------------------------


def test_outside_hours_fires_before_start():
    """A change at 03:00 UTC is outside 08-18."""
    env = envelope(created(), ts=3 * HOUR_MS)
    assert fired(only("outside_allowed_hours", allowed_hours="08-18"), env)


def test_outside_hours_start_is_inclusive():
    """A change at 08:00 UTC is inside 08-18."""
    env = envelope(created(), ts=8 * HOUR_MS)
    assert not fired(only("outside_allowed_hours", allowed_hours="08-18"), env)


def test_outside_hours_end_is_exclusive():
    """A change at 18:00 UTC is outside 08-18."""
    env = envelope(created(), ts=18 * HOUR_MS)
    assert fired(only("outside_allowed_hours", allowed_hours="08-18"), env)


def test_outside_hours_wraps_midnight():
    """A change at 23:00 UTC is inside 22-06."""
    env = envelope(created(), ts=23 * HOUR_MS)
    assert not fired(only("outside_allowed_hours", allowed_hours="22-06"), env)


def test_outside_hours_is_inactive_without_a_range():
    """With no allowed_hours set, a 03:00 change raises nothing."""
    assert not fired(AuditRules.defaults(), envelope(created(), ts=3 * HOUR_MS))


def test_outside_hours_ignores_sweep_removals():
    """The expiry sweep's token removal at night is not a change by a request."""
    event = DelegationTokenRemoved("tok-1", TokenRemovalReason.EXPIRED_BY_SWEEP)
    env = envelope(event, ts=3 * HOUR_MS)
    assert not fired(only("outside_allowed_hours", allowed_hours="08-18"), env)


# -- mass_deletion ---------------------------------------------------------------------


def deletions(count, *, start_ms=0, step_ms=100, actor="User:admin"):
    return [
        envelope(deleted(f"acl-{i}"), offset=i, ts=start_ms + i * step_ms, actor=actor)
        for i in range(count)
    ]


def alerts_over(rules, envelopes):
    return [a for env in envelopes for a in rules.evaluate(env)]


def test_mass_deletion_fires_once_on_the_deletion_above_threshold():
    """The 51st deletion within 60 s raises one alert, at that deletion."""
    found = alerts_over(only("mass_deletion"), deletions(60))
    assert [(a.rule, a.offset) for a in found] == [("mass_deletion", 50)]


def test_mass_deletion_ignores_exactly_threshold():
    """Fifty deletions within the window are not more than the threshold."""
    assert not alerts_over(only("mass_deletion"), deletions(50))


def test_mass_deletion_ignores_deletions_spread_over_more_than_the_window():
    """Fifty-one deletions 1.2 s apart never put 51 in one 60 s window."""
    assert not alerts_over(only("mass_deletion"), deletions(51, step_ms=1200))


def test_mass_deletion_counts_per_actor():
    """Two actors deleting 30 each do not add up."""
    envs = deletions(30, actor="User:a") + deletions(30, start_ms=50, actor="User:b")
    assert not alerts_over(only("mass_deletion"), envs)


def test_mass_deletion_fires_again_after_the_window_empties():
    """A second burst after a quiet window raises a second alert."""
    envs = deletions(5) + deletions(5, start_ms=120_000)
    found = alerts_over(only("mass_deletion", threshold=3), envs)
    assert [a.timestamp_ms for a in found] == [300, 120_300]


def test_mass_deletion_uses_configured_window():
    """window_seconds = 1 keeps four deletions 0.6 s apart from exceeding threshold 2."""
    envs = deletions(4, step_ms=600)
    assert not alerts_over(only("mass_deletion", threshold=2, window_seconds=1), envs)


def test_mass_deletion_restored_from_records_continues_the_window():
    """State restored from audit records crosses the threshold where an unbroken run would."""
    envs = deletions(60)
    rules = only("mass_deletion")
    rules.restore(redacted(e) for e in envs[:40])
    assert [a.offset for a in alerts_over(rules, envs[40:])] == [50]


def test_fresh_rules_forget_the_window():
    """fresh() gives the same rules with an empty deletion window."""
    rules = only("mass_deletion")
    alerts_over(rules, deletions(40))
    assert not alerts_over(rules.fresh(), deletions(40, start_ms=1000))


def test_mass_deletion_alert_names_actor_and_count():
    """The alert message names the actor, the count and the threshold."""
    (alert,) = alerts_over(only("mass_deletion", threshold=2), deletions(3, actor="User:ops"))
    assert "User:ops" in alert.message and "3 ACLs" in alert.message and "2" in alert.message


# -- alerts --------------------------------------------------------------------------------


def test_alert_copies_the_envelope_fields():
    """An alert carries the event's offset, time, actor, host and entity key."""
    env = envelope(issued(requester="User:bob"), offset=7, ts=123, actor="User:bob", host="h")
    (alert,) = only("token_for_other_owner").evaluate(env)
    assert (alert.offset, alert.timestamp_ms, alert.actor_principal, alert.actor_host) == (
        7,
        123,
        "User:bob",
        "h",
    )
    assert (alert.entity_key, alert.severity) == ("token:tok-1", "medium")


def test_alert_round_trips_through_a_dict():
    """Alert.from_dict(alert.to_dict()) is the same alert."""
    (alert,) = AuditRules.defaults().evaluate(envelope(issued(requester="User:bob")))
    assert Alert.from_dict(json.loads(json.dumps(alert.to_dict()))) == alert


# -- rules files ----------------------------------------------------------------------------


def test_load_rules_without_a_file_gives_every_default_rule():
    """No rules file means all nine rules enabled."""
    assert load_rules(None).names == NAMES and len(NAMES) == 9


def test_toml_file_disables_a_rule(tmp_path):
    """enabled = false in TOML drops the rule."""
    path = tmp_path / "rules.toml"
    path.write_text("[token_for_other_owner]\nenabled = false\n")
    assert "token_for_other_owner" not in load_rules(path).names


def test_json_file_sets_parameters(tmp_path):
    """A JSON file sets the mass-deletion threshold and window."""
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"mass_deletion": {"threshold": 5, "window_seconds": 10}}))
    (rule,) = [r for r in load_rules(path).rules if isinstance(r, MassDeletion)]
    assert (rule.threshold, rule.window_ms) == (5, 10_000)


def test_toml_file_sets_severity(tmp_path):
    """severity in a rule table changes the alerts' severity."""
    path = tmp_path / "rules.toml"
    path.write_text('[token_for_other_owner]\nseverity = "critical"\n')
    (alert,) = load_rules(path).evaluate(envelope(issued(requester="User:bob")))
    assert alert.severity == "critical"


def test_unknown_key_names_key_rule_and_file(tmp_path):
    """An unknown key is an error naming the key, its rule and the file."""
    path = tmp_path / "rules.toml"
    path.write_text("[mass_deletion]\nthreshhold = 5\n")
    with pytest.raises(
        RulesFileError, match=r"rules\.toml.*unknown key 'threshhold' in \[mass_deletion\]"
    ):
        load_rules(path)


def test_unknown_rule_names_it_and_the_file(tmp_path):
    """An unknown rule table is an error naming it and the file."""
    path = tmp_path / "rules.json"
    path.write_text('{"no_such_rule": {}}')
    with pytest.raises(RulesFileError, match=r"rules\.json.*unknown rule 'no_such_rule'"):
        load_rules(path)


def test_wrong_value_type_is_an_error():
    """A threshold given as text is rejected, naming the key."""
    with pytest.raises(RulesFileError, match=r"\[mass_deletion\] threshold"):
        parse_rules({"mass_deletion": {"threshold": "50"}}, "f.toml")


def test_bad_hour_range_is_an_error():
    """allowed_hours '8 to 18' is rejected with the expected format."""
    with pytest.raises(RulesFileError, match="HH-HH"):
        parse_rules({"outside_allowed_hours": {"allowed_hours": "8 to 18"}}, "f.toml")


def test_unknown_operation_is_an_error():
    """An operation name Kafka does not have is rejected."""
    with pytest.raises(RulesFileError, match="unknown AclOperation 'WRTIE'"):
        parse_rules({"wildcard_grant": {"operations": ["WRTIE"]}}, "f.toml")


@pytest.mark.parametrize("rule, key, value, problem", [
    ("super_user_change", "trusted_actors", ["alice"], "not of the form Type:Name"),
    ("super_user_change", "trusted_actors", ["User:ops\nUser:x"], "control character"),
    ("wildcard_grant", "operations", ["ANY"], "not ANY"),
    ("mass_deletion", "window_seconds", float("nan"), "number of seconds"),
    ("mass_deletion", "window_seconds", float("inf"), "number of seconds"),
    ("mass_deletion", "enabled", "false", "true or false"),
])
def test_values_that_would_silently_never_apply_are_errors(rule, key, value, problem):
    """A bare actor name (never equal to a Type:Name actor), ANY, NaN or infinite seconds, "false" for a bool:
    each is refused naming the rule and key, instead of a rule that quietly never fires."""
    with pytest.raises(RulesFileError, match=rf"f\.toml: \[{rule}\] {key}") as info:
        parse_rules({rule: {key: value}}, "f.toml")
    assert problem in str(info.value)


def test_unknown_severity_is_an_error():
    """A severity outside low/medium/high/critical is rejected."""
    with pytest.raises(RulesFileError, match="severity"):
        parse_rules({"wildcard_grant": {"severity": "urgent"}}, "f.toml")


def test_invalid_toml_names_the_file(tmp_path):
    """A file that is not TOML is an error naming the file."""
    path = tmp_path / "rules.toml"
    path.write_text("[mass_deletion\n")
    with pytest.raises(RulesFileError, match=r"rules\.toml is not valid TOML"):
        load_rules(path)


def test_missing_rules_file_is_an_error(tmp_path):
    """A rules file that does not exist is a clear error."""
    with pytest.raises(RulesFileError, match="does not exist"):
        load_rules(tmp_path / "absent.toml")


def test_unsupported_suffix_is_an_error(tmp_path):
    """A .yaml rules file is refused with the supported kinds named."""
    path = tmp_path / "rules.yaml"
    path.write_text("{}")
    with pytest.raises(RulesFileError, match=r"\.toml or \.json"):
        load_rules(path)


@pytest.mark.parametrize(("setting", "value"), [("super.users", "User:admin;User:mallory"),
                                                 ("allow.everyone.if.no.acl.found", "true")])
def test_a_logged_change_of_a_setting_that_opens_access_raises_an_alert(setting, value):
    """Super users and allow-everyone are logged settings in secmeta (SecuritySettingAltered), not static configs
    as in Kafka: adding a principal to super.users makes it a super user, and allow-everyone opens every resource
    without ACLs to every client. The default rules (``access_setting_change``) must alert on
    such a change, as they do on a grant of ALL on the cluster."""
    alerts = AuditRules.defaults().evaluate(envelope(SecuritySettingAltered(setting, value), actor="User:mallory"))
    assert any(setting in alert.message for alert in alerts), \
        f"no default rule alerts naming {setting} when User:mallory sets it to {value}: {alerts}"


@pytest.mark.parametrize("name", [s.name for s in LOGGED])
def test_a_setting_alerts_when_changed_exactly_when_changing_it_needs_more_than_alter_configs(open_store, name):
    """Which settings decide access is what the store enforces: a principal holding ALTER_CONFIGS on the cluster
    (quota tooling's right) is refused a change of such a setting, and allowed one of any other. The default rules
    raise access_setting_change on the logged change (a delete, back to its default) exactly for the refused ones,
    naming the setting and the actor."""
    from secmeta.core import RequestContext
    from secmeta.core.errors import ClusterAuthorizationException
    from tests.storekit import ADMIN, acl

    store = open_store()
    store.log_initial_settings(ADMIN)
    assert not any(store.create_acls([acl("kafka-cluster", "User:ops", AclOperation.ALTER_CONFIGS,
                                          rtype=ResourceType.CLUSTER)], context=ADMIN))
    ops = RequestContext("User:ops", "10.0.0.2")
    start = store.log.end_offset
    try:
        store.alter_settings(delete=[name], context=ops)
        refused, actor = False, ops.principal
    except ClusterAuthorizationException:
        assert store.log.end_offset == start        # a refusal writes nothing
        refused, actor = True, ADMIN.principal
        store.alter_settings(delete=[name], context=ADMIN)
    [logged_change] = list(store.log.read(start, store.log.end_offset))
    assert isinstance(logged_change.event, SecuritySettingAltered) and logged_change.event.setting_name == name
    alerts = [a for a in AuditRules.defaults().evaluate(logged_change) if a.rule == "access_setting_change"]
    assert bool(alerts) == refused
    for alert in alerts:
        assert alert.severity == "critical" and name in alert.message and actor in alert.message


def test_the_token_secrets_fingerprint_is_never_carried_by_an_alert():
    """A change of delegation.token.secret.fingerprint alerts, naming the setting and the actor, but neither the
    message nor any field of the alert holds the fingerprint (a test for guesses of the secret)."""
    from secmeta.core.settings import secret_fingerprint

    fingerprint = secret_fingerprint(secrets.token_bytes(32))
    event = SecuritySettingAltered("delegation.token.secret.fingerprint", fingerprint)
    [alert] = only("access_setting_change").evaluate(envelope(event, actor="User:mallory"))
    assert "delegation.token.secret.fingerprint" in alert.message and "User:mallory" in alert.message
    assert fingerprint not in json.dumps(alert.to_dict())


def test_a_deleted_access_setting_alerts_and_says_it_went_back_to_its_default():
    """Deleting allow.everyone.if.no.acl.found (logged with no value) alerts too, naming the setting and actor."""
    [alert] = only("access_setting_change").evaluate(
        envelope(SecuritySettingAltered("allow.everyone.if.no.acl.found", None), actor="User:mallory"))
    assert "allow.everyone.if.no.acl.found" in alert.message and "default" in alert.message
    assert "User:mallory" in alert.message


def test_access_setting_change_trusts_only_the_actors_a_rules_file_names():
    """By default every actor's change alerts, the admin's too; a rules file may trust some actors."""
    change = SecuritySettingAltered("super.users", "User:admin;User:ops")
    assert fired(only("access_setting_change"), envelope(change, actor="User:admin")) == ["access_setting_change"]
    rules = only("access_setting_change", trusted_actors=["User:admin"])
    assert not fired(rules, envelope(change, actor="User:admin"))
    assert fired(rules, envelope(change, actor="User:mallory")) == ["access_setting_change"]
