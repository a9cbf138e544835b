"""Hypothesis strategies for events, envelopes and ACL bindings (reusable by any test)."""

from __future__ import annotations

import uuid

from hypothesis import strategies as st

from secmeta.events.keyring import SealedSecret
from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    ClientQuotaAltered,
    ClientQuotaEntity,
    DelegationTokenExpired,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    DelegationTokenRenewed,
    Envelope,
    KeyRotated,
    LogRecovered,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
    SecuritySettingAltered,
    TokenRemovalReason,
)
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)

__all__ = [
    "acl_bindings",
    "envelopes",
    "event_lists",
    "events",
    "events_of_each_type",
    "longs",
    "names",
    "principals",
    "request_batches",
    "sealed_secrets",
]

# Avro strings are UTF-8: no lone surrogates.
names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
principals = st.builds(
    lambda kind, name: f"{kind}:{name}", st.sampled_from(["User", "Group"]), names
)
longs = st.integers(-(2**63), 2**63 - 1)
timestamps = st.integers(0, 2**45)
ints = st.integers(-(2**31), 2**31 - 1)
acl_ids = st.builds(lambda: str(uuid.uuid4()))

sealed_secrets = st.builds(
    SealedSecret,
    key_id=st.from_regex(r"k-\d{8}-[0-9a-f]{6}", fullmatch=True),
    nonce=st.binary(min_size=12, max_size=12),
    ciphertext=st.binary(min_size=16, max_size=200),
)

acl_bindings = st.builds(
    AclBinding.of,
    st.sampled_from(ResourceType),
    names,
    st.sampled_from(PatternType),
    principals,
    st.one_of(st.just("*"), names),
    st.sampled_from(AclOperation),
    st.sampled_from(AclPermissionType),
)

_EVENT_STRATEGIES = {
    ScramCredentialUpserted: st.builds(
        ScramCredentialUpserted, names, st.sampled_from(ScramMechanism), ints, sealed_secrets
    ),
    ScramCredentialDeleted: st.builds(
        ScramCredentialDeleted, names, st.sampled_from(ScramMechanism)
    ),
    AclCreated: st.builds(AclCreated, acl_ids, acl_bindings),
    AclDeleted: st.builds(AclDeleted, acl_ids, acl_bindings),
    DelegationTokenIssued: st.builds(
        DelegationTokenIssued,
        names,
        principals,
        principals,
        st.lists(principals, max_size=4).map(tuple),
        timestamps,
        timestamps,
        timestamps,
    ),
    DelegationTokenRenewed: st.builds(DelegationTokenRenewed, names, longs, timestamps),
    DelegationTokenExpired: st.builds(DelegationTokenExpired, names, longs, timestamps),
    DelegationTokenRemoved: st.builds(
        DelegationTokenRemoved, names, st.sampled_from(TokenRemovalReason)
    ),
    ClientQuotaAltered: st.builds(
        ClientQuotaAltered,
        st.builds(lambda parts: str(ClientQuotaEntity.of(parts)),
                  st.dictionaries(st.sampled_from(["user", "client-id", "ip"]), st.none() | names, min_size=1)),
        st.sampled_from(["producer_byte_rate", "consumer_byte_rate", "request_percentage"]),
        st.none() | st.floats(allow_nan=False),
    ),
    SecuritySettingAltered: st.builds(
        SecuritySettingAltered,
        st.sampled_from(["super.users", "allow.everyone.if.no.acl.found", "delegation.token.max.lifetime.ms"]),
        st.none() | names,
    ),
    LogRecovered: st.builds(
        LogRecovered, names, names, names, timestamps, timestamps, timestamps,
        st.binary(min_size=32, max_size=32).map(bytes.hex), st.binary(min_size=32, max_size=32).map(bytes.hex), names,
        st.just("") | st.binary(min_size=32, max_size=32).map(bytes.hex),
    ),
    KeyRotated: st.builds(KeyRotated, names, names),
}

events = st.one_of(*_EVENT_STRATEGIES.values())


def events_of_each_type() -> dict[type, st.SearchStrategy]:
    """One strategy per event class, keyed by the class."""
    return dict(_EVENT_STRATEGIES)


def envelopes(event_strategy: st.SearchStrategy = events) -> st.SearchStrategy[Envelope]:
    """Envelopes as a writer builds them (offset -1, no fingerprint)."""
    return st.builds(
        Envelope,
        offset=st.just(-1),
        timestamp_ms=timestamps,
        actor_principal=principals,
        actor_host=st.one_of(st.just("127.0.0.1"), names),
        request_id=names,
        event=event_strategy,
    )


event_lists = st.lists(envelopes(), max_size=30)


def _request(header, evs) -> list[Envelope]:
    return [Envelope(-1, *header, event) for event in evs]


_headers = st.tuples(timestamps, principals, st.one_of(st.just("127.0.0.1"), names), names)

# Batches as the store appends them: a few requests, each several events under one header
# (timestamp, actor principal, actor host, request id); consecutive requests may share one.
request_batches = st.lists(
    st.builds(_request, _headers, st.lists(events, min_size=1, max_size=6)), max_size=4
).map(lambda requests: [env for request in requests for env in request])
