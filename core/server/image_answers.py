"""Answers kept per published image: the same read of the same image is the same bytes.

The store publishes a new immutable image with every write, before the write is answered.
A read's answer is a function of that image, the store's settings and the request, once the
caller may ask it at all (who asks decides only that: DescribeAcls needs DESCRIBE on the cluster):
so an answer computed while image I is published may be sent again for the same request, for as
long as the store's published image is still I, to any caller the store allows to ask it.
``ImageAnswers`` (one per server, which serves one store) keeps such answers for the current image
only: the first request that finds another image published drops them all, so nothing computed
from an older image is ever sent after a write has been answered (read-your-writes holds across
connections).  An answer is kept under the image that was published when its computation began; if
a write lands during the computation, it (which may be of the newer image) is kept under the older
one and so never used again.

Whether a caller may have a kept answer is asked of the store each time (``may(context)``, the
store's own decision, which its decider keeps per image): the same decision ``compute`` makes
before it reads anything, so a kept answer goes to exactly the callers a computed one would, and
never to one the store refuses; a refusal is never kept (``compute`` raises for it).

Answers of the same objects: a computed answer that is a pure function of immutable objects of the
image (DescribeAcls' encoding of the index nodes or groups its filter selected) is kept by those
objects (``of_objects``), so another request that selects the same ones (a topic never asked before,
under the same prefixes as an earlier one) gets their bytes without encoding them again.  The request
is still read, checked and authorized, and its selection made, by the store, every time; only the
encoding is reused.  These are held under the same image as the kept answers and dropped with them.

Kept on second sight: an answer is kept only when its key was asked before (under this image or an
earlier one: ``seen`` holds the keys' hashes only, never an answer), so a client asking names no one
asks twice (a scan, new topics) neither pays for keeping its answers nor evicts the ones asked again
and again.  Bounded: at most ``limit`` answers of at most ``max_bytes`` each, ``budget`` bytes in all,
keys included (the kept answers are dropped when the next would pass either), and ``8 * limit``
hashes seen.  Only answers that carry no secret are kept (DescribeAcls).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from operator import is_
from typing import Any

from secmeta.core.types import RequestContext
from secmeta.core.wire.codec import EncodedResponse

__all__ = ["ImageAnswers"]

#: Whether the store lets the requester of a RequestContext ask the read (the store's own decision, made now).
May = Callable[[RequestContext], bool]


class ImageAnswers:
    """Encoded answers of the store's published image, keyed by request."""

    def __init__(self, limit: int = 8192, max_bytes: int = 256 * 1024, budget: int = 16 * 1024 * 1024):
        self._limit, self._max_bytes, self._budget = limit, max_bytes, budget
        self._kept: tuple[Any, dict[Hashable, EncodedResponse]] = (None, {})
        self._held = 0      # bytes of the kept answers and keys (approximate under concurrent misses: only a bound)
        self._seen: set[int] = set()    # hashes of the keys asked (across images): what is asked again is kept
        # (slot, ids of the objects) -> (the objects, their answer): kept while the image is (see of_objects)
        self._by_objects: dict[tuple, tuple[tuple, EncodedResponse]] = {}
        self._by_objects_held = 0
        self._lock = threading.Lock()

    def kept(self, store: Any, key: Hashable, context: RequestContext, may: May) -> EncodedResponse | None:
        """The answer kept for ``key`` if ``store``'s published image is the one it was computed from and the
        store lets ``context``'s requester ask it (``may``); else None (``answer`` computes it)."""
        image, answers = self._kept
        if image is not store.image:
            return None
        found = answers.get(key)
        return found if found is not None and may(context) else None

    def answer(self, store: Any, key: Hashable, compute: Callable[[], EncodedResponse], context: RequestContext,
               may: May) -> EncodedResponse:
        """``kept(store, key, context, may)`` if there is one, else ``compute()`` (which reads the published image
        itself and raises for a requester the store refuses), kept for the next request of ``key`` if ``key`` was
        asked before.  ``store`` is always the same store (the server's)."""
        image = store.image
        kept_image, answers = self._kept
        if kept_image is not image:
            with self._lock:
                kept_image, answers = self._kept
                if kept_image is not image:
                    answers = {}
                    self._kept, self._held = (image, answers), 0
                    self._by_objects, self._by_objects_held = {}, 0
        found = answers.get(key)
        if found is not None and may(context):
            return found
        response = compute()
        seen, asked = self._seen, hash(key)
        if asked not in seen:       # asked for the first time: kept if it is asked again
            if len(seen) >= 8 * self._limit:
                seen.clear()
            seen.add(asked)
            return response
        size = len(response.body) + (len(key) if isinstance(key, bytes) else 0)
        if size <= self._max_bytes:
            if len(answers) >= self._limit or self._held + size > self._budget:
                answers.clear()
                self._held = 0
            answers[key] = response
            self._held += size
        return response

    def of_objects(self, slot: Hashable, objects: tuple, compute: Callable[[], EncodedResponse]) -> EncodedResponse:
        """``compute()``, an answer that is a pure function of ``slot`` and the immutable ``objects`` (the same
        objects by identity, in order: the same answer), kept for the next call with the same ones until the
        kept answers are dropped (the next request under another image).  Only an answer (``answer``'s
        ``compute``) whose caller the store has already checked may call this: it keeps bytes, not decisions.
        Bounded as the kept answers (``limit`` answers, ``max_bytes`` each, ``budget`` bytes)."""
        memo = self._by_objects
        key = (slot, *map(id, objects))
        found = memo.get(key)
        if found is not None and all(map(is_, found[0], objects)):   # (held: no other object can have the id)
            return found[1]
        response = compute()
        size = len(response.body)
        if size <= self._max_bytes:
            if len(memo) >= self._limit or self._by_objects_held + size > self._budget:
                memo.clear()
                self._by_objects_held = 0
            memo[key] = (objects, response)
            self._by_objects_held += size
        return response
