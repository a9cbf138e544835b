"""The command line's parser: argparse's, with each option's default in its help and a mistyped option named.

Argparse checks the options a command requires before it reports the ones it does not know, so
``secmeta acls --lsit`` would say "one of the arguments --add --remove --list is required".  ``Parser``
reports an unknown option first, by name, with the nearest valid one: "unknown option --lsit (did you
mean --list?)".  Abbreviations argparse accepts (a unique prefix, ``--lis``) stay accepted.  Every
subcommand's parser is a ``Parser`` too (argparse makes subparsers of the parent's class).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


class HelpFormatter(argparse.HelpFormatter):
    """Argparse's help, with each option's default appended unless its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (action.option_strings and action.default not in (None, False, [], argparse.SUPPRESS)
                and "default" not in text):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors name an unknown option before anything else."""

    _given: Sequence[str] = ()

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._given = list(sys.argv[1:] if args is None else args)
        namespace, extras = super().parse_known_args(args, namespace)
        unknown = self.unknown_option(self._given)
        if unknown:
            self.error(unknown)
        return namespace, extras

    def error(self, message: str):  # type: ignore[override]
        super().error(self.unknown_option(self._given) or message)

    def unknown_option(self, tokens: Sequence[str]) -> str | None:
        """"unknown option --X (did you mean --Y?)" for the first option in ``tokens`` this parser does not
        know; None when it knows them all.  A parser with subcommands looks only before the command."""
        known = [s for s in self._option_string_actions if s.startswith(self.prefix_chars[0] * 2)]
        commands = any(isinstance(a, argparse._SubParsersAction) for a in self._actions)
        for token in tokens:
            if token == "--" or (commands and token[:1] not in self.prefix_chars):
                return None
            if not token.startswith(self.prefix_chars[0] * 2) or len(token) < 3:
                continue
            name = token.split("=", 1)[0]
            if name in known or (self.allow_abbrev and any(s.startswith(name) for s in known)):
                continue
            import difflib  # only for a mistyped option

            near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            return f"unknown option {name}" + (f" (did you mean {near[0]}?)" if near else "")
        return None
