"""The demo's throwaway CA: a server certificate clients accept for 127.0.0.1 and localhost, keys kept private."""

from __future__ import annotations

import ssl

import pytest

from secmeta.consumers.demo_ca import make_ca
from secmeta.core.server.listeners import ssl_context


def _handshake(ca, server_hostname: str) -> None:
    """A TLS handshake in memory: a client trusting the CA (host name checked) and the server's context."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ssl.create_default_context(cafile=str(ca.ca_cert)).wrap_bio(
        to_client, to_server, server_hostname=server_hostname)
    server = ssl_context(ca.server_ssl()).wrap_bio(to_server, to_client, server_side=True)
    pending = [client, server]
    while pending:
        side = pending.pop(0)
        try:
            side.do_handshake()
        except ssl.SSLWantReadError:
            pending.append(side)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_client_trusting_the_ca_accepts_the_server_at_its_names(tmp_path, host):
    """librdkafka checks the broker's host name: the server certificate is accepted at 127.0.0.1 and localhost."""
    _handshake(make_ca(tmp_path), host)


def test_a_client_refuses_the_server_certificate_for_another_host(tmp_path):
    """The server certificate names only 127.0.0.1 and localhost."""
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        _handshake(make_ca(tmp_path), "example.com")


def test_private_keys_are_readable_by_their_owner_only(tmp_path):
    """The CA's and the server's keys are written with mode 0600."""
    ca = make_ca(tmp_path)
    assert {oct(path.stat().st_mode & 0o777) for path in (ca.ca_key, ca.server_key)} == {"0o600"}
