"""Kafka protocol fields <-> secmeta types, for the server's handlers and the client alike.

Functions named ``*_fields`` return plain values (dicts) for ``secmeta.core.wire.codec.build``,
which drops the keys a version lacks; functions named ``*_from_*`` read kio entities
(anything with the attributes) back into secmeta types.  Nothing here validates: an
out-of-range enum code reads as UNKNOWN, as Kafka's ``fromCode`` does, and the store's
own validation turns it into the per-item error.  Nothing here logs or formats a
password, salt, salted password or HMAC.

Timestamps in Create/Renew/ExpireDelegationToken responses are kio ``TZAware`` datetimes
that kio cannot read back when negative.  Kafka sends -1 there with an error; we send
``NO_TIMESTAMP_MS`` (0) instead, which every client ignores when the error code is set.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from secmeta.core import validation
from secmeta.core.auth.scram import DEFAULT_ITERATIONS, MAX_ITERATIONS, SALT_LENGTH, salted_password
from secmeta.core.control.quotas import (
    ClientQuotaAlteration,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ClientQuotaOp,
)
from secmeta.core.errors import ApiError, ErrorCode
from secmeta.core.times import datetime_to_ms, ms_to_datetime
from secmeta.core.types import (
    USE_DEFAULT_ITERATIONS,
    DelegationToken,
    ScramCredentialInfo,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from secmeta.events.records import ClientQuotaEntity
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)

__all__ = [
    "NO_TIMESTAMP_MS",
    "acl_creation_fields",
    "alter_request_fields",
    "alter_result_fields",
    "alter_results_from",
    "alterations_from_request",
    "binding_fields",
    "binding_from",
    "bindings_from_resources",
    "create_token_args",
    "create_token_error_fields",
    "create_token_request_fields",
    "create_token_response_fields",
    "describe_result_fields",
    "describe_results_from",
    "describe_users_fields",
    "described_token_fields",
    "error_fields",
    "error_from",
    "filter_fields",
    "filter_from",
    "filter_of",
    "matching_acl_fields",
    "ms_from",
    "owners_fields",
    "owners_from_request",
    "quota_alter_result_fields",
    "quota_alter_results_from",
    "quota_alterations_fields",
    "quota_alterations_from_request",
    "quota_entity_fields",
    "quota_entity_from",
    "quota_entries_fields",
    "quota_entries_from",
    "quota_filter_fields",
    "quota_filter_from",
    "resources_fields",
    "token_from_create_response",
    "token_from_described",
    "users_from_request",
]

NO_TIMESTAMP_MS = 0
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


# -- errors ---------------------------------------------------------------------------

def error_fields(error: ApiError) -> dict[str, Any]:
    """error_code and error_message of an ApiError (no message for NONE)."""
    return {"error_code": int(error.code), "error_message": error.message if error else None}


def error_from(code: int, message: str | None = None) -> ApiError:
    """The ApiError of a wire (code, message); a code secmeta does not name reads as
    UNKNOWN_SERVER_ERROR with the code and its Kafka name kept in the message."""
    code = int(code)
    try:
        return ApiError(ErrorCode(code), message)
    except ValueError:
        try:
            from kio.schema.errors import ErrorCode as KioErrorCode
            name = KioErrorCode(code).name.upper()
        except ValueError:
            name = "UNKNOWN"
        text = f"{name} ({code})" + (f": {message}" if message else "")
        return ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, text)


# -- ACL bindings and filters -----------------------------------------------------------

def binding_fields(binding: AclBinding, *, pattern_key: str = "pattern_type") -> dict[str, Any]:
    """The seven wire fields of a binding; ``pattern_key`` names the pattern type field
    (``resource_pattern_type`` in CreateAcls' AclCreation, ``pattern_type`` elsewhere)."""
    return {
        "resource_type": int(binding.pattern.resource_type),
        "resource_name": binding.pattern.name,
        pattern_key: int(binding.pattern.pattern_type),
        "principal": binding.entry.principal,
        "host": binding.entry.host,
        "operation": int(binding.entry.operation),
        "permission_type": int(binding.entry.permission_type),
    }


def acl_creation_fields(binding: AclBinding) -> dict[str, Any]:
    """An AclCreation of CreateAcls."""
    return binding_fields(binding, pattern_key="resource_pattern_type")


def matching_acl_fields(binding: AclBinding) -> dict[str, Any]:
    """A DeleteAclsMatchingAcl of DeleteAcls (always without error: a removed binding)."""
    return {"error_code": 0, "error_message": None, **binding_fields(binding)}


def _pattern_type_of(entity: Any) -> int:
    value = getattr(entity, "resource_pattern_type", None)
    if value is None:
        value = getattr(entity, "pattern_type", PatternType.LITERAL)
    return int(value)


def binding_from(entity: Any, acl: Any = None) -> AclBinding:
    """The binding of an AclCreation or DeleteAclsMatchingAcl, or of a DescribeAclsResource
    (``entity``) with one of its AclDescriptions (``acl``)."""
    entry = entity if acl is None else acl
    return AclBinding.of(
        ResourceType(int(entity.resource_type)), entity.resource_name, PatternType(_pattern_type_of(entity)),
        entry.principal, entry.host, AclOperation(int(entry.operation)),
        AclPermissionType(int(entry.permission_type)),
    )


def filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    """The filter fields of DescribeAclsRequest and DeleteAclsFilter."""
    return {
        "resource_type_filter": int(f.pattern.resource_type),
        "resource_name_filter": f.pattern.name,
        "pattern_type_filter": int(f.pattern.pattern_type),
        "principal_filter": f.entry.principal,
        "host_filter": f.entry.host,
        "operation": int(f.entry.operation),
        "permission_type": int(f.entry.permission_type),
    }


def _member(members: Mapping[int, Any], enum: type, code: int) -> Any:
    """``enum(code)`` (an unknown code reads as UNKNOWN), by a table lookup for a known code."""
    member = members.get(code)
    return member if member is not None else enum(int(code))


_RESOURCE_TYPES: Mapping[int, ResourceType] = {int(m): m for m in ResourceType}
_PATTERN_TYPES: Mapping[int, PatternType] = {int(m): m for m in PatternType}
_OPERATIONS: Mapping[int, AclOperation] = {int(m): m for m in AclOperation}
_PERMISSIONS: Mapping[int, AclPermissionType] = {int(m): m for m in AclPermissionType}


def filter_from(entity: Any) -> AclBindingFilter:
    """The AclBindingFilter of a DescribeAclsRequest or a DeleteAclsFilter."""
    return filter_of((entity.resource_type_filter, entity.resource_name_filter,
                      getattr(entity, "pattern_type_filter", PatternType.LITERAL), entity.principal_filter,
                      entity.host_filter, entity.operation, entity.permission_type))


def filter_of(fields: tuple) -> AclBindingFilter:
    """The AclBindingFilter of a filter's seven wire values (resource type, name, pattern type, principal, host,
    operation, permission type: ``secmeta.core.wire.hot_requests.DescribeAclsFields``)."""
    resource_type, name, pattern_type, principal, host, operation, permission = fields
    return AclBindingFilter.of(_member(_RESOURCE_TYPES, ResourceType, resource_type), name,
                               _member(_PATTERN_TYPES, PatternType, pattern_type), principal, host,
                               _member(_OPERATIONS, AclOperation, operation),
                               _member(_PERMISSIONS, AclPermissionType, permission))


def resources_fields(bindings: Iterable[AclBinding]) -> list[dict[str, Any]]:
    """DescribeAcls' resources: the bindings grouped by resource pattern (first-seen order),
    as Kafka's DescribeAclsResponse.aclsResources groups them."""
    groups: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in bindings:
        key = (int(b.pattern.resource_type), b.pattern.name, int(b.pattern.pattern_type))
        groups.setdefault(key, []).append({
            "principal": b.entry.principal, "host": b.entry.host,
            "operation": int(b.entry.operation), "permission_type": int(b.entry.permission_type),
        })
    return [{"resource_type": rtype, "resource_name": name, "pattern_type": ptype, "acls": acls}
            for (rtype, name, ptype), acls in groups.items()]


def bindings_from_resources(resources: Iterable[Any]) -> list[AclBinding]:
    """The bindings of DescribeAcls' resources, flattened."""
    return [binding_from(resource, acl) for resource in resources for acl in resource.acls]


# -- SCRAM credentials --------------------------------------------------------------------

def alterations_from_request(request: Any) -> list[UserScramCredentialAlteration]:
    """An AlterUserScramCredentialsRequest's items: deletions first, then upsertions, in
    request order (the order Kafka's ScramControlManager.alterCredentials walks them)."""
    items: list[UserScramCredentialAlteration] = [
        UserScramCredentialDeletion(d.name, ScramMechanism(int(d.mechanism))) for d in request.deletions]
    items.extend(
        UserScramCredentialUpsertion(
            u.name, ScramCredentialInfo(ScramMechanism(int(u.mechanism)), int(u.iterations)),
            salt=bytes(u.salt), salted_password=bytes(u.salted_password))
        for u in request.upsertions)
    return items


def _clamp_int32(value: int) -> int:
    return max(_INT32_MIN, min(_INT32_MAX, int(value)))


def _upsertion_fields(u: UserScramCredentialUpsertion) -> dict[str, Any]:
    """The wire form of an upsertion: a password is salted here, as Kafka's AdminClient does.

    Anything that cannot be salted (unknown mechanism, iterations outside 1..MAX_ITERATIONS,
    an empty password) goes out unsalted (empty bytes) for the server to refuse.
    """
    mechanism = validation.enum_or_unknown(ScramMechanism, u.mechanism)
    iterations = int(u.scram_credential_info.iterations)
    if u.password is None:
        return {"name": u.user, "mechanism": int(mechanism), "iterations": _clamp_int32(iterations),
                "salt": bytes(u.salt or b""), "salted_password": bytes(u.salted_password or b"")}
    if iterations == USE_DEFAULT_ITERATIONS:
        iterations = DEFAULT_ITERATIONS  # the wire has no "default": the count salts the password
    password = validation.secret_bytes(u.password, "password", utf8=True)
    salt = bytes(u.salt) if u.salt else secrets.token_bytes(SALT_LENGTH)
    salted = b""
    if mechanism is not ScramMechanism.UNKNOWN and password and 1 <= iterations <= MAX_ITERATIONS:
        salted = salted_password(mechanism, password, salt, iterations)
    return {"name": u.user, "mechanism": int(mechanism), "iterations": _clamp_int32(iterations),
            "salt": salt, "salted_password": salted}


def alter_request_fields(alterations: Iterable[UserScramCredentialAlteration]) -> dict[str, Any]:
    """AlterUserScramCredentialsRequest fields (deletions, upsertions) for the alterations."""
    deletions, upsertions = [], []
    for item in alterations:
        if isinstance(item, UserScramCredentialDeletion):
            deletions.append({"name": item.user, "mechanism": int(validation.enum_or_unknown(ScramMechanism, item.mechanism))})
        else:
            upsertions.append(_upsertion_fields(item))
    return {"deletions": deletions, "upsertions": upsertions}


def alter_result_fields(results: Mapping[str, ApiError]) -> list[dict[str, Any]]:
    """AlterUserScramCredentialsResult items, one per user."""
    return [{"user": user, **error_fields(error)} for user, error in results.items()]


def alter_results_from(results: Iterable[Any]) -> dict[str, ApiError]:
    """User -> ApiError of an AlterUserScramCredentialsResponse's results."""
    return {r.user: error_from(r.error_code, r.error_message) for r in results}


def describe_users_fields(users: Iterable[str] | None) -> dict[str, Any]:
    """DescribeUserScramCredentialsRequest fields (None = every user)."""
    return {"users": None if users is None else [{"name": u} for u in users]}


def users_from_request(request: Any) -> list[str] | None:
    """The users a DescribeUserScramCredentialsRequest names; None (null or empty) = every user."""
    return [u.name for u in request.users] if request.users else None


def describe_result_fields(results: Mapping[str, UserScramCredentialsDescription | ApiError]) -> list[dict[str, Any]]:
    """DescribeUserScramCredentialsResult items, one per user."""
    out = []
    for user, result in results.items():
        if isinstance(result, ApiError):
            out.append({"user": user, **error_fields(result), "credential_infos": []})
        else:
            infos = [{"mechanism": int(i.mechanism), "iterations": int(i.iterations)}
                     for i in result.scram_credential_infos]
            out.append({"user": user, "error_code": 0, "error_message": None, "credential_infos": infos})
    return out


def describe_results_from(results: Iterable[Any]) -> dict[str, UserScramCredentialsDescription | ApiError]:
    """User -> description or ApiError of a DescribeUserScramCredentialsResponse's results."""
    out: dict[str, UserScramCredentialsDescription | ApiError] = {}
    for r in results:
        if int(r.error_code):
            out[r.user] = error_from(r.error_code, r.error_message)
        else:
            infos = tuple(ScramCredentialInfo(ScramMechanism(int(i.mechanism)), int(i.iterations))
                          for i in r.credential_infos)
            out[r.user] = UserScramCredentialsDescription(r.user, infos)
    return out


# -- delegation tokens ------------------------------------------------------------------------

def _principal_parts(principal: str) -> tuple[str, str]:
    """(type, name) of a ``Type:Name`` principal; anything else goes as a name without a type, which
    the server refuses as it refuses that string in-process."""
    try:
        return validation.principal_parts(principal)
    except validation.FieldError:
        return "", principal


def ms_from(value: datetime.datetime | datetime.timedelta | int) -> int:
    """Milliseconds of a datetime (since the epoch), a timedelta or an int."""
    if isinstance(value, datetime.datetime):
        return datetime_to_ms(value)
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    return int(value)


def _principal_fields(principal: str, prefix: str = "") -> dict[str, str]:
    kind, name = _principal_parts(principal)
    return {f"{prefix}principal_type": kind, f"{prefix}principal_name": name}


def create_token_request_fields(owner: str | None = None, renewers: Iterable[str] = (),
                                max_lifetime_ms: int = -1) -> dict[str, Any]:
    """CreateDelegationTokenRequest fields (owner only exists from v3)."""
    owner_type, owner_name = _principal_parts(owner) if owner is not None else (None, None)
    return {"owner_principal_type": owner_type, "owner_principal_name": owner_name,
            "renewers": [_principal_fields(r) for r in renewers], "max_lifetime": int(max_lifetime_ms)}


def create_token_args(request: Any) -> dict[str, Any]:
    """store.create_delegation_token's keyword arguments (owner, renewers, max_lifetime_ms).

    A null owner (and v1-2, which have none) means the requester, as the message's schema says; an empty
    owner name is the empty owner, which the store refuses (INVALID_REQUEST).  Kafka's KafkaApis
    (handleCreateTokenRequest) reads an empty name as null: a typo'd owner became a token for the requester.
    """
    owner_type = getattr(request, "owner_principal_type", None)
    owner_name = getattr(request, "owner_principal_name", None)
    owner = (None if owner_name is None and owner_type is None else
             "" if not owner_name else validation.principal_text(owner_type, owner_name))
    renewers = tuple(validation.principal_text(r.principal_type, r.principal_name) for r in request.renewers)
    return {"owner": owner, "renewers": renewers, "max_lifetime_ms": ms_from(request.max_lifetime)}


def create_token_response_fields(token: DelegationToken) -> dict[str, Any]:
    """CreateDelegationTokenResponse fields of a created token (with its HMAC)."""
    return {
        "error_code": 0, **_principal_fields(token.owner), **_principal_fields(token.requester, "token_requester_"),
        "issue_timestamp": ms_to_datetime(token.issue_timestamp_ms),
        "expiry_timestamp": ms_to_datetime(token.expiry_timestamp_ms),
        "max_timestamp": ms_to_datetime(token.max_timestamp_ms),
        "token_id": token.token_id, "hmac": token.hmac or b"",
    }


def create_token_error_fields(error: ApiError, owner: str, requester: str) -> dict[str, Any]:
    """CreateDelegationTokenResponse fields of a refused request (owner and requester kept,
    as Kafka's CreateDelegationTokenResponse.prepareResponse does)."""
    none = ms_to_datetime(NO_TIMESTAMP_MS)
    return {
        "error_code": int(error.code), **_principal_fields(owner), **_principal_fields(requester, "token_requester_"),
        "issue_timestamp": none, "expiry_timestamp": none, "max_timestamp": none, "token_id": "", "hmac": b"",
    }


def token_from_create_response(response: Any, renewers: Iterable[str] = ()) -> DelegationToken:
    """The DelegationToken a successful CreateDelegationTokenResponse describes (the response
    has no renewers: pass those requested).  Before v3 the requester is the owner."""
    owner = validation.principal_text(response.principal_type, response.principal_name)
    requester = _requester_of(response, owner)
    return DelegationToken(
        response.token_id, owner, requester, tuple(renewers), ms_from(response.issue_timestamp),
        ms_from(response.expiry_timestamp), ms_from(response.max_timestamp), bytes(response.hmac) or None)


def _requester_of(entity: Any, owner: str) -> str:
    name = getattr(entity, "token_requester_principal_name", None)
    if not name:
        return owner
    return validation.principal_text(getattr(entity, "token_requester_principal_type", None), name)


def owners_fields(owners: Iterable[str] | None) -> dict[str, Any]:
    """DescribeDelegationTokenRequest fields (None = every owner)."""
    return {"owners": None if owners is None else [_principal_fields(o) for o in owners]}


def owners_from_request(request: Any) -> list[str] | None:
    """The owners a DescribeDelegationTokenRequest names: None (null) = all, [] = none,
    as Kafka's DelegationTokenManager.describeTokens reads them."""
    if request.owners is None:
        return None
    return [validation.principal_text(o.principal_type, o.principal_name) for o in request.owners]


def described_token_fields(token: DelegationToken) -> dict[str, Any]:
    """A DescribedDelegationToken (an empty HMAC when the store withholds it)."""
    return {
        **_principal_fields(token.owner), **_principal_fields(token.requester, "token_requester_"),
        "issue_timestamp": token.issue_timestamp_ms, "expiry_timestamp": token.expiry_timestamp_ms,
        "max_timestamp": token.max_timestamp_ms, "token_id": token.token_id, "hmac": token.hmac or b"",
        "renewers": [_principal_fields(r) for r in token.renewers],
    }


def token_from_described(entity: Any) -> DelegationToken:
    """The DelegationToken of a DescribedDelegationToken (hmac None when empty)."""
    owner = validation.principal_text(entity.principal_type, entity.principal_name)
    return DelegationToken(
        entity.token_id, owner, _requester_of(entity, owner),
        tuple(validation.principal_text(r.principal_type, r.principal_name) for r in entity.renewers),
        int(entity.issue_timestamp), int(entity.expiry_timestamp), int(entity.max_timestamp),
        bytes(entity.hmac) or None)


# -- client quotas (AlterClientQuotas 49, DescribeClientQuotas 48) ----------------------------

def quota_entity_fields(entity: ClientQuotaEntity) -> list[dict[str, Any]]:
    """EntityData items of an entity (entity_name None = the default)."""
    return [{"entity_type": t, "entity_name": n} for t, n in entity.parts]


def quota_entity_from(data: Any) -> ClientQuotaEntity:
    """The entity of EntityData items (a type given twice: the last, as Kafka's map)."""
    return ClientQuotaEntity.of({d.entity_type: d.entity_name for d in data})


def quota_alterations_fields(entries: Iterable[ClientQuotaAlteration], validate_only: bool) -> dict[str, Any]:
    """AlterClientQuotasRequest fields; a removal is sent as Kafka's AdminClient does (value 0.0, remove)."""
    return {"validate_only": bool(validate_only), "entries": [
        {"entity": quota_entity_fields(ClientQuotaEntity.of(e.entity)),
         "ops": [{"key": op.key, "value": 0.0 if op.value is None else op.value, "remove": op.value is None}
                 for op in e.ops]}
        for e in entries]}


def quota_alterations_from_request(request: Any) -> list[ClientQuotaAlteration]:
    """The alterations of an AlterClientQuotasRequest: ``remove`` wins over the value (Kafka ignores it)."""
    return [ClientQuotaAlteration(quota_entity_from(e.entity),
                                  tuple(ClientQuotaOp(op.key, None if op.remove else float(op.value)) for op in e.ops))
            for e in request.entries]


def quota_alter_result_fields(results: Mapping[ClientQuotaEntity, ApiError]) -> list[dict[str, Any]]:
    """AlterClientQuotasResponse entries, one per entity."""
    return [{**error_fields(error), "entity": quota_entity_fields(entity)} for entity, error in results.items()]


def quota_alter_results_from(entries: Any) -> dict[ClientQuotaEntity, ApiError]:
    return {quota_entity_from(e.entity): error_from(e.error_code, e.error_message) for e in entries}


def quota_filter_fields(query: ClientQuotaFilter) -> dict[str, Any]:
    """DescribeClientQuotasRequest fields."""
    return {"strict": bool(query.strict), "components": [
        {"entity_type": c.entity_type, "match_type": int(c.match_type), "match": c.match} for c in query.components]}


def quota_filter_from(request: Any) -> ClientQuotaFilter:
    return ClientQuotaFilter(tuple(ClientQuotaFilterComponent(c.entity_type, int(c.match_type), c.match)
                                   for c in request.components), bool(request.strict))


def quota_entries_fields(found: Mapping[ClientQuotaEntity, Mapping[str, float]]) -> list[dict[str, Any]]:
    """DescribeClientQuotasResponse entries: each entity with its values."""
    return [{"entity": quota_entity_fields(entity), "values": [{"key": k, "value": v} for k, v in values.items()]}
            for entity, values in found.items()]


def quota_entries_from(entries: Any) -> dict[ClientQuotaEntity, dict[str, float]]:
    return {quota_entity_from(e.entity): {v.key: float(v.value) for v in e.values} for e in entries or ()}
