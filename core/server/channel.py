"""The local channel between ``secmeta serve``'s writer and its serving processes.

A message is a tuple ``(kind, *fields)``, pickled behind a 4-byte big-endian length, over a Unix
socket pair the writer made for the child it started: pickle is only ever read from a process's own
parent or child, never from a network peer.  ``call(kind, *fields)`` sends ``(kind, id, *fields)``
and waits for the other side's ``reply(id, ...)``; any other message goes to the ``handle``
callback.  A failure crosses as itself: an ``ApiException`` as its ``ApiError`` (so its Kafka code
survives), anything else pickled if it can be, else as a ``SecmetaError`` naming its type.
When the other side goes away, every call waiting fails with ``ChannelClosed``.
"""

from __future__ import annotations

import asyncio
import itertools
import pickle
import struct
from collections.abc import Callable
from typing import Any

from secmeta.core.errors import ApiError, ApiException, SecmetaError

__all__ = ["Channel", "ChannelClosed"]

_SIZE = struct.Struct(">I")
#: The largest message either side accepts (a request's arguments or answer; far above any real one).
MAX_MESSAGE = 256 * 1024 * 1024


class ChannelClosed(SecmetaError):
    """The process at the other end of the channel went away."""


class Channel:
    """One end of a writer <-> serving process channel; ``run()`` reads until the other end closes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 handle: Callable[[tuple], Any], *, name: str = "channel"):
        self._reader, self._writer, self._handle, self.name = reader, writer, handle, name
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future] = {}
        self.closed = False

    @classmethod
    async def over(cls, sock: Any, handle: Callable[[tuple], Any], *, name: str = "channel") -> Channel:
        """A channel over a connected Unix socket (one end of a socket pair)."""
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=1 << 20)
        return cls(reader, writer, handle, name=name)

    def __repr__(self) -> str:
        return f"<Channel {self.name} waiting={len(self._waiting)}{' closed' if self.closed else ''}>"

    def send(self, *message: Any) -> None:
        """Queue ``message`` to the other side (a no-op once closed)."""
        if self.closed:
            return
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        self._writer.write(_SIZE.pack(len(data)) + data)

    async def call(self, kind: str, *fields: Any) -> Any:
        """Send ``(kind, id, *fields)`` and return the other side's answer (or raise its failure)."""
        if self.closed:
            raise ChannelClosed(f"{self.name}: the other process has gone")
        rid = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        try:
            self.send(kind, rid, *fields)
            return await future
        finally:
            self._waiting.pop(rid, None)

    def reply(self, rid: int, value: Any = None, error: BaseException | None = None) -> None:
        """Answer call ``rid`` with ``value``, or with ``error`` raised at the caller."""
        if error is None:
            self.send("reply", rid, True, value)
        else:
            self.send("reply", rid, False, _portable(error))

    async def run(self) -> None:
        """Read messages until the other side closes; replies wake their callers, the rest go to ``handle``."""
        try:
            while True:
                try:
                    size = _SIZE.unpack(await self._reader.readexactly(4))[0]
                    if size > MAX_MESSAGE:
                        raise ChannelClosed(f"{self.name}: a message of {size} bytes")
                    message = pickle.loads(await self._reader.readexactly(size))
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                if message[0] == "reply":
                    self._answered(*message[1:])
                    continue
                outcome = self._handle(message)
                if asyncio.iscoroutine(outcome):
                    asyncio.get_running_loop().create_task(outcome)
        finally:
            self.close()

    def _answered(self, rid: int, ok: bool, value: Any) -> None:
        future = self._waiting.get(rid)
        if future is None or future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(_raised(value))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ChannelClosed(f"{self.name}: the other process has gone"))
        self._writer.close()


def _portable(error: BaseException) -> Any:
    if isinstance(error, ApiException):
        return ("api", error.error)
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # noqa: BLE001 - anything that does not round-trip is named by its type
        return ("named", type(error).__name__)
    return ("exception", error)


def _raised(value: Any) -> BaseException:
    kind, payload = value
    if kind == "api":
        assert isinstance(payload, ApiError)
        return ApiException.from_error(payload)
    if kind == "exception":
        return payload
    return SecmetaError(f"the writer failed: {payload}")
