"""Shared helpers of the Spark tests: a store with a random workload on a ticking clock, and its answers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from secmeta.core import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    SecurityStore,
    StoreConfig,
    UserScramCredentialUpsertion,
)
from secmeta.core.log import LogConfig
from secmeta.events.keyring import Keyring
from tests.consumers.conftest import random_workload
from tests.storekit import ADMIN, TOKEN_SECRET

SALT = b"salt-that-must-never-leak-0123456789"  # the sources' tests look for it in every row


def topic_acl(name: str, principal: str = "User:alice", pattern=PatternType.LITERAL) -> AclBinding:
    return AclBinding.of(ResourceType.TOPIC, name, pattern, principal, "*",
                         AclOperation.READ, AclPermissionType.ALLOW)


def write_small_workload(store: SecurityStore) -> None:
    """Every event type but a token removal: ACLs (one prefixed), a SCRAM credential salted with SALT,
    a token renewed once, an ACL deletion, then 30 more ACLs (enough to roll tiny segments)."""
    store.create_acls([topic_acl("orders"), topic_acl("pay", pattern=PatternType.PREFIXED)], context=ADMIN)
    errors = store.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                      b"pw-alice", salt=SALT)],
        context=ADMIN,
    )
    assert all(e.is_success for e in errors.values())
    token = store.create_delegation_token(context=ADMIN, owner="User:alice", renewers=("User:bob", "User:admin"))
    store.renew_delegation_token(token.hmac, 60_000, context=ADMIN)
    deleted = store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "orders")], context=ADMIN)
    assert len(deleted[0].acls) == 1
    store.create_acls([topic_acl(f"t-{i}", principal=f"User:u{i}") for i in range(30)], context=ADMIN)


class TickingClock:
    """A clock that moves one second each time it is read, so every request has its own time."""

    def __init__(self, t: float = 1_800_000_000.0):
        self.t = t

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


@dataclass
class Workspace:
    store_dir: Path
    key_file: Path
    keyring: Keyring
    config: StoreConfig

    def open(self) -> SecurityStore:
        return SecurityStore.open(self.store_dir, self.config, keyring=self.keyring)


def make_workspace(root: Path, seed: int, steps: int, segment_bytes: int = 4096) -> Workspace:
    """A store under ``root`` with ``steps`` random requests of every kind (ACLs, SCRAM, tokens)."""
    key_file = root / "keys.json"
    Keyring.generate_file(key_file)
    keyring = Keyring.from_file(key_file)
    clock = TickingClock()
    config = StoreConfig(token_secret=TOKEN_SECRET, clock=clock, log=LogConfig(segment_bytes=segment_bytes))
    space = Workspace(root / "store", key_file, keyring, config)
    with space.open() as store:
        random_workload(store, seed, steps=steps, clock=clock)
    return space


def acl_state(view) -> set[tuple]:
    """ACLs through describe, as (resource type, name, pattern, principal, host, operation, permission)."""
    return {(b.pattern.resource_type.name, b.pattern.name, b.pattern.pattern_type.name, b.entry.principal,
             b.entry.host, b.entry.operation.name, b.entry.permission_type.name)
            for b in view.describe_acls(AclBindingFilter.any(), context=ADMIN)}


def credential_state(view) -> set[tuple]:
    """SCRAM credentials through describe, as (user, Kafka's mechanism name, iterations)."""
    out = set()
    for user, desc in view.describe_user_scram_credentials(context=ADMIN).items():
        for info in getattr(desc, "scram_credential_infos", ()):
            out.add((user, info.mechanism.mechanism_name, info.iterations))
    return out


def token_state(view) -> set[tuple]:
    """Tokens through describe, as (token id, owner, requester, expiry ms)."""
    return {(t.token_id, t.owner, t.requester, t.expiry_timestamp_ms)
            for t in view.describe_delegation_tokens(context=ADMIN)}
