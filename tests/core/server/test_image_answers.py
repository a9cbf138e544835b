"""DescribeAcls answers kept per published image: sent again only while that image is still the store's."""

from __future__ import annotations

from secmeta.core.errors import ErrorCode
from secmeta.core.server.acl_apis import describe_acls
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


def test_an_answer_computed_while_a_write_lands_is_not_sent_after_it(store):
    """An answer whose computation a write overtook is not reused: the next request computes again."""
    answers = ImageAnswers()
    computed = []

    def compute():
        computed.append(store.image)
        if len(computed) == 1:
            store.create_acls([_binding(0)], context=ADMIN)     # a write lands while the answer is computed
        return describe_acls_response(3, store.describe_acl_groups(FILTER, context=ADMIN))

    answers.answer(store, "k", compute)
    answers.answer(store, "k", compute)
    assert len(computed) == 2
    kept = answers.answer(store, "k", compute)
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
            answers.answer(store, key, lambda key=key: compute(key))
    assert len(computed) >= 20 - 3
    answers.answer(store, "big", lambda: compute("big", 100))
    answers.answer(store, "big", lambda: compute("big", 100))
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
            answers.answer(store, key, lambda key=key: compute(key))
    assert len(computed) >= 12 - 2          # at most two 40-byte answers fit in 100 bytes
