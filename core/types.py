"""The public request and result types, named after confluent_kafka.admin where it has them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from secmeta.core import validation
from secmeta.core.errors import ApiError
from secmeta.events.records import ClientQuotaEntity
from secmeta.events.types import AclBinding, ScramMechanism
from secmeta.projections.tokens import TokenInfo

USE_DEFAULT_ITERATIONS = -1  # "use the store's default for the mechanism" (KIP-506)


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who is asking: the principal, their host and how they connected.

    ``asserted`` (the default) says the principal and host are the caller's own claim, as a local caller's
    (the CLI's ``--as`` / ``--from-host``, a program's context) are; ``secmeta serve`` sets it False for the
    principal it authenticated and the peer address it saw. Logged changes record it beside the operator
    (the OS user, host and process that wrote them)."""

    principal: str = "User:admin"
    host: str = "127.0.0.1"
    tls: bool = True
    token_authenticated: bool = False
    authenticated: bool = True
    request_id: str | None = None
    asserted: bool = True

    def __post_init__(self) -> None:
        """Refuse what cannot be logged as the actor: a bad principal, host or request id, a non-bool flag."""
        validation.principal(self.principal, "context principal")
        validation.text(self.host, "context host")
        validation.optional_text(self.request_id, "context request_id")
        for name in ("tls", "token_authenticated", "authenticated", "asserted"):
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


# -- client quotas (KIP-546; Kafka's ClientQuotaAlteration, ClientQuotaFilter) --------------------------

@dataclass(frozen=True, slots=True)
class ClientQuotaOp:
    """Set ``key`` to ``value``, or remove it (``value=None``)."""

    key: str
    value: float | None = None


@dataclass(frozen=True, slots=True)
class ClientQuotaAlteration:
    """The ops to apply to one entity: ``{"user": "alice"}``, ``{"user": None}`` (the default user)..."""

    entity: Mapping[str, str | None] | ClientQuotaEntity
    ops: tuple[ClientQuotaOp, ...] = field(default=())


class MatchType(IntEnum):
    """How a filter component matches an entity's name (DescribeClientQuotasRequest's MATCH_TYPE_*)."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


@dataclass(frozen=True, slots=True)
class ClientQuotaFilterComponent:
    """One entity type of a filter (Kafka's ClientQuotaFilterComponent)."""

    entity_type: str
    match_type: int
    match: str | None = None

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, MatchType.EXACT, name)

    @classmethod
    def of_default_entity(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, MatchType.DEFAULT)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, MatchType.SPECIFIED)


@dataclass(frozen=True, slots=True)
class ClientQuotaFilter:
    """Components to match and whether an entity may have other types (``strict=False``) or not.

    ``ClientQuotaFilter()`` is Kafka's ``all()``; ``contains``/``contains_only`` as its factories.
    """

    components: tuple[ClientQuotaFilterComponent, ...] = ()
    strict: bool = False

    @classmethod
    def contains(cls, components: Iterable[ClientQuotaFilterComponent]) -> ClientQuotaFilter:
        return cls(tuple(components), False)

    @classmethod
    def contains_only(cls, components: Iterable[ClientQuotaFilterComponent]) -> ClientQuotaFilter:
        return cls(tuple(components), True)


EVERY_ENTITY = ClientQuotaFilter()  # Kafka's ClientQuotaFilter.all()
