"""vmap2_new_states / pmap2_new_states (deterministic parts; random draws are in test_transform_random.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
from state_core.filter import OfType, PathContains
from state_transform import pmap2_new_states, vmap2_new_states


class Cell:
    """A plain object with Module-like ``init_all_states``."""

    def __init__(self):
        self.steps = state_core.LongTermState(jnp.zeros((), jnp.int32), name="steps")
        self.init_calls = 0

    def init_all_states(self, size, fill=0.0):
        self.init_calls += 1
        self.w = state_core.ParamState(jnp.full((size,), 1.5))
        self.h = state_core.HiddenState(jnp.zeros((size,)) + fill)
        self.steps.value = self.steps.value + 1  # an existing state written during init


def _assert_concrete(*states):
    for s in states:
        for leaf in jax.tree.leaves(s.value):
            assert not isinstance(leaf, jax.core.Tracer)


def test_vmap2_new_states_batches_new_states():
    cell = Cell()
    groups = vmap2_new_states(cell, {"size": 3, "fill": 2.0}, axis_size=4)
    assert list(groups) == [0]
    assert groups[0] == [cell.w, cell.h]
    assert cell.w.value.shape == (4, 3)
    assert cell.h.value.shape == (4, 3)
    assert_allclose(np.asarray(cell.w.value), np.full((4, 3), 1.5))
    assert_allclose(np.asarray(cell.h.value), np.full((4, 3), 2.0))
    assert cell.init_calls == 1
    _assert_concrete(cell.w, cell.h, cell.steps)


def test_existing_state_written_during_init_ends_concrete():
    cell = Cell()
    groups = vmap2_new_states(cell, {"size": 2}, axis_size=3)
    assert cell.steps not in groups[0]
    _assert_concrete(cell.steps)
    assert cell.steps.value.shape == ()
    assert int(cell.steps.value) == 1
    # the states can be used by ordinary code afterwards
    cell.w.value = cell.w.value * 2
    assert_allclose(np.asarray(cell.w.value), np.full((3, 2), 3.0))


def test_state_out_axes_none_keeps_one_shared_copy():
    cell = Cell()
    groups = vmap2_new_states(cell, {"size": 2}, axis_size=5, state_out_axes={None: OfType(state_core.ParamState)})
    assert set(groups) == {None, 0}
    assert groups[None] == [cell.w]
    assert groups[0] == [cell.h]
    assert cell.w.value.shape == (2,)
    assert cell.h.value.shape == (5, 2)
    _assert_concrete(cell.w, cell.h, cell.steps)


def test_state_out_axes_other_axis():
    cell = Cell()
    groups = vmap2_new_states(cell, {"size": 2}, axis_size=5, state_out_axes={1: OfType(state_core.HiddenState)})
    assert groups == {0: [cell.w], 1: [cell.h]}
    assert cell.w.value.shape == (5, 2)
    assert cell.h.value.shape == (2, 5)


def test_state_out_axes_path_filter():
    cell = Cell()
    groups = vmap2_new_states(cell, {"size": 2}, axis_size=3, state_out_axes={None: PathContains("h")})
    assert groups[None] == [cell.h]
    assert groups[0] == [cell.w]


def test_state_tag_marks_new_states():
    cell = Cell()
    vmap2_new_states(cell, {"size": 2}, state_tag="ensemble", axis_size=2)
    assert "ensemble" in cell.w.tags
    assert "ensemble" in cell.h.tags
    assert "ensemble" not in cell.steps.tags


def test_new_states_on_nested_objects_and_lists():
    class Inner:
        def init_all_states(self):
            self.v = state_core.ShortTermState(jnp.arange(2.0))

    class Outer:
        def __init__(self):
            self.children = [Inner(), Inner()]

        def init_all_states(self):
            for c in self.children:
                c.init_all_states()

    outer = Outer()
    groups = vmap2_new_states(outer, axis_size=3)
    assert groups[0] == [outer.children[0].v, outer.children[1].v]
    for c in outer.children:
        assert_allclose(np.asarray(c.v.value), np.tile([0.0, 1.0], (3, 1)))


def test_vmap2_new_states_requires_axis_size():
    with pytest.raises(ValueError, match="axis_size"):
        vmap2_new_states(Cell(), {"size": 2})


@pytest.mark.parametrize("bad", [0, -1, 2.5])
def test_vmap2_new_states_invalid_axis_size(bad):
    with pytest.raises(ValueError, match="axis_size"):
        vmap2_new_states(Cell(), {"size": 2}, axis_size=bad)


def test_vmap2_new_states_requires_init_all_states():
    with pytest.raises(TypeError, match="init_all_states"):
        vmap2_new_states(object(), axis_size=2)


def test_vmap2_new_states_init_kwargs_must_be_dict():
    with pytest.raises(TypeError, match="init_kwargs"):
        vmap2_new_states(Cell(), [("size", 2)], axis_size=2)


def test_init_error_leaves_existing_states_untouched():
    class Broken:
        def __init__(self):
            self.count = state_core.State(jnp.array(3.0), name="count")

        def init_all_states(self):
            self.count.value = self.count.value + 1
            self.fresh = state_core.State(jnp.ones(2))
            raise RuntimeError("init failed")

    b = Broken()
    with pytest.raises(RuntimeError, match="init failed"):
        vmap2_new_states(b, axis_size=2)
    assert float(b.count.value) == 3.0
    assert not isinstance(b.count.value, jax.core.Tracer)


# ---------------------------------------------------------------- pmap2_new_states
def test_pmap2_new_states_defaults_to_device_count():
    cell = Cell()
    groups = pmap2_new_states(cell, {"size": 2})
    assert groups[0] == [cell.w, cell.h]
    assert cell.w.value.shape == (8, 2)
    assert_allclose(np.asarray(cell.w.value), np.full((8, 2), 1.5))
    _assert_concrete(cell.w, cell.h, cell.steps)
    assert int(cell.steps.value) == 1


def test_pmap2_new_states_axis_size_and_shared():
    cell = Cell()
    groups = pmap2_new_states(cell, {"size": 3}, axis_size=4, state_out_axes={None: OfType(state_core.ParamState)})
    assert groups[None] == [cell.w]
    assert cell.w.value.shape == (3,)
    assert cell.h.value.shape == (4, 3)


def test_pmap2_new_states_with_devices():
    cell = Cell()
    pmap2_new_states(cell, {"size": 1}, devices=jax.devices()[:2])
    assert cell.w.value.shape == (2, 1)


def test_pmap2_new_states_too_many_copies():
    with pytest.raises(ValueError, match=r"(?s)9.*8"):
        pmap2_new_states(Cell(), {"size": 1}, axis_size=9)
