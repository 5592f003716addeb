"""debug_nan / debug_nan_if: which operation's NaN or Inf reaches a function's results."""

import jax
import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

from state_core import State
from state_transform import debug_nan, debug_nan_if, jit, vmap2


def test_a_clean_function_passes_and_returns_none():
    assert debug_nan(lambda x: x * 2.0 + 1.0, jnp.array([1.0, 2.0])) is None


def test_a_nan_in_the_output_names_the_operation_and_the_line():
    def fn(x):
        y = jnp.log(x)  # the source
        return y * 2.0 + 1.0

    with pytest.raises(FloatingPointError, match=r"NaN or Inf in the output of fn; it is first produced by `log` at "):
        debug_nan(fn, jnp.array([-1.0, 1.0]))
    with pytest.raises(FloatingPointError, match=r"test_transform_debug_nan\.py:\d+ \(fn\)"):
        debug_nan(fn, jnp.array([-1.0, 1.0]))


def test_an_inf_counts_too_and_the_phase_labels_the_message():
    with pytest.raises(FloatingPointError, match=r"debug_nan \(forward\): .*first produced by `div`"):
        debug_nan(lambda x: 1.0 / x, jnp.array([0.0, 1.0]), phase="forward")


def test_a_masked_nan_is_not_reported():
    debug_nan(lambda x: jnp.where(x > 0, jnp.log(x), 0.0), jnp.array([-1.0, 0.0, 2.0]))


def test_the_search_looks_inside_jit_checkpoint_and_the_taken_branch():
    @jax.jit
    def inner(x):
        return jnp.sqrt(x) + 1.0

    block = jax.checkpoint(lambda x: inner(x) * 2.0)
    with pytest.raises(FloatingPointError, match="first produced by `sqrt`"):
        debug_nan(block, jnp.array([-4.0, 4.0]))

    def branchy(x):
        return jax.lax.cond(x[0] > 0.0, jnp.log, lambda y: y * 2.0, x)

    with pytest.raises(FloatingPointError, match="first produced by `log`"):
        debug_nan(branchy, jnp.array([1.0, -1.0]))
    debug_nan(branchy, jnp.array([-1.0, 1.0]))  # the other branch: clean


def test_a_nan_already_in_the_inputs_is_named_as_such():
    with pytest.raises(FloatingPointError, match="already in the inputs"):
        debug_nan(lambda x: x + 1.0, jnp.array([jnp.nan]))


def test_a_nan_in_a_written_state_names_the_state_and_writes_nothing():
    s = State(jnp.array([1.0, -1.0]), name="v")

    def step():
        s.value = jnp.log(s.value)

    with pytest.raises(FloatingPointError, match=r"the new value of State 'v'; it is first produced by `log`"):
        debug_nan(step)
    assert_allclose(s.value, [1.0, -1.0])


def test_inside_jit_the_check_raises_when_the_program_runs():
    s = State(jnp.zeros(2), name="s")

    @jit
    def step(x):
        debug_nan(jnp.log, x, phase="step")
        s.value = s.value + 1.0
        return x

    step(jnp.array([1.0, 2.0]))
    assert_allclose(s.value, [1.0, 1.0])
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"debug_nan \(step\): NaN or Inf in the output of log"):
        step(jnp.array([-1.0, 2.0]))
    assert_allclose(s.value, [1.0, 1.0])  # the failed call wrote nothing


def test_debug_nan_if_checks_only_when_the_condition_holds():
    x = jnp.array([-1.0, 2.0])
    debug_nan_if(False, jnp.log, x)
    debug_nan_if(jnp.array([False, False]), jnp.log, x)
    with pytest.raises(FloatingPointError, match=r"debug_nan \(cond\)"):
        debug_nan_if(jnp.array([False, True]), jnp.log, x, phase="cond")


def test_debug_nan_if_with_a_traced_condition_under_vmap2():
    def lane(x):
        debug_nan_if(x < 0, jnp.log, x)
        return x * 2.0

    run = vmap2(lane)
    assert_allclose(run(jnp.array([1.0, 2.0])), [2.0, 4.0])
    with pytest.raises(jax.errors.JaxRuntimeError, match="NaN or Inf in the output of log"):
        run(jnp.array([1.0, -2.0]))


def test_fn_must_be_callable():
    with pytest.raises(TypeError, match="debug_nan: fn must be callable, got int"):
        debug_nan(3, 1.0)
