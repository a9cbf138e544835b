"""Starting, draining and stopping the server: ServerThread in-process and ``secmeta serve`` under SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from secmeta.core import SecurityStore, StoreConfig
from secmeta.core.errors import ClusterAuthorizationException
from secmeta.core.server.cluster_apis import CLUSTER_HANDLERS
from secmeta.core.server.handling import Handler
from secmeta.core.wire.codec import build, request_class
from secmeta.events.keyring import Keyring
from tests.logkit import make_keyring
from tests.serverkit import ADMIN_PASSWORD, RawClient, add_user

REPO = Path(__file__).resolve().parents[3]


def _describe_cluster():
    return build(request_class(60, 2), include_cluster_authorized_operations=False, include_fenced_brokers=False)


def test_stop_drains_the_in_flight_request_and_closes_idle_connections(serve):
    """stop(): the request being handled is answered, then its connection and idle ones are closed."""
    server = serve()
    entered, release = threading.Event(), threading.Event()

    def slow(call):
        entered.set()
        release.wait(10)
        return CLUSTER_HANDLERS[60](call)

    # A handler that blocks: run in a worker thread (on_loop not given).
    server.thread.server.handlers[60] = Handler(slow, CLUSTER_HANDLERS[60].error_response)
    with RawClient.connect(server) as busy, RawClient.connect(server) as idle:
        assert idle.api_versions().error_code == 0
        correlation_id = busy.send(_describe_cluster())
        assert entered.wait(10)
        stopper = threading.Thread(target=server.thread.stop)
        stopper.start()
        assert idle.closed_by_server()
        release.set()
        got, response = busy.receive(60, 2)
        assert (got, response.error_code, response.cluster_id) == (correlation_id, 0, server.cluster_id)
        assert busy.closed_by_server()
        stopper.join(10)
        assert not stopper.is_alive()


def test_a_request_level_api_exception_becomes_the_top_level_error(serve):
    """An ApiException inside DescribeCluster's handler is answered as the response's top-level error code
    and message (DescribeClusterRequest.getErrorResponse)."""
    server = serve()

    def refuse(call):
        raise ClusterAuthorizationException("Cluster authorization failed.")

    server.thread.server.handlers[60] = Handler(refuse, CLUSTER_HANDLERS[60].error_response)
    with RawClient.connect(server) as raw:
        response = raw.request(_describe_cluster())
        assert (response.error_code, response.error_message) == (31, "Cluster authorization failed.")
        assert raw.api_versions().error_code == 0


def test_a_handler_bug_answers_unknown_server_error_and_keeps_the_connection(serve, caplog):
    """An unexpected exception in a handler is UNKNOWN_SERVER_ERROR (Kafka's getErrorResponse), not a hang;
    the log names the API and the exception's type, never its text (which may quote the client), and has
    no traceback unless DEBUG is on."""
    server = serve()
    caplog.set_level(logging.INFO, logger="secmeta.server")

    def broken(call):
        raise RuntimeError("client-controlled text")

    server.thread.server.handlers[60] = Handler(broken, CLUSTER_HANDLERS[60].error_response)
    with RawClient.connect(server) as raw:
        assert raw.request(_describe_cluster()).error_code == -1
        assert raw.api_versions().error_code == 0
    records = [r for r in caplog.records if r.name == "secmeta.server" and r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in records] == ["DescribeCluster v2 from 127.0.0.1 failed: RuntimeError"]
    assert not records[0].exc_info


def test_listener_errors_are_raised_by_start(tmp_path):
    """A TLS listener without a certificate fails before anything binds, naming the missing option."""
    from secmeta.core.server.listeners import ListenerError
    from secmeta.core.server.server import ServerThread

    with SecurityStore.open(tmp_path / "store", StoreConfig(), keyring=make_keyring(tmp_path)) as store:
        with pytest.raises(ListenerError, match="--ssl-cert"):
            ServerThread(store, "SSL://127.0.0.1:0")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_secmeta_serve_drains_on_sigterm_and_the_store_reopens(tmp_path):
    """`secmeta serve` prints its listener, serves, exits 0 on SIGTERM and leaves a store that reopens (with the
    settings logged that its log lacked)."""
    keys = tmp_path / "keys.json"
    Keyring.generate_file(keys)
    store_dir = tmp_path / "store"
    with SecurityStore.open(store_dir, StoreConfig(), keyring=Keyring.from_file(keys)) as store:
        add_user(store, "admin", ADMIN_PASSWORD)
        end = store.log.end_offset
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "secmeta.core.cli", "serve", "--store", str(store_dir), "--key-file", str(keys),
         "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "--processes", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    try:
        lines = [proc.stdout.readline().strip() for _ in range(2)]
        assert lines[0].startswith("listening on PLAINTEXT://127.0.0.1:"), lines
        assert lines[1].startswith("listening on SASL_PLAINTEXT://127.0.0.1:"), lines
        ports = [int(line.rsplit(":", 1)[1]) for line in lines]
        with RawClient.connect(("127.0.0.1", ports[1])) as raw:
            assert raw.sasl_login("admin", ADMIN_PASSWORD).error_code == 0
            assert raw.request(_describe_cluster()).error_code == 0
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
            assert raw.closed_by_server()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert "stopped; store closed" in proc.stderr.read()
    with SecurityStore.open(store_dir, StoreConfig(), keyring=Keyring.from_file(keys)) as store:
        # a store made before settings were logged: serve's first start logs its settings, and nothing else
        added = [e.event_type for e in store.history(start_offset=end)]
        assert added and set(added) == {"SecuritySettingAltered"}
        assert store.settings.super_users == {"User:admin"}


def test_a_port_in_use_is_a_listener_error(tmp_path):
    """Binding a taken port fails start() with the listener named, and nothing keeps running."""
    import socket

    from secmeta.core.server.listeners import ListenerError
    from secmeta.core.server.server import ServerThread

    with socket.socket() as taken, SecurityStore.open(tmp_path / "store", StoreConfig(),
                                                      keyring=make_keyring(tmp_path)) as store:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ListenerError, match=f"cannot listen on PLAINTEXT://127.0.0.1:{port}"):
            ServerThread(store, f"PLAINTEXT://127.0.0.1:{port}").start()
