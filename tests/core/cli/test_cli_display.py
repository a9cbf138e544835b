"""Odd characters a log already holds are escaped in every text output, kept exact in JSON (issue 22).

A name with U+202E (RIGHT-TO-LEFT OVERRIDE) shows ``invoice\u202efdp.exe`` as "invoiceexe.pdf", and one with a
newline fakes a row; names written now are refused them (tests/core/test_validation.py), but a log written
before, or replicated data, may hold them.  The store here holds such an ACL, logged as an older version
would have logged it (through the store's one write path, without today's checks).
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.core import SecurityStore, StoreConfig
from secmeta.core.cli.display import printable
from secmeta.core.cli.quota_configs import quota_line
from secmeta.core.control.result import ControlResult
from secmeta.events.keyring import Keyring
from secmeta.events.records import AclCreated, ClientQuotaEntity
from tests.clikit import make_store, run
from tests.storekit import ADMIN, acl

NAME, PRINCIPAL = "invoice\u202efdp.exe", "User:bob\nUser:admin"
SHOWN_NAME, SHOWN_PRINCIPAL = "invoice\\u202efdp.exe", "User:bob\\x0aUser:admin"


@pytest.fixture
def store(tmp_path, monkeypatch):
    path = make_store(tmp_path, monkeypatch)
    with SecurityStore.open(path, StoreConfig.load(path), keyring=Keyring.load(None)) as opened:
        old = acl(NAME, principal=PRINCIPAL)
        opened._write(ADMIN, lambda image, now, ctx, _hmacs: ControlResult([AclCreated("old-acl", old)], None))
    return path


def _read_back(shown: str) -> str:
    """The name ``printable`` showed: escapes decoded, a doubled backslash single, any other backslash kept."""
    return re.sub(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})",
                  lambda m: "\\" if m.group(1) == "\\" else chr(int(m.group(1)[1:], 16)), shown)


@given(st.text(st.one_of(st.characters(), st.sampled_from("\\xuU\u202e"))))
def test_printable_shows_only_printable_characters_and_reads_back_to_the_name(name):
    """Every shown name is printable, and reads back to exactly the name it showed: no two names look alike."""
    shown = printable(name)
    assert shown.isprintable() and _read_back(shown) == name


def test_printable_leaves_the_usual_names_alone():
    for name in ("orders-eu", "User:CN=a\\,b,O=x", "café", "注文", "a b"):
        assert printable(name) == name


@pytest.mark.parametrize("command, shown", [
    (["acls", "--list"], (SHOWN_NAME, SHOWN_PRINCIPAL)),
    (["history"], (SHOWN_NAME, SHOWN_PRINCIPAL)),
    (["log", "dump"], (SHOWN_NAME, SHOWN_PRINCIPAL)),
    (["who-could", "--operation", "Read", "--topic", NAME], (SHOWN_PRINCIPAL,)),
    (["diff", "--from-offset", "0"], (SHOWN_NAME, SHOWN_PRINCIPAL)),
    (["authorize", "--principal", "User:alice", "--host", "1.1.1.1", "--operation", "Read", "--topic", NAME],
     (SHOWN_NAME,)),
], ids=lambda v: v[0] if isinstance(v, list) else "")
def test_text_output_escapes_and_json_keeps_the_exact_name(store, capsys, command, shown):
    """Each command's text shows the escapes and none of the raw characters; its --json holds the exact strings."""
    code, out, err = run(capsys, *command)
    assert code in (0, 1) and err == ""
    assert "\u202e" not in out and PRINCIPAL not in out and all(s in out for s in shown)
    code, out, err = run(capsys, *command, "--json")
    exact = json.dumps(json.loads(out))  # what a program reads, as JSON writes any string
    assert all(json.dumps(raw)[1:-1] in exact for raw, s in ((NAME, SHOWN_NAME), (PRINCIPAL, SHOWN_PRINCIPAL))
               if s in shown)


def test_configs_describe_lines_escape_the_entity_name():
    """configs --describe's quota line (ConfigCommand's words) shows an old entity name escaped."""
    line = quota_line(ClientQuotaEntity.of({"user": NAME}), {"producer_byte_rate": 1024.0})
    assert line == f"Quota configs for user-principal '{SHOWN_NAME}' are producer_byte_rate=1024.0"
