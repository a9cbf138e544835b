"""Alter and describe SCRAM credentials (KIP-554, with KIP-506's server-side passwords).

``alter_scram_credentials`` follows Kafka's ScramControlManager.alterCredentials:
it walks the deletions, then the upsertions, each in request order, and stops
looking at a user at that user's first error, so the first failing item
decides the user's result; a user's second valid item is DUPLICATE_RESOURCE and
none of that user's items apply. It returns the events to log and one ApiError
per user; it changes nothing itself. Messages start with Kafka's words (clients
match on them) and name the bad value, never a password, salt or salted password.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from secmeta.core import validation
from secmeta.core.auth.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    credential_from_password,
    credential_from_salted_password,
)
from secmeta.core.config import StoreConfig
from secmeta.core.control.authz import Decider, require_cluster, require_write_right
from secmeta.core.control.result import ControlResult
from secmeta.core.errors import ApiError, ErrorCode, InvalidRequestException
from secmeta.core.types import (
    RequestContext,
    ScramCredentialInfo,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from secmeta.core.validation import FieldError
from secmeta.events.keyring import Keyring, seal_scram
from secmeta.events.records import Event, ScramCredentialDeleted, ScramCredentialUpserted
from secmeta.events.types import AclOperation, ScramMechanism

__all__ = ["alter_scram_credentials", "describe_scram_credentials"]

_OK = ApiError()
_UNACCEPTABLE = ErrorCode.UNACCEPTABLE_CREDENTIAL
_TWICE = "A user credential cannot be altered twice in the same request"


def _unacceptable(message: str) -> ApiError:
    return ApiError(_UNACCEPTABLE, message)


def _mechanism(value: object) -> ScramMechanism:
    """The mechanism a request names; anything unrecognised reads as UNKNOWN."""
    return validation.enum_or_unknown(ScramMechanism, value)


def _check_user_and_mechanism(user: str, mechanism: object) -> ApiError | None:
    if not user:
        return _unacceptable("Username must not be empty")
    try:
        validation.text(user, "user")
    except FieldError as exc:
        return ApiError(ErrorCode.INVALID_REQUEST, str(exc))
    if _mechanism(mechanism) is ScramMechanism.UNKNOWN:
        return ApiError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {mechanism!r}")
    return None


@dataclass(frozen=True, slots=True)
class _Upsert:
    """An upsertion that passed every check, with its mechanism and iteration count resolved."""

    item: UserScramCredentialUpsertion
    mechanism: ScramMechanism
    iterations: int
    secret: bytes = field(repr=False)  # the password, or the salted password
    salt: bytes | None = field(default=None, repr=False)


def _check_deletion(image, item: UserScramCredentialDeletion) -> ApiError | Event:
    error = _check_user_and_mechanism(item.user, item.mechanism)
    if error:
        return error
    mech = _mechanism(item.mechanism)
    if image.scram.get(item.user, mech) is None:
        return ApiError(ErrorCode.RESOURCE_NOT_FOUND,
                        f"Attempt to delete a user credential that does not exist: "
                        f"{mech.mechanism_name} of user {item.user!r}")
    return ScramCredentialDeleted(item.user, mech)


def _iterations(requested: object, mech: ScramMechanism, config: StoreConfig) -> int | ApiError:
    if requested == -1 and not isinstance(requested, bool):
        return config.default_iterations.get(mech, DEFAULT_ITERATIONS)
    if not isinstance(requested, int) or isinstance(requested, bool):
        return _unacceptable(f"Iterations must be an integer, not {requested!r}")
    if requested < MIN_ITERATIONS:
        return _unacceptable(f"Too few iterations: {requested} (minimum {MIN_ITERATIONS})")
    if requested > MAX_ITERATIONS:
        return _unacceptable(f"Too many iterations: {requested} (maximum {MAX_ITERATIONS})")
    return requested


def _check_secret(item: UserScramCredentialUpsertion, context: RequestContext,
                  config: StoreConfig) -> ApiError | tuple[bytes, bytes | None]:
    """(password or salted password, salt) as bytes, or why this store cannot take them (KIP-506's checks)."""
    try:
        password, salt, salted = (None if value is None else validation.secret_bytes(value, name, utf8=utf8)
                                  for name, value, utf8 in (("password", item.password, True),
                                                            ("salt", item.salt, False),
                                                            ("salted password", item.salted_password, False)))
    except FieldError as exc:  # the message names the field, never the value
        return _unacceptable(f"The {exc}")
    if password is not None and salted is not None:
        return _unacceptable("Give either a password or a salted password, not both")
    if (password is not None or salted is not None) and not (context.tls or config.allow_plaintext_passwords):
        # A salted password derives the client key, so it is as secret as the password itself.
        return _unacceptable("Passwords and salted passwords may only be sent over TLS "
                             "(plaintext passwords are not allowed by this store)")
    if password is not None:
        if not password:
            return _unacceptable("Password must not be empty")
        policy = config.password_policy
        if policy is not None and not policy.accept(password):
            return _unacceptable(f"Password rejected by the password policy: {policy.description}")
        if salt is not None and not salt:
            return _unacceptable("A salt, when given with a password, must not be empty")
        return password, salt
    if salt is None and salted is None:
        return _unacceptable("No password or salted password given")
    if not salt:
        return _unacceptable("A salted password needs a non-empty salt")
    if not salted:
        return _unacceptable("A salt needs a non-empty salted password")
    # As Kafka (ScramControlManager.finishUpsertion), keys are derived from whatever
    # salted-password bytes arrive: HMAC takes a key of any length.
    return salted, salt


def _check_upsertion(item: UserScramCredentialUpsertion, context: RequestContext,
                     config: StoreConfig) -> ApiError | _Upsert:
    error = _check_user_and_mechanism(item.user, item.mechanism)
    if error:
        return error
    mech = _mechanism(item.mechanism)
    if mech not in config.enabled_mechanisms:
        return ApiError(ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                        f"SCRAM mechanism {mech.mechanism_name} is not enabled")
    requested = item.scram_credential_info.iterations
    if item.password is None and requested == -1:
        # A pre-salted password was salted with the client's own count; a default cannot stand in for it.
        return _unacceptable(f"Too few iterations: {requested} (a salted password needs the count it was salted with)")
    iterations = _iterations(requested, mech, config)
    if isinstance(iterations, ApiError):
        return iterations
    secret = _check_secret(item, context, config)
    if isinstance(secret, ApiError):
        return secret
    return _Upsert(item, mech, iterations, *secret)


def _upserted(plan: _Upsert, keyring: Keyring) -> Event:
    """The event of an accepted upsertion: the credential derived and sealed (the costly step, done last)."""
    item, mech = plan.item, plan.mechanism
    if item.password is not None:
        cred = credential_from_password(mech, plan.secret, plan.iterations, salt=plan.salt)
    else:
        cred = credential_from_salted_password(mech, plan.salt, plan.secret, plan.iterations)
    sealed = seal_scram(keyring, item.user, mech, cred.salt, cred.stored_key, cred.server_key)
    return ScramCredentialUpserted(item.user, mech, plan.iterations, sealed)


def alter_scram_credentials(
    image,
    alterations: Iterable[UserScramCredentialAlteration],
    context: RequestContext,
    *,
    config: StoreConfig,
    keyring: Keyring,
    decider: Decider,
) -> ControlResult[dict[str, ApiError]]:
    """Events for the accepted users and one ApiError per user, in request order (needs ALTER on CLUSTER)."""
    require_write_right(decider, context, "alter_user_scram_credentials")
    items = list(alterations)
    for index, item in enumerate(items):  # a user names each result, so it must be a string
        if not isinstance(item, UserScramCredentialUpsertion | UserScramCredentialDeletion):
            raise InvalidRequestException(f"alteration {index} must be a UserScramCredentialUpsertion or "
                                          f"UserScramCredentialDeletion, not {type(item).__name__}")
        with validation.reraised_as(InvalidRequestException):
            validation.string(item.user, f"alteration {index}: user")
    deletions = [item for item in items if isinstance(item, UserScramCredentialDeletion)]
    upsertions = [item for item in items if not isinstance(item, UserScramCredentialDeletion)]
    errors: dict[str, ApiError] = {}
    accepted: dict[str, Event | _Upsert] = {}
    for item in (*deletions, *upsertions):
        user = item.user
        if user in errors:
            continue
        if accepted.pop(user, None) is not None:
            errors[user] = ApiError(ErrorCode.DUPLICATE_RESOURCE, _TWICE)
            continue
        if isinstance(item, UserScramCredentialDeletion):
            checked = _check_deletion(image, item)
        else:
            checked = _check_upsertion(item, context, config)
        if isinstance(checked, ApiError):
            errors[user] = checked
        else:
            accepted[user] = checked
    events = [_upserted(plan, keyring) if isinstance(plan, _Upsert) else plan for plan in accepted.values()]
    results = {item.user: errors.get(item.user, _OK) for item in items}
    return ControlResult(events, results)


def _description(scram, user: str) -> UserScramCredentialsDescription | None:
    by_mechanism = scram.mechanisms(user)
    infos = tuple(ScramCredentialInfo(ScramMechanism(mech), by_mechanism[mech].iterations)
                  for mech in sorted(by_mechanism))
    return UserScramCredentialsDescription(user, infos) if infos else None


def describe_scram_credentials(
    image,
    users: Iterable[str] | None,
    context: RequestContext,
    *,
    decider: Decider,
) -> dict[str, UserScramCredentialsDescription | ApiError]:
    """Mechanisms and iterations per user (needs DESCRIBE on CLUSTER); no secret ever.

    A read: it returns its answer, not a ControlResult (as Kafka's ScramImage.describe)."""
    require_cluster(decider, context, AclOperation.DESCRIBE)
    scram = image.scram
    wanted = list(users) if users is not None else []
    with validation.reraised_as(InvalidRequestException):
        for user in wanted:
            validation.string(user, "user")
    if not wanted:
        return {user: _description(scram, user) for user in sorted(scram.users())}
    counts = Counter(wanted)
    results: dict[str, UserScramCredentialsDescription | ApiError] = {}
    for user in wanted:
        if user in results:
            continue
        if counts[user] > 1:
            results[user] = ApiError(
                ErrorCode.DUPLICATE_RESOURCE,
                f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}")
            continue
        try:
            validation.text(user, "user")
        except FieldError as exc:
            results[user] = ApiError(ErrorCode.INVALID_REQUEST, str(exc))
            continue
        found = _description(scram, user)
        results[user] = found if found is not None else ApiError(
            ErrorCode.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {user}")
    return results
