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
as ``describe_acls``; a whole group's or node's encoding is kept while it lives), and the
answer is kept for the same filter until the store publishes another image, sent to the callers the
store lets describe ACLs (its own decision, ``store.may_describe_acls``, asked at each request:
``secmeta.core.server.image_answers``): never bytes of an older image than the one published when
the request is read.  A refusal is never kept.  On a logged-in connection, a request naming a
resource is answered from its bytes (``_answered_from_bytes``: read by hand, no kio entity, no
``Call``; a kept answer found by the request's version and body bytes, before the body is read)
when it succeeds; otherwise the handler answers it as any request.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from secmeta.core.errors import ApiError
from secmeta.core.server.call import Call
from secmeta.core.server.handling import request_level, respond
from secmeta.core.server.image_answers import ImageAnswers
from secmeta.core.types import RequestContext
from secmeta.core.wire import convert, hot_requests, hot_responses
from secmeta.core.wire.codec import EncodedResponse, response_frame_parts
from secmeta.core.wire.hot_requests import DescribeAclsFields


def _per_creation(call: Call, error: ApiError) -> Any:
    return respond(call, results=[convert.error_fields(error)] * len(call.request.creations))


@request_level(_per_creation, writes="create_acls")
def create_acls(call: Call) -> Any:
    bindings = [convert.binding_from(creation) for creation in call.request.creations]
    errors = call.store.create_acls(bindings, context=call.context)
    return respond(call, results=[convert.error_fields(e) for e in errors])


def _describe_failed(call: Call, error: ApiError) -> Any:
    return respond(call, **convert.error_fields(error), resources=[])


def _names_a_resource(call: Call) -> bool:
    return call.request.resource_name_filter is not None


def _answer(store: Any, context: RequestContext, answers: ImageAnswers | None, key: Hashable, version: int,
            fields: DescribeAclsFields) -> EncodedResponse:
    """DescribeAcls' successful answer to the filter ``fields`` (raises the store's ApiException), kept per image
    under ``key`` for the callers the store lets describe ACLs."""
    def compute() -> EncodedResponse:
        groups = store.describe_acl_groups(convert.filter_of(fields), context=context)
        if answers is not None:
            holders = tuple([holder for holder, chosen in groups if chosen is None])
            if len(holders) == len(groups):     # whole groups and nodes: the answer is their encoding
                return answers.of_objects(version, holders,
                                          lambda: hot_responses.describe_acls_response(version, groups))
        return hot_responses.describe_acls_response(version, groups)

    if answers is None:
        return compute()
    return answers.answer(store, key, compute, context, store.may_describe_acls)


def _answered_from_bytes(frame: bytes, store: Any, context: RequestContext, answers: ImageAnswers | None
                         ) -> tuple[bytes, ...] | None:
    """The response frame of a DescribeAcls naming a resource, read by hand (``hot_requests``) and answered
    without a kio entity, as the parts to write (``response_frame_parts``: the answer's body is not copied into
    a frame), or None (not read by hand, no name, or not a success): the handler answers it.
    An answer kept for the same version and body (``hot_requests.describe_acls_key``) is sent without reading
    the body, to a caller the store lets describe ACLs."""
    keyed = hot_requests.describe_acls_key(frame)
    if keyed is None:
        return None
    version, correlation_id, pos, key = keyed
    if answers is not None:
        kept = answers.kept(store, key, context, store.may_describe_acls)
        if kept is not None:
            return response_frame_parts(correlation_id, kept)
    fields = hot_requests.describe_acls_body(frame, version, pos, trailing_ok=True)
    if fields is None or fields[1] is None:     # no resource name: it may scan, so not on the loop
        return None
    try:
        response = _answer(store, context, answers, key, version, fields)
    except Exception:           # a refusal or a failure: the handler's path answers (or logs) it
        return None
    return response_frame_parts(correlation_id, response)


@request_level(_describe_failed, on_loop=_names_a_resource, raw=_answered_from_bytes)
def describe_acls(call: Call) -> Any:
    fields = hot_requests.fields_of(call.request)
    return _answer(call.store, call.context, call.answers, (call.version, fields), call.version, fields)


def _per_filter(call: Call, error: ApiError) -> Any:
    failed = {**convert.error_fields(error), "matching_acls": []}
    return respond(call, filter_results=[failed] * len(call.request.filters))


@request_level(_per_filter, writes="delete_acls")
def delete_acls(call: Call) -> Any:
    filters = [convert.filter_from(f) for f in call.request.filters]
    results = call.store.delete_acls(filters, context=call.context)
    return respond(call, filter_results=[
        {**convert.error_fields(r.error), "matching_acls": [convert.matching_acl_fields(b) for b in r.acls]}
        for r in results])
