"""A ``LayeredMap`` reads as the plain dict of the changes made to it, whatever mix of single changes, bulk updates,
bulk additions of new keys (levels, ``add_new``) and folds made it; and every map it was made from still reads as
its own dict (immutable).  The thresholds are patched small so levels, their merges and folds all occur."""

from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.projections import layered_map
from secmeta.projections.layered_map import LayeredMap

keys = st.integers(0, 40).map(lambda k: f"k{k}")
values = st.integers(0, 5).map(lambda v: ("v", v))  # never an int or None (the map's rule)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("set"), keys, values),
        st.tuples(st.just("delete"), keys),
        st.tuples(st.just("update"), st.dictionaries(keys, values, max_size=6)),
        st.tuples(st.just("add_new"), st.lists(keys, max_size=8, unique=True), values),
        st.tuples(st.just("finish")),
    ),
    max_size=40,
)


def _reads_as(layered: LayeredMap, model: dict) -> None:
    assert len(layered) == len(model)
    assert sorted(layered) == sorted(model)
    assert sorted(layered.raw_items()) == sorted(model.items())
    for k in range(41):
        key = f"k{k}"
        assert layered.get(key) == model.get(key)
        assert layered.peek(key) == model.get(key)
        assert (key in layered) == (key in model)
    held = set(layered.held(f"k{k}" for k in range(41)))
    assert held >= set(model)
    assert layered == LayeredMap(dict(model))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, values, max_size=10), steps, st.sampled_from([2, 3, 8]), st.sampled_from([1, 2, 4]))
def test_a_layered_map_reads_as_the_dict_of_its_changes(start, script, fold_floor, level_from):
    with patch.object(layered_map, "_FOLD_FLOOR", fold_floor), patch.object(layered_map, "_LEVEL_FROM", level_from):
        layered, model = LayeredMap(dict(start)), dict(start)
        made: list[tuple[LayeredMap, dict]] = [(layered, dict(model))]
        mutation = layered.mutate()
        for step in script:
            if step[0] == "set":
                mutation[step[1]] = step[2]
                model[step[1]] = step[2]
            elif step[0] == "delete":
                if step[1] in model:
                    del mutation[step[1]]
                    del model[step[1]]
            elif step[0] == "update":
                mutation.update(dict(step[1]))
                model.update(step[1])
            elif step[0] == "add_new":  # keys the map does not hold (as its callers vouch)
                new = {key: step[2] for key in step[1] if key not in model}
                mutation.add_new(new)
                model.update(new)
            else:
                layered = mutation.finish()
                _reads_as(layered, model)
                made.append((layered, dict(model)))
                mutation = layered.mutate()
            assert len(mutation) == len(model)
        layered = mutation.finish()
        _reads_as(layered, model)
        for old, its in made:
            _reads_as(old, its)
