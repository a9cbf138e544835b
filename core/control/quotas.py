"""Alter and describe client quotas (KIP-546), as Kafka's ClientQuotaControlManager and ClientQuotasImage.

``alter_client_quotas`` walks the entries in request order; each entry's result is per entity
(an ApiError; the first problem decides it and none of that entry's ops apply), so a bad entity
never stops a good one in the same request. Messages are Kafka's. Two choices differ from Kafka,
both stricter: an entity named twice in one request fails as a whole, its earlier entry included
(Kafka writes the earlier entry's changes yet reports the entity as failed); an ip entity's name
must be an IP address (Kafka also resolves host names, which a replayed log could not repeat).
A NaN or infinite value is refused (core/validation.quota_value).

``describe_client_quotas`` validates the filter as ClientQuotasImage.describe does (request-level
errors: INVALID_REQUEST, UNSUPPORTED_VERSION for an unknown entity type) and returns every
matching entity with all its quotas.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from secmeta.core import validation
from secmeta.core.control.authz import Decider, require_cluster, require_write_right
from secmeta.core.control.result import ControlResult
from secmeta.core.errors import (
    ApiError,
    ErrorCode,
    InvalidRequestException,
    UnsupportedVersionException,
)
from secmeta.core.quota_keys import CLIENT_ID, IP, QUOTA_KEYS, USER
from secmeta.core.types import (
    EVERY_ENTITY,
    ClientQuotaAlteration,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ClientQuotaOp,
    MatchType,
    RequestContext,
)
from secmeta.core.validation import FieldError
from secmeta.events.records import ClientQuotaAltered, ClientQuotaEntity
from secmeta.events.types import AclOperation

__all__ = [
    "CLIENT_ID",
    "EVERY_ENTITY",
    "IP",
    "QUOTA_KEYS",
    "USER",
    "ClientQuotaAlteration",
    "ClientQuotaFilter",
    "ClientQuotaFilterComponent",
    "ClientQuotaOp",
    "MatchType",
    "alter_client_quotas",
    "describe_client_quotas",
]

_OK = ApiError()


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_REQUEST, message)


def _kafka_name(entity: ClientQuotaEntity) -> str:
    """The entity as Kafka's ClientQuotaEntity.toString writes it: ClientQuotaEntity(entries={user=alice})."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in entity.parts) + "})"


def _entity_keys(entity: ClientQuotaEntity) -> dict[str, int | None] | ApiError:
    """The keys ``entity`` may hold (Kafka's validateEntity and configKeysForEntityType), or why it is invalid."""
    if not entity.parts:
        return _invalid("Invalid empty client quota entity")
    for entity_type, name in entity.parts:
        if entity_type not in (USER, CLIENT_ID, IP):
            return _invalid(f"Unhandled client quota entity type: {entity_type}")
        if name is not None:
            if not name:
                return _invalid(f"Empty {entity_type} not supported")
            try:
                validation.text(name, f"{entity_type} name")
            except FieldError as exc:
                return _invalid(str(exc))
    parts = entity.as_dict()
    if IP not in parts:
        return QUOTA_KEYS[USER]
    if len(parts) > 1:
        return _invalid("Invalid quota entity combination, IP entity should not be combined with User or ClientId")
    name = parts[IP]
    if name is not None:
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return _invalid(f"{name} is not a valid IP address (host names are not resolved)")
    return QUOTA_KEYS[IP]


def _entry_events(image, entity: ClientQuotaEntity, ops: tuple[ClientQuotaOp, ...]) -> list[ClientQuotaAltered] | ApiError:
    """The events of one entry, or its error (then none of its ops apply)."""
    keys = _entity_keys(entity)
    if isinstance(keys, ApiError):
        return keys
    canonical = str(entity)
    current = image.quotas.get(canonical)
    events = []
    for op in ops:
        if op.value is None:  # a removal is not checked against the key set; removing an unset key is a no-op
            if op.key in current:
                events.append(ClientQuotaAltered(canonical, op.key, None))
            continue
        if op.key not in keys:
            return _invalid(f"Invalid configuration key {op.key}")
        try:
            value = validation.quota_value(op.value, op.key, keys[op.key])
        except FieldError as exc:
            return _invalid(str(exc))
        if current.get(op.key) != value:
            events.append(ClientQuotaAltered(canonical, op.key, value))
    return events


def _checked(entries: Iterable[ClientQuotaAlteration]) -> list[tuple[ClientQuotaEntity, tuple[ClientQuotaOp, ...]]]:
    """(entity, ops) per entry; a malformed request (not these types) raises InvalidRequestException."""
    checked = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, ClientQuotaAlteration):
            raise InvalidRequestException(f"entry {index} must be a ClientQuotaAlteration, not {type(entry).__name__}")
        entity = entry.entity
        if not isinstance(entity, ClientQuotaEntity):
            if not isinstance(entity, Mapping) or not all(
                    isinstance(t, str) and (n is None or isinstance(n, str)) for t, n in entity.items()):
                raise InvalidRequestException(f"entry {index}: the entity must map entity types to names or None")
            entity = ClientQuotaEntity.of(entity)
        ops = tuple(entry.ops)
        if not all(isinstance(op, ClientQuotaOp) and isinstance(op.key, str) for op in ops):
            raise InvalidRequestException(f"entry {index}: each op must be a ClientQuotaOp with a string key")
        checked.append((entity, ops))
    return checked


def alter_client_quotas(image, entries: Iterable[ClientQuotaAlteration], context: RequestContext, *,
                        decider: Decider, validate_only: bool = False,
                        ) -> ControlResult[dict[ClientQuotaEntity, ApiError]]:
    """Events for the accepted entries and one ApiError per entity, in request order (needs ALTER_CONFIGS on CLUSTER).

    ``validate_only`` computes the same results and returns no event.
    """
    require_write_right(decider, context, "alter_client_quotas")
    results: dict[ClientQuotaEntity, ApiError] = {}
    accepted: dict[ClientQuotaEntity, list[ClientQuotaAltered]] = {}
    for entity, ops in _checked(entries):
        if entity in results:
            accepted.pop(entity, None)
            results[entity] = _invalid(f"Ignoring duplicate entity {_kafka_name(entity)}")
            continue
        keys = [op.key for op in ops]
        duplicate = next((k for k in keys if keys.count(k) > 1), None)
        if duplicate is not None:
            results[entity] = _invalid(
                f"Duplicate quota key {duplicate} not updating quota for this entity {_kafka_name(entity)}")
            continue
        events = _entry_events(image, entity, ops)
        if isinstance(events, ApiError):
            results[entity] = events
        else:
            results[entity] = _OK
            accepted[entity] = events
    events = [] if validate_only else [e for entity_events in accepted.values() for e in entity_events]
    return ControlResult(events, results)


def _checked_filter(query: ClientQuotaFilter) -> None:
    """Raise the request-level error ClientQuotasImage.describe answers a bad filter with."""
    if not isinstance(query, ClientQuotaFilter):
        raise InvalidRequestException(f"the filter must be a ClientQuotaFilter, not {type(query).__name__}")
    seen: set[str] = set()
    for component in query.components:
        if not isinstance(component, ClientQuotaFilterComponent):
            raise InvalidRequestException(f"a filter component must be a ClientQuotaFilterComponent, "
                                          f"not {type(component).__name__}")
        entity_type, match_type, match = component.entity_type, component.match_type, component.match
        if not entity_type:
            raise InvalidRequestException("Invalid empty entity type.")
        if entity_type in seen:
            raise InvalidRequestException(f"Entity type {entity_type} cannot appear more than once in the filter.")
        seen.add(entity_type)
        if entity_type not in (USER, CLIENT_ID, IP):
            raise UnsupportedVersionException(f"Unsupported entity type {entity_type}")
        if match_type == MatchType.EXACT and match is None:
            raise InvalidRequestException("Request specified MATCH_TYPE_EXACT, but set match string to null.")
        if match_type in (MatchType.DEFAULT, MatchType.SPECIFIED) and match is not None:
            raise InvalidRequestException(
                f"Request specified MATCH_TYPE_{MatchType(match_type).name}, but also specified a match string.")
        if match_type not in tuple(MatchType):
            raise InvalidRequestException(f"Unknown match type {match_type}")
    if IP in seen and len(seen) > 1:
        raise InvalidRequestException("Invalid entity filter component combination. IP filter component should "
                                      "not be used with user or clientId filter component.")


def _matches(parts: dict[str, str | None], query: ClientQuotaFilter) -> bool:
    """ClientQuotasImage.matches: every component matches, and (strict) the entity has no other type."""
    if query.strict and len(parts) != len(query.components):
        return False
    for component in query.components:
        if component.entity_type not in parts:
            return False
        if component.match_type != MatchType.SPECIFIED and parts[component.entity_type] != component.match:
            return False
    return True


def describe_client_quotas(image, query: ClientQuotaFilter, context: RequestContext, *,
                           decider: Decider) -> dict[ClientQuotaEntity, dict[str, float]]:
    """Every entity the filter matches with all its quotas (needs DESCRIBE_CONFIGS on CLUSTER), by entity."""
    require_cluster(decider, context, AclOperation.DESCRIBE_CONFIGS)
    _checked_filter(query)
    found = {}
    for canonical, values in image.quotas:
        entity = ClientQuotaEntity.parse(canonical)
        if _matches(entity.as_dict(), query):
            found[entity] = dict(values)
    return dict(sorted(found.items(), key=lambda item: str(item[0])))
