"""One serving process of ``secmeta serve --processes N``: logins and reads from its own image.

The writer (``secmeta.core.server.processes``) starts it as ``python -m secmeta.core.server.worker FD``
with one end of a socket pair on FD and the shared listening sockets inherited, and sends it
``("init", Init)``.  The process opens the store read-only, tells the writer the offset it loaded
(``loaded``), catches up to the offset the writer answers (``advance``), then serves the shared
listeners with a ``Server`` over a ``ForwardingStore``: reads and logins from its image, writes
sent to the writer, which runs the store's one write path and answers once every serving process
has applied the write.  Each ``advance`` (after every write, and a poll every ``FOLLOW_POLL_S`` for
the writer's own writes such as the token sweep) makes it catch up and report ``applied``.
Failed logins are counted by the writer's limiter (``RemoteLimiter``) and connections admitted by
the writer's table (``RemoteAdmission``), so N processes give a guesser no more tries, and a flood
no more connections, than one.  It stops on SIGTERM (draining as the server does) and when the
writer goes away (its channel closes): no serving process outlives its writer.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from secmeta.core.server import event_loop
from secmeta.core.server.admission import Admitted
from secmeta.core.server.auth_failures import Held
from secmeta.core.server.channel import Channel
from secmeta.core.server.config import ServerConfig
from secmeta.core.server.listeners import Listener

__all__ = ["WRITES", "ForwardingStore", "Init", "RemoteAdmission", "RemoteLimiter", "main"]

log = logging.getLogger("secmeta.server")

#: The store's calls that write: a serving process sends them to the writer; the writer runs no other.
WRITES = frozenset({"alter_user_scram_credentials", "alter_client_quotas", "create_acls", "delete_acls",
                    "create_delegation_token", "renew_delegation_token", "expire_delegation_token"})
#: How often a serving process looks for writes it was not told about (the writer's token sweep).
FOLLOW_POLL_S = 0.5


@dataclass(frozen=True)
class Init:
    """What a serving process needs, sent by the writer over the channel (never on a command line)."""

    index: int
    store_path: str
    store_config: Any          # StoreConfig
    keyring: Any               # Keyring
    listeners: tuple[Listener, ...]
    config: ServerConfig
    sockets: dict[str, tuple[int, ...]]   # listener name -> inherited listening socket fds
    log_level: int

    def __repr__(self) -> str:   # the keyring stays out of any repr
        return f"Init(process {self.index}, {self.store_path})"


class ForwardingStore:
    """The store as a serving process's handlers see it: reads from the followed read-only store,
    writes (``WRITES``) sent to the writer, which answers with the result and the log offset after it
    once every serving process has applied it; a write returns once this process has applied it."""

    def __init__(self, store: Any, channel: Channel, loop: asyncio.AbstractEventLoop):
        self._store, self._channel, self._loop = store, channel, loop

    def __repr__(self) -> str:
        return f"<ForwardingStore {self._store!r}>"

    def __getattr__(self, name: str) -> Any:
        if name in WRITES:
            return functools.partial(self._forward, name)
        value = getattr(self._store, name)
        if callable(value):
            setattr(self, name, value)   # a bound method never changes: look it up once
        return value

    def _forward(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Run on a handler's worker thread: the writer's answer (or its failure, raised here)."""
        args = tuple(_plain(a) for a in args)
        kwargs = {k: _plain(v) for k, v in kwargs.items()}
        call = self._channel.call("call", method, args, kwargs)
        result, offset = asyncio.run_coroutine_threadsafe(call, self._loop).result()
        if self._store.image.next_offset < offset:   # never expected (the writer waited for us): fail safe
            self._store.catch_up()
        return result


def _plain(value: Any) -> Any:
    """An argument as it can cross the channel (an iterator is read into a list)."""
    return list(value) if isinstance(value, Iterator) else value


class RemoteLimiter:
    """The writer's failed-login limiter, asked over the channel (``FailedAuthLimiter``'s interface)."""

    def __init__(self, channel: Channel):
        self._channel = channel

    async def fail(self, host: str, user: str | None) -> Held:
        return Held(*await self._channel.call("fail", host, user))

    def failed(self, host: str, user: str | None) -> None:
        self._channel.send("failed", host, user)

    def release(self) -> None:
        self._channel.send("release")


class RemoteAdmission:
    """The writer's connection table (``Admission``), asked over the channel: one table for every process,
    so the caps hold across them; a connection the writer evicts for another process's newcomer is cut here."""

    def __init__(self, channel: Channel):
        self._channel = channel
        self._ids = itertools.count(1)
        self._by_id: dict[int, Any] = {}
        self._id_of: dict[Any, int] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    async def admit(self, connection: Any, host: str) -> Admitted:
        cid = next(self._ids)
        self._by_id[cid], self._id_of[connection] = connection, cid
        refused, evicted = await self._channel.call("admit", cid, host)
        if refused is not None:
            self.forget(connection)
        return Admitted(tuple((self._by_id[v], why) for v, why in evicted if v in self._by_id), refused)

    def establish(self, connection: Any) -> Awaitable[str | None] | None:
        cid = self._id_of.get(connection)
        return None if cid is None else self._channel.call("establish", cid)

    def hold(self, connection: Any) -> None:
        cid = self._id_of.get(connection)
        if cid is not None:
            self._channel.send("hold", cid)

    def forget(self, connection: Any) -> None:
        cid = self._id_of.pop(connection, None)
        if cid is not None:
            del self._by_id[cid]
            self._channel.send("forget", cid)

    def cut(self, cid: int, why: str) -> None:
        """The writer evicted connection ``cid`` (for a newer one on another process)."""
        connection = self._by_id.get(cid)
        if connection is not None:
            connection.cut(why)


class _Process:
    """The serving process's state: its store, server and follower."""

    def __init__(self) -> None:
        self.init: asyncio.Future[Init] = asyncio.get_running_loop().create_future()
        self.wake = asyncio.Event()
        self.stop = asyncio.Event()
        self.target: int | None = None   # the offset the writer named when this process joined: serve from it on
        self.server: Any = None
        self.channel: Channel | None = None
        self.admission: RemoteAdmission | None = None

    def handle(self, message: tuple) -> Any:
        kind = message[0]
        if kind == "init" and not self.init.done():
            self.init.set_result(message[1])
        elif kind == "advance":
            self.target = message[1] if self.target is None else max(self.target, message[1])
            self.wake.set()
        elif kind == "accept":
            return self._accept(message[1], message[2])
        elif kind == "cut" and self.admission is not None:
            self.admission.cut(message[1], message[2])
        return None

    async def _accept(self, rid: int, on: bool) -> None:
        assert self.channel is not None
        try:
            if self.server is not None:
                await self.server.accept(on)
        except Exception as exc:  # noqa: BLE001 - answered to the writer
            self.channel.reply(rid, error=exc)
            return
        self.channel.reply(rid, on)


async def _follow(process: _Process, store: Any, channel: Channel, start_serving: Any) -> None:
    """Catch up whenever the writer says so (or every FOLLOW_POLL_S) and report the offset applied;
    start serving once the offset the writer named when it counted this process in is applied (not
    before it answers: a write answered before then was not waited for here)."""
    follower = ThreadPoolExecutor(1, thread_name_prefix="secmeta-follow")
    loop = asyncio.get_running_loop()
    serving = False
    try:
        while True:
            try:
                await asyncio.wait_for(process.wake.wait(), FOLLOW_POLL_S)
            except TimeoutError:
                pass
            process.wake.clear()
            applied = await loop.run_in_executor(follower, store.catch_up)
            channel.send("applied", applied)
            if not serving and process.target is not None and applied >= process.target:
                serving = True
                await start_serving()
    finally:
        follower.shutdown(wait=False)


def _warm_up(store: Any, mechanisms: Any) -> None:
    """Do the login path's one-time work before the first client comes rather than during its login: each
    credential's shape for the stand-ins of unknown names (one unseal each), and kio's classes of the APIs a
    client uses to connect and log in, at every version served (imported on first use; the others stay lazy).
    A fresh process's first logins took 0.6-1.3 s on the loaded test machine, 15-50 ms after this."""
    from secmeta.core.wire.codec import ApiKey, request_class, response_class

    for mechanism in mechanisms:
        store.scram_server(mechanism)
    for api in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.METADATA,
                ApiKey.DESCRIBE_CLUSTER):
        low, high = api.versions
        for version in range(low, high + 1):
            request_class(int(api), version)
            response_class(int(api), version)


async def _run(fd: int) -> int:
    from secmeta.core.server.server import Server
    from secmeta.core.store.facade import SecurityStore

    loop = asyncio.get_running_loop()
    process = _Process()
    loop.add_signal_handler(signal.SIGTERM, process.stop.set)
    channel = process.channel = await Channel.over(socket.socket(fileno=fd), process.handle, name="writer")
    reading = loop.create_task(channel.run())
    reading.add_done_callback(lambda _t: process.stop.set())   # the writer has gone: stop serving
    first: list[asyncio.Future[Any]] = [process.init, reading]
    await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
    if not process.init.done():
        return 1
    init = process.init.result()
    logging.basicConfig(level=init.log_level, stream=sys.stderr,
                        format=f"%(asctime)s %(levelname)s %(name)s [process {init.index}]: %(message)s")
    store = await loop.run_in_executor(None, functools.partial(
        SecurityStore.open, init.store_path, init.store_config, keyring=init.keyring, read_only=True, create=False))
    try:
        sockets = {name: tuple(socket.socket(fileno=fd) for fd in fds) for name, fds in init.sockets.items()}
        process.admission = RemoteAdmission(channel)
        server = Server(ForwardingStore(store, channel, loop), init.listeners, init.config, sockets=sockets,
                        limiter=RemoteLimiter(channel), admission=process.admission)

        async def start_serving() -> None:
            await loop.run_in_executor(None, _warm_up, store, server.sasl_mechanisms)
            await server.start()
            process.server = server
            channel.send("serving")

        channel.send("loaded", store.image.next_offset)
        following = loop.create_task(_follow(process, store, channel, start_serving))
        stopping = loop.create_task(process.stop.wait())
        await asyncio.wait([following, stopping], return_when=asyncio.FIRST_COMPLETED)
        if following.done() and following.exception() is not None:
            raise following.exception()  # type: ignore[misc]
        if process.server is not None:
            channel.send("draining")
            await server.stop()     # still following: a write in flight is answered once this process applied it
        following.cancel()
    finally:
        store.close()
        channel.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # a terminal's Ctrl-C reaches the writer, which stops us
    try:
        return event_loop.run(_run(int(argv[0])), argv[1] if len(argv) > 1 else "asyncio")
    except Exception as exc:  # noqa: BLE001 - the writer logs the exit and restarts this process
        log.error("serving process failed: %s: %s", type(exc).__name__, exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
