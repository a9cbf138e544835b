"""A store that ``secmeta acls`` tests run the CLI against, and read back through the store's own API.

ACLs are read and seeded as plain 7-tuples of names, ``(resource type, name, pattern type, principal,
host, operation, permission)``, so a test's expected set is written literally.
"""

from __future__ import annotations

from pathlib import Path

from secmeta.core import SecurityStore, StoreConfig
from secmeta.events.keyring import Keyring
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.clikit import cli_env, run
from tests.storekit import ADMIN

Acl = tuple[str, str, str, str, str, str, str]


class AclCli:
    """A store directory made with the Python API (so no CLI command creates it) and the env pointing at it."""

    def __init__(self, directory: Path, monkeypatch, capsys):
        self.keys, self.path = cli_env(directory, monkeypatch)
        self._capsys = capsys
        SecurityStore.open(self.path, StoreConfig(), keyring=Keyring.load(self.keys)).close()

    def run(self, *argv: str) -> tuple[int, str, str]:
        """``secmeta *argv``: exit code, stdout, stderr."""
        return run(self._capsys, *argv)

    def _open(self, *, read_only: bool) -> SecurityStore:
        return SecurityStore.open(self.path, StoreConfig.load(self.path), keyring=Keyring.load(self.keys),
                                  read_only=read_only)

    def seed(self, acls: set[Acl]) -> None:
        with self._open(read_only=False) as store:
            errors = store.create_acls([_binding(a) for a in sorted(acls)], context=ADMIN)
        assert not any(errors), errors

    def acls(self) -> set[Acl]:
        with self._open(read_only=True) as store:
            return {_names(b) for b in store.describe_acls(AclBindingFilter.any(), context=ADMIN)}

    def end_offset(self) -> int:
        """The log's end offset: unchanged means the command wrote nothing."""
        with self._open(read_only=True) as store:
            return store.log.end_offset


def _binding(a: Acl) -> AclBinding:
    rtype, name, ptype, principal, host, op, perm = a
    return AclBinding.of(ResourceType[rtype], name, PatternType[ptype], principal, host, AclOperation[op],
                         AclPermissionType[perm])


def _names(b: AclBinding) -> Acl:
    return (b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
            b.permission_type.name)
