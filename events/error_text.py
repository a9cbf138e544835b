"""The stable text of an exception raised while decoding: its class and message, never an object's repr.

fastavro names the stream it read from by its repr (``cannot read double from <_io.BytesIO object at 0x7f...>``),
so the same corrupt body gave another text each run: dead-letter reasons that cannot be compared, grouped or
searched. ``error_text`` gives the exception's class name and its ``str`` with every object repr that holds an
address replaced by what the object is (the stream read from: "the input"). ``str``, not ``repr``: an exception's
repr can hold the arguments it was built with whole (a ``UnicodeDecodeError``'s: the bytes being decoded).
"""

from __future__ import annotations

import re

__all__ = ["error_text"]

# <_io.BytesIO object at 0x7f...>, <function f at 0x...>, <fastavro._read.Foo object at 0X...>
_ADDRESSED = re.compile(r"<(?:[\w.]*\.)?(\w+)(?: object)?[^<>]*? at 0[xX][0-9A-Fa-f]+>")
_STREAMS = frozenset({"BytesIO", "BufferedReader", "StringIO", "FileIO", "TextIOWrapper", "memoryview"})


def _named(match: re.Match[str]) -> str:
    name = match.group(1)
    return "the input" if name in _STREAMS else f"a {name}"


def error_text(exc: BaseException) -> str:
    """``"ClassName: message"`` (the class alone if the message is empty), every object repr with an address
    replaced by what the object is: the same exception gives the same text in every process."""
    message = _ADDRESSED.sub(_named, str(exc))
    return f"{exc.__class__.__name__}: {message}" if message else exc.__class__.__name__
