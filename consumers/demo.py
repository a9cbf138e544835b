"""``secmeta demo``: the main job on an embedded default store, narrated (secmeta.consumers.demo_scenario).

It lives with the consumers because it also shows the Kafka mirror and the Spark
tables (each skipped, with a note, when its extra is not installed); it joins
the CLI through the ``secmeta.commands`` entry-point group (pyproject.toml). This
module only registers the command, so the CLI starts without loading the scenario.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from secmeta.core.cli.plugins import Commands
from secmeta.events.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from secmeta.consumers.demo_scenario import build_store, serve

__getattr__, __dir__, _ = lazy_exports(__name__, globals(), {
    "secmeta.consumers.demo_scenario": ("build_store", "serve"),
})


def register(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo", help="run the demo scenario on a local store",
        description="Build a store under the working directory: hundreds of users, thousands of ACLs, "
                    "delegation tokens issued by one principal for another; then describes, decisions, "
                    "authentication, history in the log, snapshots and tamper detection.",
    )
    demo.add_argument("--dir", default="demo-store", help="store directory to (re)create (default ./demo-store)")
    demo.add_argument("--users", type=int, default=300, help="SCRAM users to create (default 300)")
    demo.add_argument("--acls", type=int, default=3000, help="ACLs to create (default 3000)")
    demo.add_argument("--no-spark", action="store_true", help="skip the Spark part (it starts a local JVM)")
    demo.set_defaults(func=run)


COMMANDS = Commands(register)


def run(args: argparse.Namespace) -> int:
    from secmeta.consumers.demo_scenario import run as run_scenario

    return run_scenario(args)
