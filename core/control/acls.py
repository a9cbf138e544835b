"""Create, delete and describe ACLs (Kafka's AclControlManager rules).

Per binding or filter an ApiError; a request that lacks the cluster
permission or exceeds ``max_acl_changes_per_request`` raises before any
event. Every field passes secmeta.core.validation first (names, principals, hosts: a
host is '*', a canonical address or, beyond Kafka, a canonical CIDR range such
as ``10.0.0.0/8``); enum fields may be given by name.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from secmeta.core import validation
from secmeta.core.config import StoreConfig
from secmeta.core.control.authz import (
    Decider,
    acls_of,
    allowed_on_cluster,
    checked_context,
    require_cluster,
    require_write_right,
)
from secmeta.core.control.result import ControlResult
from secmeta.core.errors import ApiError, ErrorCode, InvalidRequestException
from secmeta.core.types import DeleteAclsResult, RequestContext
from secmeta.core.validation import FieldError
from secmeta.events.records import AclCreated, AclDeleted, Event
from secmeta.events.types import (
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from secmeta.projections.acl_index import Group, Node
from secmeta.projections.acls import canonical_entry
from secmeta.projections.section_arrays import uuid_texts

__all__ = ["checked_binding", "checked_filter", "create_acls", "delete_acls", "describe_acl_groups", "describe_acls",
           "may_describe_acls", "random_uuids", "validate_binding", "validate_filter"]

_OK = ApiError()


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_REQUEST, message)


def checked_binding(binding: object, entries: dict[tuple, AccessControlEntry] | None = None) -> AclBinding:
    """The binding with its enums resolved (names accepted), or FieldError naming the first bad field.

    ``entries`` (one request's memo) holds entries already found valid, by their raw fields: a
    binding whose entry is there skips the entry's checks, which could not fail (a request's
    bindings mostly repeat a few principals, hosts and operations); its valid entries are added.
    """
    if not isinstance(binding, AclBinding):
        raise FieldError("ACL binding", f"must be an AclBinding, not {type(binding).__name__}")
    pattern, entry = binding.pattern, binding.entry
    if not isinstance(pattern, ResourcePattern) or not isinstance(entry, AccessControlEntry):
        raise FieldError("ACL binding", "must hold a ResourcePattern and an AccessControlEntry")
    rtype = validation.enum_value(ResourceType, pattern.resource_type, "resource type", concrete=True)
    ptype = validation.enum_value(PatternType, pattern.pattern_type, "pattern type")
    if ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise FieldError("pattern type", f"must be LITERAL or PREFIXED, not {ptype.name}")
    key = None if entries is None else _entry_key(entry)
    checked = None if key is None else entries.get(key)
    if checked is None:
        operation = validation.enum_value(AclOperation, entry.operation, "operation", concrete=True)
        permission = validation.enum_value(AclPermissionType, entry.permission_type, "permission type", concrete=True)
    name = validation.text(pattern.name, "resource name")
    if not name:
        raise FieldError("resource name", "must not be empty")
    if rtype == ResourceType.CLUSTER and name != CLUSTER_NAME:
        raise FieldError("resource name", f"of the CLUSTER resource can only be {CLUSTER_NAME}, not {name[:100]!r}")
    if checked is None:
        principal = validation.principal(entry.principal)
        host = validation.acl_host(entry.host)
        checked = canonical_entry(principal, host, operation, permission)
        if key is not None:
            entries[key] = checked
    return AclBinding(ResourcePattern(rtype, name, ptype), checked)


def _entry_key(entry: AccessControlEntry) -> tuple | None:
    """The memo key of an entry whose fields are exactly str and enum members (no 1 == True aliasing)."""
    principal, host, operation, permission = entry.principal, entry.host, entry.operation, entry.permission_type
    if (type(principal) is str and type(host) is str and type(operation) is AclOperation
            and type(permission) is AclPermissionType):
        return principal, host, operation, permission
    return None


def validate_binding(binding: object) -> ApiError:
    """NONE, or INVALID_REQUEST naming the first field that cannot be stored."""
    return _error_of(checked_binding, binding)


def _error_of(check: Callable[[object], object], value: object) -> ApiError:
    try:
        check(value)
    except FieldError as exc:
        return _invalid(str(exc))
    return _OK


_FILTER_ENUMS = (("resource type", ResourceType), ("pattern type", PatternType), ("operation", AclOperation),
                 ("permission type", AclPermissionType))
_FILTER_ENUM_TYPES = tuple(enum_type for _, enum_type in _FILTER_ENUMS)


def checked_filter(f: object) -> AclBindingFilter:
    """The filter with its enums resolved (names accepted), or FieldError naming the first bad field.

    UNKNOWN in any enum field is refused (as Kafka's AclBindingFilter.findIndefiniteField); names and
    hosts are checked as text only: a filter stores nothing, it selects.  A filter whose enum fields
    are members already (the wire's, a typed caller's) is its own checked form: it is returned as is.
    """
    if not isinstance(f, AclBindingFilter):
        raise FieldError("ACL filter", f"must be an AclBindingFilter, not {type(f).__name__}")
    pattern, entry = f.pattern, f.entry
    if not isinstance(pattern, ResourcePatternFilter) or not isinstance(entry, AccessControlEntryFilter):
        raise FieldError("ACL filter", "must hold a ResourcePatternFilter and an AccessControlEntryFilter")
    given: tuple = (pattern.resource_type, pattern.pattern_type, entry.operation, entry.permission_type)
    members = given
    if tuple(map(type, given)) != _FILTER_ENUM_TYPES:
        members = tuple(validation.enum_value(enum_type, value, label)
                        for (label, enum_type), value in zip(_FILTER_ENUMS, given, strict=True))
    for (label, _), member in zip(_FILTER_ENUMS, members, strict=True):
        if member == 0:
            raise FieldError(label, "must not be UNKNOWN in a filter")
    name = validation.optional_text(pattern.name, "resource name", selects=True)
    principal = validation.optional_text(entry.principal, "principal", selects=True)
    host = validation.optional_text(entry.host, "host", selects=True)
    if members is given:
        return f
    rtype, ptype, operation, permission = members
    return AclBindingFilter.of(rtype, name, ptype, principal, host, operation, permission)


def validate_filter(f: object) -> ApiError:
    """NONE, or INVALID_REQUEST naming the first bad field of the filter."""
    return _error_of(checked_filter, f)


def create_acls(
    image,
    bindings: Iterable[AclBinding],
    context: RequestContext,
    *,
    config: StoreConfig,
    decider: Decider,
    new_id: Callable[[], str] | None = None,
) -> ControlResult[list[ApiError]]:
    """AclCreated events for the new valid bindings and one ApiError per binding.

    Each new ACL's id comes from ``new_id``, by default a random UUID (``random_uuids``).
    """
    require_write_right(decider, context, "create_acls")
    bindings = list(bindings)
    limit = config.max_acl_changes_per_request
    if len(bindings) > limit:
        raise InvalidRequestException(
            f"The request creates {len(bindings)} ACLs; the limit is {limit} per request")
    acls = acls_of(image)
    seen: set[AclBinding] = set()
    entries: dict[tuple, AccessControlEntry] = {}
    fresh: list[AclBinding] = []
    results: list[ApiError] = []
    for given in bindings:
        try:
            binding = checked_binding(given, entries)
        except FieldError as exc:
            results.append(_invalid(str(exc)))
            continue
        results.append(_OK)
        if binding in seen:
            continue
        seen.add(binding)
        if acls.find(binding) is None:
            fresh.append(binding)
    ids = random_uuids(len(fresh)) if new_id is None else [new_id() for _ in fresh]
    events: list[Event] = [AclCreated(acl_id, binding) for acl_id, binding in zip(ids, fresh)]
    return ControlResult(events, results)


def random_uuids(n: int) -> list[str]:
    """``n`` random (version 4) UUIDs as strings, as ``str(uuid.uuid4())``, from one read of the OS's random source.

    One read, not one per id: each read releases the GIL, and a writer that releases it beside
    a busy thread waits up to a switch interval to get it back.
    """
    raw = bytearray(os.urandom(16 * n))
    raw[6::16] = bytes(b & 0x0F | 0x40 for b in raw[6::16])  # version 4
    raw[8::16] = bytes(b & 0x3F | 0x80 for b in raw[8::16])  # RFC 4122 variant
    return uuid_texts(raw)


def delete_acls(
    image,
    filters: Iterable[AclBindingFilter],
    context: RequestContext,
    *,
    config: StoreConfig,
    decider: Decider,
) -> ControlResult[list[DeleteAclsResult]]:
    """One AclDeleted per matched ACL and, per filter, the bindings it removed."""
    require_write_right(decider, context, "delete_acls")
    acls = acls_of(image)
    removed: dict[str, AclBinding] = {}
    results: list[DeleteAclsResult] = []
    for given in filters:
        try:
            f = checked_filter(given)
        except FieldError as exc:
            results.append(DeleteAclsResult(_invalid(str(exc))))
            continue
        matched = sorted(acls.matching(f), key=lambda pair: pair[0])
        removed.update(matched)
        results.append(DeleteAclsResult(_OK, tuple(binding for _, binding in matched)))
    limit = config.max_acl_changes_per_request
    if len(removed) > limit:
        raise InvalidRequestException(
            f"The filters match {len(removed)} ACLs; at most {limit} may be deleted per request")
    return ControlResult([AclDeleted(acl_id, binding) for acl_id, binding in removed.items()], results)


#: The right a describe of ACLs needs, on the cluster (Kafka's AclApis.handleDescribeAcls).
_DESCRIBE_RIGHT = AclOperation.DESCRIBE


def may_describe_acls(context: RequestContext, decider: Decider) -> bool:
    """Whether the requester may describe ACLs: the check ``describe_acls`` makes before it reads anything."""
    return allowed_on_cluster(decider, checked_context(context), _DESCRIBE_RIGHT)


def _readable_filter(f: AclBindingFilter, context: RequestContext, decider: Decider) -> AclBindingFilter:
    """The checked filter of a describe (needs DESCRIBE on CLUSTER; an UNKNOWN field is INVALID_REQUEST)."""
    require_cluster(decider, context, _DESCRIBE_RIGHT)
    try:
        return checked_filter(f)
    except FieldError as exc:
        raise InvalidRequestException(str(exc)) from None


def describe_acls(image, f: AclBindingFilter, context: RequestContext, *,
                  decider: Decider) -> list[AclBinding]:
    """The ACLs a filter selects (needs DESCRIBE on CLUSTER; an UNKNOWN field is INVALID_REQUEST).

    A read: it returns its answer, not a ControlResult."""
    return list(acls_of(image).bindings(_readable_filter(f, context, decider)))


def describe_acl_groups(image, f: AclBindingFilter, context: RequestContext, *,
                        decider: Decider) -> list[tuple[Group | Node, list[tuple[str, AccessControlEntry]] | None]]:
    """``describe_acls``' answer (the same checks) as the image's index groups that hold it, each with the
    (acl_id, entry) pairs selected or None for all of its ACLs, a whole index node when the filter selects
    all of it (``AclsImage.selection(..., whole_nodes=True)``): for a caller that encodes per group or node
    and keeps its encoding (both are immutable)."""
    return list(acls_of(image).selection(_readable_filter(f, context, decider), whole_nodes=True))
