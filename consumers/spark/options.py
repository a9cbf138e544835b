"""Reading the options of secmeta's Spark data sources, with errors that name the option."""

from __future__ import annotations

from collections.abc import Mapping

from secmeta.events.errors import InvalidValueError

__all__ = ["SecmetaSourceError", "int_option", "option"]


class SecmetaSourceError(InvalidValueError):
    """A secmeta data source was given bad options (no path, a bad number)."""


def option(options: Mapping[str, str], name: str) -> str | None:
    """An option by name (Spark may hand option names over in lower case)."""
    value = options.get(name)
    if value is None:
        value = options.get(name.lower())
    return None if value is None else str(value)


def int_option(options: Mapping[str, str], name: str, *, minimum: int = 1,
               error: type[SecmetaSourceError] = SecmetaSourceError) -> int | None:
    """An integer option of at least ``minimum`` (None when absent or empty)."""
    text = option(options, name)
    if text is None or text.strip() == "":
        return None
    try:
        value = int(text)
    except ValueError:
        raise error(f"option {name} must be an integer, not {text!r}") from None
    if value < minimum:
        raise error(f"option {name} must be >= {minimum}, not {value}")
    return value
