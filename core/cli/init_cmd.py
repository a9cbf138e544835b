"""``secmeta init``: create a store, the one command that does.

Every other command opens ``--store`` with ``create=False``, so a mistyped directory is an error
("not a secmeta store") instead of a new, empty store that answers every question with nothing
(as ``kafka-storage.sh format`` is the one step that makes a Kafka log directory).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from secmeta.core.cli.common import add_store_options, keyring, store_path
from secmeta.core.cli.replication import add_connection_options, replication
from secmeta.core.errors import StoreError


def register(commands: argparse._SubParsersAction) -> None:
    init = commands.add_parser(
        "init", help="create a new store",
        description=(
            "Create a new, empty store in DIR (which must not exist or be empty), written with the "
            "keyring's newest key. Every other command refuses a directory that is not a store."
        ),
    )
    add_store_options(init)
    join = init.add_argument_group("joining a replicated store (needs the kafka extra)")
    join.add_argument("--join", metavar="HOST:PORT",
                      help="make this node's store from the log topic on this Kafka cluster, verified link by "
                           "link (the keyring must hold the store's keys); then serve it with --replication-*")
    add_connection_options(join)  # type: ignore[arg-type]
    init.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from secmeta.core.cli.security import log_initial_settings
    from secmeta.core.config import StoreConfig
    from secmeta.core.store.facade import SecurityStore
    from secmeta.core.store.storedir import META_FILE

    path = store_path(args)
    if (Path(path) / META_FILE).exists():
        raise StoreError(f"{path} is already a secmeta store; nothing was changed")
    ring = keyring(args)
    if args.join:
        with replication().join(path, args, ring) as store:
            print(f"joined store {store.log.store.store_id} in {path}: offsets {store.log.start_offset} to "
                  f"{store.log.end_offset} from the log topic, verified")
        return 0
    with SecurityStore.open(path, StoreConfig.load(path), keyring=ring, create=True) as store:
        store_id = store.log.store.store_id
        log_initial_settings(store, args)  # the settings that decide access are the log's first events
    print(f"created store {path} (id {store_id}, key {ring.newest_id}); its settings: secmeta config --describe")
    return 0
