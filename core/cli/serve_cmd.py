"""``secmeta serve``: the store behind Kafka's wire protocol until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
from typing import Any

from secmeta.core import validation
from secmeta.core.cli.common import add_store_options, keyring, store_path
from secmeta.core.cli.replication import add_serve_options, replication
from secmeta.core.errors import InvalidValueError
from secmeta.core.server.config import MAX_DEFAULT_PROCESSES, ServerConfig, default_processes
from secmeta.core.server.listeners import ClientAuth, SslConfig, parse_advertised, parse_listeners

_DEFAULTS = ServerConfig()


def _processes(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--processes must be a whole number of at least 1, not {text!r}")
    return int(text)


class _DefaultsShown(argparse.HelpFormatter):
    """Help lines end with the default, where there is one and the text does not give it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "serve", help="serve the store to Kafka clients (admin and SASL APIs) until SIGTERM",
        description="Serve the store on Kafka's wire protocol: Kafka's admin clients manage ACLs, SCRAM "
                    "credentials and delegation tokens, and log in with SCRAM. This process becomes the "
                    "store's one writer and a one-node cluster (broker and controller) whose id is the "
                    "store's id.",
        formatter_class=_DefaultsShown)
    add_store_options(p)
    p.add_argument("--listeners", required=True, metavar="LIST",
                   help="Kafka listeners, e.g. PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9094 "
                        "(protocols PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; port 0 = any free port)")
    p.add_argument("--advertised-listeners", metavar="LIST", default=None,
                   help="addresses clients are told to connect to, per listener (default: the bound address)")
    p.add_argument("--ssl-cert", metavar="PEM", help="server certificate (chain) for SSL and SASL_SSL listeners")
    p.add_argument("--ssl-key", metavar="PEM", help="private key of --ssl-cert (if not in the same file)")
    p.add_argument("--ssl-ca", metavar="PEM", help="CA certificates that client certificates must chain to")
    p.add_argument("--ssl-client-auth", choices=[c.value for c in ClientAuth], default=ClientAuth.NONE.value,
                   help="ask TLS clients for a certificate (Kafka's ssl.client.auth)")
    p.add_argument("--sasl-mechanisms", metavar="LIST", default=None,
                   help="SASL mechanisms offered on SASL listeners, each enabled in the store "
                        "(default: every mechanism the store enables)")
    p.add_argument("--node-id", type=int, default=_DEFAULTS.node_id, metavar="N",
                   help="id of this node (broker and controller)")
    p.add_argument("--socket-request-max-bytes", type=int, default=_DEFAULTS.socket_request_max_bytes, metavar="N",
                   help="largest request frame accepted (Kafka's socket.request.max.bytes)")
    p.add_argument("--connections-max-idle-ms", type=int, default=_DEFAULTS.connections_max_idle_ms, metavar="MS",
                   help="close connections idle this long (Kafka's connections.max.idle.ms)")
    p.add_argument("--max-connections", type=int, default=_DEFAULTS.max_connections, metavar="N",
                   help="connections held at most, logged in or not (Kafka's max.connections); logged-in ones "
                        "may take all but --max-connections-before-login")
    p.add_argument("--max-connections-per-ip", type=int, default=_DEFAULTS.max_connections_per_ip, metavar="N",
                   help="connections from one address at most (Kafka's max.connections.per.ip): beyond, the "
                        "address's oldest connection not logged in is closed, or the new one refused")
    p.add_argument("--max-connections-before-login", type=int, default=None, metavar="N",
                   help="connections not logged in yet at most (the share of --max-connections kept for logins); "
                        "a new one beyond closes the oldest of the address holding most "
                        "(default: a quarter of --max-connections)")
    p.add_argument("--max-connections-before-login-per-ip", type=int, default=None, metavar="N",
                   help="connections not logged in yet from one address at most; a new one beyond closes that "
                        "address's oldest (default: half of --max-connections-per-ip)")
    p.add_argument("--login-timeout-ms", type=int, default=_DEFAULTS.login_timeout_ms, metavar="MS",
                   help="close a connection not logged in this long after it was accepted, however it trickles "
                        "bytes (TLS handshake, SASL, and on PLAINTEXT and SSL its first request)")
    p.add_argument("--connection-failed-authentication-delay-ms", type=int,
                   default=_DEFAULTS.failed_authentication_delay_ms, metavar="MS",
                   help="hold a failed login this long before answering and closing (Kafka's "
                        "connection.failed.authentication.delay.ms); longer, up to 10 s, for a user name or an "
                        "address failing faster than --failed-authentications-per-second after a burst of "
                        f"{_DEFAULTS.failed_authentications_burst}; valid credentials are never refused or held")
    p.add_argument("--failed-authentications-per-second", type=float,
                   default=_DEFAULTS.failed_authentications_per_second, metavar="R",
                   help="failed logins a user name or an address may make per second before they are held longer")
    p.add_argument("--failed-authentications-max-pending", type=int,
                   default=_DEFAULTS.failed_authentications_max_pending, metavar="N",
                   help="failed logins held at once; beyond, a failing connection is closed at once, unanswered")
    p.add_argument("--write-queue-max", type=int, default=_DEFAULTS.write_queue_max, metavar="N",
                   help="writes waiting for or running on the write workers at most; one more is held back (its "
                        "connection not read) until one is answered, or REQUEST_TIMED_OUT at its timeout, writing "
                        "nothing "
                        f"(default {_DEFAULTS.write_queue_max})")
    p.add_argument("--write-timeout-ms", type=int, default=_DEFAULTS.write_timeout_ms, metavar="MS",
                   help="a write not started this long after it came (the request's own timeout where it has one) "
                        "is answered REQUEST_TIMED_OUT and never run, so never committed later "
                        f"(default {_DEFAULTS.write_timeout_ms}, Kafka's request.timeout.ms)")
    p.add_argument("--processes", type=_processes, default=None, metavar="N",
                   help="serving processes sharing the listeners, each answering logins and reads from its own "
                        "image of the store, which follows the log; this process stays the store's one writer and "
                        "answers a write once every serving process has applied it. 1 serves in this process "
                        "alone. Default: the CPUs this process may use (its CPU affinity), at most "
                        f"{MAX_DEFAULT_PROCESSES}. Connections and failed logins are counted once, by the writer, "
                        "so the limits above hold across the processes")
    add_serve_options(p)
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   help="level of the server's log on stderr")
    p.set_defaults(func=run)


def _mechanisms(text: str):
    from secmeta.events.types import ScramMechanism

    out = []
    for name in (n.strip() for n in text.split(",")):
        if name not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise InvalidValueError(f"--sasl-mechanisms: {name!r} is not SCRAM-SHA-256 or SCRAM-SHA-512")
        out.append(validation.enum_value(ScramMechanism, name, "--sasl-mechanisms"))
    return tuple(dict.fromkeys(out))


def server_config(args: argparse.Namespace) -> tuple[tuple, ServerConfig]:
    """The listeners and ServerConfig of the command line (errors name the bad option)."""
    listeners = parse_listeners(args.listeners)
    ssl = None
    if args.ssl_cert or args.ssl_key or args.ssl_ca:
        ssl = SslConfig(args.ssl_cert, args.ssl_key, args.ssl_ca, ClientAuth.parse(args.ssl_client_auth))
    config = ServerConfig(
        node_id=args.node_id,
        advertised=parse_advertised(args.advertised_listeners, listeners),
        ssl=ssl,
        sasl_mechanisms=None if args.sasl_mechanisms is None else _mechanisms(args.sasl_mechanisms),
        socket_request_max_bytes=args.socket_request_max_bytes,
        connections_max_idle_ms=args.connections_max_idle_ms,
        max_connections=args.max_connections,
        max_connections_per_ip=args.max_connections_per_ip,
        max_connections_before_login=args.max_connections_before_login,
        max_connections_before_login_per_ip=args.max_connections_before_login_per_ip,
        login_timeout_ms=args.login_timeout_ms,
        failed_authentication_delay_ms=args.connection_failed_authentication_delay_ms,
        failed_authentications_per_second=args.failed_authentications_per_second,
        failed_authentications_max_pending=args.failed_authentications_max_pending,
        write_queue_max=args.write_queue_max,
        write_timeout_ms=args.write_timeout_ms,
    )
    return listeners, config


def run(args: argparse.Namespace) -> int:
    from secmeta.core.cli.security import log_initial_settings
    from secmeta.core.config import StoreConfig
    from secmeta.core.server import event_loop
    from secmeta.core.server.processes import ServingProcesses
    from secmeta.core.server.server import Server
    from secmeta.core.store.commit_gate import NotWriterGate
    from secmeta.core.store.facade import SecurityStore

    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    listeners, config = server_config(args)
    path = store_path(args)
    replicated = replication() if args.replication_bootstrap_server else None
    gate = None if replicated is None else NotWriterGate("this node has not caught up with the log topic yet")
    stop = _Stop()
    with SecurityStore.open(path, StoreConfig.load(path), keyring=keyring(args), create=False,
                            commit_gate=gate) as store:
        with contextlib.nullcontext() if replicated is None else replicated.start(
                store, args, stop.fail, on_applied=stop.applied) as node:
            if node is None or node.writing:
                log_initial_settings(store, args)
            processes = 1 if replicated is not None else args.processes or default_processes()
            if processes == 1:   # Server checks TLS files before anything binds
                server: Any = Server(store, listeners, config, cluster=getattr(node, "cluster", None))
            else:
                server = ServingProcesses(store, listeners, config, processes=processes)
            stop.server = server
            store.start_token_sweeper()
            event_loop.run(_serve(server, stop, getattr(node, "listening", None)), event_loop.choice(listeners))
    if stop.error is not None:
        raise stop.error
    print("stopped; store closed", file=sys.stderr, flush=True)
    return 0


class _Stop:
    """Stops the serving loop: a signal, or replication failing in its own thread (``fail``, then re-raised).
    ``applied`` tells the serving processes of a standby that batches from the log topic were appended."""

    def __init__(self):
        self.error: BaseException | None = None
        self.server = None
        self._loop = None
        self._event = None

    def applied(self, offset: int) -> None:
        import asyncio

        advance = getattr(self.server, "applied_everywhere", None)  # ServingProcesses; one process needs none
        if advance is not None and self._loop is not None:
            asyncio.run_coroutine_threadsafe(advance(offset), self._loop)

    def arm(self, loop, event) -> None:
        self._loop, self._event = loop, event
        if self.error is not None:
            event.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._event.set)


async def _serve(server, stopper: _Stop | None = None, listening: Any = None) -> None:
    """Serve until stopped; ``listening(broker)`` (a replicated node joining the election) is called once the
    listeners are bound, with the BrokerInfo of the first one."""
    import asyncio

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if stopper is not None:
        stopper.arm(loop, stop)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    try:
        for listener in server.listeners:
            host, port = server.addresses[listener.name]
            shown = f"[{host}]" if ":" in host else host
            print(f"listening on {listener.name}://{shown}:{port}", flush=True)
        if listening is not None:
            await loop.run_in_executor(None, listening, server.brokers[server.listeners[0].name])
        await stop.wait()
        print("stopping: draining in-flight requests", file=sys.stderr, flush=True)
    finally:
        await server.stop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
