"""ApiVersions, Metadata and DescribeCluster: this one-node cluster as Kafka's brokers describe it.

The node is broker and controller at once; the cluster id is the store's id; there are no
topics.  Authorized-operations fields hold the KIP-430 bitfield when asked for, else
Kafka's "not requested" value -2147483648; a caller without DESCRIBE on the cluster gets
0, as Kafka's AuthHelper.computeDescribeClusterResponse and KafkaApis'
handleTopicMetadataRequest answer.  Throttle time is always 0.  All three only read the
store's immutable image and do work bounded by the request: they are answered on the
event loop.
"""

from __future__ import annotations

import re
import uuid
from functools import cache
from typing import Any

from secmeta.core.errors import ApiError, ErrorCode
from secmeta.core.server.call import Call
from secmeta.core.server.handling import Handler, request_level, respond
from secmeta.core.wire.codec import ApiKey, build, response_class
from secmeta.events.types import CLUSTER_NAME, AclOperation, ResourceType

__all__ = ["AUTHORIZED_OPERATIONS_OMITTED", "CLUSTER_HANDLERS", "api_versions_fallback"]

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
UNKNOWN_TOPIC_OR_PARTITION = 3
# DescribeClusterRequest.endpoint_type (KIP-919, EndpointType): this node is both.
_ENDPOINT_TYPES = frozenset({1, 2})   # BROKER, CONTROLLER
# ApiVersionsRequest.isValid (KIP-511): client software name and version.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
_DESCRIBE_BIT = 1 << int(AclOperation.DESCRIBE)


def _always(call: Call) -> bool:
    return True


def _versions_table() -> tuple[tuple[int, int, int], ...]:
    return tuple((int(api), *api.versions) for api in ApiKey)


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


@request_level(_api_versions_failed, on_loop=_always)
def api_versions(call: Call) -> Any:
    request = call.request
    if call.version >= 3 and not (_SOFTWARE.fullmatch(request.client_software_name or "")
                                  and _SOFTWARE.fullmatch(request.client_software_version or "")):
        return respond(call, error_code=ErrorCode.INVALID_REQUEST, api_keys=[])
    return respond(call, error_code=ErrorCode.NONE, api_keys=_api_keys(_versions_table(), call.version))


def _cluster_operations(call: Call, asked: bool) -> int:
    """KIP-430: the caller's operations on the cluster, 0 without DESCRIBE on it, or "not requested"."""
    if not asked:
        return AUTHORIZED_OPERATIONS_OMITTED
    ctx = call.context
    operations = int(call.store.authorized_operations(ctx.principal, ctx.host, ResourceType.CLUSTER, CLUSTER_NAME))
    return operations if operations & _DESCRIBE_BIT else 0


def _topic(name: str | None, topic_id: uuid.UUID | None, error: int) -> dict[str, Any]:
    return {"error_code": error, "name": name or "", "topic_id": topic_id or uuid.UUID(int=0),
            "is_internal": False, "partitions": [], "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


def _metadata_failed(call: Call, error: ApiError) -> Any:
    # MetadataRequest.getErrorResponse: every named topic and the top level carry the error.
    topics = [_topic(t.name, getattr(t, "topic_id", None), error.code) for t in (call.request.topics or ())]
    return respond(call, brokers=[], topics=topics, error_code=error.code)


@request_level(_metadata_failed, on_loop=_always)
def metadata(call: Call) -> Any:
    request, broker = call.request, call.broker
    topics = [_topic(t.name, getattr(t, "topic_id", None), UNKNOWN_TOPIC_OR_PARTITION) for t in (request.topics or ())]
    asked = bool(getattr(request, "include_cluster_authorized_operations", False))
    return respond(
        call,
        brokers=[{"node_id": broker.node_id, "host": broker.host, "port": broker.port, "rack": broker.rack}],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
        cluster_authorized_operations=_cluster_operations(call, asked),
        error_code=ErrorCode.NONE,
    )


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
    return respond(
        call,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=endpoint_type,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=[{"broker_id": broker.node_id, "host": broker.host, "port": broker.port, "rack": broker.rack,
                  "is_fenced": False}],
        cluster_authorized_operations=_cluster_operations(call, request.include_cluster_authorized_operations),
    )


CLUSTER_HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.API_VERSIONS: api_versions,
    ApiKey.METADATA: metadata,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster,
}
