"""One client connection: frames in, one request at a time, responses out in order.

A connection reads a 4-byte size and checks it (socket.request.max.bytes; before login
sasl.server.max.receive.size, 512 KiB) before reading the body, all under one timeout
(idle until a frame starts, then a stalled frame).  Before login (``secmeta.core.server.admission``)
the whole phase has one deadline, ``login_timeout_ms``, that trickled bytes do not extend; an
evicted connection is cut off the same way (``cut``).  A failed login is held (its failure
delay, at most ``FailedAuthLimiter.MAX_DELAY_S``), then answered and closed: the deadline
covers the phase up to the evaluated failure, not the hold, and a held connection is never
evicted, so nothing answers or closes it before its hold ends.  It reads the request header and lets
its ``Authenticator`` refuse the request before decoding the body, decodes it with
``secmeta.core.wire.codec``, answers it and writes the response before reading the next request,
so responses leave in request order (kafka-python matches them strictly in order).

Where the work runs: the event loop answers what is cheap and bounded by the request's
own size (ApiVersions, Metadata, DescribeCluster, SCRAM steps of user logins, and the
reads a handler's ``on_loop`` accepts: a DescribeAcls naming a resource, a
DescribeUserScramCredentials naming a few users), and decodes frames up to
``ON_LOOP_BYTES``.  Everything else runs in the server's thread pool, response encoding
included: SCRAM alterations and token logins (PBKDF2), reads that may scan the store, and
any large frame.  Writes run in a pool of their own (``write_workers``), so a write waiting on
its commit (fsync, a stalled Kafka in replicated mode) never holds a thread a read or a token
login needs; a write the handler refuses before it queues (``Handler.refused``: NOT_CONTROLLER,
a requester without the write's right) is answered on the loop, or in the thread pool (built and encoded
there) when its frame is larger than ``ON_LOOP_BYTES``: a refusal has one result per item of the request.  The
write bound (``write_bound``) holds a write back while ``write_queue_max`` are pending and answers
REQUEST_TIMED_OUT if none frees by its deadline; a write a worker takes up after its deadline is answered
REQUEST_TIMED_OUT there, never run.

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from secmeta.core.errors import ApiError, ErrorCode
from secmeta.core.server.apis import AUTH_KEYS
from secmeta.core.server.call import BrokerInfo, Call
from secmeta.core.server.cluster_apis import api_versions_fallback
from secmeta.core.server.deadline import Deadline
from secmeta.core.server.handling import log_failure
from secmeta.core.server.inline import ServedProtocol
from secmeta.core.server.listeners import Listener
from secmeta.core.server.principals import ANONYMOUS, tls_principal
from secmeta.core.server.sasl import Authenticator, Evaluated, Refusal, Step
from secmeta.core.server.write_bound import answer_write
from secmeta.core.types import RequestContext
from secmeta.core.wire.codec import (
    ApiKey,
    FrameError,
    RequestFrame,
    UnsupportedApi,
    decode_request,
    encode_response,
    frame_size,
    peek_header,
    response_frame_parts,
)

if TYPE_CHECKING:
    from secmeta.core.server.server import Server

__all__ = ["INLINE_KEYS", "ON_LOOP_BYTES", "Connection", "log"]

log = logging.getLogger("secmeta.server")

_IDLE, _STALLED = "idle", "stalled"     # what a read deadline's expiry interrupted: between frames, inside one

#: Frames up to this size are decoded on the event loop (kio reads ~1 MB in ~50-100 ms: larger ones go to a worker).
ON_LOOP_BYTES = 64 * 1024
#: The hot reads a logged-in connection answers as their bytes arrive (``ServedProtocol``), when on the loop.
INLINE_KEYS = frozenset({ApiKey.DESCRIBE_ACLS, ApiKey.METADATA, ApiKey.API_VERSIONS, ApiKey.DESCRIBE_CLUSTER})


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
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: Peer,
                 protocol: ServedProtocol | None = None):
        self._server, self._listener, self._broker = server, listener, broker
        self._reader, self._writer, self.peer = reader, writer, peer
        self._protocol = protocol   # None: every frame goes through the reader
        self._consumed = 0          # bytes read from the reader (equal to protocol.fed: nothing buffered)
        self._auth: Authenticator | None = None
        self._config = server.config
        self._high_water = 0        # the transport's write buffer limit, known once TLS is up
        self.in_flight = False      # a request is being handled: shutdown lets it finish
        self.stopping = False       # the server is shutting down: close after the current request
        self.established = False    # logged in (and past the first request): out of the before-login class
        self.held = False           # its failed login is held until answered: out of the before-login class
        self.task: asyncio.Task | None = None
        self._cut_reason: str | None = None
        self._running = False
        self._deadline: Deadline | None = None   # the current wait on the client (one timer, see deadline.py)
        self._expired: str | None = None         # what the deadline's expiry interrupted

    def __repr__(self) -> str:
        return f"<Connection {self.peer} {self._listener.name}>"

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self.task = self.task or asyncio.current_task()
        deadline = loop.call_later(self._config.login_timeout_ms / 1000, self._login_expired)
        config = self._config
        waits = self._deadline = Deadline(loop, min(config.connections_max_idle_ms, config.frame_read_timeout_ms) / 1000,
                                          self._wait_expired)
        auth: Authenticator | None = None
        level, reason = logging.DEBUG, "the server is shutting down"
        self._running = True
        try:
            if self._cut_reason is not None:   # cut before it ran (evicted in the same loop turn it was accepted)
                raise asyncio.CancelledError()
            auth = self._auth = await self._start()
            while not self.stopping:
                frame = await self._read_frame()
                await self._establish_once_in(auth)
                self.in_flight = True
                await self._serve(auth, frame)
                self.in_flight = False
                await self._establish_once_in(auth)
        except _Close as close:
            level, reason = close.level, close.reason
        except _ClientGone:
            level, reason = logging.DEBUG, "closed by the client"
        except asyncio.CancelledError:
            level, reason = (logging.INFO, self._cut_reason) if self._cut_reason else (logging.DEBUG, "cancelled (shutdown)")
        except (ConnectionError, OSError) as exc:
            level, reason = logging.INFO, f"connection error: {type(exc).__name__}"
        except Exception as exc:  # a bug: still one record, the traceback only at DEBUG
            level = 0
            log_failure(f"closed connection from {self.peer} on {self._listener.name}: internal error", exc)
        finally:
            deadline.cancel()
            waits.close()
            self.in_flight = False
            self._writer.transport.abort()
        if auth is not None and auth.exchange_pending:
            # A client that leaves (or is cut off) after server-first may have been probing: a failure.
            self._server.limiter.failed(self.peer.host, auth.claimed_user)
            level, reason = max(level, logging.INFO), f"{reason}; it abandoned its SASL exchange after server-first " \
                                                      "(counted as a failed authentication)"
        if level:
            log.log(level, "closed connection from %s on %s: %s", self.peer, self._listener.name, reason)

    def cut(self, reason: str) -> None:
        """Close this connection now (evicted, or out of time before login), logging ``reason``."""
        if self._cut_reason is not None:
            return
        self._cut_reason = reason
        self._writer.transport.abort()
        if self._running and self.task is not None:
            self.task.cancel()

    def _wait_expired(self, what: str) -> None:
        """The client did not send what the connection waits for in time: interrupt the wait."""
        if self._cut_reason is None and self.task is not None:
            self._expired = what
            self.task.cancel()

    def _login_expired(self) -> None:
        if not self.established and not self.held:
            self.cut(f"not logged in within {self._config.login_timeout_ms} ms (login timeout)")

    async def _establish_once_in(self, auth: Authenticator) -> None:
        """Leave the before-login class once authenticated (and, on PLAINTEXT and SSL, past the first request)."""
        if self.established or not auth.complete:
            return
        self.established = True
        refused = self._server.admission.establish(self)
        if refused is not None and not isinstance(refused, str):   # the writer's table answers asynchronously
            refused = await refused
        if refused is not None:
            raise _Close(refused)

    # -- set-up -------------------------------------------------------------------

    async def _start(self) -> Authenticator:
        principal = ANONYMOUS
        if self._listener.protocol.tls:
            try:
                await self._writer.start_tls(self._server.ssl_context,
                                             ssl_handshake_timeout=self._config.tls_handshake_timeout_ms / 1000)
            except (ssl.SSLError, ConnectionError, OSError, TimeoutError) as exc:
                reason = getattr(exc, "reason", None) or type(exc).__name__
                raise _Close(f"TLS handshake failed: {reason}") from None
            principal = tls_principal(self._writer.get_extra_info("ssl_object"))
        self._high_water = self._writer.transport.get_write_buffer_limits()[1]
        # the server, not the client, names the principal (TLS, SASL or the listener's ANONYMOUS) and the peer host;
        # on a SASL listener it is not authenticated until its login succeeds (built so once, not built and replaced)
        protocol = self._listener.protocol
        context = RequestContext(principal=principal, host=self.peer.host, tls=protocol.tls,
                                 authenticated=not protocol.sasl, asserted=False)
        return Authenticator(self._server.store, protocol, self._server.sasl_mechanisms, context)

    # -- frames -------------------------------------------------------------------

    async def _read_frame(self) -> bytes:
        config = self._config
        # before login the connection's deadline (login_timeout_ms) bounds the wait, not idleness
        idle_ms = config.connections_max_idle_ms
        limit, limit_name = config.socket_request_max_bytes, "socket.request.max.bytes"
        if not self.established and config.sasl_server_max_receive_size < limit:
            limit, limit_name = config.sasl_server_max_receive_size, "sasl.server.max.receive.size (before login)"
        reader, size, deadline = self._reader, None, self._deadline
        assert deadline is not None, "run() sets the deadline before the first read"
        protocol = self._protocol
        try:
            deadline.expect(idle_ms / 1000, _IDLE)
            if protocol is not None and self.established and protocol.fed == self._consumed:
                protocol.inline = self._inline      # frames answered on arrival meanwhile (secmeta.core.server.inline)
                try:
                    head = await reader.readexactly(4)
                finally:
                    protocol.inline = None
            else:
                head = await reader.readexactly(4)
            self._consumed += 4
            size = frame_size(head)
            if size < 0:
                raise _Close(f"invalid frame size {size}")
            if size > limit:
                raise _Close(f"frame of {size} bytes is larger than {limit_name} ({limit})")
            deadline.expect(config.frame_read_timeout_ms / 1000, _STALLED)
            body = await reader.readexactly(size)
            self._consumed += size
            return body
        except asyncio.CancelledError:
            if self._expired is None:
                raise
            self._expired = None
            assert self.task is not None    # _expired is set only while the task runs
            self.task.uncancel()
            if size is None:
                raise _Close(f"idle for {idle_ms} ms (connections.max.idle.ms)", logging.INFO) from None
            raise _Close(f"stalled: frame of {size} bytes not received within {config.frame_read_timeout_ms} ms") from None
        except asyncio.IncompleteReadError as exc:
            if size is None and not exc.partial:
                raise _ClientGone() from None
            what = "size" if size is None else f"frame of {size} bytes"
            raise _Close(f"truncated {what}: the client closed after {len(exc.partial)} of {exc.expected} bytes",
                         logging.INFO) from None
        finally:
            deadline.clear()

    async def _write(self, data: bytes) -> None:
        writer = self._writer
        transport = writer.transport
        transport.write(data)
        if transport.get_write_buffer_size() <= self._high_water:
            return  # drain() would return at once: skip its cost
        try:
            async with asyncio.timeout(self._config.frame_read_timeout_ms / 1000):
                await writer.drain()
        except TimeoutError:
            raise _Close(f"stalled: the client did not read a {len(data)}-byte response within "
                         f"{self._config.frame_read_timeout_ms} ms") from None

    # -- requests -----------------------------------------------------------------

    async def _serve(self, auth: Authenticator, data: bytes) -> None:
        if auth.expects_raw_token:
            step = auth.handle_raw(data, await self._evaluated_off_loop(auth, data))
            await self._finish(auth, step, 0)
            return
        try:
            api_key, _, correlation_id = peek_header(data)
        except FrameError as exc:
            raise _Close(str(exc)) from None
        refusal = auth.refusal(api_key)
        if refusal is not None and refusal.message is None:
            raise _Close(refusal.reason)
        frame = await self._decode(data, api_key, correlation_id, refused=refusal is not None)
        if frame is None:
            return
        if refusal is not None:
            await self._refuse(auth, frame, refusal, len(data))
        if frame.api_key in AUTH_KEYS:
            message = bytes(getattr(frame.request, "auth_bytes", b""))
            step = auth.handle(frame, await self._evaluated_off_loop(auth, message))
            await self._finish(auth, step, frame.correlation_id)
            return
        server = self._server
        handler = server.handlers[frame.api_key]
        call = Call(server.store, auth.context, frame, self._broker, server.answers, server.cluster)
        if len(data) <= ON_LOOP_BYTES and handler.on_loop(call):
            response = handler(call)
            await self._write(encode_response(frame.correlation_id, response))
            if frame.api_key == ApiKey.API_VERSIONS and not auth.complete:
                auth.api_versions_answered(int(response.error_code))
        elif handler.writes:
            large = len(data) > ON_LOOP_BYTES
            answer = await self._maybe_off_loop(large, _early_refusal, handler, call)
            if answer is None:
                bound = server.write_bound
                timed_out, deadline = await bound.admit(call)
                if timed_out is not None:
                    answer = await self._maybe_off_loop(large, _refused, handler, call, timed_out)
                else:
                    try:
                        answer = await asyncio.get_running_loop().run_in_executor(
                            server.write_executor, answer_write, handler, call, deadline)
                    finally:
                        bound.release()
            await self._write(answer)
        else:
            await self._write(await self._off_loop(_answer, handler, call))

    def _inline(self, data: bytes) -> bytes:
        """``ServedProtocol.inline``: answer the complete frames at the start of ``data`` that a logged-in
        connection answers on the loop anyway, as ``_serve`` would, while nothing else is buffered and the
        client reads its answers; the bytes from the first frame not answered here on, for the reader."""
        protocol, transport = self._protocol, self._writer.transport
        assert protocol is not None and self._deadline is not None
        if protocol.fed != self._consumed:      # bytes of a frame already wait in the reader: after them
            return data
        pos, answered = 0, False
        limit = self._config.socket_request_max_bytes
        while len(data) - pos >= 4 and not self.stopping and transport.get_write_buffer_size() <= self._high_water:
            size = int.from_bytes(data[pos:pos + 4], "big")
            end = pos + 4 + size
            if size > ON_LOOP_BYTES or size > limit or end > len(data):
                break
            response = self._answered_inline(data[pos + 4:end])     # (a slice of bytes: the frame's one copy)
            if response is None:
                break
            transport.writelines(response)      # (uvloop: one writev of the header and the kept body, no join)
            pos, answered = end, True
        if not answered:
            return data
        self._deadline.expect(self._config.connections_max_idle_ms / 1000, _IDLE)   # a request: not idle
        return data[pos:]

    def _answered_inline(self, data: bytes) -> tuple[bytes, ...] | None:
        """The response frame to a hot read (``INLINE_KEYS``) the loop answers, as the parts to write
        (``response_frame_parts``), or None: not one (the reader and ``_serve`` take it, its refusals and
        failures included)."""
        auth = self._auth
        try:
            api_key, _, _ = peek_header(data)
            if api_key not in INLINE_KEYS or auth is None or not auth.complete:    # (complete: nothing is refused)
                return None
            server = self._server
            handler = server.handlers[api_key]
            if handler.raw is not None:
                answered = handler.raw(data, server.store, auth.context, server.answers)
                if answered is not None:
                    return answered
            frame = decode_request(data, trailing_ok=True)
            call = Call(server.store, auth.context, frame, self._broker, server.answers, server.cluster)
            if not handler.on_loop(call):
                return None
            return response_frame_parts(frame.correlation_id, handler(call))
        except Exception:       # (a malformed or unsupported frame, ...): the reader's path answers or closes as always
            return None

    async def _decode(self, data: bytes, api_key: int, correlation_id: int, *, refused: bool) -> RequestFrame | None:
        """The decoded request, or None when it was answered here (ApiVersions' fallback)."""
        try:
            if len(data) <= ON_LOOP_BYTES:
                return decode_request(data, trailing_ok=True)
            return await self._off_loop(_decode_large, data)
        except UnsupportedApi as exc:
            if api_key == ApiKey.API_VERSIONS and not refused:
                await self._write(encode_response(correlation_id, api_versions_fallback()))
                return None
            raise _Close(str(exc)) from None
        except FrameError as exc:
            raise _Close(str(exc)) from None

    async def _refuse(self, auth: Authenticator, frame: RequestFrame, refusal: Refusal, size: int) -> None:
        """Answer a request sent during the SASL exchange with its error response, then close."""
        error = ApiError(ErrorCode.ILLEGAL_SASL_STATE, refusal.message)
        if frame.api_key == ApiKey.SASL_HANDSHAKE:
            response = encode_response(frame.correlation_id, auth.refused_handshake(frame))
        else:
            handler = self._server.handlers[ApiKey(frame.api_key)]
            call = Call(self._server.store, auth.context, frame, self._broker, cluster=self._server.cluster)
            response = await self._maybe_off_loop(size > ON_LOOP_BYTES, _refused, handler, call, error)
        await self._write(response)
        raise _Close(refusal.reason)

    async def _evaluated_off_loop(self, auth: Authenticator, message: bytes) -> Evaluated | None:
        """A SCRAM step that may run PBKDF2 (a token login), evaluated on a worker; None: ``auth`` evaluates it
        on the loop.  The worker touches only the exchange, never ``auth``: its result comes back here, so the
        connection's state (claimed user, exchange pending) changes on the loop alone."""
        evaluate = auth.blocking_step(message)
        return None if evaluate is None else await self._off_loop(evaluate)

    async def _off_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._server.executor, fn, *args)

    async def _maybe_off_loop(self, off: bool, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not off:
            return fn(*args, **kwargs)
        if kwargs:
            return await self._off_loop(lambda: fn(*args, **kwargs))
        return await self._off_loop(fn, *args)

    async def _finish(self, auth: Authenticator, step: Step, correlation_id: int) -> None:
        if step.failed:
            # Kafka holds the failure answer back (connection.failed.authentication.delay.ms): a
            # client that reconnects at once after a failure then fails at most this often.
            limiter = self._server.limiter
            delay, held, pending = await limiter.fail(self.peer.host, auth.claimed_user)
            self.held = True            # neither the login deadline nor an eviction ends the hold
            self._server.admission.hold(self)
            self.in_flight = False      # nothing to finish: shutdown need not wait out the hold
            if not held:
                # Closed unanswered, but not sooner than an answer would come: an early close would tell a
                # guesser "wrong" at once. The wait holds no slot; the admission caps bound such connections.
                await asyncio.sleep(delay)
                raise _Close(f"{step.close}; closed unanswered: {pending} failed authentications "
                             "are already held (failed_authentications_max_pending)", logging.INFO)
            try:
                await asyncio.sleep(delay)
            finally:
                limiter.release()
        if step.response is not None:
            await self._write(encode_response(correlation_id, step.response))
        elif step.raw is not None:
            await self._write(struct.pack(">i", len(step.raw)) + step.raw)
        if step.close is None:
            return
        if step.failed:
            raise _Close(step.close, logging.INFO)
        raise _Close(step.close)


def _decode_large(data: bytes) -> RequestFrame:
    return decode_request(data, trailing_ok=True)


def _answer(handler: Any, call: Call) -> bytes:
    """A worker thread's whole job for one request: the handler, then the response frame."""
    return encode_response(call.frame.correlation_id, handler(call))


def _early_refusal(handler: Any, call: Call) -> bytes | None:
    """The response frame to a write the handler refuses before it queues (``Handler.refused``), or None."""
    refused = handler.refused(call)
    return None if refused is None else encode_response(call.frame.correlation_id, refused)


def _refused(handler: Any, call: Call, error: ApiError) -> bytes:
    return encode_response(call.frame.correlation_id, handler.error_response(call, error))
