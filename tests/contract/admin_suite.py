"""The Admin contract (secmeta.core.admin): admin scenarios any Admin must answer, and the backends they run on.

eventsourcing's shared persistence suites are the model (eventsourcing/tests/persistence.py): one set of
scenarios, run against every implementation.  Here the implementations are ``SecurityStore`` in process
and ``RemoteAdmin`` through ``secmeta serve`` over real TCP (tests/core/server/test_admin_contract.py);
both start from the same users at the same fixed time, and a scenario's transcript (every answer, or the
exception a call raised) must be identical through both.  A scenario also asserts what a user must see,
so both being wrong the same way still fails.

A scenario is a function ``scenario(backend) -> transcript``; ``backend.as_user(name)`` gives the Admin
acting as ``User:<name>`` and the RequestContext that names that user (a store needs it, the remote
admin's login is that user already).  Tokens are random: a transcript names them T1, T2... in order of
appearance and shows an HMAC as present or not.  Per-item results (an ApiError per user, binding or filter)
are compared whole, messages included; a call that raised is compared by exception type and Kafka code,
since some responses carry no message on the wire (Create/Renew/ExpireDelegationToken have only a code).
A mapping's order and the order of the bindings one delete filter removed are no part of an answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Protocol

from secmeta.core import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Admin,
    ApiError,
    ApiException,
    DelegationToken,
    DeleteAclsResult,
    ErrorCode,
    PatternType,
    RequestContext,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    SecurityStore,
    StoreConfig,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
)
from secmeta.core.control.quotas import (
    ClientQuotaAlteration,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ClientQuotaOp,
)
from secmeta.events.records import ClientQuotaEntity
from tests.clientkit import remote_admin
from tests.logkit import Clock, make_keyring
from tests.serverkit import TOKEN_SECRET, add_user, running_server
from tests.storekit import acl, upsert

__all__ = ["SCENARIOS", "Backend", "in_process", "served"]

# admin is a super user (StoreConfig's default); alice and bob are not.
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
START_S = 1_800_000_000.0
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


class Backend(Protocol):
    def as_user(self, name: str) -> tuple[Admin, RequestContext]: ...


def _config() -> StoreConfig:
    return StoreConfig(token_secret=TOKEN_SECRET, clock=Clock(START_S))


def _context(name: str) -> RequestContext:
    """The context the server builds for a SASL_SSL login of ``name`` from 127.0.0.1."""
    return RequestContext(f"User:{name}", "127.0.0.1", tls=True)


class _InProcess:
    def __init__(self, store: SecurityStore):
        self.store = store

    def as_user(self, name: str) -> tuple[Admin, RequestContext]:
        return self.store, _context(name)


class _Served:
    def __init__(self, server, stack: ExitStack):
        self._server, self._stack, self._admins = server, stack, {}

    def as_user(self, name: str) -> tuple[Admin, RequestContext]:
        if name not in self._admins:
            self._admins[name] = self._stack.enter_context(remote_admin(self._server, "SASL_SSL", name))
        return self._admins[name], _context(name)


@contextmanager
def in_process(directory: Path) -> Iterator[Backend]:
    """SecurityStore in process, with USERS' SCRAM credentials, at START_S."""
    directory.mkdir(parents=True, exist_ok=True)
    with SecurityStore.open(directory / "store", _config(), keyring=make_keyring(directory)) as store:
        for name, password in USERS.items():
            add_user(store, name, password)
        yield _InProcess(store)


@contextmanager
def served(directory: Path) -> Iterator[Backend]:
    """RemoteAdmin logins (SCRAM over SASL_SSL) to ``secmeta serve`` over a store like in_process's."""
    with running_server(directory, "SASL_SSL://127.0.0.1:0", store_config=_config(), users=USERS) as server, \
            ExitStack() as stack:
        yield _Served(server, stack)


# -- transcripts ------------------------------------------------------------------------------

class _Transcript:
    """Answers in order; token ids (also in error messages) and HMACs replaced by stable labels, and tokens
    listed by label (describe lists them by their random ids)."""

    def __init__(self):
        self.entries: list[tuple[str, Any]] = []
        self._tokens: dict[str, str] = {}
        self.hmacs: dict[str, bytes] = {}

    def call(self, step: str, fn: Callable[[], Any]) -> Any:
        """Run one admin call; record its answer, or the ApiException it raised (type and error)."""
        try:
            answer = fn()
        except ApiException as exc:
            self.entries.append((step, ("raised", type(exc).__name__, exc.error.code)))
            return exc
        self.entries.append((step, self._plain(answer)))
        return answer

    def _plain(self, answer: Any) -> Any:
        if isinstance(answer, DelegationToken):
            label = self._tokens.setdefault(answer.token_id, f"T{len(self._tokens) + 1}")
            if answer.hmac:
                self.hmacs[label] = answer.hmac
            return dataclasses.replace(answer, token_id=label, hmac=b"<hmac>" if answer.hmac else None)
        if isinstance(answer, ApiError) and answer.message:
            message = answer.message
            for token_id, label in self._tokens.items():
                message = message.replace(token_id, label)
            return ApiError(answer.code, message)
        if isinstance(answer, dict):
            return {k: self._plain(v) for k, v in answer.items()}
        if isinstance(answer, list):
            plain = [self._plain(v) for v in answer]
            tokens = all(isinstance(v, DelegationToken) for v in plain)
            return sorted(plain, key=lambda token: token.token_id) if plain and tokens else plain
        if isinstance(answer, DeleteAclsResult):  # the bindings a filter removed, in no particular order
            return DeleteAclsResult(self._plain(answer.error), frozenset(answer.acls))
        return answer

    def last(self) -> Any:
        return self.entries[-1][1]


def _codes(answer: dict[str, ApiError]) -> dict[str, ErrorCode]:
    return {user: error.code for user, error in answer.items()}


def _raised(answer: Any, code: ErrorCode) -> bool:
    return isinstance(answer, tuple) and answer[0] == "raised" and answer[2] == code


# -- scenarios --------------------------------------------------------------------------------

def scram_alter_and_describe(backend: Backend) -> list:
    """Per-user results of one AlterUserScramCredentials; describe by name and of every user."""
    t = _Transcript()
    admin, ctx = backend.as_user("admin")
    t.call("alter", lambda: admin.alter_user_scram_credentials([
        upsert("carol", b"carol-pw", SHA512, 8192),
        upsert("dave", b"pw", SHA256, 100),                      # too few iterations
        UserScramCredentialDeletion("erin", SHA256),              # nothing to delete
        UserScramCredentialDeletion("frank", ScramMechanism.UNKNOWN),
        upsert("gina", b"pw", SHA256), upsert("gina", b"pw", SHA512),  # a second valid change of one user
    ], context=ctx))
    assert _codes(t.last()) == {
        "carol": ErrorCode.NONE, "dave": ErrorCode.UNACCEPTABLE_CREDENTIAL, "erin": ErrorCode.RESOURCE_NOT_FOUND,
        "frank": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "gina": ErrorCode.DUPLICATE_RESOURCE}
    t.call("describe named", lambda: admin.describe_user_scram_credentials(["carol", "nobody"], context=ctx))
    carol, nobody = t.last()["carol"], t.last()["nobody"]
    assert isinstance(carol, UserScramCredentialsDescription)
    assert carol.scram_credential_infos == (ScramCredentialInfo(SHA512, 8192),)
    assert nobody.code == ErrorCode.RESOURCE_NOT_FOUND
    t.call("describe all", lambda: admin.describe_user_scram_credentials(context=ctx))
    assert sorted(t.last()) == ["admin", "alice", "bob", "carol"]
    t.call("delete", lambda: admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", SHA512)],
                                                                  context=ctx))
    t.call("describe deleted", lambda: admin.describe_user_scram_credentials(["carol"], context=ctx))
    assert t.last()["carol"].code == ErrorCode.RESOURCE_NOT_FOUND
    return t.entries


TOPIC_PREFIX = acl("orders-", pattern=PatternType.PREFIXED)
TOPIC_LITERAL = acl("orders-eu", "User:bob", AclOperation.WRITE, AclPermissionType.DENY, host="10.0.0.1")
GROUP = acl("g", rtype=ResourceType.GROUP)
BAD_CLUSTER = acl("other", op=AclOperation.ALTER, rtype=ResourceType.CLUSTER)  # the cluster is kafka-cluster


def acls_create_describe_delete(backend: Backend) -> list:
    """Per-binding create results, describe through several filters, delete per filter."""
    t = _Transcript()
    admin, ctx = backend.as_user("admin")
    t.call("create", lambda: admin.create_acls([TOPIC_PREFIX, TOPIC_LITERAL, GROUP, BAD_CLUSTER, GROUP], context=ctx))
    assert [e.code for e in t.last()] == [ErrorCode.NONE] * 3 + [ErrorCode.INVALID_REQUEST, ErrorCode.NONE]
    filters = {
        "any": AclBindingFilter.any(),
        "match orders-eu": AclBindingFilter.of(ResourceType.TOPIC, "orders-eu", PatternType.MATCH),
        "alice": AclBindingFilter.of(ResourceType.ANY, None, PatternType.ANY, "User:alice"),
        "deny": AclBindingFilter.of(ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY,
                                    AclPermissionType.DENY),
    }
    for name, f in filters.items():
        t.call(f"describe {name}", lambda f=f: admin.describe_acls(f, context=ctx))
    assert set(dict(t.entries)["describe match orders-eu"]) == {TOPIC_PREFIX, TOPIC_LITERAL}
    assert set(dict(t.entries)["describe alice"]) == {TOPIC_PREFIX, GROUP}
    unknown = AclBindingFilter.of(ResourceType.UNKNOWN, None, PatternType.ANY)
    t.call("delete", lambda: admin.delete_acls([filters["match orders-eu"], unknown, filters["deny"]], context=ctx))
    match, bad, deny = t.last()
    assert isinstance(match, DeleteAclsResult) and match.acls == {TOPIC_PREFIX, TOPIC_LITERAL}
    assert bad.error.code == ErrorCode.INVALID_REQUEST
    assert deny.acls == {TOPIC_LITERAL}  # each filter matches the ACLs as they stood before the request
    t.call("describe after", lambda: admin.describe_acls(filters["any"], context=ctx))
    assert t.last() == [GROUP]
    return t.entries


def non_super_user_is_refused(backend: Backend) -> list:
    """alice (no ACL on the cluster) may neither change nor describe ACLs and SCRAM credentials; nothing changes."""
    t = _Transcript()
    alice, ctx = backend.as_user("alice")
    t.call("create acls", lambda: alice.create_acls([GROUP, TOPIC_PREFIX], context=ctx))
    t.call("describe acls", lambda: alice.describe_acls(AclBindingFilter.any(), context=ctx))
    t.call("delete acls", lambda: alice.delete_acls([AclBindingFilter.any()], context=ctx))
    t.call("alter scram", lambda: alice.alter_user_scram_credentials([upsert("alice", b"mine")], context=ctx))
    t.call("describe scram", lambda: alice.describe_user_scram_credentials(["alice"], context=ctx))
    assert all(_raised(answer, ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for _, answer in t.entries), t.entries
    admin, admin_ctx = backend.as_user("admin")
    t.call("acls after", lambda: admin.describe_acls(AclBindingFilter.any(), context=admin_ctx))
    assert t.last() == []
    return t.entries


def tokens_create_renew_expire_describe(backend: Backend) -> list:
    """Tokens through their life: create, renew by owner and renewer, refusals by others, describe, expire."""
    t = _Transcript()
    admin, ctx = backend.as_user("admin")
    alice, alice_ctx = backend.as_user("alice")
    bob, bob_ctx = backend.as_user("bob")
    t.call("create", lambda: admin.create_delegation_token(context=ctx, renewers=["User:bob"],
                                                           max_lifetime_ms=3_600_000))
    token = t.last()
    assert (token.owner, token.requester, token.renewers) == ("User:admin", "User:admin", ("User:bob",))
    assert token.max_timestamp_ms - token.issue_timestamp_ms == 3_600_000
    hmac = t.hmacs["T1"]
    t.call("renew by owner", lambda: admin.renew_delegation_token(hmac, 60_000, context=ctx))
    assert t.last() == token.issue_timestamp_ms + 60_000
    t.call("renew by renewer", lambda: bob.renew_delegation_token(hmac, 120_000, context=bob_ctx))
    t.call("renew by alice", lambda: alice.renew_delegation_token(hmac, 60_000, context=alice_ctx))
    assert _raised(t.last(), ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
    t.call("expire by alice", lambda: alice.expire_delegation_token(hmac, 1000, context=alice_ctx))
    assert _raised(t.last(), ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
    t.call("renew unknown", lambda: admin.renew_delegation_token(b"not-a-token", context=ctx))
    assert _raised(t.last(), ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
    t.call("create for bob by alice", lambda: alice.create_delegation_token(context=alice_ctx, owner="User:bob"))
    assert _raised(t.last(), ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
    t.call("create with a group renewer", lambda: admin.create_delegation_token(context=ctx, renewers=["Group:x"]))
    assert _raised(t.last(), ErrorCode.INVALID_PRINCIPAL_TYPE)
    t.call("create by alice", lambda: alice.create_delegation_token(context=alice_ctx))
    t.call("describe by admin", lambda: admin.describe_delegation_tokens(context=ctx))
    assert [(d.token_id, d.hmac) for d in t.last()] == [("T1", None), ("T2", None)]
    t.call("describe by bob", lambda: bob.describe_delegation_tokens(context=bob_ctx))   # a renewer sees it
    assert [d.token_id for d in t.last()] == ["T1"]
    t.call("describe alice's by admin", lambda: admin.describe_delegation_tokens(["User:alice"], context=ctx))
    assert [d.owner for d in t.last()] == ["User:alice"]
    t.call("expire now", lambda: admin.expire_delegation_token(hmac, -1, context=ctx))
    t.call("describe after", lambda: admin.describe_delegation_tokens(context=ctx))
    assert [d.token_id for d in t.last()] == ["T2"]
    return t.entries


def quotas_alter_and_describe(backend: Backend) -> list:
    """Per-entity results of AlterClientQuotas (KIP-546), describe through strict and loose filters, refusal."""
    t = _Transcript()
    admin, ctx = backend.as_user("admin")
    alice_app = {"user": "alice", "client-id": "app"}
    t.call("alter", lambda: admin.alter_client_quotas([
        ClientQuotaAlteration({"user": "alice"}, (ClientQuotaOp("producer_byte_rate", 1024),)),
        ClientQuotaAlteration(alice_app, (ClientQuotaOp("request_percentage", 50.5),)),
        ClientQuotaAlteration({"user": None}, (ClientQuotaOp("consumer_byte_rate", 2.5),)),  # not integral
        ClientQuotaAlteration({"client-id": None}, (ClientQuotaOp("consumer_byte_rate", 4096),)),
    ], context=ctx))
    assert [e.code for e in t.last().values()] == [ErrorCode.NONE] * 2 + [ErrorCode.INVALID_REQUEST, ErrorCode.NONE]
    alice_only = ClientQuotaFilter.contains_only([ClientQuotaFilterComponent.of_entity("user", "alice")])
    t.call("describe alice only", lambda: admin.describe_client_quotas(alice_only, context=ctx))
    assert t.last() == {ClientQuotaEntity.of({"user": "alice"}): {"producer_byte_rate": 1024.0}}
    t.call("describe alice's", lambda: admin.describe_client_quotas(
        ClientQuotaFilter.contains([ClientQuotaFilterComponent.of_entity("user", "alice")]), context=ctx))
    assert len(t.last()) == 2
    t.call("remove", lambda: admin.alter_client_quotas(
        [ClientQuotaAlteration(alice_app, (ClientQuotaOp("request_percentage", None),))], context=ctx))
    t.call("describe all", lambda: admin.describe_client_quotas(context=ctx))
    assert set(map(str, t.last())) == {"user=alice", "client-id=<default>"}
    alice, alice_ctx = backend.as_user("alice")
    t.call("alter by alice", lambda: alice.alter_client_quotas(
        [ClientQuotaAlteration({"user": "alice"}, (ClientQuotaOp("producer_byte_rate", None),))], context=alice_ctx))
    t.call("describe by alice", lambda: alice.describe_client_quotas(context=alice_ctx))
    assert all(_raised(answer, ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for _, answer in t.entries[-2:])
    return t.entries


SCENARIOS = [scram_alter_and_describe, acls_create_describe_delete, non_super_user_is_refused,
             tokens_create_renew_expire_describe, quotas_alter_and_describe]
