"""The witness line of `secmeta log head`: it round-trips, and any edit of it is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.core.errors import InvalidValueError
from secmeta.core.log.witness import Head, head_line, parse_head, witness_problem
from tests.logkit import make_keyring

heads = st.builds(Head, st.uuids().map(str), st.integers(0, 2**62), st.binary(min_size=32, max_size=32))


@pytest.fixture(scope="module")
def keyring(tmp_path_factory):
    return make_keyring(tmp_path_factory.mktemp("witness"))


@given(head=heads)
def test_a_head_line_reads_back_as_its_head(keyring, head):
    assert parse_head(head_line(head, keyring), keyring) == head


@given(head=heads, data=st.data())
def test_any_edit_of_a_head_line_is_refused(keyring, head, data):
    line = head_line(head, keyring)
    i = data.draw(st.integers(0, len(line) - 1))
    edited = line[:i] + data.draw(st.sampled_from("0123456789abcdef=z ").filter(lambda c: c != line[i])) + line[i + 1:]
    with pytest.raises(InvalidValueError):
        parse_head(edited, keyring)


def test_a_head_line_of_another_keyring_is_refused(keyring, tmp_path):
    line = head_line(Head("s", 3, bytes(32)), make_keyring(tmp_path))
    with pytest.raises(InvalidValueError, match="not in the keyring"):
        parse_head(line, keyring)


def test_a_witness_of_another_store_is_named():
    assert "of store a, not of this store b" in witness_problem(Head("a", 0, bytes(32)), "b", 0, 5, lambda n: None)
