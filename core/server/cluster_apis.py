"""ApiVersions, Metadata and DescribeCluster: this one-node cluster as Kafka's brokers describe it.

The node is broker and controller at once; the cluster id is the store's id; there are no
topics.  Authorized-operations fields hold the KIP-430 bitfield when asked for, else
Kafka's "not requested" value -2147483648.  Throttle time is always 0.
"""

from __future__ import annotations

import re
import uuid

from core.errors import ErrorCode
from core.server.call import Call, Handler
from core.wire.codec import SERVED_VERSIONS, build, response_class
from events.types import CLUSTER_NAME, ResourceType

__all__ = ["AUTHORIZED_OPERATIONS_OMITTED", "CLUSTER_HANDLERS", "api_versions_fallback", "api_versions_list"]

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
API_VERSIONS, METADATA, DESCRIBE_CLUSTER = 18, 3, 60
UNKNOWN_TOPIC_OR_PARTITION = 3
# ApiVersionsRequest.isValid (KIP-511): client software name and version.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_versions_list() -> list[dict]:
    """Every API key served (with a handler), with its version range."""
    from core.server.apis import served_keys

    keys = served_keys()
    return [{"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(SERVED_VERSIONS.items()) if k in keys]


def api_versions_fallback():
    """ApiVersions v0 answer to an ApiVersions version we do not serve: UNSUPPORTED_VERSION and
    our ApiVersions range only (ApiVersionsRequest.getErrorResponse, KIP-511), so the client retries."""
    lo, hi = SERVED_VERSIONS[API_VERSIONS]
    return build(response_class(API_VERSIONS, 0), error_code=ErrorCode.UNSUPPORTED_VERSION,
                 api_keys=[{"api_key": API_VERSIONS, "min_version": lo, "max_version": hi}])


def handle_api_versions(call: Call):
    cls = response_class(API_VERSIONS, call.version)
    request = call.request
    if call.version >= 3 and not (_SOFTWARE.fullmatch(request.client_software_name or "")
                                  and _SOFTWARE.fullmatch(request.client_software_version or "")):
        return build(cls, error_code=ErrorCode.INVALID_REQUEST, api_keys=[], throttle_time=0)
    return build(cls, error_code=ErrorCode.NONE, api_keys=api_versions_list(), throttle_time=0)


def _cluster_operations(call: Call, asked: bool) -> int:
    if not asked:
        return AUTHORIZED_OPERATIONS_OMITTED
    ctx = call.context
    return int(call.store.authorized_operations(ctx.principal, ctx.host, ResourceType.CLUSTER, CLUSTER_NAME))


def handle_metadata(call: Call):
    request, broker = call.request, call.broker
    topics = [
        {"error_code": UNKNOWN_TOPIC_OR_PARTITION, "name": t.name, "topic_id": getattr(t, "topic_id", None) or uuid.UUID(int=0),
         "is_internal": False, "partitions": [], "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
        for t in (request.topics or ())
    ]
    asked = bool(getattr(request, "include_cluster_authorized_operations", False))
    return build(
        response_class(METADATA, call.version),
        throttle_time=0,
        brokers=[{"node_id": broker.node_id, "host": broker.host, "port": broker.port, "rack": broker.rack}],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
        cluster_authorized_operations=_cluster_operations(call, asked),
        error_code=ErrorCode.NONE,
    )


def handle_describe_cluster(call: Call):
    request, broker = call.request, call.broker
    # One node is both broker and controller, so either endpoint type describes it.
    endpoint_type = int(getattr(request, "endpoint_type", 1))
    return build(
        response_class(DESCRIBE_CLUSTER, call.version),
        throttle_time=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=endpoint_type,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=[{"broker_id": broker.node_id, "host": broker.host, "port": broker.port, "rack": broker.rack,
                  "is_fenced": False}],
        cluster_authorized_operations=_cluster_operations(call, request.include_cluster_authorized_operations),
    )


CLUSTER_HANDLERS: dict[int, Handler] = {
    API_VERSIONS: handle_api_versions,
    METADATA: handle_metadata,
    DESCRIBE_CLUSTER: handle_describe_cluster,
}
