"""Columns as one binary section of a snapshot: little-endian arrays a loader views in place.

A section is a header (an 8-byte magic naming what it holds, how many counts and arrays follow), its
counts (u64 each: what the reader checks the arrays against), a table of its arrays (typecode, byte
offset from the section's start, items) and the arrays themselves, each 8-byte aligned.  A loader
views each array in the snapshot's bytes with one ``memoryview.cast``, without work per item.

A column of strings is a UTF-8 blob: each string followed by a separator none of them holds (or, when
they hold every character, by nothing: then only the offsets delimit them), so a run of strings
decodes with one ``decode`` and one ``split``; ``Strings`` reads one or a run.  Integer columns take
the narrowest unsigned width that holds their values (``narrow``).

The ACL index's section (``acl_section``) and the tokens' (``token_section``) are built from these.
"""

from __future__ import annotations

import operator
import struct
import sys
from array import array
from binascii import hexlify, unhexlify
from collections.abc import Iterable, Sequence
from itertools import accumulate, chain, pairwise

from secmeta.events.errors import InvalidValueError

__all__ = ["SectionError", "Strings", "Uuids", "aligned", "ascending", "blob", "narrow", "pack", "packed",
           "separator_code", "separator_named", "separator_of", "signed", "unpack", "uuid_bytes", "uuid_texts", "views",
           "width"]

_HEADER = struct.Struct("<8sII")  # magic, counts, arrays
_COUNT = struct.Struct("<Q")
_ARRAY = struct.Struct("<cxxxxxxxQQ")  # typecode, byte offset (from the section's start), items
ALIGN = 8
_SEPARATORS = "\n\x00\x1f\x1e\t"
_LITTLE = sys.byteorder == "little"


class SectionError(InvalidValueError):
    """A section whose header or arrays do not hold what it says (a damaged or foreign snapshot)."""


def width(largest: int) -> str:
    """The narrowest unsigned typecode that holds ``largest``."""
    for code in "BHIQ":
        if largest < 1 << (8 * array(code).itemsize):
            return code
    raise SectionError(f"a column value {largest} does not fit 64 bits")


def narrow(values: Iterable[int]) -> array:
    """``values`` as an array of the narrowest unsigned width that holds them."""
    wide = array("Q", values)
    return array(width(max(wide, default=0)), wide)


def aligned(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


def separator_of(columns: Sequence[list[str]], below: int = 0x2000) -> str:
    """A character none of the strings holds, or "" if they hold every one it tries: the usual separators, then
    each character from U+0020 up to ``below`` (surrogates skipped: no UTF-8 string holds one).  A section tries
    those below U+2000 (past them its offsets alone delimit the strings); format 4's chunks tried every one."""
    used: set[str] = set().union(*("".join(column) for column in columns))
    candidates = chain(_SEPARATORS, (chr(c) for c in range(0x20, below) if not 0xD800 <= c < 0xE000))
    return next((separator for separator in candidates if separator not in used), "")


def separator_code(separator: str) -> int:
    """How a section's header names its separator: its code point + 1, 0 when there is none."""
    return ord(separator) + 1 if separator else 0


def separator_named(code: int) -> str:
    """The separator a header's ``code`` names (SectionError when it names no character)."""
    if not 0 <= code <= sys.maxunicode + 1 or 0xD800 < code <= 0xE000:  # a surrogate is no character either
        raise SectionError(f"a section names its separator {code}, which is no character")
    return chr(code - 1) if code else ""


def blob(strings: list[str], separator: str) -> tuple[bytes, array, list[bytes]]:
    """UTF-8 of each string followed by the separator, the offsets of each string (narrowed), and the encoded
    strings."""
    encoded = [s.encode() for s in strings]
    sep = separator.encode()
    offsets = narrow(accumulate((len(e) + len(sep) for e in encoded), initial=0))
    return (sep.join(encoded) + sep if encoded and sep else b"".join(encoded)), offsets, encoded


def pack(magic: bytes, counts: Sequence[int], arrays: Sequence[array | bytes]) -> list[bytes]:
    """A section of ``arrays`` (arrays, or bytes as unsigned bytes) after ``counts``, as byte strings to write in
    order."""
    head = _HEADER.pack(magic, len(counts), len(arrays)) + b"".join(_COUNT.pack(c) for c in counts)
    return packed(head, arrays)


def packed(head: bytes, arrays: Sequence[array | bytes]) -> list[bytes]:
    """``head``, the table of ``arrays`` (typecode, byte offset, items) and the arrays, each 8-byte aligned."""
    at = aligned(len(head) + _ARRAY.size * len(arrays))
    entries, chunks = [], []
    for value in arrays:
        if isinstance(value, array):
            code = value.typecode
            if not _LITTLE:
                value = array(code, value)
                value.byteswap()
            data, items = value.tobytes(), len(value)
        else:
            code, data, items = "B", bytes(value), len(value)
        entries.append(_ARRAY.pack(code.encode(), at, items))
        chunks.append(data + bytes(aligned(len(data)) - len(data)))
        at += aligned(len(data))
    table = head + b"".join(entries)
    return [table + bytes(aligned(len(table)) - len(table)), *chunks]


def unpack(section: memoryview, magic: bytes, counts: int, names: Sequence[str]
           ) -> tuple[tuple[int, ...], dict[str, memoryview]]:
    """A section's counts and each of its arrays (named ``names``, in order) as a memoryview of its typecode (a
    byte-swapped copy on a big-endian machine); SectionError naming what does not hold."""
    what = magic.split(b"\0")[0].decode("ascii", "replace")
    if len(section) < _HEADER.size:
        raise SectionError(f"the {what} section is truncated ({len(section)} bytes)")
    found, n_counts, n_arrays = _HEADER.unpack_from(section)
    if found != magic:
        raise SectionError(f"the {what} section starts with {bytes(found)!r}, not {magic!r}")
    if n_counts != counts or n_arrays != len(names):
        raise SectionError(f"the {what} section lists {n_counts} counts and {n_arrays} arrays, "
                           f"not {counts} and {len(names)}")
    if len(section) < _HEADER.size + _COUNT.size * counts + _ARRAY.size * n_arrays:
        raise SectionError(f"the {what} section is truncated ({len(section)} bytes)")
    values = tuple(_COUNT.unpack_from(section, _HEADER.size + _COUNT.size * i)[0] for i in range(counts))
    return values, views(section, _HEADER.size + _COUNT.size * counts, names, what)


def views(section: memoryview, table: int, names: Sequence[str], what: str) -> dict[str, memoryview]:
    """The arrays a section's table (at byte ``table``) lists, by name, each a memoryview of its typecode (a
    byte-swapped copy on a big-endian machine); SectionError naming the array that does not hold."""
    arrays = {}
    for i, name in enumerate(names):
        code, at, items = _ARRAY.unpack_from(section, table + i * _ARRAY.size)
        typecode = code.decode("ascii", "replace")
        if typecode not in "BHIQq":
            raise SectionError(f"array {name} has typecode {typecode!r}")
        size = items * array(typecode).itemsize
        if at + size > len(section):
            raise SectionError(f"array {name} runs past the {what} section")
        view = section[at:at + size].cast(typecode)
        if not _LITTLE and typecode != "B":
            copy = array(typecode, view)
            copy.byteswap()
            view = memoryview(copy)
        arrays[name] = view
    return arrays


def ascending(column: Sequence[int], end: int, what: str) -> None:
    """SectionError unless ``column`` (where each run of a column of ``end`` items or bytes starts, and ``end``)
    starts at 0, never decreases and ends at ``end``: one C-level pass, so that a reader that slices by it later
    never meets a run that ends before it starts or past its column (issue 24: a damaged token section failed at
    its first lookup, during a login, rather than at open)."""
    if not len(column) or column[0] != 0 or column[-1] != end or not all(map(operator.le, column[:-1], column[1:])):
        raise SectionError(f"{what} do not run from 0 to {end} without decreasing")


def signed(view: memoryview) -> array:
    """A column as an array of signed 64-bit ints: a copy of its bytes when it is one already, else item by item."""
    if view.format == "q":
        out = array("q")
        out.frombytes(view.cast("B"))
        return out
    return array("q", view)


class Strings:
    """A string column read from its blob: ``[i]`` and ``[a:b]`` decode only what they return."""

    __slots__ = ("blob", "offsets", "separator", "_step")

    def __init__(self, blob: memoryview, offsets: memoryview, separator: str):
        self.blob, self.offsets, self.separator = blob, offsets, separator
        self._step = len(separator.encode())

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, at):
        offsets = self.offsets
        if isinstance(at, slice):
            a, b, _ = at.indices(len(self))
            if a >= b:
                return []
            return _decoded(self.blob[offsets[a]:offsets[b]], offsets[a:b + 1], self.separator, offsets[a])
        return str(self.blob[offsets[at]:offsets[at + 1] - self._step], "utf-8")

    def check(self) -> None:
        """SectionError unless the offsets run from 0 to the blob's end without decreasing (what ``[i]`` and
        ``[a:b]`` need)."""
        ascending(self.offsets, len(self.blob), "a string column's offsets")

    def all(self) -> list[str]:
        """Every string (SectionError when the blob and its offsets disagree).  A blob with a separator is split by it
        alone: only its first and last offsets are read, and checked (issue 24: checking every offset of a column
        read whole cost 8 ms of a 160k-node snapshot's open); one without is sliced at every offset, all checked."""
        if self.separator:
            offsets = self.offsets
            if not len(offsets) or offsets[0] != 0 or offsets[-1] != len(self.blob):
                raise SectionError(f"a string column's offsets do not run from 0 to {len(self.blob)}")
        else:
            self.check()
        try:
            strings = self[:]
        except UnicodeDecodeError:
            raise SectionError("a string column is not UTF-8") from None
        if len(strings) != len(self):
            raise SectionError("a string column holds its separator")
        return strings

    def find(self, key: bytes, at: int) -> bool:
        """Whether string ``at`` is ``key`` (UTF-8)."""
        offsets = self.offsets
        return self.blob[offsets[at]:offsets[at + 1] - self._step] == key


def _decoded(blob: memoryview, offsets, separator: str, base: int) -> list[str]:
    """The strings of a run of a blob (``offsets`` from ``base``)."""
    if separator:
        strings = str(blob, "utf-8").split(separator)
        strings.pop()  # after the last separator
        return strings
    return [str(blob[a - base:b - base], "utf-8") for a, b in pairwise(offsets)]


def uuid_bytes(strings: list[str]) -> bytes | None:
    """The 16 bytes of each string when every one is a canonical UUID (``uuid_of``), else None."""
    lengths = set(map(len, strings))
    if lengths and lengths != {36}:  # each its own 36 (joined, a 35 and a 37 could read as two)
        return None
    return uuid_of("".join(strings).encode(), len(strings))


def uuid_texts(raw: bytes | memoryview) -> list[str]:
    """The canonical text (lowercase, dashed: ``str(uuid.UUID(bytes=...))``) of each 16 bytes of ``raw``."""
    h = raw.hex()
    return [f"{h[i:i + 8]}-{h[i + 8:i + 12]}-{h[i + 12:i + 16]}-{h[i + 16:i + 20]}-{h[i + 20:i + 32]}"
            for i in range(0, len(h), 32)]


def uuid_of(texts: bytes, count: int = 1) -> bytes | None:
    """The rule of what a canonical UUID text is (``str(uuid.UUID(...))``'s: 32 lowercase hex digits, dashed after
    the 8th, 12th, 16th and 20th), the one ``uuid_bytes`` and ``Uuids.find`` use: the 16 bytes of each of ``count``
    such texts laid end to end in ``texts`` (UTF-8), else None. One text is a few C calls (a hash table's probe asks
    it of every id it looks up); many are as many C calls over them all."""
    if len(texts) != 36 * count:
        return None
    if count == 1:  # the dashes' places, 8, 13, 18 and 23, in one slice
        if texts[8:24:5] != b"----":
            return None
    elif any(texts[at::36] != b"-" * count for at in (8, 13, 18, 23)):
        return None
    digits = texts.translate(None, b"-")
    try:
        raw = unhexlify(digits)
    except ValueError:  # binascii.Error: odd length or not hex
        return None
    return raw if len(raw) == 16 * count and hexlify(raw) == digits else None  # no other dash, lowercase


class Uuids:
    """A column of canonical UUID strings, 16 bytes each: ``[i]`` and ``[a:b]`` make only what they return."""

    __slots__ = ("raw", "_sought")

    def __init__(self, raw: memoryview):
        if len(raw) % 16:
            raise SectionError(f"a UUID column holds {len(raw)} bytes, not a multiple of 16")
        self.raw = raw
        self._sought: tuple[bytes, bytes | None] = (b"", None)  # the last key ``find`` was given, as 16 bytes

    def __len__(self) -> int:
        return len(self.raw) // 16

    def __getitem__(self, at):
        if isinstance(at, slice):
            a, b, _ = at.indices(len(self))
            return uuid_texts(self.raw[16 * a:16 * b]) if a < b else []
        return uuid_texts(self.raw[16 * at:16 * at + 16])[0]

    def all(self) -> list[str]:
        return self[:]

    def find(self, key: bytes, at: int) -> bool:
        """Whether string ``at`` is ``key`` (UTF-8): its 16 bytes compared (a hash table probes several ids for one
        key, so the key's bytes are kept from one call to the next)."""
        sought, raw = self._sought
        if key is not sought:
            raw = uuid_of(key)
            self._sought = (key, raw)
        return raw is not None and self.raw[16 * at:16 * at + 16] == raw
