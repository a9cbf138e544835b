"""What every CLI command shares: store and key options, time formatting, tables and JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from events.keyring import Keyring

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


def store_path(args: argparse.Namespace) -> str:
    if not args.store:
        raise SystemExit(f"secmeta: error: no store given: pass --store DIR or set ${DEFAULT_STORE_ENV}")
    return args.store


def keyring(args: argparse.Namespace) -> Keyring:
    return Keyring.load(args.key_file)


def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC with millisecond precision."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]], out=None) -> None:
    """Print rows as aligned columns under a header line."""
    out = out or sys.stdout
    cells = [[str(c) for c in headers]] + [[("" if c is None else str(c)) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip(), file=out)
        if n == 0:
            print("  ".join("-" * w for w in widths), file=out)


def print_json(value: object, out=None) -> None:
    json.dump(value, out or sys.stdout, indent=2, sort_keys=False, default=str)
    print(file=out or sys.stdout)
