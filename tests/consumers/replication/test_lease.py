"""The controllers' lease as every node reads it from the election topic (LeaseView): who holds it, when it is
vacant and whose turn it is to claim it. Pure logic over heartbeats and this node's receipt times: no broker."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from secmeta.consumers.kafka.replication.election import Heartbeat, LeaseView, read_heartbeat
from secmeta.core.server.controllership import NodeAddress

LEASE = 3.0


def beat(node: int, term: int | None = None, *, active: bool = False, seen: int = 0, eligible: bool = True):
    return Heartbeat(NodeAddress(node, "h", 9000 + node), active, term, seen, eligible)


def test_the_first_claim_of_a_term_holds_the_lease_and_a_later_claim_of_it_does_not():
    view = LeaseView(LEASE, now=0.0)
    view.apply(beat(2, 1), 0.1)
    view.apply(beat(1, 1), 0.2)           # the same term, after node 2's claim in the topic's order
    assert view.holder == (2, 1)
    view.apply(beat(1, 1, active=True), 0.3)
    assert view.holder == (2, 1) and not view.active(beat(1, 1, active=True))


def test_a_stale_heartbeat_of_a_deposed_holder_never_takes_the_lease_back():
    """A hung node's heartbeat, queued before it stopped and delivered after a newer claim, names an older term."""
    view = LeaseView(LEASE, now=0.0)
    view.apply(beat(1, 1, active=True), 0.0)
    view.apply(beat(2, 2), 4.0)
    view.apply(beat(2, 2, active=True), 4.2)
    view.apply(beat(1, 1, active=True), 4.5)
    assert view.holder == (2, 2) and view.active(beat(2, 2, active=True))
    assert not view.active(beat(1, 1, active=True))


def test_a_stale_term_never_takes_back_a_vacant_lease():
    """Node 1 holds term 1 and is SIGSTOPped; node 2 claims term 2, dies, and its lease lapses; node 1 resumes and
    its queued term-1 heartbeat arrives: the lease stays vacant (nobody would campaign while node 1 held it)."""
    view = LeaseView(LEASE, now=0.0)
    view.apply(beat(1, 1, active=True), 0.0)
    view.apply(beat(2, 2, seen=1), 4.0)
    view.apply(beat(2, 2, active=True, seen=2), 4.5)
    assert view.expire(7.5) == 2 and view.holder is None
    view.apply(beat(1, 1, active=True, seen=1), 8.0)
    assert view.holder is None and not view.active(beat(1, 1, active=True))
    assert view.turn(1, 8.0, 1.5) == 7.5                      # the lease is vacant: node 1 may claim term 3
    view.apply(beat(1, 3, seen=2), 8.1)
    assert view.holder == (1, 3)


def test_a_lease_not_renewed_for_a_whole_lease_is_vacant_and_the_lowest_live_id_claims_first():
    view = LeaseView(LEASE, now=0.0)
    for node in (1, 2, 3):
        view.apply(beat(node), 0.0)
    view.apply(beat(3, 1, active=True), 0.5)     # node 3 holds, then dies after its heartbeat at 1.0
    view.apply(beat(3, 1, active=True), 1.0)
    for node in (1, 2):
        view.apply(beat(node, seen=1), 3.5)
    assert view.expire(3.9) is None and view.turn(1, 3.9, 1.5) is None   # held until 1.0 + 3.0
    assert view.expire(4.0) == 3 and view.holder is None
    assert view.turn(1, 4.0, 1.5) == 4.0 and view.turn(2, 4.0, 1.5) == 5.5   # node 3 is not live any more


def test_a_node_that_resigned_or_is_not_heard_gets_no_turn_and_a_release_vacates_at_once():
    view = LeaseView(LEASE, now=0.0)
    view.apply(beat(1, 1, active=True), 0.0)
    view.apply(beat(2, eligible=False), 0.1)
    view.apply(beat(1, None, seen=1), 0.2)           # node 1 released the lease (it stepped down)
    assert view.holder is None and view.vacant_since == 0.2
    assert view.turn(2, 0.3, 1.5) is None             # sitting out
    assert view.turn(1, 0.3, 1.5) == 0.2
    assert view.turn(1, 3.3, 1.5) is None             # not heard for a lease: cut off, no claim
    view.left(1, 3.4)
    assert 1 not in view.heard and view.max_term == 1


def test_heartbeats_read_back_as_written_and_foreign_records_are_ignored():
    sent = beat(4, 7, active=True, seen=7)
    assert read_heartbeat(b"4", sent.encode()) == sent
    assert read_heartbeat(b"4", None) == 4
    assert read_heartbeat(b"5", sent.encode()) is None       # a key that is not its node
    assert read_heartbeat(b"x", b"{}") is None and read_heartbeat(b"4", b"not json") is None
    fields = json.loads(sent.encode())
    for odd in ({"active": "false"}, {"active": 1}, {"eligible": "true"}, {"eligible": None}):
        assert read_heartbeat(b"4", json.dumps({**fields, **odd}).encode()) is None, odd   # malformed, not "true"


heartbeats = st.lists(st.tuples(st.integers(1, 4), st.one_of(st.none(), st.integers(1, 6)), st.booleans(),
                                st.floats(0, 2)), max_size=60)


@given(heartbeats)
def test_the_holder_is_always_the_first_claimant_of_the_newest_term_claimed_since_the_lease_fell_vacant(events):
    """Whatever order heartbeats arrive in: a holder is its term's first claimant, no claim of a term older than
    the newest claimed so far takes over (even a vacant lease), and Metadata names at most that one node active."""
    view = LeaseView(LEASE, now=0.0)
    now, first = 0.0, {}
    for node, term, active, dt in events:
        now += dt
        view.expire(now)
        held = view.holder
        view.apply(beat(node, term, active=active), now)
        if view.holder is not None and view.holder != held:
            assert view.holder[1] >= max(first, default=0)     # a new holder's term is the newest claimed so far
        if term is not None:
            first.setdefault(term, node)
        if view.holder is not None:
            holder, holder_term = view.holder
            assert first[holder_term] == holder
            assert held is None or holder_term >= held[1]
        named = [n for n in range(1, 5) for t in range(0, 7) if view.active(beat(n, t or None, active=True))]
        assert len(set(named)) <= 1
