"""Create (38), Renew (39), Expire (40) and DescribeDelegationToken (41) over the store.

The store raises the Kafka code of a refused token request (DELEGATION_TOKEN_NOT_FOUND,
_OWNER_MISMATCH, _EXPIRED, _REQUEST_NOT_ALLOWED, _AUTHORIZATION_FAILED, _AUTH_DISABLED,
INVALID_PRINCIPAL_TYPE); these responses carry a code and no message.  A refused create
keeps the owner and requester (Kafka's CreateDelegationTokenResponse.prepareResponse);
its timestamps, and a refused renew's or expire's, are ``convert.NO_TIMESTAMP_MS``.
Describe returns the HMACs only when the store is configured to include them (an empty
HMAC otherwise), where Kafka always sends them.
"""

from __future__ import annotations

from typing import Any

from secmeta.core.errors import ApiError
from secmeta.core.server.call import Call
from secmeta.core.server.handling import request_level, respond
from secmeta.core.times import ms_to_datetime
from secmeta.core.wire import convert


def _create_failed(call: Call, error: ApiError) -> Any:
    owner = convert.create_token_args(call.request)["owner"] or call.context.principal
    return respond(call, **convert.create_token_error_fields(error, owner, call.context.principal))


@request_level(_create_failed, writes="create_delegation_token")
def create_delegation_token(call: Call) -> Any:
    token = call.store.create_delegation_token(context=call.context, **convert.create_token_args(call.request))
    return respond(call, **convert.create_token_response_fields(token))


def _expiry_failed(call: Call, error: ApiError) -> Any:
    return respond(call, error_code=int(error.code),
                   expiry_timestamp=ms_to_datetime(convert.NO_TIMESTAMP_MS))


def _expiry(call: Call, expiry_ms: int) -> Any:
    return respond(call, error_code=0, expiry_timestamp=ms_to_datetime(expiry_ms))


@request_level(_expiry_failed, writes="renew_delegation_token")
def renew_delegation_token(call: Call) -> Any:
    request = call.request
    return _expiry(call, call.store.renew_delegation_token(
        bytes(request.hmac), convert.ms_from(request.renew_period), context=call.context))


@request_level(_expiry_failed, writes="expire_delegation_token")
def expire_delegation_token(call: Call) -> Any:
    request = call.request
    return _expiry(call, call.store.expire_delegation_token(
        bytes(request.hmac), convert.ms_from(request.expiry_time_period), context=call.context))


def _describe_failed(call: Call, error: ApiError) -> Any:
    return respond(call, error_code=int(error.code), tokens=[])


@request_level(_describe_failed)
def describe_delegation_token(call: Call) -> Any:
    tokens = call.store.describe_delegation_tokens(convert.owners_from_request(call.request), context=call.context)
    return respond(call, error_code=0, tokens=[convert.described_token_fields(t) for t in tokens])
