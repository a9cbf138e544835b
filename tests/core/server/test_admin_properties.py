"""Property: ACL and SCRAM changes made through confluent-kafka's AdminClient over the wire leave the
server's store equal to a second store given the same changes through the Python API: the same ACL set,
the same credential descriptions, and the same per-item errors (code and message) and removed bindings
on the way.

The wire path is Kafka's: librdkafka salts each password itself (KIP-554's salted password, as Kafka's
KafkaAdminClient.alterUserScramCredentials does) and the server hands salt + salted password to the store;
the Python API gets the password.  Mechanism and iteration checks (ScramControlManager.alterCredentials)
and ACL validation (AclControlManager.validateNewAcl) are the store's own on both paths.

Every example starts from a fresh pair (a new server and a new local store), so a failing example
leaves nothing behind for the next one or for shrinking.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import admin as ck
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from secmeta.core import SecurityStore, StoreConfig
from secmeta.core.errors import ErrorCode
from secmeta.core.types import RequestContext, UserScramCredentialDeletion
from secmeta.events.types import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from tests.adminkit import (
    TIMEOUT,
    ck_alteration,
    ck_binding,
    ck_filter,
    from_ck,
    ours_upsertion,
    outcome_of,
)
from tests.logkit import make_keyring
from tests.serverkit import ADMIN_PASSWORD, TOKEN_SECRET, add_user, running_server

# librdkafka can express resource types up to TRANSACTIONAL_ID and operations up to IDEMPOTENT_WRITE.
RESOURCE_TYPES = [ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID]
NAMES = ["a", "ab", "*", CLUSTER_NAME]
PRINCIPALS = ["User:alice", "User:bob", "User:*", "alice"]            # the last is invalid
HOSTS = ["*", "10.0.0.1", "10.0.0.0/8", "10.0.0.1/8"]                  # the last is invalid
OPERATIONS = [AclOperation(code) for code in range(2, 13)]
PERMISSIONS = [AclPermissionType.ALLOW, AclPermissionType.DENY]
USERS = ["u1", "u2", "u3"]
MECHANISMS = [ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512]
ITERATIONS = [4096, 8192, 100, 20000]                                 # the last two are refused

bindings = st.builds(AclBinding.of, st.sampled_from(RESOURCE_TYPES), st.sampled_from(NAMES),
                     st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]), st.sampled_from(PRINCIPALS),
                     st.sampled_from(HOSTS), st.sampled_from(OPERATIONS), st.sampled_from(PERMISSIONS))
filters = st.builds(
    AclBindingFilter.of, st.sampled_from([ResourceType.ANY, *RESOURCE_TYPES]), st.sampled_from([None, *NAMES]),
    st.sampled_from([PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED]),
    st.sampled_from([None, *PRINCIPALS[:3]]), st.sampled_from([None, *HOSTS[:3]]),
    st.sampled_from([AclOperation.ANY, *OPERATIONS]), st.sampled_from([AclPermissionType.ANY, *PERMISSIONS]))
upsertions = st.builds(ours_upsertion, st.sampled_from(USERS), st.sampled_from(MECHANISMS),
                       st.sampled_from(ITERATIONS), st.sampled_from([b"pw-1", b"pw-2"]))
deletions = st.builds(UserScramCredentialDeletion, st.sampled_from(USERS), st.sampled_from(MECHANISMS))
operations = st.one_of(
    st.tuples(st.just("create"), st.lists(bindings, min_size=1, max_size=4, unique=True)),
    st.tuples(st.just("delete"), st.lists(filters, min_size=1, max_size=2, unique=True)),
    st.tuples(st.just("alter"), st.lists(st.one_of(upsertions, deletions), min_size=1, max_size=3)),
)

CONTEXT = RequestContext("User:admin", "127.0.0.1", tls=True)


@contextmanager
def _fresh_pair(directory: Path):
    """(server, its AdminClient, a second store) that start equal: admin's credentials only."""
    with running_server(directory / "served", "SASL_SSL://127.0.0.1:0") as server:
        config = StoreConfig(token_secret=TOKEN_SECRET)
        with SecurityStore.open(directory / "local", config, keyring=make_keyring(directory)) as local:
            add_user(local, "admin", ADMIN_PASSWORD)
            admin = ck.AdminClient(server.confluent_config("SASL_SSL", "admin", mechanism="SCRAM-SHA-512"))
            yield server, admin, local


def _errors(errors) -> list[tuple[ErrorCode, str | None]]:
    return [(e.code, e.message) for e in errors]


def _create(admin, local, items):
    futures = admin.create_acls([ck_binding(b) for b in items], request_timeout=10)
    wire = [outcome_of(futures[ck_binding(b)]) for b in items]
    return wire, _errors(local.create_acls(items, context=CONTEXT))


def _delete(admin, local, items):
    futures = admin.delete_acls([ck_filter(f) for f in items], request_timeout=10)
    wire = []
    for f in items:
        code, message = outcome_of(futures[ck_filter(f)])
        removed = set() if code else {from_ck(b) for b in futures[ck_filter(f)].result(timeout=TIMEOUT)}
        wire.append((code, message, removed))
    return wire, [(r.error.code, r.error.message, set(r.acls)) for r in local.delete_acls(items, context=CONTEXT)]


def _alter(admin, local, items):
    futures = admin.alter_user_scram_credentials([ck_alteration(a) for a in items], request_timeout=10)
    wire = {user: outcome_of(f) for user, f in futures.items()}
    python = local.alter_user_scram_credentials(items, context=CONTEXT)
    return wire, {user: (e.code, e.message) for user, e in python.items()}


APPLY = {"create": _create, "delete": _delete, "alter": _alter}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operations, min_size=1, max_size=5))
def test_admin_client_changes_equal_python_api_changes(tmp_path_factory, ops):
    """The same sequence through AdminClient and through the Python API: same results, same state."""
    with _fresh_pair(tmp_path_factory.mktemp("admin-property")) as (server, admin, local):
        for kind, items in ops:
            wire, python = APPLY[kind](admin, local, items)
            assert wire == python, (kind, items)
            outcomes = python.values() if isinstance(python, dict) else python
            for outcome in outcomes:
                event(f"{kind} {outcome[0].name}")
        any_acl = AclBindingFilter.any()
        assert set(server.store.describe_acls(any_acl, context=CONTEXT)) == set(local.describe_acls(any_acl, context=CONTEXT))
        assert (server.store.describe_user_scram_credentials(context=CONTEXT)
                == local.describe_user_scram_credentials(context=CONTEXT))
