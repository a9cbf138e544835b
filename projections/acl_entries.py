"""Interned AccessControlEntry values, shared by every ACL that has them.

An image holds each distinct (principal, host, operation, permission) once;
entries no ACL uses any more are dropped when the table has doubled since
the last sweep (a weak table without weak references), by one thread at a
time: a reader that finds a sweep under way goes on without waiting.
"""

from __future__ import annotations

import sys
import threading

from secmeta.events.types import AccessControlEntry, AclOperation, AclPermissionType

__all__ = ["canonical_entry"]


class _EntryTable:
    __slots__ = ("entries", "limit", "sweeping")

    def __init__(self) -> None:
        self.entries: dict[tuple, AccessControlEntry] = {}
        self.limit = 4096
        self.sweeping = threading.Lock()  # one sweeper at a time; readers never wait for it

    def get(self, principal: str, host: str, operation: int, permission: int) -> AccessControlEntry:
        key = (principal, host, operation, permission)
        entry = self.entries.get(key)
        if entry is None:
            entry = AccessControlEntry(
                sys.intern(principal),
                sys.intern(host),
                AclOperation(operation),
                AclPermissionType(permission),
            )
            key = (entry.principal, entry.host, entry.operation, entry.permission_type)
            self.entries[key] = entry
            if len(self.entries) > self.limit and self.sweeping.acquire(blocking=False):
                try:
                    self._sweep()
                finally:
                    self.sweeping.release()
        return entry

    def _sweep(self) -> None:
        entries, getrefcount = self.entries, sys.getrefcount
        # Referenced only by the table (and the call's argument): unused.
        unused = [key for key in list(entries) if getrefcount(entries.get(key)) <= 2]
        for key in unused:
            entries.pop(key, None)
        self.limit = max(4096, 2 * len(self.entries))


ENTRIES = _EntryTable()


def canonical_entry(principal: str, host: str, operation: int, permission_type: int) -> AccessControlEntry:
    """The shared AccessControlEntry with these fields (interned strings, enum members)."""
    return ENTRIES.get(principal, host, operation, permission_type)
