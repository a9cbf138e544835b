"""Review 2 (FAILING ON PURPOSE): a write refused before it queues (``Handler.refused``: a requester without the
write's right, or NOT_CONTROLLER) has its error response built and encoded on the event loop, whatever the request's
size. The connection's own rule (its module docstring; ``_refuse`` for a request sent during SASL) answers a frame
larger than ``ON_LOOP_BYTES`` off the loop: a CreateAcls of N creations is refused with N results, and building them
on the loop holds every other client (400,000 creations, a 3.2 MB frame: ~2.3 s of the loop's CPU, measured in
review; the 100 MiB frame limit allows ~30 times that). Fix: build the refusal of a frame above ON_LOOP_BYTES off the
loop (``_maybe_off_loop``), as ``_refuse`` does, its encoding included."""

from __future__ import annotations

import threading

import pytest
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest

from secmeta.core.server import acl_apis, connection
from secmeta.core.server.connection import ON_LOOP_BYTES
from secmeta.core.wire.codec import build, encode_request, request_class
from tests.serverkit import RawClient

CLUSTER_AUTHORIZATION_FAILED = 31


def _held_build(monkeypatch, refusing: threading.Event, other_answered: threading.Event, waited: list) -> None:
    respond = acl_apis.respond

    def slow_refusal(call, **fields):
        if call.frame.api_key == 30:   # CreateAcls' refusal: let another client be answered meanwhile
            refusing.set()
            waited.append(other_answered.wait(20))
        return respond(call, **fields)

    monkeypatch.setattr(acl_apis, "respond", slow_refusal)


def _held_encode(monkeypatch, refusing: threading.Event, other_answered: threading.Event, waited: list) -> None:
    encode = connection.encode_response

    def slow_encode(correlation_id, response):
        if type(response).__name__ == "CreateAclsResponse":   # the refusal's encoding: as above
            refusing.set()
            waited.append(other_answered.wait(20))
        return encode(correlation_id, response)

    monkeypatch.setattr(connection, "encode_response", slow_encode)


@pytest.mark.parametrize("hold", [_held_build, _held_encode], ids=["built", "encoded"])
def test_a_large_refused_write_does_not_hold_other_clients_while_its_refusal_is_built(serve, monkeypatch, hold):
    """While the refusal of an unauthorized CreateAcls larger than ON_LOOP_BYTES is being built, or encoded,
    another client's ApiVersions is answered (the refusal waits for that answer, up to 20 s: on the loop it cannot
    come)."""
    server = serve()
    refusing, other_answered, waited = threading.Event(), threading.Event(), []
    hold(monkeypatch, refusing, other_answered, waited)
    creation = AclCreation(resource_type=2, resource_name="", resource_pattern_type=3, principal="", host="",
                           operation=2, permission_type=3)
    creations = ON_LOOP_BYTES // 8 + 100    # ~8 bytes a creation at v3: the frame is past ON_LOOP_BYTES
    request = CreateAclsRequest(creations=(creation,) * creations)
    assert len(encode_request(1, None, request)) > ON_LOOP_BYTES
    versions = build(request_class(18, 3), client_software_name="t", client_software_version="1")
    with RawClient.connect(server, timeout=60) as writer, RawClient.connect(server, timeout=60) as other:
        other.request(versions)         # both connections past their first request (a PLAINTEXT login)
        writer.request(versions)
        writer.send(request)            # PLAINTEXT: User:ANONYMOUS, without ALTER on the cluster
        assert refusing.wait(30), "the write was not refused"
        other.request(versions)
        other_answered.set()
        _, response = writer.receive(30, 3)
    assert {r.error_code for r in response.results} == {CLUSTER_AUTHORIZATION_FAILED}
    assert len(response.results) == creations
    assert waited == [True], "the refusal was made on the event loop: no other client was answered meanwhile"
