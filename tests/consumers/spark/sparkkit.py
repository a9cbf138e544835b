"""Shared helpers of the Spark tests: a store with a random workload on a ticking clock, and its answers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core import AclBindingFilter, SecurityStore, StoreConfig
from core.log import LogConfig
from events.keyring import Keyring
from tests.consumers.conftest import ADMIN, TOKEN_SECRET, random_workload


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
    """SCRAM credentials through describe, as (user, mechanism, iterations)."""
    out = set()
    for user, desc in view.describe_user_scram_credentials(context=ADMIN).items():
        for info in getattr(desc, "scram_credential_infos", ()):
            out.add((user, info.mechanism.name, info.iterations))
    return out


def token_state(view) -> set[tuple]:
    """Tokens through describe, as (token id, owner, requester, expiry ms)."""
    return {(t.token_id, t.owner, t.requester, t.expiry_timestamp_ms)
            for t in view.describe_delegation_tokens(context=ADMIN)}
