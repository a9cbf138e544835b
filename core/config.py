"""StoreConfig: every setting of a store, with Kafka's defaults where Kafka has one."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from core.errors import InvalidValueError
from core.log import LogConfig
from core.scram_crypto import DEFAULT_ITERATIONS
from events.types import ScramMechanism
from projections.snapshot import SnapshotPolicy

DAY_MS = 24 * 3600 * 1000
CONFIG_FILE = "config.json"
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


@dataclass(frozen=True)
class PasswordPolicy:
    """KIP-506's optional policy: ``accept(password)`` and a description used in the error."""

    accept: Callable[[bytes], bool]
    description: str

    @classmethod
    def min_length(cls, n: int) -> PasswordPolicy:
        return cls(lambda p: len(p) >= n, f"passwords must be at least {n} bytes long")


@dataclass(frozen=True)
class StoreConfig:
    """Settings of a SecurityStore. Secrets (token_secret) never show in repr."""

    super_users: frozenset[str] = frozenset({"User:admin"})
    allow_everyone_if_no_acl_found: bool = False
    default_principal: str = "User:admin"
    # SCRAM (KIP-554 / KIP-506)
    enabled_mechanisms: frozenset[ScramMechanism] = frozenset({ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512})
    default_iterations: dict[ScramMechanism, int] = field(
        default_factory=lambda: {ScramMechanism.SCRAM_SHA_256: DEFAULT_ITERATIONS, ScramMechanism.SCRAM_SHA_512: DEFAULT_ITERATIONS}
    )
    allow_plaintext_passwords: bool = False
    password_policy: PasswordPolicy | None = None
    # delegation tokens (KIP-48)
    token_secret: bytes | None = field(default=None, repr=False)
    token_max_lifetime_ms: int = 7 * DAY_MS
    token_expiry_time_ms: int = DAY_MS
    token_expiry_check_interval_ms: int = 3600 * 1000
    describe_tokens_include_hmac: bool = False
    # limits
    max_acl_changes_per_request: int = 10_000
    # durability and snapshots
    log: LogConfig = field(default_factory=LogConfig)
    snapshot_policy: SnapshotPolicy = field(default_factory=SnapshotPolicy)
    keep_snapshots: int = 2
    delete_covered_segments: bool = False
    key_file: str | None = None
    clock: Callable[[], float] = field(default=time.time, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "super_users", frozenset(self.super_users))
        object.__setattr__(self, "enabled_mechanisms", frozenset(ScramMechanism(m) for m in self.enabled_mechanisms))
        for principal in self.super_users:
            if ":" not in principal:
                raise InvalidValueError(f"super user {principal!r} is not a principal of the form Type:Name")
        for mech, its in self.default_iterations.items():
            if not MIN_ITERATIONS <= its <= MAX_ITERATIONS:
                raise InvalidValueError(f"default iterations for {ScramMechanism(mech).name} must be within "
                                 f"{MIN_ITERATIONS}..{MAX_ITERATIONS}, not {its}")
        for name in ("token_max_lifetime_ms", "token_expiry_time_ms", "token_expiry_check_interval_ms",
                     "max_acl_changes_per_request"):
            if getattr(self, name) <= 0:
                raise InvalidValueError(f"{name} must be positive, not {getattr(self, name)}")
        if self.token_secret is not None and len(self.token_secret) == 0:
            raise InvalidValueError("token_secret must not be empty (leave it None to disable delegation tokens)")

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def with_(self, **changes) -> StoreConfig:
        return replace(self, **changes)

    # -- persisted settings (config.json in the store directory) -----------------

    _PERSISTED = ("super_users", "allow_everyone_if_no_acl_found", "default_principal", "allow_plaintext_passwords",
                  "token_max_lifetime_ms", "token_expiry_time_ms", "token_expiry_check_interval_ms",
                  "describe_tokens_include_hmac", "max_acl_changes_per_request", "delete_covered_segments")

    @classmethod
    def load(cls, directory: str | os.PathLike) -> StoreConfig:
        """Settings saved in ``DIR/config.json`` (if any); the token secret from $SECMETA_TOKEN_SECRET."""
        path = Path(directory) / CONFIG_FILE
        values: dict = {}
        if path.exists():
            try:
                values = json.loads(path.read_text())
            except ValueError as exc:
                raise InvalidValueError(f"{path} is not valid JSON: {exc}") from None
            unknown = set(values) - set(cls._PERSISTED)
            if unknown:
                raise InvalidValueError(f"{path} has unknown settings: {', '.join(sorted(unknown))}")
            if "super_users" in values:
                values["super_users"] = frozenset(values["super_users"])
        secret = os.environ.get("SECMETA_TOKEN_SECRET")
        if secret:
            values["token_secret"] = secret.encode()
        return cls(**values)

    def save(self, directory: str | os.PathLike) -> Path:
        path = Path(directory) / CONFIG_FILE
        data = {name: getattr(self, name) for name in self._PERSISTED}
        data["super_users"] = sorted(self.super_users)
        path.write_text(json.dumps(data, indent=2) + "\n")
        return path


__all__ = ["StoreConfig", "PasswordPolicy", "MIN_ITERATIONS", "MAX_ITERATIONS"]
