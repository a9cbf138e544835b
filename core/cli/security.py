"""What the security commands share: opening the store, the acting principal, resource options."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from secmeta.core import validation
from secmeta.core.cli.common import DEFAULT_STORE_ENV, add_store_options, keyring, store_path
from secmeta.core.errors import InvalidValueError, StoreError
from secmeta.events.types import CLUSTER_NAME, AclOperation, PatternType, ResourceType

if TYPE_CHECKING:  # imported where a command runs, so registering the commands stays light
    from secmeta.core.admin import Admin, AdminReader
    from secmeta.core.config import StoreConfig
    from secmeta.core.store.facade import SecurityStore
    from secmeta.core.store.view import StoreView
    from secmeta.core.types import RequestContext

RESOURCE_OPTIONS = (
    ("--topic", ResourceType.TOPIC, "topic name"),
    ("--group", ResourceType.GROUP, "consumer group id"),
    ("--transactional-id", ResourceType.TRANSACTIONAL_ID, "transactional id"),
    ("--delegation-token", ResourceType.DELEGATION_TOKEN, "delegation token id"),
    ("--user-principal", ResourceType.USER, "user principal (resource of type USER)"),
)


def add_security_options(parser: argparse.ArgumentParser) -> None:
    add_store_options(parser)
    parser.add_argument("--as", dest="as_principal", metavar="PRINCIPAL",
                        help="act as this principal (default: the store's default_principal, User:admin); logged "
                             "as asserted, not authenticated, beside your OS user, host name and process")
    parser.add_argument("--from-host", default=None, metavar="HOST",
                        help="the acting client's host (default 127.0.0.1); logged as asserted, like --as")


def add_remote_options(parser: argparse.ArgumentParser) -> None:
    """--bootstrap-server / --command-config: talk to a running `secmeta serve` instead of a store directory."""
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT",
                        help="send the request to this running server over Kafka's protocol instead of opening --store")
    parser.add_argument("--command-config", metavar="FILE",
                        help="Kafka client properties for --bootstrap-server (security.protocol, sasl.*, ssl.*)")
    # $SECMETA_STORE applies in open_admin, and only without --bootstrap-server: an explicit --store
    # beside --bootstrap-server is then told apart from the environment's and refused.
    parser.set_defaults(store=None)


def add_resource_options(parser: argparse.ArgumentParser, *, many: bool) -> None:
    for flag, _, what in RESOURCE_OPTIONS:
        parser.add_argument(flag, action="append" if many else "store", metavar="NAME", help=what)
    parser.add_argument("--cluster", action="store_true", help=f"the cluster resource ({CLUSTER_NAME})")


def resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    """(type, name) of every resource option given."""
    out = []
    for flag, rtype, _ in RESOURCE_OPTIONS:
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        for name in value if isinstance(value, list) else ([value] if value is not None else []):
            out.append((rtype, name))
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def one_resource(args: argparse.Namespace) -> tuple[ResourceType, str]:
    """(type, name) of the one resource option given; more or fewer is an error naming the options."""
    targets = resources(args)
    if len(targets) != 1:
        raise InvalidValueError("give exactly one resource: --topic, --group, --cluster, --transactional-id, "
                                "--delegation-token or --user-principal")
    return targets[0]


def pattern_type(text: str) -> PatternType:
    """--resource-pattern-type, by name (any case) or code."""
    return validation.enum_value(PatternType, text, "--resource-pattern-type")


def kafka_operation_name(op: AclOperation) -> str:
    """An operation as Kafka's tools write it (SecurityUtils.operationName): IDEMPOTENT_WRITE -> IdempotentWrite."""
    return "".join(word.capitalize() for word in op.name.split("_"))


# AclEntry.ACL_OPERATIONS: every operation but the filter-only UNKNOWN and ANY.
ACL_OPERATIONS = tuple(op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY))
OPERATION_NAMES = ", ".join(kafka_operation_name(op) for op in ACL_OPERATIONS)


def operation(text: str) -> AclOperation:
    """--operation of acls, authorize, who-could and timeline: a name as kafka-acls.sh takes it (Read, IdempotentWrite, ...) in any
    case, or as the enum spells it (IDEMPOTENT_WRITE); UNKNOWN and ANY are no operation an ACL can name."""
    op = validation.enum_or_unknown(AclOperation, text)
    if op not in ACL_OPERATIONS:
        raise InvalidValueError(f"unknown operation {text!r} (valid operation names: {OPERATION_NAMES})")
    return op


def open_store(args: argparse.Namespace, *, read_only: bool = False) -> SecurityStore:
    """The store of --store; reads open it read-only so they work beside a running writer."""
    from secmeta.core.config import StoreConfig
    from secmeta.core.store.facade import SecurityStore

    path = store_path(args)
    try:
        config = StoreConfig.load(path)
    except InvalidValueError as exc:  # the store's config.json: a store that cannot be used (exit 1), no usage error
        raise StoreError(str(exc)) from None
    return SecurityStore.open(path, config, keyring=keyring(args), read_only=read_only,
                              create=False)  # only `secmeta init` creates a store


def log_initial_settings(store: SecurityStore, args: argparse.Namespace) -> None:
    """Log the settings the store's log has not set yet as the local operator (``secmeta init``, and ``secmeta
    serve`` on a store made before settings were logged), so config.json never decides them again. Other commands
    do not: a request they refuse writes nothing."""
    from secmeta.core.types import RequestContext

    try:
        store.log_initial_settings(RequestContext(
            principal=getattr(args, "as_principal", None) or store.config.default_principal,
            host=getattr(args, "from_host", None) or "127.0.0.1", tls=True))
    except BaseException:
        store.close()
        raise


@dataclass(frozen=True, slots=True)
class AdminSession:
    """What an admin command talks to: the ``admin`` (the store of --store, or a RemoteAdmin connected to
    --bootstrap-server), the ``reader`` its describe calls go to (the admin, or the store as it stood at
    --as-of / --at-offset) and the ``context`` of who asks (--as and --from-host on a store; None over
    the wire, where the login of --command-config decides)."""

    admin: Admin
    reader: AdminReader
    context: RequestContext | None
    store: SecurityStore | None = None

    def next_offset(self) -> int | None:
        """The store's next log offset (the events applied), for a write's report; None over the wire."""
        return None if self.store is None else self.store.image.next_offset


@contextmanager
def open_admin(args: argparse.Namespace, *, read_only: bool = False) -> Iterator[AdminSession]:
    """The one local/remote choice: a session on a RemoteAdmin connected to --bootstrap-server, else on the
    store of --store (read-only for reads, so they work beside a running writer); closed when the block ends.

    Over the wire the login of --command-config decides who asks, so --as and --from-host are refused, and so
    are --as-of / --at-offset, which read a store's history, and --store / --key-file, which name a local
    store (the $SECMETA_STORE and $SECMETA_KEY_FILE defaults are not used then).
    """
    if getattr(args, "bootstrap_server", None) is None:
        if getattr(args, "command_config", None):
            raise InvalidValueError("--command-config needs --bootstrap-server")
        if args.store is None:
            args = argparse.Namespace(**{**vars(args), "store": os.environ.get(DEFAULT_STORE_ENV)})
        with open_store(args, read_only=read_only) as store:
            yield AdminSession(store, view(store, args), acting_context(args, store.config), store)
        return
    for flag, value in (("--store", args.store), ("--key-file", args.key_file)):
        if value is not None:
            raise InvalidValueError(f"{flag} cannot be used with --bootstrap-server: the server holds the store "
                                    "(give one or the other)")
    for flag in ("as_of", "at_offset"):
        if getattr(args, flag, None) is not None:
            raise InvalidValueError(f"--{flag.replace('_', '-')} reads a store's history and cannot be used with "
                             "--bootstrap-server (a server answers as of now)")
    for flag, value in (("--as", args.as_principal), ("--from-host", args.from_host)):
        if value is not None:
            raise InvalidValueError(f"{flag} cannot be used with --bootstrap-server: the server takes the principal "
                             "and host from the connection (log in with --command-config)")
    from secmeta.core.wire.client import RemoteAdmin

    with RemoteAdmin.connect(args.bootstrap_server, args.command_config) as remote:
        yield AdminSession(remote, remote, None)


def add_point_options(parser: argparse.ArgumentParser) -> None:
    """--as-of / --at-offset: answer as the store stood at that point."""
    point = parser.add_mutually_exclusive_group()
    point.add_argument("--as-of", metavar="TIME", help="answer as of this time (ISO-8601 with zone, or epoch ms)")
    point.add_argument("--at-offset", metavar="N", help="answer as the store stood after its first N events")


def has_point(args: argparse.Namespace) -> bool:
    return getattr(args, "as_of", None) is not None or getattr(args, "at_offset", None) is not None


def view(store: SecurityStore, args: argparse.Namespace) -> SecurityStore | StoreView:
    """The store itself, or its read-only view at --as-of / --at-offset."""
    from secmeta.core.times import parse_offset, parse_time

    if getattr(args, "as_of", None) is not None:
        return store.as_of(timestamp_ms=parse_time(args.as_of))
    if getattr(args, "at_offset", None) is not None:
        return store.as_of(offset=parse_offset(args.at_offset))
    return store


def acting_context(args: argparse.Namespace, config: StoreConfig) -> RequestContext:
    """Who acts on a local store: --as (default: the store's default_principal) from --from-host (default 127.0.0.1)."""
    from secmeta.core.types import RequestContext

    return RequestContext(principal=args.as_principal or config.default_principal,
                          host=args.from_host or "127.0.0.1", tls=True)
