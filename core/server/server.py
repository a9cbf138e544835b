"""``secmeta serve``: an asyncio server on Kafka's wire protocol in front of one SecurityStore.

The server is the store's only writer; writes and anything else that may block or take
long run in a thread pool (the store blocks on fsync and PBKDF2 and serialises writes
itself), while the event loop moves bytes and answers the cheap, bounded reads
(``secmeta.core.server.connection`` says which).
It is a one-node cluster: node ``config.node_id`` is the broker and the controller, and the
cluster id is the store's id.  ``Server`` runs inside an event loop; ``ServerThread`` runs
one in a background thread for tests, benchmarks and the demo.  The server never closes
the store: whoever opened it does.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from collections.abc import Awaitable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from secmeta.core.errors import InvalidValueError
from secmeta.core.server import event_loop
from secmeta.core.server.admission import Admission, Admitted
from secmeta.core.server.apis import HANDLERS
from secmeta.core.server.auth_failures import FailedAuthLimiter
from secmeta.core.server.call import BrokerInfo
from secmeta.core.server.config import ServerConfig
from secmeta.core.server.connection import Connection, log, peer_of
from secmeta.core.server.controllership import Controllership
from secmeta.core.server.image_answers import ImageAnswers
from secmeta.core.server.inline import ServedProtocol
from secmeta.core.server.listeners import Listener, ListenerError, parse_listeners, ssl_context
from secmeta.core.server.write_bound import WriteBound
from secmeta.events.types import ScramMechanism

__all__ = ["Server", "ServerThread", "cluster_id"]


#: Connections the kernel may queue before they are accepted (asyncio's default is 100): a burst of
#: connections then waits to be accepted, and evicted if need be, rather than having its SYNs dropped
#: (a dropped SYN costs a bystander's connect a one-second retransmission).
LISTEN_BACKLOG = 1024
#: Connections accepted per turn of the event loop (asyncio accepts as many as its backlog argument):
#: a flood is taken in small bites, so the requests of connections already open wait milliseconds,
#: not the half second a thousand accepts in a row would take.
ACCEPT_BATCH = 16


def cluster_id(store: Any) -> str:
    """The cluster id clients see: the store's id (secmeta.json)."""
    return store.log.store.store_id


class Server:
    """Listeners bound to one store; ``start()``, then ``stop()`` drains and closes them."""

    def __init__(self, store: Any, listeners: str | Sequence[Listener], config: ServerConfig | None = None, *,
                 sockets: Mapping[str, Sequence[socket.socket]] | None = None, limiter: Any = None,
                 admission: Any = None, cluster: Controllership | None = None):
        """``sockets``: listening sockets to serve (listener name -> its sockets, bound by the caller and
        shared with other serving processes), else ``start`` binds them; ``limiter`` and ``admission``: the
        failed-login limiter and the connection table to ask (the writer's, shared by every serving
        process, answering asynchronously), else this server's own; ``cluster``: replicated mode's roles
        (who is the active controller), None for this one-node cluster."""
        self.store = store
        self.cluster = cluster   # replicated mode: who is the active controller (None: this one-node cluster)
        self.listeners = parse_listeners(listeners) if isinstance(listeners, str) else tuple(listeners)
        self.config = config or ServerConfig()
        if cluster is not None and cluster.node_id != self.config.node_id:
            raise InvalidValueError(f"the server's node id {self.config.node_id} is not its controllership's "
                                    f"node {cluster.node_id}")
        if cluster is not None:
            cluster.on_new_controller(self._new_controller)
            cluster.on_cut_off(self._cut_off)
        self.handlers: dict[int, Any] = {int(key): h for key, h in HANDLERS.items()}   # by the int key
        self.answers = ImageAnswers()       # reads' answers kept per published image (image_answers.py)
        self.sasl_mechanisms = _sasl_mechanisms(self.config, store)
        for name in self.config.advertised:
            if name not in {listener.name for listener in self.listeners}:
                raise ListenerError(f"advertised listener {name} is not a listener")
        needs_tls = any(listener.protocol.tls for listener in self.listeners)
        self.ssl_context = ssl_context(self.config.ssl) if needs_tls else None
        config = self.config
        self.limiter = limiter if limiter is not None else limiter_of(config)
        self.admission = admission if admission is not None else admission_of(config)
        self.executor: ThreadPoolExecutor | None = None
        self.write_executor: ThreadPoolExecutor | None = None   # writes only (``Connection``): they wait on commits
        self.write_bound = WriteBound(config.write_queue_max, config.write_timeout_ms)   # the writes pending on it
        self.addresses: dict[str, tuple[str, int]] = {}     # listener name -> bound (host, port)
        self.brokers: dict[str, BrokerInfo] = {}            # listener name -> what Metadata advertises
        self._sockets: dict[str, Sequence[socket.socket]] | None = dict(sockets) if sockets is not None else None
        self._own_sockets = sockets is None
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: dict[Connection, asyncio.Task] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False

    def __repr__(self) -> str:
        bound = ", ".join(f"{n}://{h}:{p}" for n, (h, p) in self.addresses.items()) or "not started"
        return f"<Server {bound} connections={len(self._connections)}>"

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        """Bind every listener (port 0: an ephemeral port, see ``addresses``), or take the sockets given."""
        self._loop = asyncio.get_running_loop()
        self.executor = ThreadPoolExecutor(self.config.workers, thread_name_prefix="secmeta-serve")
        self.write_executor = ThreadPoolExecutor(self.config.write_workers, thread_name_prefix="secmeta-write")
        the_cluster = cluster_id(self.store)
        try:
            if self._sockets is None:
                self._sockets = dict(await bind_listeners(self.listeners))
            sockets = self._sockets
            await self.accept(True)
            for listener in self.listeners:
                sockname = sockets[listener.name][0].getsockname()
                self.addresses[listener.name] = (str(sockname[0]), int(sockname[1]))
                host, port = self.config.advertised.get(listener.name, (listener.host, int(sockname[1])))
                if host in ("", "0.0.0.0", "::"):
                    host = await asyncio.get_running_loop().run_in_executor(self.executor, socket.getfqdn)
                self.brokers[listener.name] = BrokerInfo(self.config.node_id, the_cluster, host, port)
        except BaseException:
            await self._close_listeners()
            self._close_own_sockets()
            self.executor.shutdown(wait=False)
            self.write_executor.shutdown(wait=False)
            raise

    async def accept(self, on: bool) -> None:
        """Accept new connections on every listener (``on``), or leave them to the other processes sharing
        the sockets (connections already accepted are served on)."""
        if not on:
            await self._close_listeners()
            return
        if self._servers or self._stopping:
            return
        assert self._sockets is not None
        loop = asyncio.get_running_loop()
        for listener in self.listeners:
            for sock in self._sockets[listener.name]:
                # asyncio owns (and closes) a duplicate: the shared socket stays open for the next accept(True)
                server = await loop.create_server(
                    lambda listener=listener: ServedProtocol(  # type: ignore[misc]
                        loop, lambda r, w, p: self._accepted(listener, r, w, p)),
                    sock=socket.socket(fileno=os.dup(sock.fileno())), backlog=ACCEPT_BATCH)
                sock.listen(LISTEN_BACKLOG)    # asyncio listened again with its accept batch: the queue stays long
                self._servers.append(server)

    def _accepted(self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                  protocol: ServedProtocol) -> None:
        # Called synchronously from connection_made: nothing has been read yet, so a TLS
        # listener can pause reading here and hand the untouched socket to start_tls.
        peer = peer_of(writer)
        if self._stopping or (self.cluster is not None and self.cluster.cut_off is not None):
            writer.transport.abort()    # stopping, or cut off from Kafka (replicated mode): clients try another node
            return
        connection = Connection(self, listener, self.brokers[listener.name], reader, writer, peer, protocol)
        if listener.protocol.tls:
            writer.transport.pause_reading()
        admitted = self.admission.admit(connection, peer.host)
        if isinstance(admitted, Admitted):      # this server's own table: decided at once
            if not self._let_in(connection, listener, admitted):
                return
            body = connection.run()
        else:                                   # the writer's table (serve --processes): decided there
            body = self._run_once_admitted(connection, listener, admitted)
        task = asyncio.get_running_loop().create_task(body, name=f"secmeta {peer}")
        connection.task = task
        self._connections[connection] = task
        task.add_done_callback(lambda _t, c=connection: self._forget(c))

    def _let_in(self, connection: Connection, listener: Listener, admitted: Admitted) -> bool:
        """Close whom the admission evicted for ``connection``; False (closed) if it refused it."""
        for victim, why in admitted.evicted:
            assert isinstance(victim, Connection)
            victim.cut(why)
        if admitted.refused is not None:
            log.warning("closed connection from %s on %s: %s", connection.peer, listener.name, admitted.refused)
            connection.cut(admitted.refused)
            return False
        return True

    async def _run_once_admitted(self, connection: Connection, listener: Listener,
                                 deciding: Awaitable[Admitted]) -> None:
        if self._let_in(connection, listener, await deciding):
            await connection.run()

    def _new_controller(self, node_id: int) -> None:
        """Replicated mode: another node became the active controller (any thread). Close every idle client
        connection, so each client connects again and, connecting, refreshes its metadata, which names the new
        controller (librdkafka keeps a dead controller until its next periodic refresh otherwise)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._close_idle, f"the controller moved to node {node_id}: an idle connection "
                                                        "is closed so its client refreshes its metadata")

    def _close_idle(self, reason: str) -> None:
        for connection in list(self._connections):
            if connection.established and not connection.in_flight:
                connection.cut(reason)

    def _cut_off(self, reason: str | None) -> None:
        """Replicated mode: this node cannot reach Kafka (any thread): close every client connection (new ones are
        refused until it can again, ``_accepted``), so clients go to a node that knows the controller."""
        loop = self._loop
        if reason is not None and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._close_all, f"this node is cut off from Kafka ({reason})")

    def _close_all(self, reason: str) -> None:
        for connection in list(self._connections):
            connection.cut(reason)

    def _forget(self, connection: Connection) -> None:
        self._connections.pop(connection, None)
        self.admission.forget(connection)

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish (up to shutdown_drain_ms), close every connection."""
        self._stopping = True
        await self._close_listeners()
        self._close_own_sockets()
        for connection, task in list(self._connections.items()):
            connection.stopping = True
            if not connection.in_flight:
                task.cancel()
        tasks = list(self._connections.values())
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=self.config.shutdown_drain_ms / 1000)
            for task in pending:
                task.cancel()
            if pending:
                log.warning("shutdown: %d connection(s) still busy after %d ms were closed",
                            len(pending), self.config.shutdown_drain_ms)
                await asyncio.wait(pending, timeout=5)
        for name in ("executor", "write_executor"):
            executor = getattr(self, name)
            if executor is not None:
                setattr(self, name, None)
                await asyncio.get_running_loop().run_in_executor(None, executor.shutdown, True)

    def _close_own_sockets(self) -> None:
        if self._own_sockets and self._sockets is not None:
            for socks in self._sockets.values():
                for sock in socks:
                    sock.close()
            self._sockets = None

    async def _close_listeners(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 1)
            except TimeoutError:  # wait_closed waits for connections on 3.12+
                pass
        self._servers.clear()


def admission_of(config: ServerConfig) -> Admission:
    """The connection table ``config``'s caps ask for."""
    before_login, before_login_per_ip = config.before_login_limits
    return Admission(max_connections=config.max_connections, max_connections_per_ip=config.max_connections_per_ip,
                     max_before_login=before_login, max_before_login_per_ip=before_login_per_ip)


def limiter_of(config: ServerConfig) -> FailedAuthLimiter:
    """The failed-login limiter ``config`` asks for."""
    return FailedAuthLimiter(config.failed_authentication_delay_ms / 1000, config.failed_authentications_burst,
                             config.failed_authentications_per_second, config.failed_authentications_max_pending)


async def bind_listeners(listeners: Sequence[Listener]) -> dict[str, tuple[socket.socket, ...]]:
    """Listening sockets for ``listeners`` (name -> its sockets; port 0: an ephemeral port), with the long
    kernel queue; a listener that cannot bind raises ListenerError naming it (nothing stays bound)."""
    bound: dict[str, tuple[socket.socket, ...]] = {}
    try:
        for listener in listeners:
            try:
                server = await asyncio.start_server(_refuse, host=await _bind_address(listener.host),
                                                    port=listener.port, reuse_address=True,
                                                    backlog=LISTEN_BACKLOG, start_serving=False)
            except OSError as exc:
                raise ListenerError(f"cannot listen on {listener}: {exc.strerror or exc}") from None
            socks = tuple(socket.socket(fileno=os.dup(s.fileno())) for s in server.sockets)
            server.close()
            for sock in socks:
                sock.listen(LISTEN_BACKLOG)
            bound[listener.name] = socks
    except BaseException:
        for socks in bound.values():
            for sock in socks:
                sock.close()
        raise
    return bound


def _refuse(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:  # never serving
    writer.transport.abort()


def _sasl_mechanisms(config: ServerConfig, store: Any) -> tuple[ScramMechanism, ...]:
    """The mechanisms SASL listeners offer: those configured, each enabled in the store (else an
    error naming it), or by default every one the store enables."""
    enabled = store.settings.enabled_mechanisms  # the logged sasl.enabled.mechanisms in force
    if config.sasl_mechanisms is None:
        return tuple(m for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512) if m in enabled)
    refused = [m.mechanism_name for m in config.sasl_mechanisms if m not in enabled]
    if refused:
        raise InvalidValueError(f"SASL mechanism(s) {', '.join(refused)} not enabled in the store (its enabled "
                                f"mechanisms: {', '.join(sorted(m.mechanism_name for m in enabled)) or 'none'})")
    return config.sasl_mechanisms


async def _bind_address(host: str) -> str | None:
    """The one address to bind for ``host`` (Kafka binds the first address a name resolves to;
    binding all of them would give each its own ephemeral port); None binds every interface."""
    if not host:
        return None
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ListenerError(f"listener host {host!r} does not resolve: {exc}") from None
    if not infos:
        raise ListenerError(f"listener host {host!r} does not resolve")
    return str(infos[0][4][0])


class ServerThread:
    """A ``Server`` (or ``ServingProcesses``) on its own event loop in a daemon thread: a context manager.

    ``with ServerThread(store, "PLAINTEXT://127.0.0.1:0") as server:`` binds, and
    ``server.addresses["PLAINTEXT"]`` is the bound (host, port); ``bootstrap("PLAINTEXT")``
    is "host:port".  Leaving the block (or ``stop()``) drains and stops it; the store stays open.
    """

    def __init__(self, store: Any, listeners: str | Sequence[Listener], config: ServerConfig | None = None, *,
                 processes: int | None = None, cluster: Controllership | None = None):
        """``processes``: serve from that many processes (``secmeta.core.server.processes``), this one the
        writer; None serves in this process.  ``cluster``: replicated mode's roles (one process only)."""
        if processes is None:
            self.server: Any = Server(store, listeners, config, cluster=cluster)
        elif cluster is not None:
            raise InvalidValueError("replicated mode serves from one process: --processes is not for it yet")
        else:
            from secmeta.core.server.processes import ServingProcesses

            self.server = ServingProcesses(store, listeners, config, processes=processes)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    @property
    def addresses(self) -> dict[str, tuple[str, int]]:
        return dict(self.server.addresses)

    def bootstrap(self, listener: str) -> str:
        host, port = self.server.addresses[listener]
        return f"{host}:{port}"

    def start(self, timeout: float = 30) -> ServerThread:
        self._thread = threading.Thread(target=self._run, name="secmeta-serve-loop", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            raise TimeoutError("the server did not start")
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        try:
            event_loop.run(self._main(), event_loop.choice(self.server.listeners))
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._error = self._error or exc
            self._started.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        try:
            await self.server.start()
        except BaseException as exc:
            self._error = exc
            self._started.set()
            return
        self._started.set()
        await self._stop_event.wait()
        await self.server.stop()

    def call(self, coroutine: Any, timeout: float = 60) -> Any:
        """Run ``coroutine`` (e.g. ``server.route_new_connections_to(1)``) on the server's loop; its result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def stop(self, timeout: float = 60) -> None:
        if self._loop is not None and self._stop_event is not None and self._thread is not None:
            if self._thread.is_alive():
                self._loop.call_soon_threadsafe(self._stop_event.set)
            self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ServerThread {self.server!r}>"


logging.getLogger("secmeta.server").addHandler(logging.NullHandler())
