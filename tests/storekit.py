"""What tests of the store share: the acting admin, a token secret, ACL and SCRAM builders, opening a store.

Also what tests of time travel compare with: ``replayed`` (the image a full replay of a prefix builds) and
``decoded_batches`` (which batches a query decodes).  The fixtures built on these (``keyring``, ``clock``, the ``open_store`` factory) live in ``tests/conftest.py``.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from secmeta.core import (
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
from secmeta.core.log.reading import Reader
from secmeta.events.keyring import Keyring
from secmeta.projections.image import SecurityImage, SecurityProjection

__all__ = ["ADMIN", "TOKEN_SECRET", "acl", "decoded_batches", "replayed", "store_at", "upsert"]

ADMIN = RequestContext("User:admin", "10.0.0.1")  # a super user (StoreConfig's default super_users)
TOKEN_SECRET = b"token-secret-for-tests, 32 bytes or more"


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


def replayed(store: SecurityStore, n: int) -> SecurityImage:
    """The image after the store's first ``n`` events, replayed one by one from the empty image."""
    return replace(SecurityProjection().apply(SecurityImage.EMPTY, list(store.log.read(0, n))), next_offset=n)


def decoded_batches(store: SecurityStore, monkeypatch) -> list[int]:
    """The base offsets of the batches the store's log decodes from now on (the list grows as it does): as
    envelopes (``Reader.decode``, where ``Log.read`` goes) or as replay reads them (``Reader.replay_batches``: the
    first offset it yields of each batch).  Only the calling thread's reads count: a writer's open may go on
    filling time travel's checkpoints in a thread of its own, whose reads are not the query's."""
    decoded: list[int] = []
    real, real_replay = Reader.decode, Reader.replay_batches
    asker = threading.get_ident()

    def decode(reader: Reader, batch):
        if threading.get_ident() == asker:
            decoded.append(batch.base_offset)
        return real(reader, batch)

    def replay_batches(reader: Reader, *args, **kwargs):
        for first, events in real_replay(reader, *args, **kwargs):
            if threading.get_ident() == asker:
                decoded.append(first)
            yield first, events

    monkeypatch.setattr(Reader, "decode", decode)
    monkeypatch.setattr(Reader, "replay_batches", replay_batches)
    return decoded
