"""Properties of SecurityImage replay: batching, snapshots and the real log all agree."""

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.core.log import Log, LogConfig
from secmeta.core.store.state import load_state
from secmeta.events.errors import InvalidValueError
from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    ClientQuotaAltered,
    DelegationTokenExpired,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    DelegationTokenRenewed,
    Envelope,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
    TokenRemovalReason,
)
from secmeta.events.types import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    ScramMechanism,
)
from secmeta.projections.errors import InconsistentEventError
from secmeta.projections.image import SecurityImage, SecurityProjection
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import read_snapshot, write_snapshot
from tests.logkit import make_keyring
from tests.strategies_events import longs, names, principals, sealed_secrets

PROJECTION = SecurityProjection()
CODEC = SecurityImageSnapshot()

# Small pools of ids, so later events meet the entities earlier ones made.
users = st.sampled_from(["alice", "bob", "zoë"])
mechanisms = st.sampled_from([ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512])
acl_ids = st.sampled_from([f"acl-{i}" for i in range(6)])
token_ids = st.sampled_from(["t1", "t2", "t3"])
timestamps = st.integers(0, 2**45)
bindings = st.builds(
    AclBinding.of,
    st.sampled_from(list(ResourceType)[2:]),
    names,
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    principals,
    st.one_of(st.just("*"), st.just("10.0.0.0/8"), names),
    st.sampled_from(AclOperation),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)
events = st.one_of(
    st.builds(ScramCredentialUpserted, users, mechanisms, st.integers(4096, 16384), sealed_secrets),
    st.builds(ScramCredentialDeleted, users, mechanisms),
    st.builds(AclCreated, acl_ids, bindings),
    st.builds(AclDeleted, acl_ids, bindings),
    st.builds(
        DelegationTokenIssued,
        token_ids,
        principals,
        principals,
        st.lists(principals, max_size=3).map(tuple),
        timestamps,
        timestamps,
        timestamps,
    ),
    st.builds(DelegationTokenRenewed, token_ids, longs, timestamps),
    st.builds(DelegationTokenExpired, token_ids, longs, timestamps),
    st.builds(DelegationTokenRemoved, token_ids, st.sampled_from(TokenRemovalReason)),
    st.builds(ClientQuotaAltered, st.sampled_from(["user=alice", "user=<default>,client-id=app", "ip=::1"]),
              st.sampled_from(["producer_byte_rate", "request_percentage"]), st.none() | st.floats(1, 1e9)),
)


def _key(event):
    """The entity an event is about: (kind, id)."""
    if isinstance(event, ScramCredentialUpserted | ScramCredentialDeleted):
        return "scram", (event.user, event.mechanism)
    if isinstance(event, AclCreated | AclDeleted):
        return "acl", event.acl_id
    if isinstance(event, ClientQuotaAltered):
        return "quota", (event.entity, event.key)
    return "token", event.token_id


def consistent(event_list):
    """The events that fit the state before them: removals, renewals and expiries of absent entities dropped."""
    alive, kept = set(), []
    for event in event_list:
        key = _key(event)
        removed_quota = isinstance(event, ClientQuotaAltered) and event.value is None
        if isinstance(event, ScramCredentialUpserted | AclCreated | DelegationTokenIssued | ClientQuotaAltered) \
                and not removed_quota:
            alive.add(key)
        elif key not in alive:
            continue
        elif isinstance(event, ScramCredentialDeleted | AclDeleted | DelegationTokenRemoved) or removed_quota:
            alive.discard(key)
        kept.append(event)
    return kept


event_lists = st.lists(events, max_size=40).map(consistent)
cut_lists = st.lists(st.integers(0, 40), max_size=6)


def envelopes(event_list, start=0):
    """Envelopes with consecutive offsets from ``start`` (use start=-1 for a writer's)."""
    return [
        Envelope(-1 if start < 0 else start + i, 5, "User:admin", "::1", "req", event)
        for i, event in enumerate(event_list)
    ]


def split(items, cuts):
    """``items`` cut at the given positions into non-empty batches."""
    points = sorted({c for c in cuts if 0 < c < len(items)})
    bounds = [0, *points, len(items)]
    return [items[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def replay(batches, state=SecurityImage.EMPTY):
    for batch in batches:
        state = PROJECTION.apply(state, batch)
    return state


def contents(image):
    """An image as plain dicts (readable when an assertion fails)."""
    return (
        {(u, e.mechanism): (e.iterations, e.secret) for u, e in image.scram},
        dict(image.acls),
        {t.token_id: t for t in image.tokens},
        image.next_offset,
        {entity: dict(values) for entity, values in image.quotas},
    )


def model(event_list):
    """What the image must hold after ``event_list``, computed with plain dicts."""
    scram, acls, tokens, quotas = {}, {}, {}, {}
    for e in event_list:
        if isinstance(e, ScramCredentialUpserted):
            scram[(e.user, e.mechanism)] = (e.iterations, e.secret)
        elif isinstance(e, ScramCredentialDeleted):
            scram.pop((e.user, e.mechanism), None)
        elif isinstance(e, AclCreated):
            acls[e.acl_id] = e.binding
        elif isinstance(e, AclDeleted):
            acls.pop(e.acl_id, None)
        elif isinstance(e, DelegationTokenIssued):
            tokens[e.token_id] = (
                e.owner,
                e.requester,
                e.renewers,
                e.issue_timestamp_ms,
                e.expiry_timestamp_ms,
                e.max_timestamp_ms,
            )
        elif isinstance(e, DelegationTokenRenewed | DelegationTokenExpired):
            if e.token_id in tokens:
                old = tokens[e.token_id]
                tokens[e.token_id] = (*old[:4], e.expiry_timestamp_ms, old[5])
        elif isinstance(e, DelegationTokenRemoved):
            tokens.pop(e.token_id, None)
        elif isinstance(e, ClientQuotaAltered):
            values = quotas.setdefault(e.entity, {})
            values.pop(e.key, None) if e.value is None else values.__setitem__(e.key, e.value)
            if not values:
                del quotas[e.entity]
    return scram, acls, tokens, quotas


@given(event_lists)
def test_replay_matches_a_plain_dict_model(event_list):
    """Replaying events holds exactly what a dict-based model of their meaning holds."""
    scram, acls, tokens, _, quotas = contents(replay([envelopes(event_list)]))
    token_fields = {
        k: (
            t.owner,
            t.requester,
            t.renewers,
            t.issue_timestamp_ms,
            t.expiry_timestamp_ms,
            t.max_timestamp_ms,
        )
        for k, t in tokens.items()
    }
    assert (scram, acls, token_fields, quotas) == model(event_list)


@given(event_lists, cut_lists)
def test_any_split_into_batches_gives_the_same_image(event_list, cuts):
    """Replaying the events in any batches equals replaying them as one batch."""
    envs = envelopes(event_list)
    whole, batched = replay([envs]), replay(split(envs, cuts))
    assert batched == whole, (contents(batched), contents(whole))


@given(event_lists, st.integers(0, 40))
def test_snapshot_of_prefix_plus_replay_of_rest_equals_full_replay(event_list, at):
    """Snapshot after a prefix, load it, replay the rest: same image as replaying all."""
    at = min(at, len(event_list))
    envs = envelopes(event_list)
    prefix = replay([envs[:at]])
    with tempfile.TemporaryDirectory() as d:
        info = write_snapshot(d, CODEC, prefix, next_offset=at, link=b"\0" * 32, timestamp_ms=0)
        loaded = read_snapshot(info.path, CODEC)[1]
    got, expected = replay([envs[at:]], loaded), replay([envs])
    assert got == expected, (contents(got), contents(expected))


@given(event_lists)
def test_random_image_round_trips_through_a_snapshot(event_list):
    """Any replayed image reads back equal from its snapshot."""
    image = replay([envelopes(event_list)])
    with tempfile.TemporaryDirectory() as d:
        info = write_snapshot(
            d, CODEC, image, next_offset=image.next_offset, link=b"\0" * 32, timestamp_ms=0
        )
        loaded = read_snapshot(info.path, CODEC)[1]
    assert loaded == image, (contents(loaded), contents(image))


@given(event_lists.filter(bool), cut_lists, st.one_of(st.none(), st.integers(1, 7)))
def test_load_state_from_a_real_log_equals_in_memory_replay(event_list, cuts, snapshot_after):
    """Appending to a Log and loading it (with or without a snapshot) equals in-memory replay."""
    batches = split(envelopes(event_list, start=-1), cuts)
    expected = replay([envelopes(event_list)])
    with tempfile.TemporaryDirectory() as d:
        keyring = make_keyring(Path(d))
        with Log.open(Path(d) / "store", keyring=keyring, config=LogConfig(fsync="never")) as log:
            state = SecurityImage.EMPTY
            for i, batch in enumerate(batches, 1):
                result = log.append(batch)
                state = PROJECTION.apply(
                    state, [replace(e, offset=result.base_offset + k) for k, e in enumerate(batch)]
                )
                if i == snapshot_after:
                    write_snapshot(
                        log.store.snapshot_dir,
                        CODEC,
                        state,
                        next_offset=result.next_offset,
                        link=result.link,
                        timestamp_ms=0,
                        keyring=keyring,
                    )
            loaded = load_state(log, SecurityProjection(), SecurityImageSnapshot())
    used_snapshot = snapshot_after is not None and snapshot_after <= len(batches)
    assert (loaded.state, loaded.next_offset, loaded.snapshot is not None) == (
        expected,
        len(event_list),
        used_snapshot,
    ), (contents(loaded.state), contents(expected))


@given(st.lists(events, min_size=1, max_size=40))
def test_an_inconsistent_event_raises_naming_its_offset(event_list):
    """Replay of any event list raises InconsistentEventError at the first event that does not fit, naming its offset.

    Kafka: AclsDelta.replay(RemoveAccessControlEntryRecord) and ScramControlManager.replay throw for an absent entity.
    """
    kept = consistent(event_list)
    first_bad = next((i for i, (a, b) in enumerate(zip(event_list, [*kept, None])) if a is not b), None)
    batch = envelopes(event_list, start=100)
    if first_bad is None:
        replay([batch])
        return
    with pytest.raises(InconsistentEventError, match=f"^the log is inconsistent at offset {100 + first_bad}: ") as info:
        replay([batch])
    assert info.value.offset == 100 + first_bad


def replay_decoded(batches, state=SecurityImage.EMPTY, as_envelopes=()):
    """One delta replaying each batch as the log's replay reads it (EventCodec.decode_events), or those whose
    position is in ``as_envelopes`` as envelopes (``replay_all``), then one apply."""
    from secmeta.events.codec import EventCodec

    codec = EventCodec.default()
    delta = PROJECTION.delta(state)
    for i, batch in enumerate(batches):
        if i in as_envelopes:
            delta.replay_all(batch)
        else:
            delta.replay_events(batch[0].offset, codec.decode_events(codec.encode_batch(0, batch), codec.fingerprint))
    return delta.apply(batches[-1][-1].offset + 1 if batches else state.next_offset)


@given(event_lists, cut_lists, st.integers(0, 40), st.sets(st.integers(0, 8)))
def test_replaying_decoded_batches_equals_replaying_envelopes(event_list, cuts, at, as_envelopes):
    """Batches replayed as decode_events reads them (rows for ACL creations), some as envelopes into the same
    delta, onto an empty image or a replayed prefix, give the image the envelopes give applied batch by batch."""
    envs = envelopes(event_list)
    at = min(at, len(envs))
    prefix = replay([envs[:at]])
    expected = replay(split(envs, cuts))
    got = replay_decoded(split(envs[at:], cuts), prefix, as_envelopes) if envs[at:] else prefix
    assert got == expected, (contents(got), contents(expected))


@given(st.lists(events, min_size=1, max_size=40))
def test_an_inconsistent_decoded_event_raises_naming_its_offset(event_list):
    """replay_events names the offset of the first event that does not fit, as replay_all does."""
    kept = consistent(event_list)
    first_bad = next((i for i, (a, b) in enumerate(zip(event_list, [*kept, None])) if a is not b), None)
    batch = envelopes(event_list, start=100)
    if first_bad is None:
        replay_decoded([batch])
        return
    with pytest.raises(InconsistentEventError, match=f"^the log is inconsistent at offset {100 + first_bad}: "):
        replay_decoded([batch])


acl_creations = st.lists(st.builds(AclCreated, acl_ids, bindings), min_size=1, max_size=30)


@given(st.lists(acl_creations, min_size=1, max_size=4), event_lists)
def test_batches_of_acl_creations_alone_replay_as_their_envelopes(creation_batches, later):
    """Batches holding only ACL creations (replay records their rows in bulk; an id created again is replaced),
    then a batch of any events, give the image the envelopes give applied batch by batch."""
    batches, offset = [], 0
    for batch in [*creation_batches, later]:
        if batch:
            batches.append(envelopes(batch, start=offset))
            offset += len(batch)
    assert replay_decoded(batches) == replay(batches)


def test_a_batch_of_acl_creations_with_an_unindexable_pattern_is_refused_naming_it():
    """A row whose pattern an image cannot hold (MATCH) is refused in a batch of rows as alone, naming the ACL."""
    good = AclCreated("acl-0", AclBinding(ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL),
                                          AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ALLOW)))
    bad = AclCreated("acl-1", AclBinding(ResourcePattern(ResourceType.TOPIC, "t", PatternType.MATCH),
                                         AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ALLOW)))
    for batch in ([bad], [good, bad]):
        delta = PROJECTION.delta(SecurityImage.EMPTY)
        with pytest.raises(InvalidValueError, match="LITERAL or PREFIXED.*MATCH"):
            delta.replay_events(0, [event.row() for event in batch])
