"""The one way the CLI's text output shows a name: ``printable(text)``.

A name the store holds may carry characters that change how it looks without being seen: a
bidirectional control (U+202E turns ``txt.exe`` around), a zero-width space, a control character,
a line separator (a fake row).  Names written now are refused them (``secmeta.core.validation``),
but an older log or replicated data may hold them, so every text output (tables, ``acls`` lines,
``authorize``, ``configs --describe``, ``diff``) shows each such character as an escape:
``\\u202e``, ``\\x00``, ``\\U000e0041``.  A backslash before ``\\``, ``x``, ``u`` or ``U`` is doubled,
so no name displays as another's escape: what is shown reads back to exactly one name.
JSON output keeps the exact string (json escapes what it must).
"""

from __future__ import annotations

__all__ = ["printable"]


def printable(text: str) -> str:
    """``text`` with every character ``str.isprintable`` refuses (categories Cc, Cf, Cs, Co, Cn, Zl, Zp, and
    every space but ' ') escaped, and a backslash that would read as the start of an escape doubled (one before
    ``\\``, ``x``, ``u``, ``U`` or an escaped character); ``text`` itself when it has neither (the usual name)."""
    if text.isprintable() and "\\" not in text:
        return text
    shown = []
    for i, char in enumerate(text):
        if char == "\\":
            after = text[i + 1:i + 2]
            shown.append("\\\\" if after and (after in "\\xuU" or not after.isprintable()) else "\\")
        elif char.isprintable():
            shown.append(char)
        else:
            code = ord(char)
            shown.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(shown)
