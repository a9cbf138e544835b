"""The public request and result types, named after confluent_kafka.admin where it has them."""

from __future__ import annotations

from dataclasses import dataclass, field

from secmeta.core import validation
from secmeta.core.errors import ApiError
from secmeta.events.types import AclBinding, ScramMechanism
from secmeta.projections.tokens import TokenInfo

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

    def __post_init__(self) -> None:
        """Refuse what cannot be logged as the actor: a bad principal, host or request id, a non-bool flag."""
        validation.principal(self.principal, "context principal")
        validation.text(self.host, "context host")
        validation.optional_text(self.request_id, "context request_id")
        for name in ("tls", "token_authenticated", "authenticated"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"context {name} must be a bool, not {type(getattr(self, name)).__name__}")


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
class DelegationToken(TokenInfo):
    """A delegation token as create and describe return it: the image's token record plus its HMAC.

    ``hmac`` (the token's password) is present after create, and in describe
    only when the store is configured to include it; it never shows in repr.
    """

    hmac: bytes | None = field(default=None, repr=False)

    @classmethod
    def of(cls, info: TokenInfo, hmac: bytes | None = None) -> DelegationToken:
        """The token ``info`` describes, with ``hmac`` when given."""
        return cls(info.token_id, info.owner, info.requester, tuple(info.renewers), info.issue_timestamp_ms,
                   info.expiry_timestamp_ms, info.max_timestamp_ms, hmac)
