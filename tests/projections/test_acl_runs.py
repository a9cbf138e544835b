"""The runs of nodes of one (resource type, pattern type) pair that a table's index is built from
(``acl_table._runs``: C-level finds over the two code columns, issue 24's snapshot open)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from secmeta.projections.acl_table import TableError, _runs

# Codes 10 (a newline) and 0 included: the pass must not treat any byte as special.
_pairs = st.lists(st.tuples(st.sampled_from([0, 2, 3, 10, 255]), st.sampled_from([0, 3, 4, 10])), max_size=60)


@given(_pairs)
@example([(2, 3), (2, 4), (2, 3)])  # a pair listed again after another: a run of its own
@example([(3, 10), (10, 3)])  # the interleaved bytes hold 3,10,10,3: a run must not start mid-pair
def test_runs_cover_every_node_in_order_one_pair_each(pairs):
    runs = _runs(bytes(r for r, _ in pairs), bytes(p for _, p in pairs))
    at = 0
    for start, size, key in runs:
        assert start == at and size > 0
        assert pairs[start:start + size] == [key] * size
        at += size
    assert at == len(pairs)
    assert all(a[2] != b[2] for a, b in zip(runs, runs[1:]))  # maximal: neighbours differ


def test_columns_of_different_lengths_are_refused():
    with pytest.raises(TableError, match="disagree in length"):
        _runs(b"\x02\x02", b"\x03")
