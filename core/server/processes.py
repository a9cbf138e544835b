"""``secmeta serve --processes N``: the store's one writer and N serving processes sharing its listeners.

This process binds the listeners once and holds the store open for writing; each serving process
(``secmeta.core.server.worker``) inherits the listening sockets (the kernel hands each new connection
to one of the processes accepting), opens the store read-only and serves logins and reads from
its own image, which follows the writer's log (``SecurityStore.catch_up``).  Writes come back here
over each process's channel (``secmeta.core.server.channel``) and run the store's one write path.

- **Read-your-writes across processes.** After a write commits at offset N every serving process is
  told to catch up; the write is answered only once every serving process reports N applied, so a
  read on any connection, on any process, after the answer sees the write.  A process that has not
  applied it within ``process_apply_timeout_ms`` is killed (and restarted, loading afresh), with an
  error logged, before the write is answered: a stuck process never serves a stale read after it.
  A process joining (or restarting) catches up to the writer's offset before it accepts a connection.
- **Login limits stay global.** Failed logins are counted by this process's limiter
  (``FailedAuthLimiter``): serving processes ask it (``fail``) and report abandoned exchanges, so N
  processes give a guesser exactly the tries one would.  Connections are admitted by this process's
  one table (``Admission``): each serving process asks it for every new connection (``admit``) and
  login (``establish``), and a connection evicted for a newcomer on another process is cut by its
  own process (``cut``), so the caps hold across processes as in one.
- **Lifecycle.** A serving process that exits is logged and restarted (after a pause if it died
  young); ``stop`` (SIGTERM) drains and stops them all; if none can start, ``start`` fails.

``route_new_connections_to(i)`` is a hook for tests and diagnosis: only process ``i`` accepts new
connections (``None``: all of them again).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

from secmeta.core.errors import InvalidValueError, SecmetaError
from secmeta.core.server import event_loop
from secmeta.core.server.channel import Channel
from secmeta.core.server.config import ServerConfig
from secmeta.core.server.listeners import Listener, parse_listeners
from secmeta.core.server.server import Server, admission_of, bind_listeners, limiter_of
from secmeta.core.server.worker import WRITES, Init

__all__ = ["ServingProcesses"]

log = logging.getLogger("secmeta.server")

#: How long a serving process may take to load the store and start serving.
START_TIMEOUT_S = 120.0
#: A process that dies younger than this is restarted only after RESTART_PAUSE_S (no busy crash loop).
YOUNG_S, RESTART_PAUSE_S = 5.0, 1.0


@dataclass(eq=False)
class _Serving:
    """The writer's view of one serving process."""

    index: int
    proc: asyncio.subprocess.Process | None = None
    channel: Channel | None = None
    applied: int = -1           # the offset its image has applied, as it last reported
    member: bool = False        # writes wait for it (it loaded the store and may serve)
    holds: int = 0              # failed logins it holds in the limiter's slots
    connections: set[int] = field(default_factory=set)   # its connections in the admission table
    started: float = 0.0
    draining: bool = False      # it stopped accepting and is finishing its in-flight requests
    serving: asyncio.Future | None = None
    tasks: list[asyncio.Task] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid


class ServingProcesses:
    """The writer and its serving processes; ``start()``, then ``stop()``.  Same surface as ``Server``."""

    def __init__(self, store: Any, listeners: str | Sequence[Listener], config: ServerConfig | None = None, *,
                 processes: int, log_level: int | None = None):
        if processes < 1:
            raise InvalidValueError(f"--processes must be at least 1, not {processes}")
        self.store = store
        self.listeners = parse_listeners(listeners) if isinstance(listeners, str) else tuple(listeners)
        self.config = config or ServerConfig()
        self.processes = processes
        Server(store, self.listeners, self.config)   # the same checks (TLS files, mechanisms) before anything runs
        self.limiter = limiter_of(self.config)
        self.admission = admission_of(self.config)
        self.addresses: dict[str, tuple[str, int]] = {}
        self._log_level = log_level if log_level is not None else logging.getLogger("secmeta").getEffectiveLevel()
        self._sockets: dict[str, tuple[socket.socket, ...]] | None = None
        self._serving = [_Serving(i) for i in range(processes)]
        self._applied: asyncio.Condition | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._stopping = False
        self._restarts: list[asyncio.Task] = []

    def __repr__(self) -> str:
        bound = ", ".join(f"{n}://{h}:{p}" for n, (h, p) in self.addresses.items()) or "not started"
        return f"<ServingProcesses {bound} processes={[s.pid for s in self._serving]}>"

    @property
    def pids(self) -> list[int | None]:
        """The serving processes' ids, by index (None while one is being restarted)."""
        return [s.pid for s in self._serving]

    def serving(self, index: int) -> bool:
        """Whether serving process ``index`` is up and accepting (started and not exited since)."""
        serving = self._serving[index]
        return (serving.proc is not None and serving.proc.returncode is None and serving.serving is not None
                and serving.serving.done())

    def draining(self, index: int) -> bool:
        """Whether serving process ``index`` is stopping: accepting nothing new, finishing what it has."""
        return self._serving[index].draining

    async def start(self) -> None:
        """Bind the listeners and start every serving process; fails (stopping any) if one cannot start."""
        self._applied = asyncio.Condition()
        self._executor = ThreadPoolExecutor(self.config.workers, thread_name_prefix="secmeta-writer")
        self._sockets = await bind_listeners(self.listeners)
        for listener in self.listeners:
            host, port = self._sockets[listener.name][0].getsockname()[:2]
            self.addresses[listener.name] = (str(host), int(port))
        try:
            await asyncio.gather(*(self._spawn(serving) for serving in self._serving))
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop every serving process (SIGTERM: each drains its in-flight requests), then close the listeners."""
        self._stopping = True
        for task in self._restarts:
            task.cancel()
        for serving in self._serving:
            if serving.proc is not None and serving.proc.returncode is None:
                serving.proc.send_signal(signal.SIGTERM)
        drain = self.config.shutdown_drain_ms / 1000 + 5
        for serving in self._serving:
            if serving.proc is None:
                continue
            try:
                await asyncio.wait_for(serving.proc.wait(), drain)
            except TimeoutError:
                log.warning("serving process %d (pid %d) did not stop within %.0f s: killed",
                            serving.index, serving.proc.pid, drain)
                serving.proc.kill()
                await serving.proc.wait()
            for task in serving.tasks:
                task.cancel()
        if self._sockets is not None:
            for socks in self._sockets.values():
                for sock in socks:
                    sock.close()
            self._sockets = None
        if self._executor is not None:
            executor, self._executor = self._executor, None
            await asyncio.get_running_loop().run_in_executor(None, executor.shutdown, True)

    async def route_new_connections_to(self, index: int | None) -> None:
        """Only serving process ``index`` accepts new connections from now on (None: every one): for tests."""
        for serving in self._serving:
            if serving.channel is None or serving.channel.closed:
                raise SecmetaError(f"serving process {serving.index} is not running")
        await asyncio.gather(*(s.channel.call("accept", index is None or s.index == index)  # type: ignore[union-attr]
                               for s in self._serving))

    # -- the processes ------------------------------------------------------------

    async def _spawn(self, serving: _Serving) -> None:
        """Start serving process ``serving.index`` and wait until it serves (raise if it exits first)."""
        assert self._sockets is not None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fds = {name: tuple(s.fileno() for s in socks) for name, socks in self._sockets.items()}
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "secmeta.core.server.worker", str(theirs.fileno()), event_loop.choice(self.listeners),
                pass_fds=[theirs.fileno(), *(fd for group in fds.values() for fd in group)],
                stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        loop = asyncio.get_running_loop()
        serving.proc, serving.applied, serving.member, serving.holds = proc, -1, False, 0
        serving.connections, serving.draining = set(), False
        serving.started = time.monotonic()
        serving.serving = loop.create_future()
        channel = serving.channel = await Channel.over(ours, functools.partial(self._handle, serving),
                                                       name=f"serving process {serving.index}")
        channel.send("init", Init(serving.index, str(self.store.log.store.path), self.store.config,
                                  self.store.keyring, self.listeners, self.config, fds, self._log_level))
        serving.tasks = [loop.create_task(channel.run()), loop.create_task(self._watch(serving, proc))]
        exited = serving.tasks[1]
        done, _ = await asyncio.wait([serving.serving, exited], timeout=START_TIMEOUT_S,
                                     return_when=asyncio.FIRST_COMPLETED)
        if serving.serving not in done:
            if proc.returncode is None:
                proc.kill()
            raise SecmetaError(f"serving process {serving.index} (pid {proc.pid}) did not start"
                               + (f": it exited with code {proc.returncode}" if proc.returncode is not None
                                  else f" within {START_TIMEOUT_S:.0f} s"))

    async def _watch(self, serving: _Serving, proc: asyncio.subprocess.Process) -> None:
        """When the process exits: forget it (writes stop waiting for it), and restart it unless stopping."""
        code = await proc.wait()
        assert self._applied is not None
        if serving.proc is not proc:
            return
        serving.member = False
        for _ in range(serving.holds):
            self.limiter.release()
        serving.holds = 0
        for cid in serving.connections:
            self.admission.forget((serving.index, cid))
        serving.connections = set()
        if serving.channel is not None:
            serving.channel.close()
        async with self._applied:
            self._applied.notify_all()
        if self._stopping or serving.serving is None or not serving.serving.done():
            return   # stopping, or it never served: start() reports it
        log.warning("serving process %d (pid %d) exited with code %s: restarting it", serving.index, proc.pid, code)
        self._restarts.append(asyncio.get_running_loop().create_task(self._restart(serving)))

    async def _restart(self, serving: _Serving) -> None:
        if time.monotonic() - serving.started < YOUNG_S:
            await asyncio.sleep(RESTART_PAUSE_S)
        while not self._stopping:
            try:
                await self._spawn(serving)
                log.info("serving process %d restarted (pid %s)", serving.index, serving.pid)
                return
            except Exception as exc:  # noqa: BLE001 - logged, tried again
                log.error("serving process %d could not be restarted: %s; trying again in %.0f s",
                          serving.index, exc, RESTART_PAUSE_S)
                await asyncio.sleep(RESTART_PAUSE_S)

    # -- messages from a serving process ------------------------------------------

    def _handle(self, serving: _Serving, message: tuple) -> Any:
        kind = message[0]
        channel = serving.channel
        assert channel is not None
        if kind == "loaded":
            serving.member, serving.applied = True, message[1]
            channel.send("advance", self.store.image.next_offset)
        elif kind == "applied":
            return self._note_applied(serving, message[1])
        elif kind == "draining":
            serving.draining = True
        elif kind == "serving":
            if serving.serving is not None and not serving.serving.done():
                serving.serving.set_result(None)
        elif kind == "call":
            return self._write(channel, *message[1:])
        elif kind == "fail":
            return self._fail(serving, *message[1:])
        elif kind == "failed":
            self.limiter.failed(message[1], message[2])
        elif kind == "admit":
            self._admit(serving, *message[1:])
        elif kind == "establish":
            channel.reply(message[1], self.admission.establish((serving.index, message[2])))
        elif kind == "hold":
            self.admission.hold((serving.index, message[1]))
        elif kind == "forget":
            serving.connections.discard(message[1])
            self.admission.forget((serving.index, message[1]))
        elif kind == "release":
            if serving.holds > 0:
                serving.holds -= 1
                self.limiter.release()
        return None

    def _admit(self, serving: _Serving, rid: int, cid: int, host: str) -> None:
        """Admit connection ``cid`` of ``serving`` from ``host`` in the one table; cut whom it evicts elsewhere."""
        admitted = self.admission.admit((serving.index, cid), host)
        own = []
        for key, why in admitted.evicted:
            index, victim = cast(tuple[int, int], key)
            holder = self._serving[index]
            holder.connections.discard(victim)
            if index == serving.index:
                own.append((victim, why))
            elif holder.channel is not None:
                holder.channel.send("cut", victim, why)
        if admitted.refused is None:
            serving.connections.add(cid)
        assert serving.channel is not None
        serving.channel.reply(rid, (admitted.refused, own))

    async def _note_applied(self, serving: _Serving, offset: int) -> None:
        assert self._applied is not None
        async with self._applied:
            serving.applied = max(serving.applied, offset)
            self._applied.notify_all()

    async def _fail(self, serving: _Serving, rid: int, host: str, user: str | None) -> None:
        held = await self.limiter.fail(host, user)
        if held.held:
            serving.holds += 1
        assert serving.channel is not None
        serving.channel.reply(rid, tuple(held))

    async def _write(self, channel: Channel, rid: int, method: str, args: tuple, kwargs: dict) -> None:
        """Run a serving process's write on the store's one write path; answer once every process applied it."""
        if method not in WRITES:
            channel.reply(rid, error=SecmetaError(f"{method} is not a write the writer runs"))
            return
        call = getattr(self.store, method)
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self._executor, lambda: call(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - the failure is the caller's answer
            # A write can fail after its batch was appended (e.g. while publishing its image): whatever the
            # log holds now is applied everywhere before the failure is answered, as a success would be.
            await self.applied_everywhere(self.store.log.end_offset)
            channel.reply(rid, error=exc)
            return
        offset = self.store.image.next_offset
        await self.applied_everywhere(offset)
        channel.reply(rid, (result, offset))

    async def applied_everywhere(self, offset: int) -> None:
        """Wait until every serving process has applied ``offset``; one that has not within
        ``process_apply_timeout_ms`` is killed (and restarted) with an error logged."""
        assert self._applied is not None
        members = [s for s in self._serving if s.member and s.applied < offset]
        for serving in members:
            assert serving.channel is not None
            serving.channel.send("advance", offset)
        if not members:
            return

        def applied() -> bool:
            return all(not s.member or s.applied >= offset for s in self._serving)

        timeout = self.config.process_apply_timeout_ms / 1000
        async with self._applied:
            try:
                await asyncio.wait_for(self._applied.wait_for(applied), timeout)
                return
            except TimeoutError:
                pass
        for serving in self._serving:
            if serving.member and serving.applied < offset and serving.proc is not None:
                log.error("serving process %d (pid %d) did not apply offset %d within %d ms "
                          "(process_apply_timeout_ms; it is at %d): killed, to be restarted",
                          serving.index, serving.proc.pid, offset, self.config.process_apply_timeout_ms,
                          serving.applied)
                serving.member = False
                serving.proc.kill()
