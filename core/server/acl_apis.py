"""CreateAcls (30), DescribeAcls (29) and DeleteAcls (31) over the store.

As Kafka (ControllerApis.handleCreateAcls / handleDeleteAcls, AclApis.handleDescribeAcls
and the requests' getErrorResponse): a request-level failure such as
CLUSTER_AUTHORIZATION_FAILED is repeated on every creation or filter of CreateAcls and
DeleteAcls, and is DescribeAcls' top-level error with no resources.

A DescribeAcls whose filter names a resource is answered on the event loop: the store's
index then visits only the nodes that can hold ACLs for that name (the literal name, the
'*' wildcard and the prefixes of the name), so its work is bounded by the ACLs bound to
that one name.  A filter without a name may scan every ACL: it runs in a worker thread.
DescribeAcls' answer is encoded by hand (``secmeta.core.wire.hot_responses``), straight
from the index groups the store selects (``describe_acl_groups``: the same checks and ACLs
as ``describe_acls``; a whole group's encoding is kept while the group lives), and the
answer is kept for the same request and context until the store publishes another image (``secmeta.core.server.image_answers``): never bytes of an
older image than the one published when the request is read.  A refusal is never kept.
"""

from __future__ import annotations

from typing import Any

from secmeta.core.errors import ApiError
from secmeta.core.server.call import Call
from secmeta.core.server.handling import request_level, respond
from secmeta.core.wire import convert, hot_responses


def _per_creation(call: Call, error: ApiError) -> Any:
    return respond(call, results=[convert.error_fields(error)] * len(call.request.creations))


@request_level(_per_creation, writes=True)
def create_acls(call: Call) -> Any:
    bindings = [convert.binding_from(creation) for creation in call.request.creations]
    errors = call.store.create_acls(bindings, context=call.context)
    return respond(call, results=[convert.error_fields(e) for e in errors])


def _describe_failed(call: Call, error: ApiError) -> Any:
    return respond(call, **convert.error_fields(error), resources=[])


def _names_a_resource(call: Call) -> bool:
    return call.request.resource_name_filter is not None


def _described(call: Call) -> Any:
    groups = call.store.describe_acl_groups(convert.filter_from(call.request), context=call.context)
    return hot_responses.describe_acls_response(call.version, groups)


@request_level(_describe_failed, on_loop=_names_a_resource)
def describe_acls(call: Call) -> Any:
    if call.answers is None:
        return _described(call)
    return call.answers.answer(call.store, (call.version, call.request, call.context), lambda: _described(call))


def _per_filter(call: Call, error: ApiError) -> Any:
    failed = {**convert.error_fields(error), "matching_acls": []}
    return respond(call, filter_results=[failed] * len(call.request.filters))


@request_level(_per_filter, writes=True)
def delete_acls(call: Call) -> Any:
    filters = [convert.filter_from(f) for f in call.request.filters]
    results = call.store.delete_acls(filters, context=call.context)
    return respond(call, filter_results=[
        {**convert.error_fields(r.error), "matching_acls": [convert.matching_acl_fields(b) for b in r.acls]}
        for r in results])
