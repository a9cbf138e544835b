"""Alter and describe SCRAM credentials (KIP-554, with KIP-506's server-side passwords).

``alter_scram_credentials`` validates each user's item in the reference's
order of precedence and returns the events to log plus one ApiError per
user; it changes nothing itself. Error messages name the bad value, never a
password, salt or salted password.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable

from core.config import MAX_ITERATIONS, MIN_ITERATIONS, StoreConfig
from core.control.authz import Decider, require_cluster
from core.errors import ApiError, ErrorCode
from core.scram import DEFAULT_ITERATIONS, credential_from_password, credential_from_salted_password
from core.types import (
    RequestContext,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from events.keyring import Keyring, seal_scram
from events.records import Event, ScramCredentialDeleted, ScramCredentialUpserted
from events.types import AclOperation, ScramMechanism

__all__ = ["alter_scram_credentials", "describe_scram_credentials"]

_OK = ApiError()
_UNACCEPTABLE = ErrorCode.UNACCEPTABLE_CREDENTIAL


def _unacceptable(message: str) -> ApiError:
    return ApiError(_UNACCEPTABLE, message)


def _mechanism(value: object) -> ScramMechanism:
    """The mechanism a request names; anything unrecognised reads as UNKNOWN."""
    try:
        return ScramMechanism.parse(value)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return ScramMechanism.UNKNOWN


def _check_user_and_mechanism(user: str, mechanism: object) -> ApiError | None:
    if not user:
        return _unacceptable("Username must not be empty")
    if _mechanism(mechanism) is ScramMechanism.UNKNOWN:
        return ApiError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {mechanism!r}")
    return None


def _delete(image, item: UserScramCredentialDeletion) -> tuple[ApiError, Event | None]:
    error = _check_user_and_mechanism(item.user, item.mechanism)
    if error:
        return error, None
    mech = _mechanism(item.mechanism)
    if image.scram.get(item.user, mech) is None:
        return ApiError(ErrorCode.RESOURCE_NOT_FOUND,
                        f"Attempt to delete a {mech.mechanism_name} credential of user "
                        f"{item.user!r} that does not exist"), None
    return _OK, ScramCredentialDeleted(item.user, mech)


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


def _credential(item: UserScramCredentialUpsertion, mech: ScramMechanism, iterations: int,
                context: RequestContext, config: StoreConfig):
    """The ScramCredential an upsertion asks for, or the ApiError refusing it."""
    password, salt, salted = item.password, item.salt, item.salted_password
    for name, value in (("password", password), ("salt", salt), ("salted password", salted)):
        if value is not None and not isinstance(value, str | bytes | bytearray):
            return _unacceptable(f"The {name} must be bytes, not {type(value).__name__}")
    if password is not None and salted is not None:
        return _unacceptable("Give either a password or a salted password, not both")
    if (password is not None or salted is not None) and not (context.tls or config.allow_plaintext_passwords):
        # A salted password derives the client key, so it is as secret as the password itself.
        return _unacceptable("Passwords and salted passwords may only be sent over TLS "
                             "(plaintext passwords are not allowed by this store)")
    if password is not None:
        data = password.encode("utf-8") if isinstance(password, str) else bytes(password)
        if not data:
            return _unacceptable("Password must not be empty")
        policy = config.password_policy
        if policy is not None and not policy.accept(data):
            return _unacceptable(f"Password rejected by the password policy: {policy.description}")
        if salt is not None and not salt:
            return _unacceptable("A salt, when given with a password, must not be empty")
        return credential_from_password(mech, data, iterations, salt=None if salt is None else bytes(salt))
    if salt is None and salted is None:
        return _unacceptable("No password or salted password given")
    if not salt:
        return _unacceptable("A salted password needs a non-empty salt")
    if not salted:
        return _unacceptable("A salt needs a non-empty salted password")
    expected = hashlib.new(mech.hash_name).digest_size
    if len(salted) != expected:
        return _unacceptable(f"Salted password is {len(salted)} bytes long; "
                             f"{mech.mechanism_name} needs {expected}")
    return credential_from_salted_password(mech, bytes(salt), bytes(salted), iterations)


def _upsert(item: UserScramCredentialUpsertion, context: RequestContext, config: StoreConfig,
            keyring: Keyring) -> tuple[ApiError, Event | None]:
    error = _check_user_and_mechanism(item.user, item.mechanism)
    if error:
        return error, None
    mech = _mechanism(item.mechanism)
    if mech not in config.enabled_mechanisms:
        return ApiError(ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                        f"SCRAM mechanism {mech.mechanism_name} is not enabled"), None
    requested = item.scram_credential_info.iterations
    if item.password is None and requested == -1:
        # A pre-salted password was salted with the client's own count; a default cannot stand in for it.
        return _unacceptable(f"Too few iterations: {requested} (a salted password needs the count it was salted with)"), None
    iterations = _iterations(requested, mech, config)
    if isinstance(iterations, ApiError):
        return iterations, None
    cred = _credential(item, mech, iterations, context, config)
    if isinstance(cred, ApiError):
        return cred, None
    sealed = seal_scram(keyring, item.user, mech, cred.salt, cred.stored_key, cred.server_key)
    return _OK, ScramCredentialUpserted(item.user, mech, iterations, sealed)


def alter_scram_credentials(
    image,
    alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
    context: RequestContext,
    now_ms: int,
    *,
    config: StoreConfig,
    keyring: Keyring,
    decider: Decider,
) -> tuple[list[Event], dict[str, ApiError]]:
    """Events for the valid alterations and one ApiError per user (needs ALTER on CLUSTER)."""
    require_cluster(decider, context, AclOperation.ALTER)
    items = list(alterations)
    counts = Counter(item.user for item in items)
    results: dict[str, ApiError] = {}
    events: list[Event] = []
    for item in items:
        user = item.user
        if user in results:
            continue
        if counts[user] > 1:
            results[user] = ApiError(ErrorCode.DUPLICATE_RESOURCE,
                                     f"User {user!r} appears more than once in the request")
            continue
        if isinstance(item, UserScramCredentialDeletion):
            error, event = _delete(image, item)
        else:
            error, event = _upsert(item, context, config, keyring)
        results[user] = error
        if event is not None:
            events.append(event)
    return events, results


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
    """Mechanisms and iterations per user (needs DESCRIBE on CLUSTER); no secret ever."""
    require_cluster(decider, context, AclOperation.DESCRIBE)
    scram = image.scram
    wanted = list(users) if users is not None else []
    if not wanted:
        return {user: _description(scram, user) for user in sorted(scram.users())}
    counts = Counter(wanted)
    results: dict[str, UserScramCredentialsDescription | ApiError] = {}
    for user in wanted:
        if user in results:
            continue
        if counts[user] > 1:
            results[user] = ApiError(ErrorCode.DUPLICATE_RESOURCE,
                                     f"User {user!r} is named more than once in the request")
            continue
        found = _description(scram, user)
        results[user] = found if found is not None else ApiError(
            ErrorCode.RESOURCE_NOT_FOUND, f"User {user!r} has no SCRAM credentials")
    return results
