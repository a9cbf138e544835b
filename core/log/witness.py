"""A witness of the log's head kept outside the store: one authenticated line.

``secmeta log head`` prints

    secmeta-head v1 store=<store id> offset=<next offset> link=<chain link, hex> key=<key id> mac=<hex>

where ``mac`` is an HMAC-SHA256, under a key derived from the keyring's chain key ``key``, of
everything before it: nobody without the key can make a line for a head the store never had.
An operator keeps the line elsewhere (a ticket, another host); ``log verify --witness FILE``
then checks that the store still holds that offset with that link.  The operator may append
the line of every later `log head` to the same file: every line is checked, and all must
hold.  The store may have grown since; a store behind a line (rolled back, or replaced whole
by an older copy) or holding another batch there (rewritten), and a line that is not
authentic (edited, forged), fail the check: verify names the newest failing line.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass

from secmeta.core.errors import InvalidValueError
from secmeta.core.log.extent import log_extent
from secmeta.events.keyring import Keyring

__all__ = ["Head", "WitnessLine", "head_line", "parse_head", "read_witness", "witness_problem", "witnesses_problem"]

_VERSION = "v1"
_LINE = re.compile(r"secmeta-head v1 store=(?P<store>\S+) offset=(?P<offset>\d+) link=(?P<link>[0-9a-f]{64}) "
                   r"key=(?P<key>\S+) mac=(?P<mac>[0-9a-f]{64})")


@dataclass(frozen=True)
class Head:
    """The log of store ``store_id`` held offsets below ``offset``, its batch there linked ``link``."""

    store_id: str
    offset: int
    link: bytes


def _body(head: Head, key_id: str) -> str:
    return f"secmeta-head {_VERSION} store={head.store_id} offset={head.offset} link={head.link.hex()} key={key_id}"


def _mac(keyring: Keyring, key_id: str, body: str) -> str:
    key = hashlib.blake2b(keyring.chain_key(key_id), digest_size=32, person=b"secmeta-witness").digest()
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def head_line(head: Head, keyring: Keyring) -> str:
    """The authenticated line of ``head``, under the keyring's newest key."""
    body = _body(head, keyring.newest_id)
    return f"{body} mac={_mac(keyring, keyring.newest_id, body)}"


def parse_head(line: str, keyring: Keyring) -> Head:
    """The head one line witnesses; InvalidValueError for a line that is malformed, made under a key the
    keyring lacks, or not authentic."""
    match = _LINE.fullmatch(line.strip())
    if match is None:
        raise InvalidValueError("the witness holds no `secmeta-head v1 ...` line as `secmeta log head` prints")
    key_id = match["key"]
    if key_id not in keyring.ids:
        raise InvalidValueError(f"the witness line was made under key id {key_id!r}, which is not in the keyring")
    head = Head(match["store"], int(match["offset"]), bytes.fromhex(match["link"]))
    if not hmac.compare_digest(match["mac"], _mac(keyring, key_id, _body(head, key_id))):
        raise InvalidValueError("the witness line fails its HMAC check: it was altered or not made with this keyring")
    return head


@dataclass(frozen=True)
class WitnessLine:
    """Line ``number`` of a witness file: the head it witnesses, or why it witnesses nothing (``problem``)."""

    number: int
    head: Head | None
    problem: str | None = None


def read_witness(text: str, keyring: Keyring) -> list[WitnessLine]:
    """Every ``secmeta-head`` line of ``text`` (other lines, such as notes, are passed over), in file order;
    InvalidValueError if it holds none."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip().startswith("secmeta-head"):
            continue
        try:
            found.append(WitnessLine(number, parse_head(line, keyring)))
        except InvalidValueError as exc:
            found.append(WitnessLine(number, None, str(exc)))
    if not found:
        raise InvalidValueError("the witness holds no `secmeta-head v1 ...` line as `secmeta log head` prints")
    return found


def witnesses_problem(lines: list[WitnessLine], store_id: str, start: int, end: int,
                      link_at: Callable[[int], bytes | None]) -> tuple[int, str] | None:
    """(offset, why) for the newest line (the last in the file) the log contradicts or that is not
    authentic, with how many fail; None when the log holds every line's head."""
    failing = []
    for line in lines:
        problem = line.problem  # set whenever the line has no authentic head
        if problem is None and line.head is not None:
            problem = witness_problem(line.head, store_id, start, end, link_at)
        if problem is not None:
            offset = end if line.head is None else min(end, line.head.offset)
            failing.append((offset, f"line {line.number}: {problem}"))
    if not failing:
        return None
    offset, why = failing[-1]
    more = f" ({len(failing)} of {len(lines)} witness lines fail)" if len(failing) > 1 else ""
    return offset, why + more


def witness_problem(head: Head, store_id: str, start: int, end: int,
                    link_at: Callable[[int], bytes | None]) -> str | None:
    """Why the log of ``store_id`` holding offsets [start, end) contradicts ``head`` (None: it holds it)."""
    if head.store_id != store_id:
        return f"the witness is of store {head.store_id}, not of this store {store_id}"
    if head.offset > end:
        return (f"{log_extent(end)} but the witness saw it hold offsets below {head.offset}: "
                "the store is behind its witness (rolled back, truncated or replaced by an older copy)")
    if head.offset < start:
        return (f"the witness's offset {head.offset} is before the log's start {start} (retention deleted it): "
                "it cannot be checked")
    link = link_at(head.offset)
    if link != head.link:
        return (f"the log's batch ending at offset {head.offset} is not the one the witness saw there "
                f"(link {'none' if link is None else link.hex()[:16]}..., witness {head.link.hex()[:16]}...): "
                "the log diverges from its witness (rewritten)")
    return None
