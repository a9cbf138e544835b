"""Create, delete and describe ACLs (Kafka's AclControlManager rules).

Per binding or filter an ApiError; a request that lacks the cluster
permission or exceeds ``max_acl_changes_per_request`` raises before any
event. Beyond Kafka, an ACL host may be a CIDR range (``10.0.0.0/8``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from uuid import uuid4

from core.config import StoreConfig
from core.control.authz import Decider, acls_of, parse_principal, require_cluster
from core.control.result import ControlResult
from core.errors import ApiError, ErrorCode, InvalidRequestException
from core.types import DeleteAclsResult, RequestContext
from events.records import AclCreated, AclDeleted, Event
from events.types import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["MAX_STRING_LENGTH", "create_acls", "delete_acls", "describe_acls", "validate_binding",
           "validate_filter"]

MAX_STRING_LENGTH = 32767  # Kafka's protocol limit for a (non-compact) string

_OK = ApiError()


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_REQUEST, message)


def _name(enum_type, value) -> str:
    return enum_type(value).name if isinstance(value, int) else repr(value)


def _valid_host(host: str) -> bool:
    """'*', an address or host name, or (our extension) a CIDR range written canonically.

    ``10.0.0.1/8`` is refused (write ``10.0.0.0/8``): two spellings of one range
    would be two ACLs with the same effect, and a filter on one would miss the other.
    """
    if "/" not in host:
        return True
    try:
        ipaddress.ip_network(host, strict=True)
    except ValueError:
        return False
    return True


def validate_binding(binding: AclBinding) -> ApiError:
    """NONE, or INVALID_REQUEST naming the first field that cannot be stored."""
    try:
        return _validate_binding(binding)
    except (TypeError, ValueError, AttributeError) as exc:
        return _invalid(f"Malformed ACL binding: {exc}")


def _validate_binding(binding: AclBinding) -> ApiError:
    pattern, entry = binding.pattern, binding.entry
    rtype, ptype = pattern.resource_type, pattern.pattern_type
    if ResourceType(rtype) in (ResourceType.UNKNOWN, ResourceType.ANY):
        return _invalid(f"Invalid resource type {_name(ResourceType, rtype)}")
    if PatternType(ptype) not in (PatternType.LITERAL, PatternType.PREFIXED):
        return _invalid(f"Invalid pattern type {_name(PatternType, ptype)}")
    if AclOperation(entry.operation) in (AclOperation.UNKNOWN, AclOperation.ANY):
        return _invalid(f"Invalid operation {_name(AclOperation, entry.operation)}")
    if AclPermissionType(entry.permission_type) not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return _invalid(f"Invalid permission type {_name(AclPermissionType, entry.permission_type)}")
    if not pattern.name:
        return _invalid("Resource name must not be empty")
    if rtype == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return _invalid(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}, "
                        f"not {pattern.name[:100]!r}")
    if parse_principal(entry.principal) is None:
        return _invalid(f"Invalid principal {str(entry.principal)[:100]!r}: expected Type:Name")
    if not entry.host:
        return _invalid("Host must not be empty (use '*' for any host)")
    for field, value in (("resource name", pattern.name), ("principal", entry.principal),
                         ("host", entry.host)):
        if len(value) > MAX_STRING_LENGTH:
            return _invalid(f"The {field} is {len(value)} characters long; "
                            f"the limit is {MAX_STRING_LENGTH}")
    if not _valid_host(entry.host):
        return _invalid(f"Invalid host {entry.host[:100]!r}: not a valid CIDR range (write the network address, e.g. 10.0.0.0/8)")
    return _OK


def validate_filter(f: AclBindingFilter) -> ApiError:
    """NONE, or INVALID_REQUEST when a filter field is UNKNOWN."""
    for label, enum_type, value in (
        ("resource type", ResourceType, f.pattern.resource_type),
        ("pattern type", PatternType, f.pattern.pattern_type),
        ("operation", AclOperation, f.entry.operation),
        ("permission type", AclPermissionType, f.entry.permission_type),
    ):
        if enum_type(value) == 0:
            return _invalid(f"Unknown {label} in the filter")
    return _OK


def create_acls(
    image,
    bindings: Iterable[AclBinding],
    context: RequestContext,
    *,
    config: StoreConfig,
    decider: Decider,
    new_id: Callable[[], str] = lambda: str(uuid4()),
) -> ControlResult[list[ApiError]]:
    """AclCreated events for the new valid bindings and one ApiError per binding."""
    require_cluster(decider, context, AclOperation.ALTER)
    bindings = list(bindings)
    limit = config.max_acl_changes_per_request
    if len(bindings) > limit:
        raise InvalidRequestException(
            f"The request creates {len(bindings)} ACLs; the limit is {limit} per request")
    acls = acls_of(image)
    seen: set[AclBinding] = set()
    events: list[Event] = []
    results: list[ApiError] = []
    for binding in bindings:
        error = validate_binding(binding)
        results.append(error)
        if error or binding in seen:
            continue
        seen.add(binding)
        if acls.find(binding) is None:
            events.append(AclCreated(new_id(), binding))
    return ControlResult(events, results)


def delete_acls(
    image,
    filters: Iterable[AclBindingFilter],
    context: RequestContext,
    *,
    config: StoreConfig,
    decider: Decider,
) -> ControlResult[list[DeleteAclsResult]]:
    """One AclDeleted per matched ACL and, per filter, the bindings it removed."""
    require_cluster(decider, context, AclOperation.ALTER)
    acls = acls_of(image)
    removed: dict[str, AclBinding] = {}
    results: list[DeleteAclsResult] = []
    for f in filters:
        error = validate_filter(f)
        if error:
            results.append(DeleteAclsResult(error))
            continue
        matched = sorted(acls.matching(f), key=lambda pair: pair[0])
        removed.update(matched)
        results.append(DeleteAclsResult(_OK, tuple(binding for _, binding in matched)))
    limit = config.max_acl_changes_per_request
    if len(removed) > limit:
        raise InvalidRequestException(
            f"The filters match {len(removed)} ACLs; at most {limit} may be deleted per request")
    return ControlResult([AclDeleted(acl_id, binding) for acl_id, binding in removed.items()], results)


def describe_acls(image, f: AclBindingFilter, context: RequestContext, *,
                  decider: Decider) -> list[AclBinding]:
    """The ACLs a filter selects (needs DESCRIBE on CLUSTER; an UNKNOWN field is INVALID_REQUEST).

    A read: it returns its answer, not a ControlResult."""
    require_cluster(decider, context, AclOperation.DESCRIBE)
    error = validate_filter(f)
    if error:
        raise InvalidRequestException(error=error)
    return [binding for _, binding in acls_of(image).matching(f)]
