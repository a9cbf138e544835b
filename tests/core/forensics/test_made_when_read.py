"""MadeWhenRead: a diff's entries (here pairs), read as the tuple of them, made only when read."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from secmeta.core.forensics.made_when_read import MadeWhenRead

rows = st.lists(st.tuples(st.text(max_size=3), st.integers(0, 9)), max_size=12)


class Maker:
    """Makes a pair of each row (here: the row itself), counting the rows it was asked for."""

    def __init__(self):
        self.made = 0

    def __call__(self, rows):
        self.made += len(rows)
        return [(acl_id, ("binding", n)) for acl_id, n in rows]


@given(rows)
def test_pairs_read_as_the_tuple_of_the_made_pairs(found):
    """Length, truthiness, items, slices, iteration, equality, hash and repr are the tuple's."""
    expected = tuple(Maker()(found))
    pairs = MadeWhenRead(found, Maker())
    assert len(pairs) == len(expected) and bool(pairs) == bool(expected)
    assert [pairs[i] for i in range(-len(found), len(found))] == [expected[i] for i in range(-len(found), len(found))]
    assert pairs[1:-1] == expected[1:-1] and pairs[::2] == expected[::2]
    assert tuple(pairs) == expected and list(pairs) == list(expected)
    assert pairs == expected and expected == pairs and pairs == MadeWhenRead(found, Maker())
    assert pairs != (*expected, ("x", ("binding", 0)))
    assert hash(pairs) == hash(expected) and repr(pairs) == repr(expected)
    assert dict(pairs) == dict(expected)
    assert pairs + pairs == expected + expected == pairs + expected == expected + pairs


@given(rows.filter(bool), st.data())
def test_counting_or_reading_one_pair_makes_no_other(found, data):
    """A caller that counts the pairs makes none; one that reads an item makes only that one."""
    maker = Maker()
    pairs = MadeWhenRead(found, maker)
    assert len(pairs) == len(found) and pairs and maker.made == 0
    i = data.draw(st.integers(0, len(found) - 1))
    assert pairs[i] == maker([found[i]])[0]
    assert maker.made == 2


def test_the_whole_is_made_once():
    """Iterating twice, then comparing and hashing, makes each pair once."""
    maker = Maker()
    pairs = MadeWhenRead([("a", 1), ("b", 2)], maker)
    list(pairs), list(pairs), hash(pairs), pairs == (), pairs[0]
    assert maker.made == 2


@given(rows.map(lambda found: list(dict(found).items())), st.randoms())
def test_rows_in_any_order_with_a_key_read_as_the_sorted_rows(found, rng):
    """Rows given in any order with a key read as those rows sorted by it; counting them sorts nothing."""
    shuffled = list(found)
    rng.shuffle(shuffled)
    keyed = []

    def key(row):
        keyed.append(row)
        return row[0]

    pairs = MadeWhenRead(shuffled, Maker(), key)
    assert len(pairs) == len(found) and bool(pairs) == bool(found) and keyed == []
    expected = MadeWhenRead(sorted(found), Maker())
    if found:
        assert pairs[0] == expected[0]
    assert pairs == expected and tuple(pairs) == tuple(expected) and pairs[1:] == expected[1:]
    assert len(keyed) == len(found)  # sorted once
