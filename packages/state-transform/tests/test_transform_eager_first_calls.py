"""``eager_first_calls``: a new signature's first call runs op by op and compiles at the second call."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import state_core as sc
from state_core import State, StatefulFunction, eager_first_calls, eager_first_calls_enabled, set_eager_first_calls
from state_transform import for_loop, jit, vmap2


def _model():
    w = State(jnp.linspace(0.1, 1.0, 8).reshape(4, 2), name="w")

    def step(x):
        w.value = jnp.tanh(w.value * x) + jnp.exp(-w.value).sum()
        return (w.value**2).sum()

    return w, step


def _runs_of(mapped):
    """How many times the compiled form of the latest signature has been compiled (0 or 1)."""
    return mapped._last.program.run._cache_size()


def test_first_call_runs_op_by_op_and_the_second_compiles():
    w, step = _model()
    start = w.value
    with eager_first_calls(True):
        mapped = vmap2(step, state_in_axes={0: w}, state_out_axes={0: w})
        cold = mapped(jnp.arange(4.0))
    assert _runs_of(mapped) == 0  # nothing compiled for the first call
    cold_w = w.value
    w.value = start
    warm = mapped(jnp.arange(4.0))
    assert _runs_of(mapped) == 1
    # The same computation, op by op or fused: equal up to rounding.
    np.testing.assert_allclose(cold, warm, rtol=1e-6)
    np.testing.assert_allclose(cold_w, w.value, rtol=1e-6)
    np.testing.assert_allclose(warm, [5.7834477, 5.8655524, 7.1394367, 6.3256264], rtol=1e-6)


def test_off_by_default_every_call_is_bit_identical():
    assert eager_first_calls_enabled() is False
    w, step = _model()
    start = w.value
    mapped = vmap2(step, state_in_axes={0: w}, state_out_axes={0: w})
    cold = mapped(jnp.arange(4.0))
    assert _runs_of(mapped) == 1
    cold_w = w.value
    w.value = start
    warm = mapped(jnp.arange(4.0))
    np.testing.assert_array_equal(cold, warm)
    np.testing.assert_array_equal(cold_w, w.value)


def test_the_process_switch_and_a_block_override_it_per_thread():
    set_eager_first_calls(True)
    try:
        assert eager_first_calls_enabled()
        with eager_first_calls(False):
            assert not eager_first_calls_enabled()
            s = State(jnp.zeros(2))
            f = StatefulFunction(lambda x: s.value + x)
            np.testing.assert_allclose(f(jnp.ones(2)), np.ones(2))
            assert f._last.program.eager is None
        assert eager_first_calls_enabled()
    finally:
        set_eager_first_calls(False)
    assert not eager_first_calls_enabled()


def test_jit_and_loops_always_compile():
    s = State(jnp.zeros(2), name="s")

    def body(i):
        s.value = s.value + i

    with eager_first_calls(True):
        f = jit(lambda x: s.value * x)
        np.testing.assert_allclose(f(2.0), np.zeros(2))
        assert f._last.program.eager is None
        for_loop(body, jnp.arange(3.0))
    np.testing.assert_allclose(s.value, np.full(2, 3.0))


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_the_switch_takes_a_bool(bad):
    with pytest.raises(TypeError, match="set_eager_first_calls: enabled must be a bool"):
        set_eager_first_calls(bad)
    with pytest.raises(TypeError, match="eager_first_calls: enabled must be a bool"), eager_first_calls(bad):
        pass


def test_a_failing_eager_first_call_leaves_every_state_as_it_was():
    w = State(jnp.ones((4, 2)), name="w")

    def step(x):
        w.value = w.value * x
        jax.debug.callback(lambda v: (_ for _ in ()).throw(RuntimeError("boom")), x)
        return w.value.sum()

    with eager_first_calls(True):
        mapped = vmap2(step, state_in_axes={0: w}, state_out_axes={0: w})
        with pytest.raises(RuntimeError, match="boom"):
            mapped(jnp.arange(4.0))
    np.testing.assert_array_equal(w.value, np.ones((4, 2)))
    assert sc.eager_first_calls_enabled() is False
