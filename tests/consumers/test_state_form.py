"""The state topic's form of events (consumers/kafka/state_form.py), derived from the kind declarations."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from secmeta.consumers.kafka.state_form import StateForm
from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    DelegationTokenExpired,
    DelegationTokenIssued,
    DelegationTokenRenewed,
    Envelope,
)
from tests.entitykit import WidgetMade, WidgetPainted, WidgetResized, WidgetScrapped, widget_kind_of
from tests.storekit import acl


def at(offset, event):
    return Envelope(offset, 1_000 + offset, "User:admin", "h", f"r{offset}", event)


def folded(form, events, start=0):
    out = [form.of(at(start + i, e)) for i, e in enumerate(events)]
    form.commit()
    return [(env.offset, env.event, closes) for env, closes in out]


def test_a_token_renewal_is_published_as_the_whole_token_at_its_offset():
    issued = DelegationTokenIssued("t1", "User:etl", "User:admin", ("User:ops",), 10, 100, 1_000)
    form = StateForm(lambda: ())
    got = folded(form, [issued, DelegationTokenRenewed("t1", 50, 150), DelegationTokenExpired("t1", 5, 120)])
    assert got == [(0, issued, False),
                   (1, DelegationTokenIssued("t1", "User:etl", "User:admin", ("User:ops",), 10, 150, 1_000), False),
                   (2, DelegationTokenIssued("t1", "User:etl", "User:admin", ("User:ops",), 10, 120, 1_000), False)]


def test_a_token_opened_before_the_checkpoint_is_read_from_there_once():
    """The first update of an unknown entity asks for the open ones at the checkpoint, and only once."""
    issued = DelegationTokenIssued("t1", "User:etl", "User:admin", (), 10, 100, 1_000)
    asked = []
    form = StateForm(lambda: asked.append(1) or [issued])
    got = folded(form, [DelegationTokenRenewed("t1", 50, 150), DelegationTokenRenewed("t2", 50, 150)], start=7)
    assert got[0] == (7, DelegationTokenIssued("t1", "User:etl", "User:admin", (), 10, 150, 1_000), False)
    assert got[1] == (8, DelegationTokenRenewed("t2", 50, 150), False), "unknown: the change itself"
    assert asked == [1]


def test_acls_go_out_as_logged_and_a_deletion_is_followed_by_a_tombstone():
    binding = acl()
    form = StateForm(lambda: (_ for _ in ()).throw(AssertionError("ACLs have no updates to fold")))
    assert folded(form, [AclCreated("a", binding), AclDeleted("a", binding)]) == [
        (0, AclCreated("a", binding), False), (1, AclDeleted("a", binding), True)]


def test_a_discarded_chunk_leaves_the_state_it_started_from():
    issued = DelegationTokenIssued("t1", "User:etl", "User:admin", (), 10, 100, 1_000)
    form = StateForm(lambda: ())
    folded(form, [issued])
    form.of(at(1, DelegationTokenRenewed("t1", 50, 150)))
    form.discard()
    assert folded(form, [DelegationTokenExpired("t1", 5, 120)], start=1)[0][1].expiry_timestamp_ms == 120
    assert form.of(at(2, DelegationTokenRenewed("t1", 5, 130)))[0].event.issue_timestamp_ms == 10


def test_a_kind_declared_anywhere_folds_with_no_code_of_its_own():
    """A throwaway kind: updates carry their attributes only, a None size closes, scrapping closes."""
    form = StateForm(lambda: (), kind_of=widget_kind_of)
    got = folded(form, [WidgetMade("w", "User:ann", "red", 3), WidgetPainted("w", "blue", "wide"),
                        WidgetResized("w", 5), WidgetResized("w", None), WidgetMade("v", "User:ann", "red", 1),
                        WidgetScrapped("v")])
    assert got == [(0, WidgetMade("w", "User:ann", "red", 3), False), (1, WidgetMade("w", "User:ann", "blue", 3), False),
                   (2, WidgetMade("w", "User:ann", "blue", 5), False), (3, WidgetResized("w", None), True),
                   (4, WidgetMade("v", "User:ann", "red", 1), False), (5, WidgetScrapped("v"), True)]


_widget_events = st.lists(st.one_of(
    st.builds(WidgetMade, st.sampled_from("ab"), st.just("User:ann"), st.sampled_from(["red", "blue"]),
              st.integers(1, 3)),
    st.builds(WidgetPainted, st.sampled_from("ab"), st.sampled_from(["red", "blue", "green"]), st.just("b")),
    st.builds(WidgetResized, st.sampled_from("ab"), st.one_of(st.none(), st.integers(1, 3))),
    st.builds(WidgetScrapped, st.sampled_from("ab"))), max_size=20)


@given(_widget_events, st.integers(0, 20))
def test_the_latest_state_message_per_key_is_the_entity_whatever_the_chunks(events, cut):
    """Compacting the state messages (latest per key, tombstones remove) gives each open widget as a model
    fold of the events has it, however the events are cut into chunks."""
    model: dict[str, dict] = {}
    for e in events:
        if isinstance(e, WidgetMade):
            model[e.widget_id] = {"owner": e.owner, "colour": e.colour, "size": e.size}
        elif e.widget_id in model:
            if isinstance(e, WidgetScrapped) or (isinstance(e, WidgetResized) and e.size is None):
                del model[e.widget_id]
            elif isinstance(e, WidgetPainted):
                model[e.widget_id]["colour"] = e.colour
            else:
                model[e.widget_id]["size"] = e.size
    form = StateForm(lambda: (), kind_of=widget_kind_of)
    latest: dict[str, object] = {}
    for start, chunk in ((0, events[:cut]), (cut, events[cut:])):
        for _offset, event, closes in folded(form, chunk, start):
            latest[event.entity_key] = None if closes else event
    compacted = {e.widget_id: {"owner": e.owner, "colour": e.colour, "size": e.size}
                 for e in latest.values() if isinstance(e, WidgetMade)}
    assert compacted == model


def test_whether_a_tombstone_follows_is_asked_of_each_event_whose_type_does_not_decide_it():
    """An ACL's removal always gets a tombstone and its creation never, whatever came first; a quota set to a
    value does not and one removed (None) does, in either order (its type alone does not say)."""
    from secmeta.events.records import ClientQuotaAltered

    form = StateForm(lambda: ())
    binding = acl("User:alice")
    quotas = [ClientQuotaAltered("user=alice", "producer_byte_rate", 1.0),
              ClientQuotaAltered("user=alice", "producer_byte_rate", None),
              ClientQuotaAltered("user=bob", "producer_byte_rate", None),
              ClientQuotaAltered("user=bob", "producer_byte_rate", 2.0)]
    events = [AclCreated("a1", binding), AclDeleted("a1", binding), AclCreated("a2", binding), *quotas]
    assert [closes for _, _, closes in folded(form, events)] == [False, True, False, False, True, True, False]


def test_a_types_form_is_known_by_type_only_where_no_event_of_it_decides():
    """of_type: ACL creations go out as themselves, a deletion followed by a tombstone, by their type alone; a token's
    issue and renewal (their kind has updates) and a quota's change (closed when its value is None) depend on the
    event: None. Where it answers, it is what of() gives the type's events."""
    from secmeta.events.records import ClientQuotaAltered

    form = StateForm(lambda: ())
    assert (form.of_type(AclCreated), form.of_type(AclDeleted)) == (False, True)
    assert [form.of_type(cls) for cls in (DelegationTokenRenewed, DelegationTokenIssued, ClientQuotaAltered)] == [
        None] * 3
    binding = acl()
    assert [closes for _, closes in (form.of(at(0, AclCreated("a", binding))), form.of(at(1, AclDeleted("a", binding))))
            ] == [False, True]
