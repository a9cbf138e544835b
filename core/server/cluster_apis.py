"""ApiVersions, Metadata and DescribeCluster: this one-node cluster as Kafka's brokers describe it.

The node is broker and controller at once; the cluster id is the store's id; there are no
topics.  In replicated mode the brokers are every node announced and the controller is the
active one (``secmeta.core.server.controllership``).  Authorized-operations fields hold the
KIP-430 bitfield when asked for, else Kafka's "not requested" value -2147483648; a caller
without DESCRIBE on the cluster gets 0, as Kafka's AuthHelper.computeDescribeClusterResponse
and KafkaApis' handleTopicMetadataRequest answer; a named topic the caller may describe gets
its operations on that topic (a refused one keeps "not requested", as in handleTopicMetadataRequest).  Throttle time is always 0.  All three only
read the store's immutable image and do work bounded by the request: they are answered on
the event loop.

Their successful answers depend on a few values only (the version, the cluster id, the
cluster's view: its controller and nodes as this listener advertises them, and the caller's
cluster operations, computed per request from the published image), so each is encoded by
kio once per such key and kept: a request then costs its checks, its authorization and a
lookup, and the answer is always the one the current image gives.  Metadata naming topics
is built per request: each named topic is TOPIC_AUTHORIZATION_FAILED for a caller that may not
DESCRIBE it, else UNKNOWN_TOPIC_OR_PARTITION, as Kafka's handleTopicMetadataRequest answers.
"""

from __future__ import annotations

import re
import uuid
from functools import cache, lru_cache
from typing import Any

from secmeta.core.errors import ApiError, ErrorCode
from secmeta.core.server.call import Call
from secmeta.core.server.controllership import ClusterView, cluster_view
from secmeta.core.server.handling import Handler, request_level, respond
from secmeta.core.wire.codec import ApiKey, EncodedResponse, build, encoded, response_class
from secmeta.events.types import CLUSTER_NAME, AclOperation, ResourceType

__all__ = ["AUTHORIZED_OPERATIONS_OMITTED", "CLUSTER_HANDLERS", "api_versions_fallback"]

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_AUTHORIZATION_FAILED = 29
# DescribeClusterRequest.endpoint_type (KIP-919, EndpointType): this node is both.
_ENDPOINT_TYPES = frozenset({1, 2})   # BROKER, CONTROLLER
# ApiVersionsRequest.isValid (KIP-511): client software name and version.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
_DESCRIBE_BIT = 1 << int(AclOperation.DESCRIBE)


def _always(call: Call) -> bool:
    return True


#: The APIs served, listed once (their versions are read at each ApiVersions: a test changes one at run time).
_APIS = tuple(ApiKey)


def _versions_table() -> tuple[tuple[int, int, int], ...]:
    return tuple([(api._value_, *api.versions) for api in _APIS])     # (not EnumType.__iter__: 11 -> 5 us)


@cache
def _api_keys(table: tuple[tuple[int, int, int], ...], version: int) -> tuple[Any, ...]:
    """ApiVersions' api_keys entries for ``table`` (kio entities are immutable: built once)."""
    return build(response_class(ApiKey.API_VERSIONS, version), error_code=0, throttle_time=0, api_keys=[
        {"api_key": key, "min_version": low, "max_version": high} for key, low, high in table]).api_keys


def api_versions_fallback() -> Any:
    """ApiVersions v0 answer to an ApiVersions version we do not serve: UNSUPPORTED_VERSION and
    our ApiVersions range only (ApiVersionsRequest.getErrorResponse, KIP-511), so the client retries."""
    low, high = ApiKey.API_VERSIONS.versions
    return build(response_class(ApiKey.API_VERSIONS, 0), error_code=ErrorCode.UNSUPPORTED_VERSION,
                 api_keys=[{"api_key": ApiKey.API_VERSIONS, "min_version": low, "max_version": high}])


def _api_versions_failed(call: Call, error: ApiError) -> Any:
    return respond(call, error_code=error.code, api_keys=[])


def _encoded(api_key: ApiKey, version: int, fields: dict[str, Any]) -> EncodedResponse:
    """The successful answer of ``api_key`` at ``version`` with ``fields``, encoded by kio."""
    return encoded(build(response_class(api_key, version), throttle_time=0, **fields))


@cache
def _api_versions_answer(table: tuple[tuple[int, int, int], ...], version: int) -> EncodedResponse:
    return _encoded(ApiKey.API_VERSIONS, version, {"error_code": ErrorCode.NONE, "api_keys": _api_keys(table, version)})


@request_level(_api_versions_failed, on_loop=_always)
def api_versions(call: Call) -> Any:
    request = call.request
    if call.version >= 3 and not (_SOFTWARE.fullmatch(request.client_software_name or "")
                                  and _SOFTWARE.fullmatch(request.client_software_version or "")):
        return respond(call, error_code=ErrorCode.INVALID_REQUEST, api_keys=[])
    return _api_versions_answer(_versions_table(), call.version)


def _cluster_operations(call: Call, asked: bool) -> int:
    """KIP-430: the caller's operations on the cluster, 0 without DESCRIBE on it, or "not requested"."""
    if not asked:
        return AUTHORIZED_OPERATIONS_OMITTED
    ctx = call.context
    operations = int(call.store.authorized_operations(ctx.principal, ctx.host, ResourceType.CLUSTER, CLUSTER_NAME))
    return operations if operations & _DESCRIBE_BIT else 0


def _topic(name: str | None, topic_id: uuid.UUID | None, error: int,
           operations: int = AUTHORIZED_OPERATIONS_OMITTED) -> dict[str, Any]:
    return {"error_code": error, "name": name or "", "topic_id": topic_id or uuid.UUID(int=0),
            "is_internal": False, "partitions": [], "topic_authorized_operations": operations}


def _named_topic(call: Call, name: str | None, topic_id: uuid.UUID | None, asked: bool) -> dict[str, Any]:
    """A named topic's entry: its error (``_named_topic_error``) and, when asked (v8+), for a topic the caller may
    describe (one Kafka looks up), the caller's operations on it by the store's one rule (KIP-430 bitfield), as
    KafkaApis.handleTopicMetadataRequest sets them on the looked-up topics alone; a topic refused or given by id
    alone keeps "not requested"."""
    error = _named_topic_error(call, name)
    if not asked or not name or error == TOPIC_AUTHORIZATION_FAILED:
        return _topic(name, topic_id, error)
    ctx = call.context
    return _topic(name, topic_id, error,
                  int(call.store.authorized_operations(ctx.principal, ctx.host, ResourceType.TOPIC, name)))


def _named_topic_error(call: Call, name: str | None) -> int:
    """KafkaApis.handleTopicMetadataRequest: a named topic the caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED,
    and is not looked up ("do not disclose the existence of topics unauthorized for Describe"); one it may describe
    is looked up, and this node holds no topics: UNKNOWN_TOPIC_OR_PARTITION. A topic given by id alone (no name)
    has no name to authorize and is unknown."""
    if name:
        ctx = call.context
        if not call.store.authorize(ctx.principal, ctx.host, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            return TOPIC_AUTHORIZATION_FAILED
    return UNKNOWN_TOPIC_OR_PARTITION


def _metadata_failed(call: Call, error: ApiError) -> Any:
    # MetadataRequest.getErrorResponse: every named topic and the top level carry the error.
    topics = [_topic(t.name, getattr(t, "topic_id", None), error.code) for t in (call.request.topics or ())]
    return respond(call, brokers=[], topics=topics, error_code=error.code)


def _metadata_fields(cluster_id: str, view: ClusterView, topics: list[dict[str, Any]],
                     operations: int) -> dict[str, Any]:
    return {"brokers": [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack} for n in view.brokers],
            "cluster_id": cluster_id, "controller_id": view.controller_id, "topics": topics,
            "cluster_authorized_operations": operations, "error_code": ErrorCode.NONE}


#: Bounds of the answers kept encoded: the keys are a version, a listener's cluster view and a
#: cluster-operations bitfield (a few dozen in all; a replicated cluster adds a view per failover);
#: the bound only caps a surprise.
_KEPT = 256


@lru_cache(maxsize=_KEPT)
def _metadata_answer(version: int, cluster_id: str, view: ClusterView, operations: int) -> EncodedResponse:
    return _encoded(ApiKey.METADATA, version, _metadata_fields(cluster_id, view, [], operations))


@request_level(_metadata_failed, on_loop=_always)
def metadata(call: Call) -> Any:
    request, broker = call.request, call.broker
    asked = bool(getattr(request, "include_cluster_authorized_operations", False))
    operations = _cluster_operations(call, asked)
    view = cluster_view(broker, call.cluster)
    if not request.topics:      # all topics (null) or none: the same answer for every such request
        return _metadata_answer(call.version, broker.cluster_id, view, operations)
    topic_operations = bool(getattr(request, "include_topic_authorized_operations", False))
    topics = [_named_topic(call, t.name, getattr(t, "topic_id", None), topic_operations) for t in request.topics]
    return respond(call, **_metadata_fields(broker.cluster_id, view, topics, operations))


def _describe_cluster_failed(call: Call, error: ApiError) -> Any:
    return respond(call, error_code=error.code, error_message=error.message, cluster_id="", brokers=[])


@request_level(_describe_cluster_failed, on_loop=_always)
def describe_cluster(call: Call) -> Any:
    request, broker = call.request, call.broker
    endpoint_type = int(getattr(request, "endpoint_type", 1))
    if endpoint_type not in _ENDPOINT_TYPES:
        # AuthHelper.computeDescribeClusterResponse: EndpointType.UNKNOWN
        code = ErrorCode.INVALID_REQUEST if call.version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        return _describe_cluster_failed(call, ApiError(code, f"Unsupported endpoint type {endpoint_type}"))
    operations = _cluster_operations(call, request.include_cluster_authorized_operations)
    return _describe_cluster_answer(call.version, broker.cluster_id, cluster_view(broker, call.cluster),
                                    endpoint_type, operations)


@lru_cache(maxsize=_KEPT)
def _describe_cluster_answer(version: int, cluster_id: str, view: ClusterView, endpoint_type: int,
                             operations: int) -> EncodedResponse:
    return _encoded(ApiKey.DESCRIBE_CLUSTER, version, {
        "error_code": ErrorCode.NONE, "error_message": None, "endpoint_type": endpoint_type,
        "cluster_id": cluster_id, "controller_id": view.controller_id,
        "brokers": [{"broker_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack, "is_fenced": False}
                    for n in view.brokers],
        "cluster_authorized_operations": operations})


CLUSTER_HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.API_VERSIONS: api_versions,
    ApiKey.METADATA: metadata,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster,
}
