"""paused_gc: the one way readers pause Python's cyclic collector while building images or rows."""

from __future__ import annotations

import gc

import pytest

from secmeta.projections.gc_pause import paused_gc


@pytest.fixture(autouse=True)
def _collector_on():
    gc.enable()
    yield
    gc.enable()


def test_collector_is_off_inside_and_back_on_after():
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collector_is_back_on_after_an_exception():
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off():
    gc.disable()
    with paused_gc():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_pause_false_leaves_the_collector_running():
    with paused_gc(pause=False):
        assert gc.isenabled()


def test_nested_pauses_restore_only_at_the_outer_end():
    with paused_gc():
        with paused_gc():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def _frozen_by(freeze_given: bool, freeze_set: bool | None) -> int:
    """How many more objects are frozen after a block that built 100 lists (still alive)."""
    before = gc.get_freeze_count()
    with paused_gc(freeze=freeze_given) as pause:
        kept = [[] for _ in range(100)]
        if freeze_set is not None:
            pause.freeze = freeze_set
    frozen = gc.get_freeze_count() - before
    assert len(kept) == 100
    return frozen


@pytest.mark.parametrize(("given", "set_inside", "frozen"), [
    (False, None, False),
    (True, None, True),
    (False, True, True),  # decided inside the block, once the size of the result is known
    (True, False, False),
])
def test_freeze_moves_what_is_alive_out_of_the_collectors_generations(given, set_inside, frozen):
    assert (_frozen_by(given, set_inside) >= 100) is frozen
