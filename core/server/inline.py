"""Each accepted connection's asyncio protocol: a stream reader's, plus requests answered as their bytes arrive.

A connection (``secmeta.core.server.connection``) is a task that reads frames from an
``asyncio.StreamReader``: the bytes a socket read delivers are fed to the reader, which wakes the
task, which reads the size and the body, answers and waits again (a future, a loop turn and a
task step per request).  For the requests that are answered on the event loop anyway (the hot
reads: a bounded DescribeAcls, Metadata, ApiVersions, DescribeCluster of a logged-in
connection), that hand-over was about as much of the server's CPU as the answer itself.

``ServedProtocol`` is asyncio's ``StreamReaderProtocol`` with one addition: while the connection
waits for the start of its next frame with nothing buffered, it sets ``inline``, and the protocol
hands it each arriving chunk first.  ``inline(data)`` answers the complete frames at the start
of ``data`` that it may answer on the spot, in order, and returns the bytes it did not take,
which go to the reader as before (from the first frame it does not answer on: responses leave
in request order).  ``fed`` counts the bytes given to the reader, so that the connection can
tell that nothing is buffered (every byte fed has been read).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["ServedProtocol"]

_LIMIT = 2**16      # asyncio.start_server's reader limit


class ServedProtocol(asyncio.StreamReaderProtocol):
    """A StreamReaderProtocol whose arriving bytes ``inline`` (when set) may answer before the reader sees them."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 accepted: Callable[[asyncio.StreamReader, asyncio.StreamWriter, ServedProtocol], None]):
        """``accepted(reader, writer, protocol)`` is called on connection, as start_server's callback."""
        super().__init__(asyncio.StreamReader(limit=_LIMIT, loop=loop),
                         lambda reader, writer: accepted(reader, writer, self), loop=loop)
        self.fed = 0       # bytes given to the reader since the connection began
        self.inline: Callable[[bytes], bytes] | None = None

    def data_received(self, data: bytes) -> None:
        inline = self.inline
        if inline is not None:
            data = inline(data)
            if not data:
                return
        self.fed += len(data)
        super().data_received(data)
