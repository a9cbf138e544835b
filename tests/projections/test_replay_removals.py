"""Replay's bulk route with removals between its batches of creations (issue 24, the diverse shape).

A replay records batches of ACL creations as runs of rows (``AclsDelta.add_rows``), keyed by id when a removal or
a single creation comes, and grouped straight into a table by ``apply`` onto an empty image.  Whatever the order
of creations and removals of the same ids, within a batch or across batches, and whether a removal fits or not,
the result is the event-by-event apply's: the same image, or the same InconsistentEventError naming the same
offset.
"""

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scripts.bench import shapes
from secmeta.events.codec import EventCodec
from secmeta.events.records import AclCreated, AclDeleted, Envelope, replay_form
from secmeta.projections.errors import InconsistentEventError
from secmeta.projections.image import SecurityDelta, SecurityImage, SecurityProjection
from tests.projections.test_image_properties import bindings, contents

PROJECTION = SecurityProjection()
ids = st.sampled_from([f"acl-{i}" for i in range(5)])
creation = st.builds(AclCreated, ids, bindings)
removal = st.builds(AclDeleted, ids, bindings)
# A batch as a writer logs one: creations alone (read back as rows, recorded as a run), removals alone, or both.
batches = st.lists(st.one_of(st.lists(creation, min_size=1, max_size=6), st.lists(removal, min_size=1, max_size=3),
                             st.lists(creation | removal, min_size=1, max_size=6)), max_size=8)
BINDING = shapes.final_pairs("current", 1)[0][1]


def as_envelopes(batch_list, start=0):
    out, offset = [], start
    for batch in batch_list:
        out.append([Envelope(offset + i, 0, "User:admin", "*", "r", event) for i, event in enumerate(batch)])
        offset += len(batch)
    return out


def one_by_one(envelope_batches, image=SecurityImage.EMPTY):
    """The reference: each event applied alone (``SecurityProjection.apply`` of one envelope)."""
    for batch in envelope_batches:
        for envelope in batch:
            image = PROJECTION.apply(image, [envelope])
    return image


def bulk(envelope_batches, image=SecurityImage.EMPTY, codec=None):
    """Replay's route: every batch into one delta as the log reads it (``decode_events``: creations as rows), one
    apply."""
    delta = SecurityDelta(image)
    end = image.next_offset
    for batch in envelope_batches:
        if codec is None:
            events = [replay_form(envelope.event) for envelope in batch]
        else:
            events = codec.decode_events(codec.encode_batch(0, batch), codec.fingerprint)
        delta.replay_events(batch[0].offset, events)
        end = batch[-1].offset + 1
    return delta.apply(end)


def outcome(route, *args):
    """The image a route gives, or the offset its InconsistentEventError names."""
    try:
        return route(*args)
    except InconsistentEventError as exc:
        return ("inconsistent at", exc.offset)


@example([[AclCreated("acl-0", BINDING)], [AclDeleted("acl-1", BINDING)], [AclCreated("acl-1", BINDING)]], 0)
@example([[AclCreated("acl-0", BINDING)], [AclDeleted("acl-0", BINDING)], [AclCreated("acl-0", BINDING)]], 0)
@example([[AclCreated("acl-0", BINDING)], [AclDeleted("acl-0", BINDING)], [AclDeleted("acl-0", BINDING)]], 0)
@given(batches, st.integers(0, 3))
def test_removals_between_runs_of_creations_replay_as_each_event_alone(batch_list, prefix):
    """Creations and removals of the same few ids, in any order within and across batches, removals of ids never
    created or removed already among them: replay's bulk route gives the image (or the error naming the first
    offset that does not fit) that applying each event alone gives, onto an empty image or a replayed one."""
    envelope_batches = as_envelopes(batch_list)
    base = SecurityImage.EMPTY
    if prefix and envelope_batches:  # some batches applied first: the rest replays onto a non-empty image
        try:
            base = one_by_one(envelope_batches[:prefix])
        except InconsistentEventError:
            return
        envelope_batches = envelope_batches[prefix:]
    expected = outcome(one_by_one, envelope_batches, base)
    got = outcome(bulk, envelope_batches, base)
    assert (contents(got) if isinstance(got, SecurityImage) else got) == \
        (contents(expected) if isinstance(expected, SecurityImage) else expected)
    assert got == expected


def test_a_removal_that_does_not_fit_is_named_before_a_later_event_that_does_not_either():
    """A removal recorded for later, of an ACL never created, is named, not a later removal of a token that does not
    exist: the first event that does not fit is the one an error names."""
    from secmeta.events.records import DelegationTokenRemoved, TokenRemovalReason

    script = [[AclCreated("a1", BINDING)], [AclDeleted("zz", BINDING), DelegationTokenRemoved("t9", TokenRemovalReason.EXPIRED_BY_SWEEP)]]
    envelope_batches = as_envelopes(script, start=10)
    with pytest.raises(InconsistentEventError, match="^the log is inconsistent at offset 11: removal of ACL 'zz'"):
        bulk(envelope_batches)
    assert outcome(one_by_one, envelope_batches) == ("inconsistent at", 11)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 3000), st.integers(0, 2**16))
def test_the_diverse_shape_replays_as_its_requests_written_one_by_one(n, seed):
    """The diverse benchmark shape's log (a request of removals after every request of creations), read back through
    the codec and replayed in bulk, gives the image its requests give applied one by one."""
    requests = shapes.shape_events("diverse", n, seed)
    envelope_batches = as_envelopes(requests)
    written = SecurityImage.EMPTY
    for batch in envelope_batches:
        written = PROJECTION.apply(written, batch)
    assert bulk(envelope_batches, codec=EventCodec.default()) == written



def test_a_batch_of_removals_checked_later_is_named_before_a_later_batchs_event_that_does_not_fit():
    """A batch of removals alone, after a run of creations, is recorded to be checked later (``remove_later``); one of
    an ACL never created is still the error named, before a token's removal in a later batch that does not fit
    either, and alone it is named at apply: the first event that does not fit, as applying each event alone."""
    from secmeta.events.records import DelegationTokenRemoved, TokenRemovalReason

    later = [[AclCreated("a1", BINDING)], [AclDeleted("zz", BINDING)],
             [DelegationTokenRemoved("t9", TokenRemovalReason.EXPIRED_BY_SWEEP)]]
    for script in (later, later[:2]):
        envelope_batches = as_envelopes(script, start=10)
        with pytest.raises(InconsistentEventError, match="^the log is inconsistent at offset 11: removal of ACL 'zz'"):
            bulk(envelope_batches)
        assert outcome(one_by_one, envelope_batches) == ("inconsistent at", 11)


def test_removals_checked_later_leave_the_acls_a_delta_reads():
    """The ids a delta reads (``get``) after a batch of creations and one of removals recorded for later: the removed
    ACL is gone and the others are held, as the delta's image has them once applied."""
    def replayed() -> SecurityDelta:
        delta = SecurityDelta(SecurityImage.EMPTY)
        delta.replay_events(0, [replay_form(AclCreated(f"acl-{i}", BINDING)) for i in range(4)])
        delta.replay_events(4, [AclDeleted("acl-2", BINDING)])
        return delta

    assert [replayed().acls_delta().get(f"acl-{i}") for i in range(4)] == [BINDING, BINDING, None, BINDING]
    image = replayed().apply(5).acls
    assert sorted(image.acls) == ["acl-0", "acl-1", "acl-3"]
    assert [image.get(f"acl-{i}") for i in range(4)] == [BINDING, BINDING, None, BINDING]


def test_a_delta_whose_removal_checked_later_did_not_fit_refuses_every_later_read():
    """Once a removal recorded for later is found not to fit, the delta keeps refusing: a caller that caught the
    error and applies again gets the same error, not an image missing the creations recorded after the removal."""
    delta = SecurityDelta(SecurityImage.EMPTY)
    delta.replay_events(0, [replay_form(AclCreated("a1", BINDING))])
    delta.replay_events(1, [AclDeleted("never-created", BINDING)])  # recorded for later, unchecked
    delta.replay_events(2, [replay_form(AclCreated("a2", BINDING))])
    for _ in range(2):
        with pytest.raises(InconsistentEventError) as refused:
            delta.apply(3)
        assert refused.value.offset == 1 and "never-created" in str(refused.value)
