"""A write whose right check fails with something other than a refusal (a bug, not an ApiException) is answered
UNKNOWN_SERVER_ERROR and logged once: the early check before the write queues (``Handler.refused``) leaves the
failure to the write's own path, which runs the same check under the store's lock and logs what fails there."""

from __future__ import annotations

import logging

from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest

from secmeta.core.errors import ErrorCode
from tests.serverkit import RawClient


def test_a_write_whose_right_check_fails_unexpectedly_is_logged_once(serve, monkeypatch, caplog):
    server = serve()

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(server.store, "require_write_right", broken)   # the early check fails: not a refusal
    monkeypatch.setattr(server.store, "create_acls", broken)           # and so does the write's own check
    creation = AclCreation(resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
                           operation=2, permission_type=3)
    with caplog.at_level(logging.INFO, logger="secmeta.server"), RawClient.connect(server, timeout=30) as client:
        response = client.request(CreateAclsRequest(creations=(creation,)))
    assert [int(r.error_code) for r in response.results] == [ErrorCode.UNKNOWN_SERVER_ERROR]
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(failures) == 1, [r.getMessage() for r in failures]
    assert "CreateAcls" in failures[0].getMessage() and "RuntimeError" in failures[0].getMessage()
