"""``secmeta config``: describe and alter the logged settings (kafka-configs.sh's options for the cluster's broker
configs: ``--alter --add-config 'super.users=User:a;User:b' --delete-config NAME``).

The settings that decide access (secmeta.core.settings.LOGGED) change only by a logged, attributed event; one
``--alter`` is one request, applied whole or not at all (an unknown setting or bad value is an error naming it,
and nothing is written). ``--delete-config`` returns a setting to its default. ``--describe`` shows each logged
setting in force (``--as-of`` / ``--at-offset``: as it stood then) and where its value came from; their history
is ``secmeta history --event-type SecuritySettingAltered``. Over ``--bootstrap-server`` there is no settings API
(Kafka's DescribeConfigs/IncrementalAlterConfigs are not served), so this command works on a store directory.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, cast

from secmeta.core.cli.common import add_json_option, emit, emit_json, held_output, written
from secmeta.core.cli.scram_configs import split_add_config
from secmeta.core.cli.security import add_point_options, add_security_options, has_point, open_admin
from secmeta.core.errors import InvalidValueError

if TYPE_CHECKING:
    from secmeta.core.admin import SettingsAdmin, SettingsReader


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "config", help="describe and alter the settings that decide access (logged, with their history)",
        description="Describe and alter the logged settings (super.users, allow.everyone.if.no.acl.found, "
                    "delegation.token.*, sasl.enabled.mechanisms, secmeta.scram.default.iterations, "
                    "secmeta.allow.plaintext.passwords) with kafka-configs.sh option names. Each --alter is one "
                    "logged, attributed request (needs ALTER_CONFIGS on the cluster, and also ALTER on the cluster, "
                    "as writing ACLs does, for a setting that decides who is authorized or who may log in).",
    )
    add_security_options(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="change settings (with --add-config or --delete-config)")
    action.add_argument("--describe", action="store_true", help="show every logged setting in force")
    p.add_argument("--add-config", action="append", default=[], metavar="CONFIGS",
                   help="settings to set, e.g. 'super.users=User:admin;User:ops,allow.everyone.if.no.acl.found=false' "
                        "(a value holding commas in brackets: 'sasl.enabled.mechanisms=[SCRAM-SHA-256,SCRAM-SHA-512]')")
    p.add_argument("--delete-config", action="append", default=[], metavar="NAMES",
                   help="settings to return to their defaults, comma-separated")
    add_json_option(p, "print JSON: the settings --describe shows, or what --alter wrote (log offsets, names)")
    add_point_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # No --bootstrap-server here (secmeta serve does not serve DescribeConfigs / IncrementalAlterConfigs), so the
    # session is a store's, which has the settings calls.
    if args.describe:
        if args.add_config or args.delete_config:
            raise InvalidValueError("--add-config and --delete-config go with --alter, not --describe")
        with open_admin(args, read_only=True) as session:
            rows = cast("SettingsReader", session.reader).describe_settings(context=session.context)
            emit(rows, {"name": "NAME", "value": "VALUE", "source": "SOURCE"}, json=args.json)
        return 0
    if has_point(args):
        raise InvalidValueError("--as-of / --at-offset go with --describe: the past cannot be altered")
    set_: dict[str, str] = {}
    for text in args.add_config:
        for name, value in split_add_config(text).items():
            if name in set_:
                raise InvalidValueError(f"--add-config gives {name} twice: give each setting once")
            set_[name] = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    delete = [n.strip() for text in args.delete_config for n in text.split(",") if n.strip()]
    if not set_ and not delete:
        raise InvalidValueError("--alter needs --add-config or --delete-config")
    with held_output(), open_admin(args) as session:  # the write completes before anything is printed
        first = session.next_offset()
        changed = cast("SettingsAdmin", session.admin).alter_settings(set_, delete, context=session.context)
        if args.json:
            emit_json({"log": written(first, session.next_offset()), "altered": list(changed)})
        else:
            print(f"altered {', '.join(changed)}" if changed else "no setting changed (each was already as asked)")
    return 0
