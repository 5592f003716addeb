"""The values ``*_new_states`` stores after its run go through the one write-back: all or none, never a tracer."""

import jax
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import ParamState, StateLeakError
from state_core.filter import PathContains
from state_transform import vmap2_new_states


class Layer:
    """Its states are created with values known while tracing, so vmap2_new_states copies them itself."""

    def init_all_states(self):
        self.w = ParamState(np.zeros(2))
        self.b = ParamState(1.0)


def test_new_states_made_inside_a_plain_jit_are_refused_and_none_is_written():
    layer = Layer()

    def init():
        vmap2_new_states(layer, axis_size=3)
        return 0.0

    with pytest.raises(StateLeakError, match=r"vmap2_new_states writes ParamState .* not state-aware"):
        jax.jit(init)()
    # Before the one write-back, the copies (tracers of the jit) were stored silently.
    assert isinstance(layer.w.value, np.ndarray) and isinstance(layer.b.value, float)
    assert_allclose(layer.w.value, np.zeros(2))


def test_a_copy_that_cannot_be_made_leaves_every_new_state_uncopied():
    layer = Layer()
    message = (
        r"vmap2_new_states: ParamState at path 'b' has shape \(\), so its copies can go on an axis in "
        r"\[-1, 0\], but state_out_axes puts them on axis 1\. .* No state was written\."
    )
    with pytest.raises(ValueError, match=message):
        vmap2_new_states(layer, axis_size=3, state_out_axes={1: PathContains("b"), 0: ...})
    assert np.shape(layer.w.value) == (2,)  # w's copies were made, but nothing was stored
    assert_allclose(layer.b.value, 1.0)
