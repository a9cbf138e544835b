"""What tests of the store share: the acting admin, a token secret, ACL and SCRAM builders, opening a store.

The fixtures built on these (``keyring``, ``clock``, the ``open_store`` factory) live in ``tests/conftest.py``.
"""

from __future__ import annotations

from pathlib import Path

from core import (
    AclBinding,
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
from events.keyring import Keyring

__all__ = ["ADMIN", "TOKEN_SECRET", "acl", "store_at", "upsert"]

ADMIN = RequestContext("User:admin", "10.0.0.1")  # a super user (StoreConfig's default super_users)
TOKEN_SECRET = b"token-secret-for-tests"


def acl(name: str = "foo", principal: str = "User:alice", op: AclOperation = AclOperation.READ,
        perm: AclPermissionType = AclPermissionType.ALLOW, *, host: str = "*",
        pattern: PatternType = PatternType.LITERAL, rtype: ResourceType = ResourceType.TOPIC) -> AclBinding:
    """An ACL binding: by default User:alice may READ the LITERAL topic ``name`` from any host."""
    return AclBinding.of(rtype, name, pattern, principal, host, op, perm)


def upsert(user: str, password: bytes = b"pw", mech: ScramMechanism = ScramMechanism.SCRAM_SHA_256,
           iterations: int = 4096, *, salt: bytes | None = None) -> UserScramCredentialUpsertion:
    """A SCRAM credential upsertion (without ``salt``, the store chooses one)."""
    return UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, iterations), password, salt=salt)


def store_at(directory: str | Path, keyring: Keyring, *, read_only: bool = False, **config) -> SecurityStore:
    """``SecurityStore.open(directory, StoreConfig(token_secret=TOKEN_SECRET, **config))``."""
    config.setdefault("token_secret", TOKEN_SECRET)
    return SecurityStore.open(directory, StoreConfig(**config), keyring=keyring, read_only=read_only)
