"""secmeta.core.control.tokens: create, renew, expire, describe and sweep delegation tokens."""

import hashlib
import hmac

import pytest

from secmeta.core.auth.token_hmac import TokenHmacs, token_hmac
from secmeta.core.config import DAY_MS, StoreConfig
from secmeta.core.control import ControlResult
from secmeta.core.control.tokens import (
    create_token,
    describe_tokens,
    expire_token,
    renew_token,
    sweep_expired,
)
from secmeta.core.errors import (
    DelegationTokenAuthorizationException,
    DelegationTokenDisabledException,
    DelegationTokenExpiredException,
    DelegationTokenNotFoundException,
    DelegationTokenOwnerMismatchException,
    ErrorCode,
    InvalidPrincipalTypeException,
    InvalidRequestException,
    UnsupportedByAuthenticationException,
)
from secmeta.core.types import RequestContext
from secmeta.events.records import (
    DelegationTokenExpired,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    DelegationTokenRenewed,
    TokenRemovalReason,
)
from secmeta.events.types import AclOperation, ResourceType
from secmeta.projections.image import SecurityDelta, SecurityImage
from tests.core.control.controlkit import unpacked

SECRET = b"token-secret-key, 32 bytes or more"
CONFIG = StoreConfig(token_secret=SECRET)
NOW = 1_700_000_000_000
ALICE, BOB, CAROL = "User:alice", "User:bob", "User:carol"
MAX_DEFAULT, EXPIRY_DEFAULT = 7 * DAY_MS, DAY_MS
INT64_MAX = 2**63 - 1


def allow(*_):
    return True


def deny(*_):
    return False


def ctx(principal=ALICE, **kw):
    return RequestContext(principal=principal, **kw)


def create(context=None, *, now=NOW, config=CONFIG, decider=deny, token_id="tok-1", **kw):
    return unpacked(create_token(SecurityImage.EMPTY, context or ctx(), now, config=config, decider=decider,
                                 new_token_id=lambda: token_id, **kw))


def image_of(*created_events):
    delta = SecurityDelta(SecurityImage.EMPTY)
    for event in created_events:
        delta.replay(event)
    return delta.apply()


def issued(token_id="tok-1", owner=ALICE, requester=ALICE, renewers=(), now=NOW, **kw):
    (event,), _ = create(ctx(requester), token_id=token_id, owner=owner, renewers=renewers, now=now,
                         decider=allow, **kw)
    return event


def renew(image, hmac_, period=-1, context=None, now=NOW, config=CONFIG):
    hmacs = TokenHmacs.of(image.tokens, SECRET)
    return unpacked(renew_token(image, hmacs, hmac_, period, context or ctx(), now, config=config))


def expire(image, hmac_, period=-1, context=None, now=NOW, config=CONFIG):
    hmacs = TokenHmacs.of(image.tokens, SECRET)
    return unpacked(expire_token(image, hmacs, hmac_, period, context or ctx(), now, config=config))


def mac(token_id="tok-1"):
    return token_hmac(SECRET, token_id)


# -- create: who may ---------------------------------------------------------------


def test_create_refused_for_token_authenticated_caller():
    """A token-authenticated caller gets DELEGATION_TOKEN_REQUEST_NOT_ALLOWED."""
    with pytest.raises(UnsupportedByAuthenticationException) as info:
        create(ctx(token_authenticated=True))
    assert info.value.error.code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


def test_create_refused_for_unauthenticated_caller():
    """An unauthenticated (plaintext) caller gets DELEGATION_TOKEN_REQUEST_NOT_ALLOWED."""
    with pytest.raises(UnsupportedByAuthenticationException):
        create(ctx(authenticated=False, tls=False))


def test_create_allowed_for_authenticated_non_tls_caller():
    """An authenticated caller without TLS (SASL_PLAINTEXT) may create a token."""
    events, _ = create(ctx(tls=False))
    assert len(events) == 1


def test_create_without_secret_is_auth_disabled():
    """No token secret configured gives DELEGATION_TOKEN_AUTH_DISABLED."""
    with pytest.raises(DelegationTokenDisabledException) as info:
        create(config=StoreConfig())
    assert info.value.error.code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


def test_request_not_allowed_beats_auth_disabled():
    """Kafka's broker check (REQUEST_NOT_ALLOWED) comes before the controller's (AUTH_DISABLED)."""
    with pytest.raises(UnsupportedByAuthenticationException):
        create(ctx(token_authenticated=True), config=StoreConfig())


def test_create_owner_without_colon_is_invalid_principal_type():
    """An owner that is not Type:Name gets INVALID_PRINCIPAL_TYPE."""
    with pytest.raises(InvalidPrincipalTypeException) as info:
        create(owner="bob", decider=allow)
    assert info.value.error.code == ErrorCode.INVALID_PRINCIPAL_TYPE


@pytest.mark.parametrize("renewer", ["Group:ops", "bob", "User:"])
def test_create_renewer_not_a_user_is_invalid_principal_type(renewer):
    """A renewer that is not a User principal gets INVALID_PRINCIPAL_TYPE."""
    with pytest.raises(InvalidPrincipalTypeException):
        create(renewers=[BOB, renewer])


def test_create_with_an_empty_owner_is_invalid_request_naming_owner():
    """owner="" was silently the requester (issue 22): an empty principal is refused; None means the requester."""
    with pytest.raises(InvalidRequestException, match="^INVALID_REQUEST: owner must not be empty") as info:
        create(owner="", decider=allow)
    assert info.value.error.code == ErrorCode.INVALID_REQUEST


def test_create_for_other_owner_without_permission_fails():
    """Creating for another owner without CREATE_TOKENS gets DELEGATION_TOKEN_AUTHORIZATION_FAILED."""
    with pytest.raises(DelegationTokenAuthorizationException) as info:
        create(owner=BOB, decider=deny)
    assert info.value.error.code == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED


def test_create_for_other_owner_asks_create_tokens_on_the_owner():
    """The check is CREATE_TOKENS on USER named by the owner principal string."""
    calls = []
    create(ctx(host="h1"), owner=BOB, decider=lambda *a: calls.append(a) or True)
    assert calls == [(ALICE, "h1", AclOperation.CREATE_TOKENS, ResourceType.USER, BOB)]


def test_create_for_self_needs_no_permission():
    """A requester creating for itself is not checked against ACLs."""
    calls = []
    create(owner=ALICE, decider=lambda *a: calls.append(a) or False)
    assert calls == []


def test_authorization_failure_beats_auth_disabled():
    """A requester lacking CREATE_TOKENS gets AUTHORIZATION_FAILED even when tokens are disabled."""
    with pytest.raises(DelegationTokenAuthorizationException):
        create(owner=BOB, decider=deny, config=StoreConfig())


def test_bad_renewer_beats_auth_disabled():
    """A non-User renewer answers INVALID_PRINCIPAL_TYPE even when tokens are disabled.

    Kafka: KafkaApis.handleCreateTokenRequest checks renewer types before forwarding to the controller,
    which is where DELEGATION_TOKEN_AUTH_DISABLED comes from.
    """
    with pytest.raises(InvalidPrincipalTypeException):
        create(renewers=["Group:ops"], config=StoreConfig())


# -- create: the token -------------------------------------------------------------


def test_create_owner_defaults_to_requester():
    """Without an owner the token is owned by the requester."""
    (event,), token = create()
    assert event.owner == token.owner == ALICE and event.requester == ALICE


def test_create_event_records_owner_requester_and_renewers():
    """DelegationTokenIssued carries owner, requester, renewers and all timestamps."""
    (event,), _ = create(owner=BOB, renewers=[CAROL], decider=allow)
    assert event == DelegationTokenIssued("tok-1", BOB, ALICE, (CAROL,), NOW, NOW + EXPIRY_DEFAULT,
                                          NOW + MAX_DEFAULT)


def test_create_returns_the_token_with_its_hmac():
    """The token returned carries HMAC-SHA512(secret, token id)."""
    _, token = create()
    assert token.hmac == hmac.new(SECRET, b"tok-1", hashlib.sha512).digest()
    assert (token.token_id, token.issue_timestamp_ms) == ("tok-1", NOW)


def test_create_default_token_ids_are_random():
    """Without new_token_id each token gets a fresh random id."""
    ids = {create_token(SecurityImage.EMPTY, ctx(), NOW, config=CONFIG, decider=deny).response.token_id
           for _ in range(2)}
    assert len(ids) == 2


def test_create_default_lifetimes():
    """max = now + max lifetime config, expiry = now + expiry config."""
    _, token = create()
    assert (token.max_timestamp_ms, token.expiry_timestamp_ms) == (NOW + MAX_DEFAULT, NOW + EXPIRY_DEFAULT)


def test_create_requested_max_below_expiry_caps_expiry():
    """A requested max lifetime shorter than the expiry time sets both to now + requested."""
    _, token = create(max_lifetime_ms=1000)
    assert (token.max_timestamp_ms, token.expiry_timestamp_ms) == (NOW + 1000, NOW + 1000)


def test_create_requested_max_between_expiry_and_config():
    """A requested max between expiry and max config sets max only."""
    _, token = create(max_lifetime_ms=3 * DAY_MS)
    assert (token.max_timestamp_ms, token.expiry_timestamp_ms) == (NOW + 3 * DAY_MS, NOW + DAY_MS)


def test_create_requested_max_above_config_is_capped():
    """A requested max above the config is capped at the config."""
    _, token = create(max_lifetime_ms=30 * DAY_MS)
    assert token.max_timestamp_ms == NOW + MAX_DEFAULT


@pytest.mark.parametrize("requested", [0, -1, -5000])
def test_create_nonpositive_requested_max_means_default(requested):
    """A requested max lifetime <= 0 uses the config."""
    _, token = create(max_lifetime_ms=requested)
    assert token.max_timestamp_ms == NOW + MAX_DEFAULT


def test_create_uses_configured_lifetimes():
    """The config's max lifetime and expiry time drive the defaults."""
    config = StoreConfig(token_secret=SECRET, token_max_lifetime_ms=5000, token_expiry_time_ms=2000)
    _, token = create(config=config)
    assert (token.max_timestamp_ms, token.expiry_timestamp_ms) == (NOW + 5000, NOW + 2000)


@pytest.mark.parametrize("requested", [2**63, -(2**63) - 1, True])
def test_create_requested_max_outside_int64_is_invalid(requested):
    """A requested max lifetime that is not a 64-bit integer is INVALID_REQUEST."""
    with pytest.raises(InvalidRequestException):
        create(max_lifetime_ms=requested)


def test_create_timestamp_overflow_is_invalid():
    """A max timestamp past the 64-bit range is INVALID_REQUEST, not a wrapped value."""
    with pytest.raises(InvalidRequestException):
        create(now=INT64_MAX - 10)


# -- renew -------------------------------------------------------------------------


def test_renew_refused_for_token_authenticated_caller():
    """A token-authenticated caller cannot renew."""
    image = image_of(issued())
    with pytest.raises(UnsupportedByAuthenticationException):
        renew(image, mac(), context=ctx(token_authenticated=True))


def test_renew_without_secret_is_auth_disabled():
    """Renewing with no token secret gives DELEGATION_TOKEN_AUTH_DISABLED."""
    with pytest.raises(DelegationTokenDisabledException):
        renew(image_of(issued()), mac(), config=StoreConfig())


def test_renew_unknown_hmac_is_not_found():
    """An unknown HMAC gives DELEGATION_TOKEN_NOT_FOUND."""
    with pytest.raises(DelegationTokenNotFoundException):
        renew(image_of(issued()), b"not-a-token")


def test_renew_past_expiry_is_expired():
    """Renewing after the expiry timestamp gives DELEGATION_TOKEN_EXPIRED."""
    with pytest.raises(DelegationTokenExpiredException):
        renew(image_of(issued()), mac(), now=NOW + EXPIRY_DEFAULT + 1)


def test_renew_past_max_is_expired():
    """Renewing after the max timestamp gives DELEGATION_TOKEN_EXPIRED."""
    image = image_of(issued(max_lifetime_ms=1000))
    with pytest.raises(DelegationTokenExpiredException):
        renew(image, mac(), now=NOW + 1001)


def test_renew_at_expiry_is_still_allowed():
    """At exactly the expiry timestamp the token is not yet expired."""
    _, expiry = renew(image_of(issued()), mac(), now=NOW + EXPIRY_DEFAULT)
    assert expiry == NOW + 2 * EXPIRY_DEFAULT


def test_renew_expired_beats_owner_mismatch():
    """An expired token renewed by a stranger gives EXPIRED (checked first)."""
    with pytest.raises(DelegationTokenExpiredException):
        renew(image_of(issued()), mac(), context=ctx(CAROL), now=NOW + EXPIRY_DEFAULT + 1)


def test_renew_by_stranger_is_owner_mismatch():
    """A caller neither owner nor renewer gets DELEGATION_TOKEN_OWNER_MISMATCH."""
    with pytest.raises(DelegationTokenOwnerMismatchException):
        renew(image_of(issued()), mac(), context=ctx(CAROL))


def test_renew_by_requester_alone_is_owner_mismatch():
    """The requester who is not owner or renewer may not renew."""
    image = image_of(issued(owner=BOB, requester=ALICE))
    with pytest.raises(DelegationTokenOwnerMismatchException):
        renew(image, mac(), context=ctx(ALICE))


def test_renew_by_renewer_is_allowed():
    """A listed renewer may renew."""
    events, _ = renew(image_of(issued(renewers=[BOB])), mac(), context=ctx(BOB))
    assert len(events) == 1


def test_renew_default_period():
    """Period -1 renews to now + expiry config."""
    later = NOW + 1000
    events, expiry = renew(image_of(issued()), mac(), now=later)
    assert expiry == later + EXPIRY_DEFAULT
    assert events == [DelegationTokenRenewed("tok-1", -1, later + EXPIRY_DEFAULT)]


def test_renew_shorter_requested_period():
    """A requested period below the config is used."""
    _, expiry = renew(image_of(issued()), mac(), period=5000)
    assert expiry == NOW + 5000


def test_renew_longer_requested_period_is_capped_by_config():
    """A requested period above the expiry config is capped at it."""
    _, expiry = renew(image_of(issued()), mac(), period=3 * DAY_MS)
    assert expiry == NOW + EXPIRY_DEFAULT


def test_renew_is_capped_by_max_timestamp():
    """The new expiry never passes the token's max timestamp."""
    image = image_of(issued(max_lifetime_ms=DAY_MS + DAY_MS // 2))
    _, expiry = renew(image, mac(), now=NOW + DAY_MS)
    assert expiry == NOW + DAY_MS + DAY_MS // 2


def test_renew_zero_period_means_default():
    """A period of 0 is not positive and means the config."""
    _, expiry = renew(image_of(issued()), mac(), period=0)
    assert expiry == NOW + EXPIRY_DEFAULT


# -- expire ------------------------------------------------------------------------


def test_expire_refused_for_unauthenticated_caller():
    """An unauthenticated caller cannot expire."""
    with pytest.raises(UnsupportedByAuthenticationException):
        expire(image_of(issued()), mac(), context=ctx(authenticated=False))


def test_expire_without_secret_is_auth_disabled():
    """Expiring with no token secret gives DELEGATION_TOKEN_AUTH_DISABLED."""
    with pytest.raises(DelegationTokenDisabledException):
        expire(image_of(issued()), mac(), config=StoreConfig())


def test_expire_unknown_hmac_is_not_found():
    """An unknown HMAC gives DELEGATION_TOKEN_NOT_FOUND."""
    with pytest.raises(DelegationTokenNotFoundException):
        expire(image_of(issued()), mac("other"))


# KRaft's order, which these pin: apache/kafka metadata/src/main/java/org/apache/kafka/controller/
# DelegationTokenControlManager.java, expireDelegationToken: AUTH_DISABLED, NOT_FOUND, EXPIRED
# (maxTimestamp < now || expiryTimestamp < now), OWNER_MISMATCH, then a negative period writes a
# RemoveDelegationTokenRecord (answering expiryTimestampMs = the requested period, where secmeta answers now:
# see below). The order departs from
# /work/shared/reference/kafka-semantics.md's Expire line (ZooKeeper-era DelegationTokenManager: owner check,
# then a negative period removes even an expired token, then EXPIRED); review 28, finding 3.


def test_expire_expired_beats_owner_mismatch():
    """KRaft expireDelegationToken: a stranger expiring an expired token gets DELEGATION_TOKEN_EXPIRED (checked
    before the owner), not OWNER_MISMATCH as in the ZooKeeper-era order."""
    with pytest.raises(DelegationTokenExpiredException):
        expire(image_of(issued()), mac(), period=10, context=ctx(CAROL), now=NOW + EXPIRY_DEFAULT + 1)


def test_expire_by_a_stranger_of_a_live_token_is_owner_mismatch_whatever_the_period():
    """KRaft expireDelegationToken: OWNER_MISMATCH comes before the negative period's removal."""
    for period in (-1, 10):
        with pytest.raises(DelegationTokenOwnerMismatchException):
            expire(image_of(issued()), mac(), period=period, context=ctx(CAROL))


def test_expire_by_requester_alone_is_owner_mismatch():
    """The requester who is not owner or renewer may not expire."""
    with pytest.raises(DelegationTokenOwnerMismatchException):
        expire(image_of(issued(owner=BOB)), mac(), context=ctx(ALICE))


def test_expire_negative_period_removes_at_once():
    """A negative period emits DelegationTokenRemoved(EXPIRED_BY_REQUEST) and answers now. Departs from KRaft's
    expireDelegationToken, which answers the requested negative period: kio cannot carry a timestamp before the
    epoch, so secmeta's wire client could not read that answer."""
    events, expiry = expire(image_of(issued()), mac(), period=-1, now=NOW + 7)
    assert events == [DelegationTokenRemoved("tok-1", TokenRemovalReason.EXPIRED_BY_REQUEST)]
    assert expiry == NOW + 7


def test_expire_negative_period_on_an_expired_token_is_expired_and_writes_nothing():
    """KRaft expireDelegationToken: the owner expiring an already expired token at once gets
    DELEGATION_TOKEN_EXPIRED, and no RemoveDelegationTokenRecord is written (the sweep removes it). The
    ZooKeeper-era order removed it."""
    with pytest.raises(DelegationTokenExpiredException):
        expire(image_of(issued()), mac(), period=-1, now=NOW + EXPIRY_DEFAULT + 1)


def test_expire_already_expired_is_expired():
    """A non-negative period on an expired token gives DELEGATION_TOKEN_EXPIRED."""
    with pytest.raises(DelegationTokenExpiredException):
        expire(image_of(issued()), mac(), period=10, now=NOW + EXPIRY_DEFAULT + 1)


def test_expire_sets_expiry_to_now_plus_period():
    """A period sets expiry = now + period and emits DelegationTokenExpired."""
    events, expiry = expire(image_of(issued()), mac(), period=500)
    assert expiry == NOW + 500
    assert events == [DelegationTokenExpired("tok-1", 500, NOW + 500)]


def test_expire_period_is_not_capped_by_expiry_config():
    """Expire uses the period as given (capped only by max), unlike renew."""
    _, expiry = expire(image_of(issued()), mac(), period=3 * DAY_MS)
    assert expiry == NOW + 3 * DAY_MS


def test_expire_is_capped_by_max_timestamp():
    """An expire period past the max timestamp gives the max."""
    _, expiry = expire(image_of(issued()), mac(), period=30 * DAY_MS)
    assert expiry == NOW + MAX_DEFAULT


def test_expire_zero_period_expires_now():
    """Period 0 sets the expiry to now."""
    _, expiry = expire(image_of(issued()), mac(), period=0)
    assert expiry == NOW


def test_expire_by_renewer_is_allowed():
    """A renewer may expire."""
    events, _ = expire(image_of(issued(renewers=[BOB])), mac(), period=-1, context=ctx(BOB))
    assert len(events) == 1


# -- describe ----------------------------------------------------------------------


def three_tokens():
    return image_of(
        issued("t-alice", owner=ALICE, requester=ALICE, now=NOW),
        issued("t-bob", owner=BOB, requester=BOB, renewers=[CAROL], now=NOW + 1),
        issued("t-carol", owner=CAROL, requester=CAROL, now=NOW + 2),
    )


def describe(owners, principal=ALICE, decider=deny, image=None, **kw):
    found = describe_tokens(image or three_tokens(), owners, ctx(principal), decider=decider, config=CONFIG, **kw)
    return [t.token_id for t in found]


def test_describe_all_owners_shows_own_tokens_only():
    """owners None: a caller without permissions sees just the tokens it is party to."""
    assert describe(None, principal=CAROL) == ["t-bob", "t-carol"]


def test_describe_empty_owners_is_none():
    """owners [] returns no token, even for a caller who may see all."""
    assert describe([], decider=allow) == []


def test_describe_filters_by_owner():
    """A requested owner selects tokens it owns."""
    assert describe([BOB], principal=BOB) == ["t-bob"]


def test_describe_owner_filter_matches_renewer():
    """A requested principal also selects tokens it renews."""
    assert describe([CAROL], principal=CAROL) == ["t-bob", "t-carol"]


def test_describe_owner_filter_matches_requester():
    """A requested principal also selects tokens it requested for someone else."""
    image = image_of(issued("t", owner=BOB, requester=ALICE))
    assert describe([ALICE], principal=ALICE, image=image) == ["t"]


def test_describe_hides_tokens_of_others():
    """A caller with no relation and no permission sees nothing of others."""
    assert describe([BOB], principal=ALICE) == []


def test_describe_with_describe_on_the_token():
    """DESCRIBE on DELEGATION_TOKEN:<id> makes that token visible."""
    def decider(principal, host, op, rtype, name):
        return (op, rtype, name) == (AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, "t-bob")
    assert describe(None, principal=ALICE, decider=decider) == ["t-alice", "t-bob"]


def test_describe_with_describe_tokens_on_the_owner():
    """DESCRIBE_TOKENS on USER:<owner> makes that owner's tokens visible."""
    def decider(principal, host, op, rtype, name):
        return (op, rtype, name) == (AclOperation.DESCRIBE_TOKENS, ResourceType.USER, CAROL)
    assert describe(None, principal=ALICE, decider=decider) == ["t-alice", "t-carol"]


def test_describe_omits_hmac_by_default():
    """Described tokens carry no HMAC unless asked."""
    found = describe_tokens(three_tokens(), None, ctx(), decider=deny, config=CONFIG)
    assert [t.hmac for t in found] == [None]


def test_describe_includes_hmac_when_configured():
    """describe_tokens_include_hmac adds each token's HMAC."""
    config = StoreConfig(token_secret=SECRET, describe_tokens_include_hmac=True)
    found = describe_tokens(three_tokens(), None, ctx(), decider=deny, config=config)
    assert [t.hmac for t in found] == [mac("t-alice")]


def test_describe_returns_token_fields():
    """A described token has the owner, requester, renewers and timestamps of the image."""
    (token,) = describe_tokens(three_tokens(), [BOB], ctx(BOB), decider=deny, config=CONFIG)
    assert (token.owner, token.requester, token.renewers) == (BOB, BOB, (CAROL,))
    assert (token.issue_timestamp_ms, token.expiry_timestamp_ms) == (NOW + 1, NOW + 1 + EXPIRY_DEFAULT)


def test_describe_refused_for_token_authenticated_caller():
    """A token-authenticated caller gets DELEGATION_TOKEN_REQUEST_NOT_ALLOWED."""
    with pytest.raises(UnsupportedByAuthenticationException):
        describe_tokens(three_tokens(), None, ctx(token_authenticated=True), decider=allow, config=CONFIG)


def test_describe_with_disabled_config_is_auth_disabled():
    """Without a token secret, describe answers DELEGATION_TOKEN_AUTH_DISABLED, not an empty list.

    Kafka: KafkaApis.handleDescribeTokensRequest; DelegationTokenRequestsWithDisableTokenFeatureTest.
    """
    with pytest.raises(DelegationTokenDisabledException):
        describe_tokens(three_tokens(), None, ctx(), decider=allow, config=StoreConfig())


# -- sweep -------------------------------------------------------------------------


def test_sweep_removes_tokens_past_expiry():
    """Tokens past their expiry get DelegationTokenRemoved(EXPIRED_BY_SWEEP)."""
    image = image_of(issued("old", now=NOW), issued("new", now=NOW + DAY_MS))
    result = sweep_expired(image, NOW + DAY_MS + 1)
    assert result == ControlResult([DelegationTokenRemoved("old", TokenRemovalReason.EXPIRED_BY_SWEEP)], 1)


def test_sweep_removes_tokens_past_max():
    """A token past its max timestamp is swept."""
    image = image_of(issued("short", max_lifetime_ms=10))
    assert [e.token_id for e in sweep_expired(image, NOW + 11).events] == ["short"]


def test_sweep_keeps_token_at_its_expiry():
    """At exactly the expiry timestamp a token is not swept."""
    assert sweep_expired(image_of(issued()), NOW + EXPIRY_DEFAULT) == ControlResult((), 0)


def test_sweep_of_nothing_expired_is_empty():
    """With no expired token the sweep emits nothing."""
    assert sweep_expired(three_tokens(), NOW) == ControlResult((), 0)


def test_renew_decides_on_the_image_it_is_given():
    """A token the HMAC index knows but the given image does not is NOT_FOUND: the image decides."""
    hmacs = TokenHmacs.of(image_of(issued()).tokens, SECRET)
    with pytest.raises(DelegationTokenNotFoundException):
        renew_token(SecurityImage.EMPTY, hmacs, mac(), -1, ctx(), NOW, config=CONFIG)
