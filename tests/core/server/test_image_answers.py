"""DescribeAcls answers kept per published image: sent again only while that image is still the store's."""

from __future__ import annotations

from contextlib import contextmanager

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core.errors import ClusterAuthorizationException, ErrorCode
from secmeta.core.server.acl_apis import _answered_from_bytes, describe_acls
from secmeta.core.server.call import BrokerInfo, Call
from secmeta.core.server.image_answers import ImageAnswers
from secmeta.core.types import RequestContext
from secmeta.core.wire import convert
from secmeta.core.wire.codec import (
    EncodedResponse,
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_class,
)
from secmeta.core.wire.hot_responses import describe_acls_response
from secmeta.events.types import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.storekit import ADMIN

BROKER = BrokerInfo(1, "c", "127.0.0.1", 9092)
ALICE = RequestContext("User:alice", "10.0.0.2")
FILTER = AclBindingFilter.of(ResourceType.TOPIC, "orders", PatternType.MATCH)


def _binding(i: int) -> AclBinding:
    return AclBinding.of(ResourceType.TOPIC, "orders", PatternType.LITERAL, f"User:u{i}", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)


def _describe(store, answers: ImageAnswers, context=ADMIN):
    """DescribeAcls v3 through the handler, as the server calls it; the decoded answer."""
    frame = decode_request(encode_request(5, "t", build(request_class(29, 3), **convert.filter_fields(FILTER)))[4:])
    response = describe_acls(Call(store, context, frame, BROKER, answers))
    return decode_response(29, 3, encode_response(5, response)[4:])[1]


def _described(answer) -> set[AclBinding]:
    return set(convert.bindings_from_resources(answer.resources))


def test_an_answer_is_sent_again_only_until_the_next_write(store):
    """The same request is answered from the kept bytes while no write lands; each write is seen at once."""
    answers = ImageAnswers()
    store.create_acls([_binding(0)], context=ADMIN)
    first = _describe(store, answers)
    assert _describe(store, answers) == first and _described(first) == {_binding(0)}
    store.create_acls([_binding(1)], context=ADMIN)
    assert _described(_describe(store, answers)) == {_binding(0), _binding(1)}
    store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:u0")], context=ADMIN)
    assert _described(_describe(store, answers)) == {_binding(1)}


def test_an_answer_kept_for_one_caller_is_never_sent_to_another(store):
    """An admin's kept answer does not reach a caller without DESCRIBE on the cluster: it is refused, every time."""
    answers = ImageAnswers()
    store.create_acls([_binding(0)], context=ADMIN)
    assert _described(_describe(store, answers)) == {_binding(0)}
    for _ in range(2):
        refused = _describe(store, answers, ALICE)
        assert int(refused.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and refused.resources == ()


def _raw(store, answers: ImageAnswers, context, correlation_id: int = 9, client_id: str = "t", name: str = "orders"):
    """DescribeAcls v3 of topic ``name`` answered from its bytes, as a logged-in connection's inline path asks: the
    decoded answer, or None (not answered there: the handler's path answers, its refusals included)."""
    the_filter = AclBindingFilter.of(ResourceType.TOPIC, name, PatternType.MATCH)
    frame = encode_request(correlation_id, client_id,
                           build(request_class(29, 3), **convert.filter_fields(the_filter)))[4:]
    parts = _answered_from_bytes(frame, store, context, answers)
    if parts is None:
        return None
    answered = b"".join(parts)
    assert int.from_bytes(answered[4:8], "big") == correlation_id
    return decode_response(29, 3, answered[4:])[1]


@contextmanager
def _computations(store):
    """The store's ``describe_acl_groups`` calls inside the block (each an answer computed, not a kept one)."""
    computed: list[tuple] = []
    real = store.describe_acl_groups

    def counted(*args, **kwargs):
        computed.append(args)
        return real(*args, **kwargs)

    store.describe_acl_groups = counted
    try:
        yield computed
    finally:
        del store.describe_acl_groups


def _cluster_describe(principal: str, permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding.of(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, principal, "*",
                         AclOperation.DESCRIBE, permission)


def test_a_kept_answer_is_sent_from_the_bytes_to_every_allowed_caller_and_never_to_another(store):
    """Kept by the request's bytes, an answer computed for the admin is sent to any other caller the store lets
    describe ACLs (DESCRIBE on the cluster: the store's own decision, asked at each request), under its own
    correlation id and client id, without computing it again; a caller the store refuses is never answered
    from it (the handler's path refuses it)."""
    answers = ImageAnswers()
    other = AclBinding.of(ResourceType.TOPIC, "other", PatternType.LITERAL, "User:u1", "*", AclOperation.READ,
                          AclPermissionType.ALLOW)
    store.create_acls([_binding(0), other, _cluster_describe("User:bob")], context=ADMIN)
    with _computations(store) as computed:
        for _ in range(2):          # asked twice: kept (on second sight)
            assert _described(_raw(store, answers, ADMIN)) == {_binding(0)}
            assert _described(_raw(store, answers, ADMIN, name="other")) == {other}
        assert len(computed) == 4
        bob = RequestContext("User:bob", "10.0.0.3")
        assert _described(_raw(store, answers, bob, correlation_id=11, client_id="bob")) == {_binding(0)}
        assert _described(_raw(store, answers, bob, correlation_id=12, name="other")) == {other}
        assert _described(_raw(store, answers, ADMIN, correlation_id=13)) == {_binding(0)}
        assert len(computed) == 4      # each answered from the admin's kept bytes
        for _ in range(2):
            assert _raw(store, answers, ALICE) is None
            assert int(_describe(store, answers, ALICE).error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_a_client_cycling_through_thousands_of_resources_is_answered_from_kept_answers(store):
    """Issue 24: a client asking 2,000 resources in turn (more than the 256 answers once kept) computed every
    answer; the default bound keeps them all (each kept when asked a second time), so the third pass computes
    none."""
    answers = ImageAnswers()
    store.create_acls([_binding(0)], context=ADMIN)
    with _computations(store) as computed:
        for _ in range(3):
            for i in range(2000):
                assert _raw(store, answers, ADMIN, name=f"t{i}") is not None
        assert len(computed) == 4000


def test_answers_asked_once_are_not_kept_and_do_not_evict_the_ones_asked_again(store):
    """Kept on second sight: a stream of keys asked once each (a scan of new names) is computed and never kept,
    so an answer asked again and again stays kept through it; the same keys asked a second time are kept."""
    answers = ImageAnswers(limit=10)
    computed = []

    def compute(key) -> EncodedResponse:
        computed.append(key)
        return EncodedResponse(True, b"x")

    for _ in range(2):
        answers.answer(store, "hot", lambda: compute("hot"), ADMIN, store.may_describe_acls)
    for key in range(100):
        answers.answer(store, key, lambda key=key: compute(key), ADMIN, store.may_describe_acls)
    answers.answer(store, "hot", lambda: compute("hot"), ADMIN, store.may_describe_acls)
    assert computed.count("hot") == 2
    assert answers.kept(store, 99, ADMIN, store.may_describe_acls) is None
    answers.answer(store, 99, lambda: compute(99), ADMIN, store.may_describe_acls)       # the second time: kept
    assert computed.count(99) == 2 and answers.kept(store, 99, ADMIN, store.may_describe_acls) is not None


def test_a_caller_whose_right_is_revoked_is_refused_at_once(store):
    """A caller allowed under one image is decided on again under the next: once a write denies it DESCRIBE on
    the cluster, its next request is refused, the kept bytes unused."""
    answers = ImageAnswers()
    bob = RequestContext("User:bob", "10.0.0.3")
    store.create_acls([_binding(0), _cluster_describe("User:bob")], context=ADMIN)
    assert _described(_raw(store, answers, bob)) == {_binding(0)}
    assert _described(_raw(store, answers, ADMIN)) == {_binding(0)}
    store.create_acls([_cluster_describe("User:bob", AclPermissionType.DENY)], context=ADMIN)
    assert _raw(store, answers, bob) is None
    assert int(_describe(store, answers, bob).error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert _described(_raw(store, answers, ADMIN)) == {_binding(0)}


def test_an_answer_computed_while_a_write_lands_is_not_sent_after_it(store):
    """An answer whose computation a write overtook is not reused: the next request computes again."""
    answers = ImageAnswers()
    computed = []

    def compute():
        computed.append(store.image)
        if len(computed) == 1:
            store.create_acls([_binding(0)], context=ADMIN)     # a write lands while the answer is computed
        return describe_acls_response(3, store.describe_acl_groups(FILTER, context=ADMIN))

    answers.answer(store, "k", compute, ADMIN, store.may_describe_acls)
    answers.answer(store, "k", compute, ADMIN, store.may_describe_acls)
    assert len(computed) == 2
    kept = answers.answer(store, "k", compute, ADMIN, store.may_describe_acls)
    assert len(computed) == 2          # computed from the image still published: reused
    assert _described(decode_response(29, 3, encode_response(1, kept)[4:])[1]) == {_binding(0)}


def test_kept_answers_stay_within_the_bound(store):
    """No more than ``limit`` answers are kept, nor more than ``budget`` bytes; one larger than ``max_bytes``
    is never kept."""
    answers = ImageAnswers(limit=3, max_bytes=64)
    computed = []

    def compute(key, size: int = 8) -> EncodedResponse:
        computed.append(key)
        return EncodedResponse(True, b"x" * size)

    for _ in range(2):
        for key in range(10):
            answers.answer(store, key, lambda key=key: compute(key), ADMIN, store.may_describe_acls)
    assert len(computed) >= 20 - 3
    answers.answer(store, "big", lambda: compute("big", 100), ADMIN, store.may_describe_acls)
    answers.answer(store, "big", lambda: compute("big", 100), ADMIN, store.may_describe_acls)
    assert computed.count("big") == 2


def test_kept_answers_stay_within_the_byte_budget(store):
    """Answers that together pass ``budget`` bytes are not all kept: asked again, most are computed again."""
    answers = ImageAnswers(limit=100, max_bytes=64, budget=100)
    computed = []

    def compute(key) -> EncodedResponse:
        computed.append(key)
        return EncodedResponse(True, b"x" * 40)

    for _ in range(2):
        for key in range(6):
            answers.answer(store, key, lambda key=key: compute(key), ADMIN, store.may_describe_acls)
    assert len(computed) >= 12 - 2          # at most two 40-byte answers fit in 100 bytes


_CALLERS = st.builds(RequestContext, st.sampled_from(["User:bob", "User:carol", "User:dave"]),
                     st.sampled_from(["10.0.0.3", "10.0.0.9"]))
_CLUSTER_ACLS = st.lists(st.builds(
    lambda principal, host, operation, permission: AclBinding.of(
        ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, principal, host, operation, permission),
    st.sampled_from(["User:bob", "User:carol", "User:*"]), st.sampled_from(["*", "10.0.0.3", "10.0.0.0/30"]),
    st.sampled_from([AclOperation.DESCRIBE, AclOperation.ALL, AclOperation.ALTER]),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY])), max_size=4, unique=True)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(acls=_CLUSTER_ACLS, callers=st.lists(_CALLERS, min_size=1, max_size=4))
def test_a_kept_answer_goes_to_exactly_the_callers_the_store_lets_describe(store, acls, callers):
    """Whatever the cluster's ACLs, a kept answer is sent to a caller exactly when the store's own describe would
    answer it (the same decision, the store's), and it is the store's answer; a refused caller is never sent it."""
    store.delete_acls([AclBindingFilter.of(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)], context=ADMIN)
    store.create_acls([_binding(0), *acls], context=ADMIN)
    answers = ImageAnswers()
    for _ in range(2):      # kept (on second sight) for the admin
        assert _described(_raw(store, answers, ADMIN)) == {_binding(0)}
    for caller in callers:
        try:
            expected: set | None = set(store.describe_acls(FILTER, context=caller))
        except ClusterAuthorizationException:
            expected = None
        answered = _raw(store, answers, caller)
        assert (None if answered is None else _described(answered)) == expected


def _prefixed(prefix: str, i: int, host: str = "*") -> AclBinding:
    return AclBinding.of(ResourceType.TOPIC, prefix, PatternType.PREFIXED, f"User:p{i}", host, AclOperation.READ,
                         AclPermissionType.ALLOW)


def test_a_name_never_asked_under_prefixes_asked_before_reuses_their_encoding_not_their_checks(store, monkeypatch):
    """Topics never asked before whose filters select the same index nodes (the same prefixes) are each read,
    checked, authorized and selected by the store, but encoded once; a caller the store refuses is still refused,
    and a write to a selected node is in the next answer."""
    from secmeta.core.wire import hot_responses

    encoded = []
    real = hot_responses.describe_acls_response
    monkeypatch.setattr(hot_responses, "describe_acls_response", lambda *a: encoded.append(a) or real(*a))
    answers = ImageAnswers()
    store.create_acls([_prefixed("orders-", 0), _prefixed("orders-", 1, "10.0.0.7"), _binding(0)], context=ADMIN)
    expected = {_prefixed("orders-", 0), _prefixed("orders-", 1, "10.0.0.7")}
    with _computations(store) as computed:
        for name in ("orders-a", "orders-b", "orders-c"):
            assert _described(_raw(store, answers, ADMIN, name=name)) == expected
        assert len(computed) == 3 and len(encoded) == 1
        assert _described(_raw(store, answers, ADMIN, name="orders")) == {_binding(0)}   # other nodes: encoded
        assert len(encoded) == 2
        assert _raw(store, answers, ALICE, name="orders-d") is None
        assert int(_describe(store, answers, ALICE).error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    store.create_acls([_prefixed("orders-", 2)], context=ADMIN)
    assert _described(_raw(store, answers, ADMIN, name="orders-e")) == expected | {_prefixed("orders-", 2)}


def test_answers_kept_by_objects_stay_within_the_bounds(store):
    """``of_objects`` keeps at most ``limit`` answers and ``budget`` bytes, and none larger than ``max_bytes``."""
    answers = ImageAnswers(limit=3, max_bytes=64, budget=100)
    objects = [(object(),) for _ in range(10)]
    computed = []

    def compute(i: int, size: int = 8) -> EncodedResponse:
        computed.append(i)
        return EncodedResponse(True, b"x" * size)

    for _ in range(2):
        for i, held in enumerate(objects):
            answers.of_objects(3, held, lambda i=i: compute(i))
    assert len(computed) >= 20 - 3
    for _ in range(2):
        answers.of_objects(3, objects[0], lambda: compute(-1, 100))
        answers.of_objects(4, objects[0], lambda: compute(-2, 40))
        answers.of_objects(5, objects[0], lambda: compute(-3, 40))
        answers.of_objects(6, objects[0], lambda: compute(-4, 40))
    assert computed.count(-1) == 2                     # larger than max_bytes: never kept
    assert computed.count(-2) + computed.count(-3) + computed.count(-4) >= 4    # 3 x 40 bytes pass 100


_NAMES = st.sampled_from(["orders", "orders-eu", "orders-eu-1", "ord", "payments", "payments-x", "*"])
_WRITES = st.lists(st.builds(
    lambda name, prefixed, principal, host: AclBinding.of(
        ResourceType.TOPIC, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL, principal, host,
        AclOperation.READ, AclPermissionType.ALLOW),
    st.sampled_from(["orders", "orders-", "orders-eu", "pay", "payments", "*"]), st.booleans(),
    st.sampled_from(["User:a", "User:b", "User:*"]), st.sampled_from(["*", "10.0.0.1"])), min_size=1, max_size=4)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(_WRITES, st.booleans(), st.lists(_NAMES, min_size=1, max_size=4)),
                      min_size=1, max_size=4))
def test_answers_of_the_same_objects_are_the_stores_answers_across_writes(store, steps):
    """Whatever is written and deleted between them, each DescribeAcls answered from its bytes (never-asked
    names and names asked again, over one ImageAnswers) is exactly the store's own describe of that name."""
    store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC)], context=ADMIN)
    answers = ImageAnswers()
    for writes, delete, names in steps:
        if delete:
            store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, writes[0].pattern.name, PatternType.MATCH)],
                              context=ADMIN)
        else:
            assert not any(store.create_acls(writes, context=ADMIN))
        for name in names:
            the_filter = AclBindingFilter.of(ResourceType.TOPIC, name, PatternType.MATCH)
            assert _described(_raw(store, answers, ADMIN, name=name)) == set(
                store.describe_acls(the_filter, context=ADMIN))
