"""What every CLI command shares: store and key options, and the one output formatter.

Output: ``emit(rows, columns, json=...)`` prints rows (mappings) as an aligned table of the named
columns, or as a JSON array of the whole rows; ``emit_json(value)`` prints any other answer as JSON;
a table shows each cell as ``secmeta.core.cli.display.printable`` does (odd characters escaped, JSON keeps
them); ``iso_time(ms)`` is the one way a time is shown (ISO-8601 UTC with milliseconds and ``Z``), and the
JSON encoder writes datetimes the same way.  ``add_json_option`` gives a read command its ``--json``.
"""

from __future__ import annotations

import argparse
import enum
import io
import json as _json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stdout
from datetime import datetime
from typing import TYPE_CHECKING

from secmeta.core.cli.display import printable
from secmeta.core.times import format_datetime, format_ms, with_times
from secmeta.events.errors import InvalidValueError

if TYPE_CHECKING:
    from secmeta.events.keyring import Keyring

DEFAULT_STORE_ENV = "SECMETA_STORE"


def add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", metavar="DIR", default=os.environ.get(DEFAULT_STORE_ENV),
        help=f"store directory (default: ${DEFAULT_STORE_ENV})",
    )
    add_key_option(parser)


def add_key_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--key-file", metavar="PATH",
        help="keyring file (default: $SECMETA_KEY_FILE, or inline keys in $SECMETA_KEYS)",
    )


def add_json_option(parser: argparse.ArgumentParser, help: str = "print JSON instead of a table") -> None:
    parser.add_argument("--json", action="store_true",
                        help=f"{help} (times as ISO-8601 UTC with Z, each beside its epoch-ms field)")


@contextmanager
def held_output() -> Iterator[None]:
    """Hold what a write command prints until the block ends, so its write completes (or is refused) before
    anything reaches stdout: a reader that goes away (``| head -c 1``) cannot stop a write half way, and
    printing never interleaves with writing.  Enter it before the store opens, so the store is closed (the
    write durable) when the output is printed; a block that raises prints nothing (stderr names the error)."""
    held = io.StringIO()
    with redirect_stdout(held):
        yield
    sys.stdout.write(held.getvalue())


def written(first_offset: int | None, next_offset: int | None) -> dict[str, int | None]:
    """What a write command's JSON says it logged: its events are the offsets from ``first_offset`` up to
    ``next_offset`` (the log's next offset after it, as the store reports offsets; equal when nothing was
    written).  None over --bootstrap-server, where the server's log is not read."""
    return {"first_offset": first_offset, "next_offset": next_offset}


def seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def store_path(args: argparse.Namespace) -> str:
    if not args.store:
        raise InvalidValueError(f"no store given: pass --store DIR or set ${DEFAULT_STORE_ENV}")
    return args.store


def keyring(args: argparse.Namespace) -> Keyring:
    from secmeta.events.keyring import Keyring

    return Keyring.load(args.key_file)


iso_time = format_ms  # the CLI's name for secmeta.core.times' one way to show a time


def _plain(value: object) -> object:
    """What the JSON encoder writes for a value json cannot: datetimes in ISO-8601 Z, enums by name."""
    if isinstance(value, datetime):
        return format_datetime(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(_cell(v) for v in value) or "-"
    if isinstance(value, datetime):
        return format_datetime(value)
    if isinstance(value, enum.Enum):
        return value.name
    return str(value)


def emit(rows: Iterable[Mapping[str, object]], columns: Mapping[str, str] | Sequence[str], *,
         json: bool = False, empty: str | None = None, out=None) -> int:
    """Print rows for a person (an aligned table) or a program (``json=True``); return how many.

    ``columns`` maps a row key to its table header (a plain list of keys is headed by the key in
    upper case).  JSON is one array holding every key of every row, not only the columns.  A table
    shows None as ``-`` and joins lists with commas; ``empty`` is printed instead of a bare header
    when there are no rows.  Rows may be a generator: JSON is streamed, a table is not.
    """
    out = out or sys.stdout
    if json:
        count = 0
        out.write("[")
        for count, row in enumerate(rows, 1):
            out.write(("," if count > 1 else "") + "\n  " + _json.dumps(with_times(row), default=_plain))
        out.write("\n]\n" if count else "]\n")
        return count
    headers = dict(columns) if isinstance(columns, Mapping) else {c: c.upper() for c in columns}
    cells = [[_cell(row.get(key)) for key in headers] for row in rows]
    if not cells and empty is not None:
        print(empty, file=out)
        return 0
    print_table(list(headers.values()), cells, out=out)
    return len(cells)


def emit_json(value: object, out=None) -> None:
    """Print one answer that is not a list of rows (a decision, a diff, a report) as JSON."""
    out = out or sys.stdout
    _json.dump(with_times(value), out, indent=2, default=_plain)
    print(file=out)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]], out=None) -> None:
    """Print rows as aligned columns under a header line; each cell as ``printable`` shows it."""
    out = out or sys.stdout
    cells = [[str(c) for c in headers]] + [[("" if c is None else printable(str(c))) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip(), file=out)
        if n == 0:
            print("  ".join("-" * w for w in widths), file=out)

