"""Small builders shared by the log, snapshot and CLI tests."""

from __future__ import annotations

import uuid
from pathlib import Path

from events.keyring import Keyring
from events.records import AclCreated, AclDeleted, Envelope, ScramCredentialDeleted
from events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)


class Clock:
    """A settable clock (seconds since the epoch) for StoreConfig(clock=...): time moves only when told."""

    def __init__(self, t: float = 1_800_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_keyring(directory: Path, name: str = "keys.json") -> Keyring:
    path = Path(directory) / name
    Keyring.generate_file(path)
    return Keyring.from_file(path)


def binding(i: int) -> AclBinding:
    return AclBinding.of(
        ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL, f"User:user-{i}", "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )


def acl_created(i: int, ts: int = 1_000, acl_id: str | None = None) -> Envelope:
    return Envelope(-1, ts, "User:admin", "10.0.0.1", f"req-{i}", AclCreated(acl_id or str(uuid.UUID(int=i)), binding(i)))


def acl_deleted(i: int, ts: int = 1_000) -> Envelope:
    return Envelope(-1, ts, "User:admin", "10.0.0.1", f"del-{i}", AclDeleted(str(uuid.UUID(int=i)), binding(i)))


def scram_deleted(user: str, ts: int = 1_000) -> Envelope:
    return Envelope(-1, ts, "User:admin", "10.0.0.1", "r", ScramCredentialDeleted(user, ScramMechanism.SCRAM_SHA_256))


def strip(envelopes) -> list[tuple]:
    """What a test compares: offset, time, actor and event of each envelope."""
    return [(e.offset, e.timestamp_ms, e.actor_principal, e.request_id, e.event) for e in envelopes]
