"""TokensImage and TokensDelta: tokens by id, expiry changes, Kafka's expiry rule."""

import pytest
from hypothesis import given

from secmeta.events.records import DelegationTokenIssued, Envelope
from secmeta.events.redact import redacted
from secmeta.projections.errors import InconsistentEventError
from secmeta.projections.tokens import TokenInfo, TokensDelta, TokensImage
from tests.strategies_events import events_of_each_type


def token(token_id="t1", expiry=1_000, max_ts=2_000):
    return TokenInfo(token_id, "User:alice", "User:alice", ("User:bob",), 0, expiry, max_ts)


def issued(*infos, base=TokensImage.EMPTY):
    delta = TokensDelta(base)
    for info in infos:
        delta.issue(info)
    return delta.apply()


def test_empty_image_has_no_tokens():
    """EMPTY holds no token."""
    assert len(TokensImage.EMPTY) == 0 and list(TokensImage.EMPTY) == []


def test_issued_token_is_found_by_id():
    """get returns the issued token's info."""
    assert issued(token()).get("t1") == token()


def test_iteration_yields_token_infos():
    """Iterating an image yields its TokenInfo values."""
    assert sorted(t.token_id for t in issued(token("a"), token("b"))) == ["a", "b"]


def test_set_expiry_changes_only_the_expiry():
    """set_expiry replaces expiry_timestamp_ms and keeps every other field."""
    delta = TokensDelta(issued(token(expiry=1_000)))
    delta.set_expiry("t1", 1_500)
    assert delta.apply().get("t1") == token(expiry=1_500)


def test_set_expiry_of_unknown_token_raises():
    """Changing the expiry of a token that does not exist raises InconsistentEventError naming it."""
    with pytest.raises(InconsistentEventError, match="expiry change of delegation token 'nope'"):
        TokensDelta(issued(token())).set_expiry("nope", 5)


def test_set_expiry_after_issue_in_same_delta_applies():
    """A token issued earlier in the same delta can have its expiry changed."""
    delta = TokensDelta(TokensImage.EMPTY)
    delta.issue(token(expiry=1_000))
    delta.set_expiry("t1", 1_200)
    assert delta.apply().get("t1").expiry_timestamp_ms == 1_200


def test_remove_drops_the_token():
    """A removed token is no longer in the image."""
    delta = TokensDelta(issued(token()))
    delta.remove("t1")
    got = delta.apply()
    assert got.get("t1") is None and len(got) == 0


def test_remove_of_unknown_token_raises():
    """Removing a token that does not exist raises InconsistentEventError naming it."""
    with pytest.raises(InconsistentEventError, match="removal of delegation token 'nope'"):
        TokensDelta(issued(token())).remove("nope")


def test_apply_leaves_base_image_unchanged():
    """The image a delta started from keeps its tokens."""
    base = issued(token())
    delta = TokensDelta(base)
    delta.remove("t1")
    delta.apply()
    assert base.get("t1") == token()


def test_apply_shares_untouched_tokens():
    """A token the delta did not touch is the same object in the new image."""
    base = issued(token("a"), token("b"))
    delta = TokensDelta(base)
    delta.set_expiry("b", 1_234)
    assert delta.apply().get("a") is base.get("a")


def test_token_past_expiry_is_expired():
    """A token is expired once now passes its expiry timestamp."""
    assert issued(token(expiry=1_000, max_ts=2_000)).expired(1_001) == [token()]


def test_token_past_max_is_expired():
    """A token is expired once now passes its max timestamp, whatever its expiry."""
    info = token(expiry=3_000, max_ts=2_000)
    assert issued(info).expired(2_001) == [info]


def test_token_at_its_expiry_is_not_expired():
    """now equal to the expiry timestamp is not yet expired."""
    assert issued(token(expiry=1_000)).expired(1_000) == []


def test_expired_lists_only_expired_tokens_by_id():
    """expired() returns just the expired tokens, sorted by token id."""
    image = issued(token("c", 10), token("a", 10), token("b", 5_000, 6_000))
    assert [t.token_id for t in image.expired(100)] == ["a", "c"]


@given(events_of_each_type()[DelegationTokenIssued])
def test_a_token_and_the_event_that_issues_it_convert_both_ways(event):
    """TokenInfo.of(event).issued() is the event again, and its redacted payload gives the same token."""
    info = TokenInfo.of(event)
    assert info.issued() == event
    assert TokenInfo.of(redacted(Envelope(0, 0, "User:a", "h", "r", event))["payload"]) == info
    assert info.token_id == event.token_id and info.renewers == tuple(event.renewers)
