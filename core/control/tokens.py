"""Create, renew, expire, describe and sweep delegation tokens (KIP-48, KIP-373).

Checks follow Kafka's order (KafkaApis.handleCreateTokenRequest, then the
controller): token-authenticated or unauthenticated callers, the CREATE_TOKENS
check for another owner, renewer types, then tokens disabled and the token's
state. Describe answers DELEGATION_TOKEN_AUTH_DISABLED too when tokens are off.
Failures raise the ApiException subclass of the Kafka code; nothing is
changed here, the events returned are the change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from uuid import uuid4

from secmeta.core import validation
from secmeta.core.auth.token_hmac import TokenHmacs, token_hmac
from secmeta.core.config import StoreConfig
from secmeta.core.control.authz import Decider, require_token_request_allowed
from secmeta.core.control.result import ControlResult
from secmeta.core.errors import (
    DelegationTokenAuthorizationException,
    DelegationTokenDisabledException,
    DelegationTokenExpiredException,
    DelegationTokenNotFoundException,
    DelegationTokenOwnerMismatchException,
    InvalidPrincipalTypeException,
    InvalidRequestException,
)
from secmeta.core.settings import require_token_secret
from secmeta.core.types import DelegationToken, RequestContext
from secmeta.events.records import (
    DelegationTokenExpired,
    DelegationTokenRemoved,
    DelegationTokenRenewed,
    TokenRemovalReason,
)
from secmeta.events.types import AclOperation, ResourceType
from secmeta.projections.tokens import TokenInfo, TokensImage

__all__ = [
    "USER_TYPE",
    "create_token",
    "describe_tokens",
    "expire_token",
    "renew_token",
    "sweep_expired",
]

USER_TYPE = "User"


def _tokens_of(image) -> TokensImage:
    return image if isinstance(image, TokensImage) else image.tokens


def _require_enabled(config: StoreConfig) -> bytes:
    """The token secret, if one is configured and it is the one the log's settings name (its fingerprint)."""
    secret = require_token_secret(config)
    if secret is None:
        raise DelegationTokenDisabledException(
            "Delegation tokens are disabled: no token secret is configured")
    return secret


def _require_int64(name: str, value: object) -> None:
    with validation.reraised_as(InvalidRequestException):
        validation.int64(value, name)


def _timestamp(name: str, value: int) -> int:
    if not validation.is_int64(value):
        raise InvalidRequestException(f"The token's {name} overflows a 64-bit timestamp")
    return value


def create_token(
    image,
    context: RequestContext,
    now_ms: int,
    *,
    owner: str | None = None,
    renewers: Iterable[str] = (),
    max_lifetime_ms: int = -1,
    config: StoreConfig,
    decider: Decider,
    new_token_id: Callable[[], str] = lambda: str(uuid4()),
) -> ControlResult[DelegationToken]:
    """A DelegationTokenIssued event and the new token with its HMAC."""
    require_token_request_allowed(context)
    requester = context.principal
    if owner == "":  # Kafka's KafkaApis reads an empty owner name as absent; an empty principal is no principal
        raise InvalidRequestException("owner must not be empty: give a Type:Name principal, or no owner "
                                      "(None) for a token of the requester")
    owner = requester if owner is None else owner  # 0 or False is a wrong type, not "no owner"
    _principal_type(owner, "owner")
    if owner != requester and not decider(
        requester, context.host, AclOperation.CREATE_TOKENS, ResourceType.USER, owner
    ):
        raise DelegationTokenAuthorizationException(
            f"Principal {requester} may not create tokens for {owner} (needs CREATE_TOKENS on "
            f"USER:{owner})")
    if isinstance(renewers, str):
        raise InvalidRequestException("renewers must be a list of principals, not one string")
    renewers = tuple(renewers)
    for renewer in renewers:  # the broker checks renewers before the controller sees the request
        if _principal_type(renewer, "renewer") != USER_TYPE:
            raise InvalidPrincipalTypeException(f"Renewer {renewer!r} is not a User principal")
    secret = _require_enabled(config)
    _require_int64("max_lifetime_ms", max_lifetime_ms)
    lifetime = config.token_max_lifetime_ms
    if max_lifetime_ms > 0:
        lifetime = min(lifetime, max_lifetime_ms)
    max_ts = _timestamp("max timestamp", now_ms + lifetime)
    expiry = min(max_ts, _timestamp("expiry", now_ms + config.token_expiry_time_ms))
    info = TokenInfo(new_token_id(), owner, requester, renewers, now_ms, expiry, max_ts)
    return ControlResult([info.issued()], DelegationToken.of(info, token_hmac(secret, info.token_id)))


def _principal_type(value: object, field: str) -> str:
    """The type of principal ``value``: text secmeta cannot store is INVALID_REQUEST, text that is not
    ``Type:Name`` INVALID_PRINCIPAL_TYPE (Kafka's code for an owner or renewer it cannot parse)."""
    with validation.reraised_as(InvalidRequestException):
        validation.text(value, field)
    with validation.reraised_as(InvalidPrincipalTypeException):
        return validation.principal_parts(value, field)[0]


def _find(image, hmacs: TokenHmacs, hmac: bytes) -> TokenInfo:
    if not isinstance(hmac, bytes | bytearray):  # never quoted: it is the token's password
        raise InvalidRequestException(f"hmac must be bytes, not {type(hmac).__name__}")
    token_id = hmacs.token_id(hmac)
    info = None if token_id is None else _tokens_of(image).get(token_id)
    if info is None:
        raise DelegationTokenNotFoundException("No delegation token has this HMAC")
    return info


def _token_to_change(image, hmacs: TokenHmacs, hmac: bytes, context: RequestContext, config: StoreConfig,
                     period_name: str, period: object) -> TokenInfo:
    """The token a renew or an expire names by ``hmac``, after the checks both make first, in this order: the
    connection may ask for tokens, tokens are enabled, the period is an int64, the token exists."""
    require_token_request_allowed(context)
    _require_enabled(config)
    _require_int64(period_name, period)
    return _find(image, hmacs, hmac)


def _require_owner_or_renewer(info: TokenInfo, context: RequestContext, action: str) -> None:
    if context.principal != info.owner and context.principal not in info.renewers:
        raise DelegationTokenOwnerMismatchException(
            f"Principal {context.principal} is neither the owner nor a renewer of token "
            f"{info.token_id} and may not {action} it")


def _require_not_expired(info: TokenInfo, now_ms: int) -> None:
    if info.is_expired(now_ms):
        raise DelegationTokenExpiredException(f"Delegation token {info.token_id} has expired")


def renew_token(
    image,
    hmacs: TokenHmacs,
    hmac: bytes,
    renew_period_ms: int,
    context: RequestContext,
    now_ms: int,
    *,
    config: StoreConfig,
) -> ControlResult[int]:
    """A DelegationTokenRenewed event and the new expiry timestamp.

    ``hmacs`` is the HMAC index of ``image``'s tokens (the image holds no HMAC).
    """
    info = _token_to_change(image, hmacs, hmac, context, config, "renew_period_ms", renew_period_ms)
    _require_not_expired(info, now_ms)
    _require_owner_or_renewer(info, context, "renew")
    period = config.token_expiry_time_ms
    if renew_period_ms > 0:
        period = min(period, renew_period_ms)
    expiry = min(info.max_timestamp_ms, now_ms + period)
    return ControlResult([DelegationTokenRenewed(info.token_id, renew_period_ms, expiry)], expiry)


def expire_token(
    image,
    hmacs: TokenHmacs,
    hmac: bytes,
    expiry_period_ms: int,
    context: RequestContext,
    now_ms: int,
    *,
    config: StoreConfig,
) -> ControlResult[int]:
    """Change a token's expiry (or remove it at once for a negative period); the new expiry.

    KRaft's order (DelegationTokenControlManager.expireDelegationToken): after the checks renew makes too
    (``_token_to_change``), an expired token is DELEGATION_TOKEN_EXPIRED whoever asks and whatever the period,
    then a caller neither owner nor renewer is OWNER_MISMATCH; only then does a negative period remove the token.
    A removal answers ``now_ms`` as the expiry timestamp, where KRaft answers the requested negative period:
    the wire codec (kio) cannot carry a timestamp before the epoch, so secmeta's own client could not read it.
    ``hmacs`` is the HMAC index of ``image``'s tokens (the image holds no HMAC).
    """
    info = _token_to_change(image, hmacs, hmac, context, config, "expiry_period_ms", expiry_period_ms)
    _require_not_expired(info, now_ms)
    _require_owner_or_renewer(info, context, "expire")
    if expiry_period_ms < 0:
        return ControlResult([DelegationTokenRemoved(info.token_id, TokenRemovalReason.EXPIRED_BY_REQUEST)], now_ms)
    expiry = min(info.max_timestamp_ms, now_ms + expiry_period_ms)
    return ControlResult([DelegationTokenExpired(info.token_id, expiry_period_ms, expiry)], expiry)


def _involves(info: TokenInfo, principal: str) -> bool:
    return principal == info.owner or principal == info.requester or principal in info.renewers


def _visible(info: TokenInfo, context: RequestContext, decider: Decider) -> bool:
    caller, host = context.principal, context.host
    return (
        _involves(info, caller)
        or decider(caller, host, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, info.token_id)
        or decider(caller, host, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, info.owner)
    )


def describe_tokens(
    image,
    owners: Iterable[str] | None,
    context: RequestContext,
    *,
    decider: Decider,
    config: StoreConfig,
    past: bool = False,
) -> list[DelegationToken]:
    """The tokens of ``owners`` (None = all, empty = none) that the caller may see.

    A read: it returns its answer, not a ControlResult. The HMAC is included
    only when ``config.describe_tokens_include_hmac`` (Kafka always sends it).
    The live state needs tokens enabled (Kafka); a ``past`` one (as_of) needs the secret only to show HMACs.
    """
    require_token_request_allowed(context)
    include_hmac = bool(config.describe_tokens_include_hmac)
    secret = _require_enabled(config) if include_hmac or not past else None
    if owners is not None:
        if isinstance(owners, str):
            raise InvalidRequestException("owners must be a list of principals, not one string")
        owners = tuple(owners)
        with validation.reraised_as(InvalidRequestException):
            for owner in owners:
                validation.text(owner, "owner", selects=True)
        owners = frozenset(owners)
        if not owners:
            return []
    found: list[DelegationToken] = []
    for info in sorted(_tokens_of(image), key=lambda t: (t.issue_timestamp_ms, t.token_id)):
        if owners is not None and not any(_involves(info, owner) for owner in owners):
            continue
        if not _visible(info, context, decider):
            continue
        found.append(DelegationToken.of(info, token_hmac(secret, info.token_id) if include_hmac else None))
    return found


def sweep_expired(image, now_ms: int) -> ControlResult[int]:
    """A DelegationTokenRemoved (EXPIRED_BY_SWEEP) for every token expired at ``now_ms``; how many."""
    events = [DelegationTokenRemoved(info.token_id, TokenRemovalReason.EXPIRED_BY_SWEEP)
              for info in _tokens_of(image).expired(now_ms)]
    return ControlResult(events, len(events))
