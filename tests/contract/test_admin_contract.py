"""The Admin contract (tests/contract/admin_suite.py) in process: one protocol, and its scenarios on SecurityStore.

SecurityStore, RemoteAdmin and (for the describe calls) StoreView have the protocol's signatures, and every
scenario's own expectations hold against SecurityStore.  The same scenarios through ``secmeta serve`` over TCP,
required to answer as here, are tests/core/server/test_admin_contract.py (marked ``server`` by its folder).
"""

from __future__ import annotations

import inspect
import typing

import pytest

from secmeta.core import Admin, AdminReader, SecurityStore
from secmeta.core.store.view import StoreView
from secmeta.core.wire.client import RemoteAdmin
from tests.contract.admin_suite import SCENARIOS, in_process

_ADMIN_CALLS = [name for name in dir(Admin) if not name.startswith("_")]


def _shape(function) -> tuple:
    """A method's parameters after self (name, kind, resolved annotation, default: context's left out, a
    remote admin may default it) and its resolved return annotation."""
    hints = typing.get_type_hints(function)
    params = list(inspect.signature(function).parameters.values())[1:]
    return (tuple((p.name, p.kind, hints.get(p.name), None if p.name == "context" else p.default) for p in params),
            hints.get("return"))


def test_the_protocol_names_every_admin_call():
    """Admin holds the describe, SCRAM, ACL, token and quota calls (and close), nothing else."""
    assert sorted(_ADMIN_CALLS) == [
        "alter_client_quotas", "alter_user_scram_credentials", "close", "create_acls", "create_delegation_token",
        "delete_acls", "describe_acls", "describe_client_quotas", "describe_delegation_tokens",
        "describe_user_scram_credentials", "expire_delegation_token", "renew_delegation_token"]


@pytest.mark.parametrize("implementation", [SecurityStore, RemoteAdmin], ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", _ADMIN_CALLS)
def test_both_implement_each_call_with_the_protocols_signature(implementation, name):
    """Same parameters (names, kinds, types) and result type as Admin's; RemoteAdmin may default context."""
    assert _shape(getattr(implementation, name)) == _shape(getattr(Admin, name))


@pytest.mark.parametrize("name", [name for name in dir(AdminReader) if not name.startswith("_")])
def test_a_past_view_answers_the_describe_calls_as_the_store_does(name):
    """StoreView (``as_of``) is an AdminReader with the store's describe signatures."""
    assert _shape(getattr(StoreView, name)) == _shape(getattr(AdminReader, name))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_in_process(tmp_path, scenario):
    """The scenario's own expectations hold against SecurityStore."""
    with in_process(tmp_path) as backend:
        scenario(backend)
