"""DescribeClientQuotas (48) and AlterClientQuotas (49) served by ``secmeta serve``.

Neither confluent-kafka 2.16 nor kafka-python 3.0 has an admin call for client quotas (librdkafka has
no KIP-546 API), so kafka-python's own protocol messages (kafka.protocol.admin.AlterClientQuotasRequest /
DescribeClientQuotasRequest, as Kafka's AdminClient encodes them) go through its admin client's
connection, and secmeta's RemoteAdmin is tested beside it. What Kafka does:
ClientQuotasRequestTest (core/src/test/scala/unit/kafka/server/ClientQuotasRequestTest.scala),
AlterClientQuotasRequest.getErrorResponse and KafkaApis.handleDescribeClientQuotasRequest.
"""

from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

from secmeta.core.control.quotas import (
    ClientQuotaAlteration,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ClientQuotaOp,
)
from secmeta.core.errors import (
    ApiError,
    ClusterAuthorizationException,
    ErrorCode,
    UnsupportedVersionException,
)
from secmeta.core.wire.codec import ApiKey, build, request_class
from secmeta.events.records import ClientQuotaEntity
from tests.clientkit import remote_admin
from tests.serverkit import ADMIN, RawClient

LISTENERS = "SASL_SSL://127.0.0.1:0"
ALICE = ClientQuotaEntity.of({"user": "alice"})


@pytest.fixture
def server(serve):
    return serve(LISTENERS, users={"admin": "admin-secret", "bob": "bob-secret"})


@pytest.fixture
def kafka_python(server):
    client = KafkaAdminClient(**server.kafka_python_config("SASL_SSL", "admin", mechanism="SCRAM-SHA-512"))
    yield lambda request: client._manager.run(client._manager.send, request)
    client.close()


def _alter(entity: dict, ops: dict, validate_only=False) -> AlterClientQuotasRequest:
    """The request Kafka's AdminClient sends: a removal is value 0.0 with remove=true."""
    data = AlterClientQuotasRequest.EntryData
    return AlterClientQuotasRequest(validate_only=validate_only, entries=[data(
        entity=[data.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[data.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops.items()])])


def _describe(*components, strict=False) -> DescribeClientQuotasRequest:
    component = DescribeClientQuotasRequest.ComponentData
    return DescribeClientQuotasRequest(strict=strict, components=[
        component(entity_type=t, match_type=m, match=s) for t, m, s in components])


def _described(response) -> dict:
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


def test_kafka_pythons_quota_requests_set_describe_and_remove(server, kafka_python):
    """ClientQuotasRequestTest.testAlterClientQuotasRequest, through kafka-python's encoding of the messages."""
    response = kafka_python(_alter({"user": "alice"}, {"producer_byte_rate": 1024.0, "request_percentage": 12.5}))
    assert [(e.error_code, e.error_message) for e in response.entries] == [(0, None)]
    assert _described(kafka_python(_describe(("user", 0, "alice")))) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5}}
    kafka_python(_alter({"user": "alice"}, {"producer_byte_rate": None}))
    assert _described(kafka_python(_describe())) == {(("user", "alice"),): {"request_percentage": 12.5}}
    assert server.store.describe_client_quotas(context=ADMIN) == {ALICE: {"request_percentage": 12.5}}


def test_kafka_pythons_default_entity_and_errors(server, kafka_python):
    """A null name is the default entity; a bad value is INVALID_REQUEST per entity; an unknown filter type
    is UNSUPPORTED_VERSION at the top (testClientQuotasUnsupportedEntityTypes)."""
    kafka_python(_alter({"user": None, "client-id": "app"}, {"consumer_byte_rate": 5000.0}))
    assert _described(kafka_python(_describe(("user", 1, None), ("client-id", 2, None), strict=True))) == {
        (("user", None), ("client-id", "app")): {"consumer_byte_rate": 5000.0}}
    bad = kafka_python(_alter({"user": "bob"}, {"producer_byte_rate": 10000.5}))
    assert [e.error_code for e in bad.entries] == [ErrorCode.INVALID_REQUEST]
    unsupported = kafka_python(_describe(("group", 2, None)))
    assert unsupported.error_code == ErrorCode.UNSUPPORTED_VERSION and unsupported.entries is None


def test_remote_admin_answers_as_the_store(server):
    with remote_admin(server, "SASL_SSL", "admin") as admin:
        results = admin.alter_client_quotas([
            ClientQuotaAlteration({"user": "alice", "client-id": None}, (ClientQuotaOp("consumer_byte_rate", 2048),)),
            ClientQuotaAlteration({"ip": "10.0.0.1"}, (ClientQuotaOp("connection_creation_rate", 0.5),))])
        assert [r.code for r in results.values()] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST]
        validated = admin.alter_client_quotas(
            [ClientQuotaAlteration({"user": "zed"}, (ClientQuotaOp("producer_byte_rate", 1),))], validate_only=True)
        assert list(validated.values()) == [ApiError()]
        everything = admin.describe_client_quotas()
        assert everything == server.store.describe_client_quotas(context=ADMIN) == {
            ClientQuotaEntity.of({"user": "alice", "client-id": None}): {"consumer_byte_rate": 2048.0}}
        with pytest.raises(UnsupportedVersionException):
            admin.describe_client_quotas(ClientQuotaFilter((ClientQuotaFilterComponent.of_entity_type("group"),)))


def test_a_requester_without_cluster_config_rights_is_refused(server):
    """CLUSTER_AUTHORIZATION_FAILED on every entity (alter) and at the top (describe); nothing is written."""
    end = server.log_end()
    with remote_admin(server, "SASL_SSL", "bob") as admin:
        with pytest.raises(ClusterAuthorizationException):
            admin.alter_client_quotas([ClientQuotaAlteration({"user": "bob"}, (ClientQuotaOp("producer_byte_rate", 1),))])
        with pytest.raises(ClusterAuthorizationException):
            admin.describe_client_quotas()
    assert server.log_end() == end


@pytest.mark.parametrize("version", [0, 1])
def test_both_versions_round_trip_through_the_handlers(server, version):
    """v0 (non-flexible) and v1 (flexible) of both APIs: encoded, decoded and answered alike (RawClient, kio)."""
    with RawClient.connect(server, "SASL_SSL") as raw:
        raw.sasl_login("admin", "admin-secret")
        altered = raw.request(build(request_class(ApiKey.ALTER_CLIENT_QUOTAS, version), validate_only=False, entries=[
            {"entity": [{"entity_type": "client-id", "entity_name": None}],
             "ops": [{"key": "consumer_byte_rate", "value": 4096.0, "remove": False}]}]))
        assert [int(e.error_code) for e in altered.entries] == [0]
        described = raw.request(build(request_class(ApiKey.DESCRIBE_CLIENT_QUOTAS, version), strict=True,
                                      components=[{"entity_type": "client-id", "match_type": 1, "match": None}]))
    assert [(tuple((d.entity_type, d.entity_name) for d in e.entity), {v.key: v.value for v in e.values})
            for e in described.entries] == [((("client-id", None),), {"consumer_byte_rate": 4096.0})]
