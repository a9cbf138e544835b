"""DescribeClientQuotas (48) and AlterClientQuotas (49) over the store (KIP-546).

Request-level failures as Kafka's getErrorResponse: Describe answers the error at the top with
no entries; Alter repeats it on every entity of the request (AlterClientQuotasRequest.getErrorResponse),
e.g. CLUSTER_AUTHORIZATION_FAILED without ALTER_CONFIGS on the cluster.  A Describe is a scan of
every quota entity, and an Alter a write: both run in a worker thread.
"""

from __future__ import annotations

from typing import Any

from secmeta.core.errors import ApiError
from secmeta.core.server.call import Call
from secmeta.core.server.handling import request_level, respond
from secmeta.core.wire import convert


def _describe_failed(call: Call, error: ApiError) -> Any:
    return respond(call, **convert.error_fields(error), entries=None)


@request_level(_describe_failed)
def describe_client_quotas(call: Call) -> Any:
    found = call.store.describe_client_quotas(convert.quota_filter_from(call.request), context=call.context)
    return respond(call, error_code=0, error_message=None, entries=convert.quota_entries_fields(found))


def _alter_failed(call: Call, error: ApiError) -> Any:
    entities = dict.fromkeys(convert.quota_entity_from(e.entity) for e in call.request.entries)
    return respond(call, entries=convert.quota_alter_result_fields(dict.fromkeys(entities, error)))


@request_level(_alter_failed, writes="alter_client_quotas")
def alter_client_quotas(call: Call) -> Any:
    results = call.store.alter_client_quotas(convert.quota_alterations_from_request(call.request),
                                             validate_only=bool(call.request.validate_only), context=call.context)
    return respond(call, entries=convert.quota_alter_result_fields(results))
