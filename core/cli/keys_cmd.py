"""``secmeta keys``: create and rotate keyring files."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:
    keys = commands.add_parser("keys", help="manage keyring files", description="Manage keyring files.")
    sub = keys.add_subparsers(dest="keys_command", required=True, metavar="COMMAND")
    gen = sub.add_parser(
        "generate",
        help="create a keyring file, or add a new newest key to one (rotation)",
        description=(
            "Create a keyring file with one fresh 256-bit key, or append a new key that "
            "becomes the newest: new writes use it, older records still open with the old keys. "
            "Prints the key id, never the key."
        ),
    )
    gen.add_argument("--key-file", metavar="PATH", required=True, help="keyring file to create or extend")
    gen.set_defaults(func=generate)


def generate(args: argparse.Namespace) -> int:
    from secmeta.events.keyring import Keyring

    key_id = Keyring.generate_file(args.key_file)
    ring = Keyring.from_file(args.key_file)
    print(f"added key {key_id} to {args.key_file} ({len(ring.ids)} key(s); newest is {ring.newest_id})")
    return 0
