"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51) over the store.

Kafka's request carries a salted password (KIP-554), which the store accepts with its
salt as ``UserScramCredentialUpsertion(salt=..., salted_password=...)`` and validates
itself.  Request-level failures as Kafka's getErrorResponse: Describe puts the error at
the top and on a result per named user; Alter gives one result per distinct user,
sorted by name.  A Describe naming at most ``ON_LOOP_USERS`` users is answered on the event
loop (one lookup per user in the immutable image); describing every user, or more, and
every Alter (PBKDF2, fsync) run in a worker thread.
"""

from __future__ import annotations

from typing import Any

from secmeta.core.errors import ApiError
from secmeta.core.server.call import Call
from secmeta.core.server.handling import request_level, respond
from secmeta.core.wire import convert

ON_LOOP_USERS = 64


def _describe_failed(call: Call, error: ApiError) -> Any:
    users = convert.users_from_request(call.request) or []
    return respond(call, **convert.error_fields(error),
                   results=convert.describe_result_fields(dict.fromkeys(users, error)))


def _names_few_users(call: Call) -> bool:
    return bool(call.request.users) and len(call.request.users) <= ON_LOOP_USERS


@request_level(_describe_failed, on_loop=_names_few_users)
def describe_user_scram_credentials(call: Call) -> Any:
    results = call.store.describe_user_scram_credentials(convert.users_from_request(call.request),
                                                         context=call.context)
    return respond(call, error_code=0, error_message=None, results=convert.describe_result_fields(results))


def _alter_failed(call: Call, error: ApiError) -> Any:
    users = sorted({item.name for item in (*call.request.deletions, *call.request.upsertions)})
    return respond(call, results=convert.alter_result_fields(dict.fromkeys(users, error)))


@request_level(_alter_failed, writes="alter_user_scram_credentials")
def alter_user_scram_credentials(call: Call) -> Any:
    results = call.store.alter_user_scram_credentials(convert.alterations_from_request(call.request),
                                                      context=call.context)
    return respond(call, results=convert.alter_result_fields(results))
