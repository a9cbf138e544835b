"""A hostile flood of half-open connections, for the flood test and scripts/bench/login_flood.

``HalfOpenFlood(("127.0.0.1", port), sources, per_source)`` keeps ``per_source`` connections
open from each source address (any of 127/8 is this host), each having sent only the first
bytes of a frame, and reconnects each one the server closes, for as long as it runs.  One
thread, one selector: it costs the attacker little, as a real one would.
"""

from __future__ import annotations

import selectors
import socket
import struct
import threading

__all__ = ["HalfOpenFlood", "loopback_sources"]

#: A frame that announces 100 bytes and sends two of them: the server waits for the rest.
PARTIAL_FRAME = struct.pack(">i", 100) + b"\x00\x12"


def loopback_sources(count: int, first: int = 10) -> list[str]:
    """``count`` loopback addresses 127.0.x.y from 127.0.0.``first`` on (never 127.0.0.1)."""
    return [f"127.0.{(first + i) // 250}.{(first + i) % 250 + 1}" for i in range(count)]


class HalfOpenFlood(threading.Thread):
    """Half-open connections from many addresses, reopened as the server closes them; ``stop()`` ends it."""

    def __init__(self, address: tuple[str, int], sources: list[str], per_source: int):
        super().__init__(name="half-open-flood", daemon=True)
        self.address, self.sources, self.per_source = address, sources, per_source
        self.opened = 0                # connections opened (first round and reconnections)
        self.failed = 0                # connection attempts the server refused or reset at once
        self.ready = threading.Event()  # set once the first round is open
        self._halt = threading.Event()
        self._selector = selectors.DefaultSelector()

    def _open(self, source: str) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((source, 0))
            sock.settimeout(2)
            sock.connect(self.address)
            sock.sendall(PARTIAL_FRAME)
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ, source)
            self.opened += 1
        except OSError:
            self.failed += 1
            sock.close()

    def run(self) -> None:
        try:
            for _ in range(self.per_source):
                for source in self.sources:
                    self._open(source)
            self.ready.set()
            while not self._halt.is_set():
                for key, _ in self._selector.select(0.05):
                    self._selector.unregister(key.fileobj)
                    key.fileobj.close()
                    if not self._halt.is_set():
                        self._open(key.data)
        finally:
            self.ready.set()
            for key in list(self._selector.get_map().values()):
                key.fileobj.close()
            self._selector.close()

    @property
    def open_now(self) -> int:
        return len(self._selector.get_map()) if not self._halt.is_set() else 0

    def stop(self) -> None:
        self._halt.set()
        self.join(10)
