"""``secmeta serve --processes N``: serving processes share the listeners, the writer answers writes (issue 24, item 3).

Each serving process answers logins and reads from its own image following the log; a write is answered once
every process has applied it, so a read through any other process right after sees it; failed logins are
counted once and connections admitted by one table, the writer's, so N processes give a guesser no more tries
and a flood no more connections than one; a process that dies or gets stuck is restarted.  The test routes new connections to one process at a time
(``route_new_connections_to``) so that a write and the read after it land on different processes.
Clients: confluent-kafka AdminClients and raw kio frames over real TCP.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from secmeta.core import AclBindingFilter as SecmetaFilter
from secmeta.core import ResourceType as SecmetaResourceType
from secmeta.core import SecurityStore, StoreConfig
from secmeta.core.server.config import ServerConfig
from secmeta.core.wire.codec import build, request_class
from secmeta.events.keyring import Keyring
from tests.core.server.test_server_login_limits import _failure_answered_within
from tests.serverkit import ADMIN as STORE_ADMIN
from tests.serverkit import ADMIN_PASSWORD, TOKEN_SECRET, RawClient, add_user, running_server

pytestmark = pytest.mark.server

LISTENER = "SASL_PLAINTEXT"
#: Failures slowed after a burst of 2 (refilled slowly), answered at once before; a stuck process is given 3 s;
#: 3 connections before login per address, given a minute to log in (only an eviction closes one sooner).
CONFIG = ServerConfig(failed_authentication_delay_ms=0, failed_authentications_burst=2,
                      failed_authentications_per_second=0.05, process_apply_timeout_ms=3000,
                      max_connections_before_login_per_ip=3, login_timeout_ms=60_000)
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    store_config = StoreConfig(token_secret=TOKEN_SECRET, allow_plaintext_passwords=True)   # SASL_PLAINTEXT
    with running_server(tmp_path_factory.mktemp("processes"), f"{LISTENER}://127.0.0.1:0", config=CONFIG,
                        store_config=store_config, processes=2) as running:
        yield running


def _route(server, index: int | None) -> None:
    server.thread.call(server.thread.server.route_new_connections_to(index))


def _raw_on(server, index: int, user: str = "admin", password: str = ADMIN_PASSWORD) -> RawClient:
    """A logged-in raw connection accepted by serving process ``index``."""
    _route(server, index)
    try:
        raw = RawClient.connect(server, LISTENER)
        assert raw.sasl_login(user, password).error_code == 0   # answered: process ``index`` has accepted it
    finally:
        _route(server, None)
    return raw


def _admin_on(server, index: int) -> AdminClient:
    """A confluent-kafka AdminClient whose connections were all made to serving process ``index``."""
    _route(server, index)
    try:
        admin = AdminClient(server.confluent_config(LISTENER))
        admin.describe_cluster(request_timeout=10).result(timeout=20)   # bootstrap and controller connected
        admin.describe_acls(_topic_filter("none"), request_timeout=10).result(timeout=20)
    finally:
        _route(server, None)
    return admin


def _topic_filter(name: str) -> AclBindingFilter:
    return AclBindingFilter(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, None, None,
                            AclOperation.ANY, AclPermissionType.ANY)


def _create(admin: AdminClient, topic: str) -> None:
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:bob", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding], request_timeout=10).values():
        assert future.result(timeout=20) is None


def _raw_describe(raw: RawClient, topic: str) -> list[str]:
    response = raw.request(build(request_class(29, 3), resource_type_filter=2, resource_name_filter=topic,
                                 pattern_type_filter=3, principal_filter=None, host_filter=None,
                                 operation=1, permission_type=1))
    assert response.error_code == 0
    return [resource.resource_name for resource in response.resources]


def test_a_write_through_one_process_is_read_at_once_through_the_other(server):
    """An ACL created through a connection served by one process is in the very next DescribeAcls through a
    connection served by the other, both ways, every time (a follower polling the log alone would lag)."""
    admins = [_admin_on(server, 0), _admin_on(server, 1)]
    raws = [_raw_on(server, 0), _raw_on(server, 1)]
    try:
        for n in range(6):
            writer = n % 2
            topic = f"ryw-{n}"
            _create(admins[writer], topic)
            assert _raw_describe(raws[1 - writer], topic) == [topic]
            seen = admins[1 - writer].describe_acls(_topic_filter(topic), request_timeout=10).result(timeout=20)
            assert [b.name for b in seen] == [topic]
    finally:
        for raw in raws:
            raw.close()


def test_a_password_set_through_one_process_logs_in_at_once_through_the_other(server):
    """A SCRAM credential altered through process 0 logs in on a connection process 1 accepted before the write."""
    admin = _admin_on(server, 0)
    _route(server, 1)
    try:
        waiting = RawClient.connect(server, LISTENER)
        assert waiting.api_versions().error_code == 0          # accepted by process 1
    finally:
        _route(server, None)
    with waiting:
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        upsert = UserScramCredentialUpsertion("erin", info, b"erin-secret", b"0123456789abcdef")
        for future in admin.alter_user_scram_credentials([upsert], request_timeout=10).values():
            assert future.result(timeout=20) is None
        assert waiting.sasl_login("erin", "erin-secret").error_code == 0


def test_a_guesser_gets_no_more_tries_from_two_processes_than_from_one(server):
    """The failure buckets are the writer's: with a burst of 2, a guesser spreading wrong passwords over both
    processes has its third failure held (not answered within a second) just as one process would hold it,
    not answered at once as a second, separate bucket would have it."""
    source = "127.0.9.1"
    for index in (0, 1):
        _route(server, index)
        try:
            assert _failure_answered_within(server, "frank", source, 2.0)
        finally:
            _route(server, None)
    _route(server, 0)
    try:
        assert not _failure_answered_within(server, "frank", source, 1.0)
    finally:
        _route(server, None)


@pytest.mark.slow  # restarts two serving processes, one after a 3 s timeout
def test_a_dead_process_is_restarted_and_a_stuck_one_cannot_serve_a_stale_read(server, caplog):
    """A killed serving process is logged and replaced; a stopped (stuck) one holds a write's answer only
    until process_apply_timeout_ms, then is killed and replaced, and the write is answered and seen."""
    caplog.set_level(logging.INFO, logger="secmeta.server")
    processes = server.thread.server
    first = processes.pids[1]
    os.kill(first, signal.SIGKILL)
    new = _wait_for_pid(processes, 1, first)
    assert any(f"pid {first}) exited" in r.getMessage() and "restarting" in r.getMessage() for r in caplog.records)
    admin = _admin_on(server, 0)
    os.kill(new, signal.SIGSTOP)
    try:
        _create(admin, "while-stuck")                          # answered once the stuck process is killed
    finally:
        if _alive(new):
            os.kill(new, signal.SIGCONT)
    assert any(f"pid {new}) did not apply offset" in r.getMessage() for r in caplog.records)
    replaced = _wait_for_pid(processes, 1, new)
    with _raw_on(server, 1) as raw:
        assert processes.pids[1] == replaced
        assert _raw_describe(raw, "while-stuck") == ["while-stuck"]


@pytest.mark.slow  # its own writer and two serving processes, stopped by the test
def test_stopping_answers_a_write_in_flight(serve):
    """SIGTERM (stop) while a write is being committed: the serving processes keep following while they drain,
    so the write is applied everywhere and its client gets its answer before they stop."""
    running = serve(f"{LISTENER}://127.0.0.1:0", config=CONFIG, processes=2)
    store, entered, release = running.store, threading.Event(), threading.Event()
    real = store.create_acls

    def slow_create_acls(*args, **kwargs):
        entered.set()
        release.wait(30)
        return real(*args, **kwargs)

    store.create_acls = slow_create_acls
    admin = AdminClient(running.confluent_config(LISTENER))
    binding = AclBinding(ResourceType.TOPIC, "in-flight", ResourcePatternType.LITERAL, "User:bob", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    future = next(iter(admin.create_acls([binding], request_timeout=30).values()))
    assert entered.wait(30)
    stopping = threading.Thread(target=running.thread.stop)
    stopping.start()
    try:
        processes = running.thread.server
        deadline = time.monotonic() + 30
        while not all(processes.draining(i) for i in (0, 1)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert all(processes.draining(i) for i in (0, 1))     # both stopped accepting and are finishing
        release.set()
        assert future.result(timeout=30) is None
    finally:
        release.set()
        stopping.join(60)
    assert [b.pattern.name for b in store.describe_acls(SecmetaFilter.of(SecmetaResourceType.TOPIC, "in-flight"),
                                                        context=STORE_ADMIN)] == ["in-flight"]


def _wait_for_pid(processes, index: int, old: int, seconds: float = 60) -> int:
    """The pid of serving process ``index`` once it is no longer ``old`` and serves again."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pid = processes.pids[index]
        if pid not in (None, old) and processes.serving(index):
            return pid
        time.sleep(0.05)
    raise AssertionError(f"serving process {index} was not restarted within {seconds} s")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- the connection caps are the writer's ----------------------------------------------------------------

def test_a_flood_spread_over_the_processes_is_held_to_one_cap(server):
    """Connections before login from one address are capped across processes as in one: with a cap of 3, a
    fourth half-open connection accepted by process 1 evicts the oldest, held by process 0 (separate tables
    would let each process hold 3)."""
    source = "127.0.8.1"
    held = []
    try:
        for index in (0, 1, 1, 1):
            _route(server, index)
            raw = RawClient.connect(server, LISTENER, source=source)
            held.append(raw)
            assert raw.api_versions().error_code == 0       # accepted (by ``index``), not logged in
        _route(server, None)
        assert held[0].closed_by_server()
        for raw in held[1:]:
            assert raw.sasl_login("admin", ADMIN_PASSWORD).error_code == 0
    finally:
        _route(server, None)
        for raw in held:
            raw.close()


# -- the command ----------------------------------------------------------------------------------------

@pytest.mark.slow  # a writer and two serving processes start
def test_secmeta_serve_processes_prints_its_listener_serves_and_stops_on_sigterm(tmp_path):
    """`secmeta serve --processes 2` prints the same listening line, serves logins, and on SIGTERM stops its
    serving processes and exits 0; beside another writer of the store it exits non-zero, serving nothing."""
    keys = tmp_path / "keys.json"
    Keyring.generate_file(keys)
    store_dir = tmp_path / "store"
    with SecurityStore.open(store_dir, StoreConfig(), keyring=Keyring.from_file(keys)) as store:
        add_user(store, "admin", ADMIN_PASSWORD)
    command = [sys.executable, "-m", "secmeta.core.cli", "serve", "--store", str(store_dir), "--key-file", str(keys),
               "--listeners", f"{LISTENER}://127.0.0.1:0", "--processes", "2"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith(f"listening on {LISTENER}://127.0.0.1:"), (line, proc.stderr.read())
        children = _children(proc.pid)
        assert len(children) == 2
        with RawClient.connect(("127.0.0.1", int(line.rsplit(":", 1)[1]))) as raw:
            assert raw.sasl_login("admin", ADMIN_PASSWORD).error_code == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert not any(_alive(pid) for pid in children)
    finally:
        if proc.poll() is None:
            proc.kill()
    with SecurityStore.open(store_dir, StoreConfig(), keyring=Keyring.from_file(keys)):
        refused = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    assert refused.returncode != 0 and "listening" not in refused.stdout
    assert "already open for writing" in refused.stderr


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()]
