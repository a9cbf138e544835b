"""secmeta.core.control.quotas: alter/describe client quotas (KIP-546) with Kafka's validation and codes.

Kafka's sources: metadata/src/main/java/org/apache/kafka/controller/ClientQuotaControlManager.java and
ClientQuotaControlManagerTest.java; metadata/src/main/java/org/apache/kafka/image/ClientQuotasImage.java;
core/src/test/scala/unit/kafka/server/ClientQuotasRequestTest.scala.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.core.control.quotas import (
    ClientQuotaAlteration,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ClientQuotaOp,
    alter_client_quotas,
    describe_client_quotas,
)
from secmeta.core.errors import (
    ApiError,
    ClusterAuthorizationException,
    ErrorCode,
    InvalidRequestException,
    UnsupportedVersionException,
)
from secmeta.events.records import ClientQuotaEntity
from secmeta.events.types import AclOperation
from secmeta.projections.image import SecurityDelta, SecurityImage
from tests.core.control.controlkit import unpacked
from tests.storekit import ADMIN

C = ClientQuotaFilterComponent
OK = ApiError()


def allow(*_):
    return True


class Quotas:
    """An image that control results are applied to, as the store does."""

    def __init__(self):
        self.image = SecurityImage.EMPTY

    def alter(self, *entries, validate_only=False):
        events, results = unpacked(alter_client_quotas(self.image, entries, ADMIN, decider=allow,
                                                       validate_only=validate_only))
        delta = SecurityDelta(self.image)
        for event in events:
            delta.replay(event)
        self.image = delta.apply()
        return events, {str(entity): error for entity, error in results.items()}

    def describe(self, *components, strict=False):
        found = describe_client_quotas(self.image, ClientQuotaFilter(components, strict), ADMIN, decider=allow)
        return {str(entity): values for entity, values in found.items()}


def entry(entity, **ops):
    return ClientQuotaAlteration(entity, tuple(ClientQuotaOp(k, v) for k, v in ops.items()))


def key(entity):
    return str(ClientQuotaEntity.of(entity))


def test_set_change_and_remove_keys_until_the_entity_is_gone():
    """ClientQuotaControlManagerTest.testAlterAndRemove: removing the last key removes the entity."""
    q, user = Quotas(), {"user": "user-1"}
    q.alter(entry(user, producer_byte_rate=10000))
    assert q.describe() == {"user=user-1": {"producer_byte_rate": 10000.0}}
    q.alter(entry(user, producer_byte_rate=10001, consumer_byte_rate=20000))
    q.alter(entry(user, producer_byte_rate=None))
    assert q.describe() == {"user=user-1": {"consumer_byte_rate": 20000.0}}
    events, results = q.alter(entry(user, request_percentage=None))
    assert events == [] and results == {"user=user-1": OK}
    q.alter(entry(user, consumer_byte_rate=None))
    assert q.describe() == {} and len(q.image.quotas) == 0
    _, results = q.alter(entry(user, consumer_byte_rate=None))
    assert results == {"user=user-1": OK}
    q.alter(entry(user, request_percentage=99, controller_mutation_rate=None, producer_byte_rate=10002,
                  consumer_byte_rate=20001))
    assert q.describe() == {"user=user-1": {"request_percentage": 99.0, "producer_byte_rate": 10002.0,
                                            "consumer_byte_rate": 20001.0}}


def test_setting_the_value_a_key_holds_logs_nothing_and_succeeds():
    q = Quotas()
    q.alter(entry({"client-id": "c"}, consumer_byte_rate=5))
    events, results = q.alter(entry({"client-id": "c"}, consumer_byte_rate=5.0))
    assert events == [] and results == {"client-id=c": OK}


@pytest.mark.parametrize("entity", [
    {"user": "u"}, {"user": None}, {"client-id": "c"}, {"client-id": None}, {"user": "u", "client-id": "c"},
    {"user": None, "client-id": "c"}, {"user": "u", "client-id": None}, {"user": None, "client-id": None},
])
def test_every_user_and_client_id_shape_takes_the_four_keys(entity):
    """ClientQuotaControlManagerTest.testEntityTypes / testConfigKeysForEntityTypeWith{User,ClientId,UserAndClientId}."""
    q = Quotas()
    _, results = q.alter(entry(entity, producer_byte_rate=1, consumer_byte_rate=2, request_percentage=3,
                               controller_mutation_rate=4))
    assert results == {key(entity): OK} and len(q.describe()[key(entity)]) == 4


@pytest.mark.parametrize(("entity", "message"), [
    ({}, "Invalid empty client quota entity"),
    ({"group": "g"}, "Unhandled client quota entity type: group"),
    ({"user": ""}, "Empty user not supported"),
    ({"ip": "1.2.3.4", "user": "u"}, "Invalid quota entity combination"),
    ({"ip": "ip"}, "ip is not a valid IP address"),
    ({"ip": "1.2.3.4"}, "Invalid configuration key consumer_byte_rate"),
])
def test_an_invalid_entity_is_invalid_request_and_writes_nothing(entity, message):
    """ClientQuotaControlManagerTest.testInvalidEntityTypes, ClientQuotasRequestTest.testAlterClientQuotasBadIp."""
    events, results = Quotas().alter(entry(entity, consumer_byte_rate=1))
    (error,) = results.values()
    assert events == [] and error.code == ErrorCode.INVALID_REQUEST and error.message.startswith(message)


def test_an_ip_entity_takes_only_connection_creation_rate():
    """testConfigKeysForEntityTypeWithIp; ClientQuotaControlManagerTest.testIsValidIpEntity (address literals and the default)."""
    q = Quotas()
    _, results = q.alter(entry({"ip": "::1"}, connection_creation_rate=10), entry({"ip": None}, connection_creation_rate=20))
    assert set(results.values()) == {OK}
    _, results = q.alter(entry({"ip": "10.0.0.1"}, connection_creation_rate=2.5))
    assert results["ip=10.0.0.1"].message == "connection_creation_rate cannot be a fractional value."


@pytest.mark.parametrize(("key_", "value", "message"), [
    ("foobar", 1.0, "Invalid configuration key foobar"),
    ("producer_byte_rate", 0.0, "Quota producer_byte_rate must be greater than 0"),
    ("consumer_byte_rate", -2.0, "Quota consumer_byte_rate must be greater than 0"),
    ("consumer_byte_rate", 36893488147419103232.4, "Proposed value for consumer_byte_rate is too large for a LONG."),
    ("consumer_byte_rate", 2.245, "consumer_byte_rate cannot be a fractional value."),
    ("producer_byte_rate", 10000.5, "producer_byte_rate cannot be a fractional value."),
    ("consumer_byte_rate", 1234.9999999, "consumer_byte_rate cannot be a fractional value."),
    ("request_percentage", float("nan"), "Quota request_percentage must be a finite number"),
    ("request_percentage", float("inf"), "Quota request_percentage must be a finite number"),
    ("SCRAM-SHA-256", 4096.0, "Invalid configuration key SCRAM-SHA-256"),
])
def test_a_bad_value_is_invalid_request_in_kafkas_words(key_, value, message):
    """ClientQuotaControlManagerTest.testValidateQuotaKeyValue*, ClientQuotasRequestTest.testAlterClientQuotasInvalidRequests
    (NaN and infinity: refused here, stored by Kafka)."""
    events, results = Quotas().alter(ClientQuotaAlteration({"user": "u"}, (ClientQuotaOp(key_, value),)))
    assert events == [] and results["user=u"].code == ErrorCode.INVALID_REQUEST
    assert results["user=u"].message.startswith(message)


@pytest.mark.parametrize(("key_", "value"), [
    ("consumer_byte_rate", 1234.0), ("consumer_byte_rate", 1235.0000001), ("request_percentage", 56.62367),
    ("request_percentage", 200.0), ("consumer_byte_rate", 2.0 ** 63),
])
def test_values_kafka_accepts_are_stored_exactly_as_sent(key_, value):
    """testValidateQuotaKeyValue*: within 1e-6 above an integer is integral; the LONG bound is 2**63 as a double."""
    q = Quotas()
    q.alter(ClientQuotaAlteration({"user": "u"}, (ClientQuotaOp(key_, value),)))
    assert q.describe() == {"user=u": {key_: value}}


def test_one_bad_op_fails_the_entity_but_not_the_other_entities_of_the_request():
    """ClientQuotasRequestTest.testInvalidQuotaKeys (either order, zero records); errors are per entity."""
    q = Quotas()
    bad_first = ClientQuotaAlteration({"user": "a"}, (ClientQuotaOp("bad", 1), ClientQuotaOp("producer_byte_rate", 1)))
    bad_last = ClientQuotaAlteration({"user": "b"}, (ClientQuotaOp("producer_byte_rate", 1), ClientQuotaOp("bad", 1)))
    events, results = q.alter(bad_first, bad_last, entry({"user": "c"}, producer_byte_rate=1))
    assert [r.code for r in results.values()] == [ErrorCode.INVALID_REQUEST] * 2 + [ErrorCode.NONE]
    assert [e.entity for e in events] == ["user=c"]


def test_a_key_twice_in_one_entry_fails_the_entity():
    """ClientQuotaControlManager.alterClientQuotas: a duplicate key -> INVALID_REQUEST, nothing applied."""
    dup = ClientQuotaAlteration({"user": "u"}, (ClientQuotaOp("producer_byte_rate", 1), ClientQuotaOp("producer_byte_rate", 2)))
    events, results = Quotas().alter(dup)
    assert events == [] and results["user=u"].code == ErrorCode.INVALID_REQUEST


def test_an_entity_twice_in_one_request_fails_with_none_of_its_entries_applied():
    """Kafka answers 'Ignoring duplicate entity' yet writes the first entry; here neither applies."""
    q = Quotas()
    events, results = q.alter(entry({"user": "u", "client-id": "c"}, producer_byte_rate=1),
                              entry({"client-id": "c", "user": "u"}, consumer_byte_rate=2))
    assert events == [] and results["user=u,client-id=c"].message.startswith("Ignoring duplicate entity")


def test_validate_only_reports_the_same_results_and_changes_nothing():
    """ClientQuotasRequestTest.testAlterClientQuotasRequestValidateOnly."""
    q = Quotas()
    events, results = q.alter(entry({"user": "u"}, producer_byte_rate=1), entry({"user": "v"}, bad=1), validate_only=True)
    assert events == [] and [r.code for r in results.values()] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST]


def test_alter_needs_alter_configs_and_describe_needs_describe_configs_on_the_cluster():
    """ControllerApis.handleAlterClientQuotas / KafkaApis.handleDescribeClientQuotasRequest."""
    asked = []

    def deny(principal, host, operation, resource_type, name):
        asked.append(operation)
        return False

    with pytest.raises(ClusterAuthorizationException):
        alter_client_quotas(SecurityImage.EMPTY, [entry({"user": "u"}, producer_byte_rate=1)], ADMIN, decider=deny)
    with pytest.raises(ClusterAuthorizationException):
        describe_client_quotas(SecurityImage.EMPTY, ClientQuotaFilter(), ADMIN, decider=deny)
    assert asked == [AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS]


@pytest.fixture(scope="module")
def stored():
    """ClientQuotasRequestTest.setupDescribeClientQuotasMatchTest's 13 entities."""
    q = Quotas()
    rows = [({"user": "user-1", "client-id": "client-id-1"}, 50.50), ({"user": "user-2", "client-id": "client-id-1"}, 51.51),
            ({"user": "user-3", "client-id": "client-id-2"}, 52.52), ({"user": None, "client-id": "client-id-1"}, 53.53),
            ({"user": "user-1", "client-id": None}, 54.54), ({"user": "user-3", "client-id": None}, 55.55),
            ({"user": "user-1"}, 56.56), ({"user": "user-2"}, 57.57), ({"user": "user-3"}, 58.58), ({"user": None}, 59.59),
            ({"client-id": "client-id-2"}, 60.60)]
    _, results = q.alter(*(entry(e, request_percentage=v) for e, v in rows),
                         entry({"ip": "1.2.3.4"}, connection_creation_rate=10),
                         entry({"ip": "2.3.4.5"}, connection_creation_rate=20))
    assert set(results.values()) == {OK}
    return q


@pytest.mark.parametrize(("components", "strict", "count"), [
    ((C.of_entity("user", "user-1"),), False, 3),
    ((C.of_entity("user", "unknown"),), False, 0),
    ((C.of_entity("client-id", "client-id-2"),), False, 2),
    ((C.of_default_entity("user"),), False, 2),
    ((C.of_entity("user", "user-2"),), True, 1),
    ((C.of_entity("client-id", "client-id-1"),), True, 0),
    ((C.of_entity_type("user"),), True, 4),
    ((C.of_entity_type("user"),), False, 10),
    ((C.of_entity_type("client-id"),), True, 1),
    ((C.of_entity_type("client-id"),), False, 7),
    ((C.of_entity_type("ip"),), False, 2),
    ((), False, 13),
    ((), True, 0),
])
def test_describe_filters_match_as_kafkas(stored, components, strict, count):
    """ClientQuotasRequestTest.testDescribeClientQuotasMatchExact / MatchPartial."""
    assert len(stored.describe(*components, strict=strict)) == count


def test_a_strict_filter_naming_every_part_finds_exactly_that_entity(stored):
    for name in stored.describe():
        entity = ClientQuotaEntity.parse(name)
        if "ip" in entity.as_dict():
            continue
        parts = [C.of_default_entity(t) if n is None else C.of_entity(t, n) for t, n in entity.parts]
        assert list(stored.describe(*parts, strict=True)) == [name]


@pytest.mark.parametrize(("components", "error", "message"), [
    ((C("", 2),), InvalidRequestException, "Invalid empty entity type."),
    ((C.of_entity_type("user"), C.of_entity("user", "u")), InvalidRequestException, "Entity type user cannot appear"),
    ((C.of_entity_type("group"),), UnsupportedVersionException, "Unsupported entity type group"),
    ((C.of_entity_type("ip"), C.of_entity_type("other")), UnsupportedVersionException, "Unsupported entity type"),
    ((C("user", 0, None),), InvalidRequestException, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ((C("user", 1, "u"),), InvalidRequestException, "Request specified MATCH_TYPE_DEFAULT, but also"),
    ((C("user", 2, "u"),), InvalidRequestException, "Request specified MATCH_TYPE_SPECIFIED, but also"),
    ((C("user", 7, None),), InvalidRequestException, "Unknown match type 7"),
    ((C.of_entity_type("ip"), C.of_entity_type("user")), InvalidRequestException, "Invalid entity filter component"),
])
def test_a_bad_filter_is_a_request_level_error(stored, components, error, message):
    """ClientQuotasImage.describe; ClientQuotasRequestTest.testClientQuotasUnsupportedEntityTypes,
    testDescribeClientQuotasInvalidFilterCombination."""
    with pytest.raises(error) as raised:
        stored.describe(*components)
    assert raised.value.error.message.startswith(message)


_names = st.none() | st.sampled_from(["a", "b", "<default>"])
_entities = st.fixed_dictionaries({}, optional={"user": _names, "client-id": _names}).filter(bool)
_ops = st.lists(st.tuples(_entities, st.sampled_from(["producer_byte_rate", "request_percentage"]),
                          st.none() | st.integers(1, 3).map(float)), max_size=30)


@given(_ops)
def test_describe_answers_what_was_last_set_per_entity_and_key(ops):
    """Invariant: after any sequence of single-op requests, describe() is the last value set per (entity, key),
    with entities whose keys were all removed absent."""
    q, expected = Quotas(), {}
    for entity, k, v in ops:
        _, results = q.alter(ClientQuotaAlteration(entity, (ClientQuotaOp(k, v),)))
        assert set(results.values()) == {OK}
        values = expected.setdefault(key(entity), {})
        if v is None:
            values.pop(k, None)
        else:
            values[k] = v
    assert q.describe() == {e: v for e, v in expected.items() if v}
