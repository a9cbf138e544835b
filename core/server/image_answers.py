"""Answers kept per published image: the same read of the same image is the same bytes.

The store publishes a new immutable image with every write, before the write is answered.
A read's answer is a function of that image, the store's settings, the request and the
connection's ``RequestContext`` (who asks decides what is allowed): so an answer computed
while image I is published may be sent again for the same request and context for as long
as the store's published image is still I.  ``ImageAnswers`` (one per server, which serves one store) keeps such answers for the
current image only: the first request that finds another image published drops them all,
so nothing computed from an older image is ever sent after a write has been answered
(read-your-writes holds across connections).  An answer is kept under the image that was
published when its computation began; if a write lands during the computation, the answer
(which may be of the newer image) is kept under the older one and so never sent again.

Bounded: at most ``limit`` answers of at most ``max_bytes`` each, ``budget`` bytes in all (the
kept answers are dropped when the next would pass either).  Only answers that carry no secret
are kept (DescribeAcls).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from secmeta.core.wire.codec import EncodedResponse

__all__ = ["ImageAnswers"]


class ImageAnswers:
    """Encoded answers of the store's published image, keyed by request and context."""

    def __init__(self, limit: int = 256, max_bytes: int = 256 * 1024, budget: int = 8 * 1024 * 1024):
        self._limit, self._max_bytes, self._budget = limit, max_bytes, budget
        self._kept: tuple[Any, dict[Hashable, EncodedResponse]] = (None, {})
        self._held = 0      # bytes of the kept answers (approximate under concurrent misses: only a bound)
        self._lock = threading.Lock()

    def answer(self, store: Any, key: Hashable, compute: Callable[[], EncodedResponse]) -> EncodedResponse:
        """The answer kept for ``key`` if ``store``'s published image is the one it was computed from,
        else ``compute()`` (which reads the published image itself), kept for the next request.
        ``store`` is always the same store (the server's)."""
        image = store.image
        kept_image, answers = self._kept
        if kept_image is not image:
            with self._lock:
                kept_image, answers = self._kept
                if kept_image is not image:
                    answers = {}
                    self._kept, self._held = (image, answers), 0
        found = answers.get(key)
        if found is not None:
            return found
        response = compute()
        size = len(response.body)
        if size <= self._max_bytes:
            if len(answers) >= self._limit or self._held + size > self._budget:
                answers.clear()
                self._held = 0
            answers[key] = response
            self._held += size
        return response
