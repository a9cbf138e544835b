"""Replicated mode's roles at the server (issue 25, item 4): a standby serves reads and logins, answers
every write NOT_CONTROLLER (41) with nothing written, and Metadata names the active controller among
every node announced, so librdkafka's admin calls bootstrapped at a standby reach the active one.

Two real ``secmeta serve`` nodes over TCP, each on its own store; their Controllerships are set as an
election would set them (the election itself is tested against Kafka in tests/consumers/replication).
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AclBinding as KafkaAclBinding
from confluent_kafka.admin import AclOperation as KafkaOp
from confluent_kafka.admin import AclPermissionType as KafkaPerm
from confluent_kafka.admin import AdminClient, ResourcePatternType
from confluent_kafka.admin import ResourceType as KafkaRes

from secmeta.core import StoreConfig
from secmeta.core.errors import ErrorCode, InvalidValueError
from secmeta.core.server.config import ServerConfig
from secmeta.core.server.controllership import Controllership, NodeAddress
from secmeta.core.wire import convert
from secmeta.core.wire.codec import build, decode_response, request_class
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.serverkit import ADMIN, TOKEN_SECRET, RawClient, running_server

READ = AclBinding.of(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                     AclOperation.READ, AclPermissionType.ALLOW)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """Node 1 (active) and node 2 (standby), each knowing the other's address as announced."""
    base = tmp_path_factory.mktemp("controllership")
    one, two = Controllership(1), Controllership(2)
    # PLAINTEXT clients are User:ANONYMOUS: a super user here, so only the node's role decides
    config = StoreConfig(token_secret=TOKEN_SECRET, super_users=frozenset({"User:admin", "User:ANONYMOUS"}))
    with running_server(base / "n1", cluster=one, store_config=config) as active, \
            running_server(base / "n2", cluster=two, store_config=config, config=ServerConfig(node_id=2)) as standby:
        one.become_active()
        addresses = {1: active.addresses["PLAINTEXT"], 2: standby.addresses["PLAINTEXT"]}
        for cluster in (one, two):
            for node_id, (host, port) in addresses.items():
                cluster.observe(NodeAddress(node_id, host, port), active=node_id == 1)
        yield active, standby, one, two


def _raw(server, api_key: int, version: int, **fields):
    with RawClient.connect(server) as raw:
        raw.send(build(request_class(api_key, version), **fields))
        return decode_response(api_key, version, raw.read_frame())[1]


def test_every_write_api_on_a_standby_is_not_controller_and_writes_nothing(nodes):
    """CreateAcls, DeleteAcls, AlterUserScramCredentials, CreateDelegationToken and AlterClientQuotas sent to
    the standby answer 41 with the message naming the active node; the standby's log does not move."""
    _active, standby, _one, _two = nodes
    before = standby.log_end()
    created = _raw(standby, 30, 3, creations=[convert.acl_creation_fields(READ)])
    deleted = _raw(standby, 31, 3, filters=[convert.filter_fields(AclBindingFilter.any())])
    upsert = convert.alter_request_fields([])
    upsert["deletions"] = [{"name": "alice", "mechanism": 1}]
    altered = _raw(standby, 51, 0, **upsert)
    token = _raw(standby, 38, 3, **convert.create_token_request_fields(None, [], -1))
    quotas = _raw(standby, 49, 1, entries=[{"entity": [{"entity_type": "user", "entity_name": "alice"}],
                                             "ops": [{"key": "producer_byte_rate", "value": 1024.0,
                                                      "remove": False}]}], validate_only=False)
    codes = [int(created.results[0].error_code), int(deleted.filter_results[0].error_code),
             int(altered.results[0].error_code), int(token.error_code), int(quotas.entries[0].error_code)]
    assert codes == [ErrorCode.NOT_CONTROLLER] * 5
    assert created.results[0].error_message == "node 2 is not the active controller (the active controller is node 1)"
    assert standby.log_end() == before


def test_a_standby_serves_reads(nodes):
    """DescribeAcls on the standby answers from its own image (here: the ACL its store holds)."""
    _active, standby, _one, _two = nodes
    standby.store.create_acls([READ], context=ADMIN)   # as the follower would have applied it
    described = _raw(standby, 29, 3, **convert.filter_fields(AclBindingFilter.any()))
    assert int(described.error_code) == 0
    assert convert.bindings_from_resources(described.resources) == [READ]


def test_metadata_names_the_active_controller_and_every_node(nodes):
    """Metadata from either node lists both nodes at their addresses and names node 1 the controller;
    DescribeCluster agrees."""
    active, standby, _one, _two = nodes
    for server in (active, standby):
        metadata = _raw(server, 3, 12, topics=None, allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False)
        assert metadata.controller_id == 1
        assert sorted((b.node_id, b.host, b.port) for b in metadata.brokers) == [
            (1, *active.addresses["PLAINTEXT"]), (2, *standby.addresses["PLAINTEXT"])]
        cluster = _raw(server, 60, 0, include_cluster_authorized_operations=False)
        assert cluster.controller_id == 1 and len(cluster.brokers) == 2


def test_admin_client_bootstrapped_at_a_standby_writes_through_the_active(nodes):
    """confluent-kafka's AdminClient given only the standby's address creates an ACL: librdkafka
    sends CreateAcls to the controller Metadata names, and only the active node's store has it."""
    active, standby, _one, _two = nodes
    admin = AdminClient(standby.confluent_config("PLAINTEXT"))
    binding = KafkaAclBinding(KafkaRes.TOPIC, "routed", ResourcePatternType.LITERAL, "User:bob", "*",
                              KafkaOp.WRITE, KafkaPerm.ALLOW)
    for future in admin.create_acls([binding], request_timeout=15).values():
        future.result()
    routed = AclBindingFilter.of(ResourceType.TOPIC, "routed", PatternType.LITERAL)
    assert len(active.store.describe_acls(routed, context=ADMIN)) == 1
    assert standby.store.describe_acls(routed, context=ADMIN) == []


def test_no_controller_known_is_minus_one_and_a_node_stepping_down_refuses_at_once():
    """A node that steps down answers NOT_CONTROLLER from its next request and no longer names itself;
    while nobody is known active, Metadata's controller_id is -1 (Kafka's NO_CONTROLLER_ID)."""
    cluster = Controllership(3)
    cluster.become_active()
    assert cluster.accepts_writes and cluster.active_id == 3
    cluster.step_down("node 4 holds the lease (term 2)")
    assert not cluster.accepts_writes and cluster.active_id is None
    cluster.observe(NodeAddress(4, "h", 1), active=True)
    assert cluster.active_id == 4
    cluster.observe(NodeAddress(4, "h", 1), active=False)
    assert cluster.active_id is None and set(cluster.nodes) == {4}
    cluster.observe(NodeAddress(3, "h", 2), active=True)   # an echo of its own old announcement
    assert not cluster.accepts_writes and cluster.active_id is None


def test_a_node_that_steps_down_names_the_node_that_claimed_the_role_meanwhile():
    """A node resumed after SIGSTOP still thinks it is active when it reads the newer active node's
    announcement (made once, while it was stopped); when it then steps down it names that node, not -1
    for ever. A claim withdrawn meanwhile (that node announced standby, or left) is not named."""
    resumed = Controllership(1)
    resumed.become_active()
    resumed.observe(NodeAddress(2, "h", 2), active=True)
    assert resumed.accepts_writes and resumed.active_id == 1   # its own role is decided by its election
    resumed.step_down("its lease lapsed")
    assert not resumed.accepts_writes and resumed.active_id == 2

    withdrawn = Controllership(1)
    withdrawn.become_active()
    withdrawn.observe(NodeAddress(2, "h", 2), active=True)
    withdrawn.observe(NodeAddress(2, "h", 2), active=False)
    withdrawn.step_down("node 2 holds the lease (term 2)")
    assert withdrawn.active_id is None


def test_the_new_controller_listeners_hear_of_a_move_only_not_of_the_same_controller_coming_back():
    """Idle client connections are closed when the controller moves; node 2's lease lapsing (no controller known for
    a moment) and node 2 announcing active again is no move, so nobody is told; another node taking over is."""
    cluster = Controllership(1)
    told: list[int] = []
    cluster.on_new_controller(told.append)
    cluster.observe(NodeAddress(2, "h", 2), active=True)
    cluster.observe(NodeAddress(2, "h", 2), active=False)     # its lease lapsed: no controller known
    assert cluster.active_id is None
    cluster.observe(NodeAddress(2, "h", 2), active=True)      # it renewed: the same controller
    cluster.observe(NodeAddress(2, "h", 2), active=True)
    assert told == [2]
    cluster.observe(NodeAddress(2, "h", 2), active=None)      # it left
    cluster.observe(NodeAddress(3, "h", 3), active=True)
    cluster.become_active()
    cluster.step_down("node 3 holds the lease (term 4)")     # node 3's claim stands: named again, after node 1
    assert told == [2, 3, 1, 3]


def test_a_server_refuses_a_controllership_of_another_node(tmp_path):
    """The server's node id and its Controllership's must agree, else the start fails naming both."""
    with pytest.raises(InvalidValueError, match="node id 1 .* node 2"):
        with running_server(tmp_path, cluster=Controllership(2)):
            pass


def test_an_admin_client_finds_a_new_controller_at_once_when_the_old_one_dies(tmp_path):
    """The active node dies; another becomes active: it closes its idle client connections, so librdkafka connects
    again and, connecting, refreshes its metadata, naming the new controller. Without that, an AdminClient with no
    topics keeps the dead controller until its periodic broker refresh (every 10 s) and a write sent meanwhile
    waits past its 5 s timeout."""
    import contextlib

    one, two = Controllership(1), Controllership(2)
    config = StoreConfig(token_secret=TOKEN_SECRET, super_users=frozenset({"User:admin", "User:ANONYMOUS"}))
    with contextlib.ExitStack() as stack, \
            running_server(tmp_path / "n2", cluster=two, store_config=config, config=ServerConfig(node_id=2)) as standby:
        active = stack.enter_context(running_server(tmp_path / "n1", cluster=one, store_config=config))
        one.become_active()
        addresses = {1: active.addresses["PLAINTEXT"], 2: standby.addresses["PLAINTEXT"]}
        for node_id, (host, port) in addresses.items():
            two.observe(NodeAddress(node_id, host, port), active=node_id == 1)
        servers = ",".join(f"{host}:{port}" for host, port in addresses.values())
        admin = AdminClient({"bootstrap.servers": servers, "reconnect.backoff.max.ms": 200})

        def create(name: str) -> None:
            binding = KafkaAclBinding(KafkaRes.TOPIC, name, ResourcePatternType.LITERAL, "User:bob", "*",
                                      KafkaOp.WRITE, KafkaPerm.ALLOW)
            for future in admin.create_acls([binding], request_timeout=5).values():
                future.result()

        create("before")
        assert admin.list_topics(timeout=5).controller_id == 1   # the client knows node 2 too, and node 1 active
        stack.close()                                            # node 1 dies
        assert admin.list_topics(timeout=5).controller_id == 1   # node 2 answers: not elected yet
        two.become_active()                                      # node 2 is elected (it names itself)
        create("after")
        routed = AclBindingFilter.of(ResourceType.TOPIC, "after", PatternType.LITERAL)
        assert len(standby.store.describe_acls(routed, context=ADMIN)) == 1


def test_a_node_cut_off_from_kafka_closes_every_connection_and_refuses_new_ones_until_it_reaches_kafka_again(tmp_path):
    """Cut off from the commit point, a node's image may be arbitrarily stale and it cannot name the controller:
    it closes every client connection (even one in the middle of its session) and refuses new ones, so clients
    go to the other nodes; once it reaches Kafka again it serves as before."""
    cluster = Controllership(1)
    with running_server(tmp_path, cluster=cluster) as node:
        cluster.become_active()
        with RawClient.connect(node) as before:
            assert _metadata_controller(before) == 1
            cluster.set_cut_off("none of its heartbeats came back from Kafka within 3000 ms")
            assert before.closed_by_server()
        with RawClient.connect(node) as during:
            assert during.closed_by_server()
        cluster.set_cut_off(None)
        with RawClient.connect(node) as after:
            assert _metadata_controller(after) == 1


def _metadata_controller(raw: RawClient) -> int:
    raw.send(build(request_class(3, 12), topics=None, allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False))
    return decode_response(3, 12, raw.read_frame())[1].controller_id
