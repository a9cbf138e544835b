"""One client connection: frames in, one request at a time, responses out in order.

A connection reads a 4-byte size, checks it against socket.request.max.bytes, reads the
frame (a stalled frame times out), decodes it with ``core.wire.codec``, lets its
``Authenticator`` decide whether the request may be served, runs the handler in the
server's thread pool and writes the response before reading the next request, so
responses leave in request order (kafka-python matches them strictly in order).

Anything the server cannot serve (garbage, a truncated frame, an unknown API key or
version, a TLS handshake failure, a stall, idleness, a refused SASL state) closes this
connection only, with exactly one log line on the ``secmeta.server`` logger naming the
peer and the reason.  Nothing here writes to the store except the handlers it calls.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.errors import ApiException, ErrorCode
from core.server.call import BrokerInfo, Call
from core.server.cluster_apis import api_versions_fallback
from core.server.error_response import error_response
from core.server.listeners import Listener
from core.server.principals import ANONYMOUS, tls_principal
from core.server.sasl import Authenticator, Step
from core.types import RequestContext
from core.wire.codec import (
    API_NAMES,
    FrameError,
    UnsupportedApi,
    decode_request,
    encode_response,
    frame_size,
    peek_header,
    response_class,
)

if TYPE_CHECKING:
    from core.server.server import Server

__all__ = ["Connection", "log"]

log = logging.getLogger("secmeta.server")

_API_VERSIONS = 18
_AUTH_KEYS = (17, 36)


class _Close(Exception):
    """Close this connection, logging ``reason`` once at ``level``."""

    def __init__(self, reason: str, level: int = logging.WARNING):
        super().__init__(reason)
        self.reason, self.level = reason, level


class _ClientGone(Exception):
    """The client closed the connection between requests: nothing to log above debug."""


@dataclass(frozen=True, slots=True)
class Peer:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def peer_of(writer: asyncio.StreamWriter) -> Peer:
    address = writer.get_extra_info("peername")
    if isinstance(address, tuple) and len(address) >= 2:
        return Peer(str(address[0]), int(address[1]))
    return Peer(str(address), 0)


class Connection:
    """Serves one accepted connection until it ends; ``run()`` never raises."""

    def __init__(self, server: Server, listener: Listener, broker: BrokerInfo,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: Peer):
        self._server, self._listener, self._broker = server, listener, broker
        self._reader, self._writer, self.peer = reader, writer, peer
        self._config = server.config
        self.in_flight = False      # a request is being handled: shutdown lets it finish
        self.stopping = False       # the server is shutting down: close after the current request

    def __repr__(self) -> str:
        return f"<Connection {self.peer} {self._listener.name}>"

    async def run(self) -> None:
        try:
            auth = await self._start()
            while not self.stopping:
                frame = await self._read_frame()
                self.in_flight = True
                await self._serve(auth, frame)
                self.in_flight = False
            log.debug("closing %s on %s: the server is shutting down", self.peer, self._listener.name)
        except _Close as close:
            log.log(close.level, "closed connection from %s on %s: %s", self.peer, self._listener.name, close.reason)
        except _ClientGone:
            log.debug("connection from %s on %s closed by the client", self.peer, self._listener.name)
        except asyncio.CancelledError:
            log.debug("closing %s on %s: cancelled (shutdown)", self.peer, self._listener.name)
        except (ConnectionError, OSError) as exc:
            log.info("closed connection from %s on %s: %s", self.peer, self._listener.name,
                     f"connection error: {type(exc).__name__}: {exc}")
        except Exception:  # a bug: still one record, with the traceback
            log.exception("closed connection from %s on %s: internal error", self.peer, self._listener.name)
        finally:
            self.in_flight = False
            self._writer.transport.abort()

    # -- set-up -------------------------------------------------------------------

    async def _start(self) -> Authenticator:
        principal = ANONYMOUS
        if self._listener.protocol.tls:
            try:
                await self._writer.start_tls(self._server.ssl_context,
                                             ssl_handshake_timeout=self._config.tls_handshake_timeout_ms / 1000)
            except (ssl.SSLError, ConnectionError, OSError, TimeoutError) as exc:
                raise _Close(f"TLS handshake failed: {type(exc).__name__}: {exc}") from None
            principal = tls_principal(self._writer.get_extra_info("ssl_object"))
        context = RequestContext(principal=principal, host=self.peer.host, tls=self._listener.protocol.tls)
        return Authenticator(self._server.store, self._listener.protocol, self._config.sasl_mechanisms, context)

    # -- frames -------------------------------------------------------------------

    async def _read_frame(self) -> bytes:
        idle_s = self._config.connections_max_idle_ms / 1000
        try:
            first = await asyncio.wait_for(self._reader.readexactly(1), idle_s)
        except asyncio.IncompleteReadError:
            raise _ClientGone() from None
        except TimeoutError:
            raise _Close(f"idle for {self._config.connections_max_idle_ms} ms (connections.max.idle.ms)",
                         logging.INFO) from None
        stall_s = self._config.frame_read_timeout_ms / 1000
        loop = asyncio.get_running_loop()
        deadline = loop.time() + stall_s
        prefix = first + await self._read_exactly(3, deadline, "size")
        size = frame_size(prefix)
        limit = self._config.socket_request_max_bytes
        if size < 0:
            raise _Close(f"invalid frame size {size}")
        if size > limit:
            raise _Close(f"frame of {size} bytes is larger than socket.request.max.bytes ({limit})")
        return await self._read_exactly(size, deadline, f"frame of {size} bytes")

    async def _read_exactly(self, n: int, deadline: float, what: str) -> bytes:
        timeout = max(0.0, deadline - asyncio.get_running_loop().time())
        try:
            return await asyncio.wait_for(self._reader.readexactly(n), timeout)
        except asyncio.IncompleteReadError as exc:
            raise _Close(f"truncated {what}: the client closed after {len(exc.partial)} of {n} bytes",
                         logging.INFO) from None
        except TimeoutError:
            raise _Close(f"stalled: {what} not received within {self._config.frame_read_timeout_ms} ms") from None

    async def _write(self, data: bytes) -> None:
        self._writer.write(data)
        try:
            await asyncio.wait_for(self._writer.drain(), self._config.frame_read_timeout_ms / 1000)
        except TimeoutError:
            raise _Close(f"stalled: the client did not read a {len(data)}-byte response within "
                         f"{self._config.frame_read_timeout_ms} ms") from None

    # -- requests -----------------------------------------------------------------

    async def _serve(self, auth: Authenticator, data: bytes) -> None:
        if auth.expects_raw_token:
            step = await self._off_loop(auth.handle_raw, data)
            await self._finish(step, 0)
            return
        try:
            frame = decode_request(data, trailing_ok=True)  # as Kafka: bytes after the request are ignored
        except UnsupportedApi as exc:
            if exc.api_key == _API_VERSIONS and auth.refusal(_API_VERSIONS) is None:
                await self._write(encode_response(exc.correlation_id, api_versions_fallback()))
                return
            raise _Close(str(exc)) from None
        except FrameError as exc:
            raise _Close(str(exc)) from None
        except Exception as exc:  # kio raises KeyError for an unknown tagged field, and maybe more
            key, version, _ = peek_header(data)
            name = API_NAMES.get(key, f"api key {key}")
            raise _Close(f"malformed {name} v{version} request: {type(exc).__name__}: {exc}") from None
        refusal = auth.refusal(frame.api_key)
        if refusal is not None:
            raise _Close(refusal)
        if frame.api_key in _AUTH_KEYS:
            step = await self._off_loop(auth.handle, frame)
            await self._finish(step, frame.correlation_id)
            return
        handler = self._server.handlers.get(frame.api_key)
        if handler is None:
            raise _Close(f"unsupported request: {frame.name} v{frame.api_version} (no handler)")
        response = await self._off_loop(self._call, handler, Call(self._server.store, auth.context, frame, self._broker))
        await self._write(encode_response(frame.correlation_id, response))

    def _call(self, handler, call: Call) -> Any:
        """Run a handler (in a worker thread); a request-level error becomes the top-level error."""
        frame = call.frame
        try:
            return handler(call)
        except ApiException as exc:
            response = error_response(response_class(frame.api_key, frame.api_version), exc.error.code, exc.error.message)
            if response is None:
                raise
            return response
        except Exception:
            log.exception("handler of %s v%d failed for %s", frame.name, frame.api_version, self.peer)
            response = error_response(response_class(frame.api_key, frame.api_version), ErrorCode.UNKNOWN_SERVER_ERROR, None)
            if response is None:
                raise
            return response

    async def _off_loop(self, fn, *args) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._server.executor, fn, *args)

    async def _finish(self, step: Step, correlation_id: int) -> None:
        if step.failed:
            # Kafka holds the failure answer back (connection.failed.authentication.delay.ms): a
            # client that reconnects at once after a failure then fails at most this often.
            await asyncio.sleep(self._server.limiter.close_delay(self.peer.host))
        if step.response is not None:
            await self._write(encode_response(correlation_id, step.response))
        elif step.raw is not None:
            await self._write(struct.pack(">i", len(step.raw)) + step.raw)
        if step.close is None:
            return
        if step.failed:
            raise _Close(step.close, logging.INFO)
        raise _Close(step.close)

