"""secmeta.core.auth.token_hmac: the one token HMAC and the index that finds a token by it."""

import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from secmeta.core.auth.token_hmac import TokenHmacs, token_hmac
from secmeta.events.records import (
    DelegationTokenIssued,
    DelegationTokenRemoved,
    Envelope,
    TokenRemovalReason,
)
from secmeta.projections.image import SecurityDelta, SecurityImage

SECRET = b"index-secret"


def issued(token_id):
    return DelegationTokenIssued(token_id, "User:a", "User:a", (), 0, 10, 20)


def removed(token_id):
    return DelegationTokenRemoved(token_id, TokenRemovalReason.EXPIRED_BY_REQUEST)


def test_token_hmac_is_hmac_sha512_of_the_token_id():
    """The token's password is HMAC-SHA512 keyed by the secret over the token id (KIP-48)."""
    assert token_hmac(SECRET, "tok") == hmac.new(SECRET, b"tok", hashlib.sha512).digest()


# A script of token changes that replay cleanly: issue a fresh id, or remove a live one.
scripts = st.lists(st.tuples(st.booleans(), st.integers(0, 5)), max_size=30)


@given(scripts)
def test_advancing_the_index_equals_indexing_the_final_tokens(script):
    """For any run of issues and removals, the advanced index finds exactly the image's tokens by HMAC."""
    image, hmacs, live, fresh = SecurityImage.EMPTY, TokenHmacs.of(SecurityImage.EMPTY.tokens, SECRET), [], 0
    for offset, (issue, pick) in enumerate(script):
        if issue or not live:
            event, fresh = issued(f"t{fresh}"), fresh + 1
            live.append(event.token_id)
        else:
            event = removed(live.pop(pick % len(live)))
        delta = SecurityDelta(image)
        delta.replay_all([Envelope(offset, 0, "User:a", "h", "r", event)])
        image, hmacs = delta.apply(offset + 1), hmacs.advanced([event])
    assert hmacs == TokenHmacs.of(image.tokens, SECRET)
    assert sorted(hmacs.token_id(token_hmac(SECRET, t)) for t in live) == sorted(live)


def test_index_without_a_secret_is_empty():
    """While tokens are disabled nothing is indexed and nothing is found."""
    hmacs = TokenHmacs.of(SecurityImage.EMPTY.tokens, None).advanced([issued("t")])
    assert hmacs.token_id(token_hmac(SECRET, "t")) is None


def test_lookup_of_anything_but_bytes_is_none():
    """A str, an empty value or None finds no token."""
    hmacs = TokenHmacs.of(SecurityImage.EMPTY.tokens, SECRET).advanced([issued("t")])
    assert [hmacs.token_id(v) for v in ("t", b"", None)] == [None, None, None]
    assert hmacs.token_id(bytearray(token_hmac(SECRET, "t"))) == "t"


def test_index_repr_shows_no_hmac():
    """The repr counts tokens and shows neither the secret nor an HMAC."""
    hmacs = TokenHmacs.of(SecurityImage.EMPTY.tokens, SECRET).advanced([issued("t")])
    assert repr(hmacs) == "TokenHmacs(<1 tokens>)"
