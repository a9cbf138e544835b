"""`secmeta serve` in replicated mode as users run it: a writer node that Kafka's AdminClient writes through, a
node made with `secmeta init --join` that follows as a standby in its own process, and their local logs the
same bytes (issue 25 items 1, 2 and 6) against a real Kafka-compatible broker (Tansu)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from secmeta.core import SecurityStore, StoreConfig
from secmeta.events.keyring import Keyring
from tests.clikit import run
from tests.serverkit import ADMIN_PASSWORD, add_user

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.server


def _first_node(tmp_path: Path) -> tuple[Path, Path, Path, str]:
    """A keyring, node 1's store (with the admin user), node 2's directory to be, and the store's log topic."""
    keys = tmp_path / "keys.json"
    Keyring.generate_file(keys)
    node1, node2 = tmp_path / "node1", tmp_path / "node2"
    with SecurityStore.open(node1, StoreConfig(), keyring=Keyring.load(keys)) as store:
        add_user(store, "admin", ADMIN_PASSWORD)
        topic = f"__secmeta_log.{store.log.store.store_id}"
    return keys, node1, node2, topic


def _serve(store: Path, keys: Path, bootstrap: str, *extra: str,
           listeners: str = "SASL_PLAINTEXT://127.0.0.1:0") -> tuple[Any, ...]:
    """`secmeta serve` in replicated mode (on one SASL_PLAINTEXT port unless ``listeners`` says otherwise); the
    process and the port of each listener."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "secmeta.core.cli", "serve", "--store", str(store), "--key-file", str(keys),
         "--listeners", listeners, "--processes", "1", "--replication-bootstrap-server", bootstrap,
         "--replication-factor", "1", "--min-insync-replicas", "1",
         "--controller-lease-ms", "10000", *extra],   # about writes, not failover: no loaded pause outlasts it
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    ports = []
    for _listener in listeners.split(","):
        line = proc.stdout.readline().strip()
        if not line.startswith("listening on"):
            proc.kill()
            raise AssertionError(f"serve did not start: {line!r} {proc.stderr.read()[-3000:]}")
        ports.append(int(line.rsplit(":", 1)[1]))
    if "--standby" not in extra:   # a node in the controllers' election: wait until it is elected and writes
        while "is the active controller" not in (log := proc.stderr.readline()):
            if not log:
                raise AssertionError("serve stopped before it was elected")
    return (proc, *ports)


def _stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.stderr.read()


def _admin(port: int) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin", "sasl.password": ADMIN_PASSWORD})


def _create_acl(admin: AdminClient, topic: str) -> None:
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding], request_timeout=15).values():
        future.result()


def _topics_with_acls(admin: AdminClient) -> set[str]:
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    return {b.name for b in admin.describe_acls(everything, request_timeout=15).result()}


def _log_bytes(store: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((store / "log").glob("*.log")))


def test_a_writer_and_a_joined_standby_keep_bit_identical_logs(tmp_path, tansu_bootstrap, capsys, monkeypatch):
    """AdminClient writes through the writer; `init --join` makes node 2 from the topic; node 2 follows in its
    own process; both local logs hold the same bytes."""
    keys, node1, node2, topic = _first_node(tmp_path)
    writer, port = _serve(node1, keys, tansu_bootstrap, "--node-id", "1")
    standby = None
    admin = _admin(port)
    try:
        _create_acl(admin, "before-join")
        code, out, err = run(capsys, "init", "--store", str(node2), "--key-file", str(keys),
                             "--join", tansu_bootstrap, "--replication-topic", topic)
        assert code == 0, err
        assert "verified" in out and _log_bytes(node2) == _log_bytes(node1)
        standby, standby_port = _serve(node2, keys, tansu_bootstrap, "--node-id", "2", "--standby",
                                       "--replication-topic", topic)
        _create_acl(admin, "after-join")
        deadline = time.monotonic() + 30  # the standby applies what the writer committed
        while _log_bytes(node2) != _log_bytes(node1) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _log_bytes(node2) == _log_bytes(node1)
        reader = _admin(standby_port)  # the standby answers reads with what it appended
        while "after-join" not in _topics_with_acls(reader) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _topics_with_acls(reader) == {"before-join", "after-join"}
        del reader
    finally:
        del admin  # before its server stops: a client destroyed after waits for the dead connection
        errors = _stop(writer)
        if standby is not None:
            errors += _stop(standby)
    assert writer.returncode == 0 and (standby is None or standby.returncode == 0), errors


def test_a_standby_names_the_active_controller_and_answers_writes_not_controller(tmp_path, tansu_bootstrap, capsys):
    """A `--standby` node takes no part in the election but reads its announcements: its Metadata names the
    active node as the controller (so an AdminClient bootstrapped at the standby writes through the active
    one), and a write sent to the standby itself is answered NOT_CONTROLLER naming the active node, with
    nothing written."""
    from secmeta.core.errors import ErrorCode
    from secmeta.core.wire import convert
    from secmeta.core.wire.codec import build, decode_response, request_class
    from secmeta.events.types import AclBinding as Binding
    from secmeta.events.types import AclOperation as Op
    from secmeta.events.types import AclPermissionType as Permission
    from secmeta.events.types import PatternType
    from secmeta.events.types import ResourceType as Resource
    from tests.serverkit import RawClient

    keys, node1, node2, topic = _first_node(tmp_path)
    writer, writer_port = _serve(node1, keys, tansu_bootstrap, "--node-id", "1")
    standby = None
    try:
        code, _out, err = run(capsys, "init", "--store", str(node2), "--key-file", str(keys),
                              "--join", tansu_bootstrap, "--replication-topic", topic)
        assert code == 0, err
        standby, port, plain_port = _serve(node2, keys, tansu_bootstrap, "--node-id", "2", "--standby",
                                           "--replication-topic", topic,
                                           listeners="SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0")
        admin = _admin(port)
        metadata = admin.list_topics(timeout=10)   # the standby read the announcements before it listened
        assert metadata.controller_id == 1 and metadata.brokers[1].port == writer_port
        _create_acl(admin, "through-the-standby")   # sent to the controller Metadata names
        deadline = time.monotonic() + 30  # the standby applies it from the topic
        while (before := _log_bytes(node2)) != _log_bytes(node1) and time.monotonic() < deadline:
            time.sleep(0.05)
        with RawClient.connect(("127.0.0.1", plain_port)) as raw:
            read = Binding.of(Resource.TOPIC, "at-the-standby", PatternType.LITERAL, "User:alice", "*", Op.READ,
                              Permission.ALLOW)
            raw.send(build(request_class(30, 3), creations=[convert.acl_creation_fields(read)]))
            result = decode_response(30, 3, raw.read_frame())[1].results[0]
        assert int(result.error_code) == ErrorCode.NOT_CONTROLLER
        assert result.error_message == "node 2 is not the active controller (the active controller is node 1)"
        assert _log_bytes(node2) == before == _log_bytes(node1)
        assert _topics_with_acls(_admin(writer_port)) == {"through-the-standby"}
        del admin
    finally:
        errors = _stop(writer)
        if standby is not None:
            errors += _stop(standby)
    assert writer.returncode == 0 and (standby is None or standby.returncode == 0), errors


def test_a_lease_out_of_range_is_refused_naming_the_option_before_kafka_is_reached(tmp_path, capsys):
    """`--controller-lease-ms` below 300 ms would make a loaded node lose its role between two heartbeats: refused,
    naming the option, before the node reaches Kafka (the bootstrap here is nobody's)."""
    keys, node1, _node2, _topic = _first_node(tmp_path)
    code, _out, err = run(capsys, "serve", "--store", str(node1), "--key-file", str(keys), "--listeners",
                          "PLAINTEXT://127.0.0.1:0", "--replication-bootstrap-server", "127.0.0.1:1",
                          "--controller-lease-ms", "100")
    assert code != 0 and "--controller-lease-ms" in err and "not 100" in err
