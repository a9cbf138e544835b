"""Commands other packages add to ``secmeta``, found through the ``secmeta.commands`` entry-point group.

A distribution declares its commands in pyproject.toml, as pytest and Flask
plugins do::

    [project.entry-points."secmeta.commands"]
    spark = "secmeta.consumers.spark.cli:COMMANDS"

The entry point names a ``Commands``: the function that adds the subcommands to
the parser, and the extra (``pip install 'secmeta[spark]'``) whose packages they
need. ``register`` only builds parsers, so loading it imports none of those
packages. When an extra is not installed its commands are left out of the CLI;
asking for one fails with a ``MissingExtraError`` that says what to install.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from secmeta.core.errors import SecmetaError

if TYPE_CHECKING:
    from importlib import metadata

GROUP = "secmeta.commands"

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")


@dataclass(frozen=True)
class Commands:
    """Subcommands added by another package: ``register(commands)``, needing ``extra`` if given."""

    register: Callable[[argparse._SubParsersAction], None]
    extra: str | None = None


class MissingExtraError(SecmetaError):
    """A command was asked for whose extra is not installed."""


def register_all(commands: argparse._SubParsersAction) -> None:
    """Add every installed command set; a command whose extra is missing only explains what to install."""
    from importlib import (
        metadata,  # only when a plugin's command is asked for (30 ms a store command saves)
    )

    for entry in sorted(metadata.entry_points(group=GROUP), key=lambda e: e.name):
        found: Commands = entry.load()
        missing = _missing_packages(entry.dist, found.extra)
        if not missing:
            found.register(commands)
            continue
        for name in _command_names(found):
            # Not listed by `secmeta --help` (no help=); takes any arguments, even -h, as plain words
            # (no character starts an option), so every use of the command explains what to install.
            stub = commands.add_parser(name, add_help=False, prefix_chars="\0")
            stub.add_argument("arguments", nargs="*")
            stub.set_defaults(func=_needs_extra(name, found.extra, missing))


def _command_names(found: Commands) -> list[str]:
    scratch = argparse.ArgumentParser().add_subparsers()
    found.register(scratch)
    return list(scratch.choices)


def _needs_extra(command: str, extra: str, missing: list[str]) -> Callable[[argparse.Namespace], int]:
    def fail(_args: argparse.Namespace) -> int:
        raise MissingExtraError(f"the {command} commands need the {extra} extra: pip install 'secmeta[{extra}]' "
                                f"(not installed: {', '.join(missing)})")

    return fail


def _missing_packages(dist: metadata.Distribution | None, extra: str | None) -> list[str]:
    """The distributions ``extra`` of ``dist`` requires that are not installed."""
    from importlib import metadata

    if extra is None:
        return []
    if dist is None or extra not in (dist.metadata.get_all("Provides-Extra") or ()):
        raise SecmetaError(f"the commands of entry point group {GROUP} need extra {extra!r}, "
                           f"which {dist.name if dist else 'their distribution'} does not declare")
    missing = []
    for requirement in dist.requires or ():
        marker = _EXTRA_MARKER.search(requirement)
        if marker is None or marker.group(1) != extra:
            continue
        name = _NAME.match(requirement).group(1)
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    return missing
