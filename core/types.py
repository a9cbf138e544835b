"""The public request and result types, named after confluent_kafka.admin where it has them."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.errors import ApiError
from events.types import AclBinding, ScramMechanism

USE_DEFAULT_ITERATIONS = -1  # "use the store's default for the mechanism" (KIP-506)


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who is asking: the authenticated principal, their host and how they connected."""

    principal: str = "User:admin"
    host: str = "127.0.0.1"
    tls: bool = True
    token_authenticated: bool = False
    authenticated: bool = True
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class ScramCredentialInfo:
    """A mechanism and its iteration count (what describe may show)."""

    mechanism: ScramMechanism
    iterations: int = USE_DEFAULT_ITERATIONS


@dataclass(frozen=True, slots=True)
class UserScramCredentialUpsertion:
    """Create or replace a user's credential for one mechanism.

    Give ``password`` (the store salts it, KIP-506) or ``salted_password``
    with ``salt`` (the pre-salted wire form of KIP-554).
    """

    user: str
    scram_credential_info: ScramCredentialInfo
    password: bytes | None = field(default=None, repr=False)
    salt: bytes | None = field(default=None, repr=False)
    salted_password: bytes | None = field(default=None, repr=False)

    @property
    def mechanism(self) -> ScramMechanism:
        return self.scram_credential_info.mechanism


@dataclass(frozen=True, slots=True)
class UserScramCredentialDeletion:
    """Delete a user's credential for one mechanism."""

    user: str
    mechanism: ScramMechanism


UserScramCredentialAlteration = UserScramCredentialUpsertion | UserScramCredentialDeletion


@dataclass(frozen=True, slots=True)
class UserScramCredentialsDescription:
    """A user's credentials as describe shows them: mechanisms and iterations only."""

    user: str
    scram_credential_infos: tuple[ScramCredentialInfo, ...]


@dataclass(frozen=True, slots=True)
class DeleteAclsResult:
    """Per delete filter: an error, or the ACLs it removed."""

    error: ApiError
    acls: tuple[AclBinding, ...] = ()


@dataclass(frozen=True, slots=True)
class DelegationToken:
    """A delegation token as create and describe return it.

    ``hmac`` (the token's password) is present after create, and in describe
    only when the store is configured to include it; it never shows in repr.
    """

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int
    hmac: bytes | None = field(default=None, repr=False)
