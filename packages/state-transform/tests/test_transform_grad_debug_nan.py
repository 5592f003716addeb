"""grad(..., debug_nan=True): a NaN in the loss or a gradient fails the call, naming where, writing nothing."""

import jax.numpy as jnp
import numpy as np
import pytest

from state_core import ParamState, State
from state_transform import grad, jit, vmap2_new_states
from state_transform.compat import in_new_state_probe


def _model():
    w = ParamState(jnp.array([1.0, -1.0]), name="w")
    calls = State(jnp.zeros(()), name="calls")

    def loss(x):
        calls.value = calls.value + 1
        return jnp.sum(jnp.sqrt(w.value * x))

    return w, calls, loss


def test_nan_raises_naming_the_gradient_and_writes_nothing():
    w, calls, loss = _model()
    g = grad(loss, grad_states=w, debug_nan=True, return_value=True)
    for _ in range(2):  # the first (op-by-op) call and the compiled one
        with pytest.raises(
            FloatingPointError,
            match=r"grad\(loss\): NaN or Inf in the value of loss, the gradient of ParamState 'w'; no state was",
        ):
            g(jnp.array([1.0, 1.0]))
    np.testing.assert_allclose(calls.value, 0.0)
    grads, value = g(jnp.array([1.0, -1.0]))
    np.testing.assert_allclose(grads, [0.5, -0.5])
    np.testing.assert_allclose(value, 2.0)
    np.testing.assert_allclose(calls.value, 1.0)


def test_nan_in_an_argument_gradient_names_the_argument():
    def loss(x):
        return jnp.sum(jnp.sqrt(jnp.abs(x)) * 0.0 + x)  # the value is finite at 0, the gradient is inf * 0

    g = grad(loss, debug_nan=True)
    with pytest.raises(FloatingPointError, match=r"grad\(loss\): NaN or Inf in the gradient of argument 0;"):
        g(jnp.array([0.0]))
    np.testing.assert_allclose(g(jnp.array([4.0])), [1.0])


def test_an_infinite_gradient_raises_too():
    # brainstate's own case: d sqrt(w) / dw at w = 0 is inf.
    w = State(jnp.array([0.0, 4.0]), name="w")

    def loss(x):
        return jnp.sum(jnp.sqrt(w.value) * x)

    with pytest.raises(FloatingPointError, match=r"grad\(loss\): NaN or Inf in the gradient of State 'w';"):
        grad(loss, grad_states=w, debug_nan=True)(jnp.array([1.0, 1.0]))
    np.testing.assert_allclose(w.value, [0.0, 4.0])
    w.value = jnp.array([1.0, 4.0])
    np.testing.assert_allclose(grad(loss, grad_states=w, debug_nan=True)(jnp.array([1.0, 1.0])), [0.5, 0.25])


def test_without_debug_nan_the_nan_is_returned():
    w, calls, loss = _model()
    grads = grad(loss, grad_states=w)(jnp.array([1.0, 1.0]))
    assert np.isnan(np.asarray(grads)[1])
    np.testing.assert_allclose(calls.value, 1.0)


def test_inside_jit_the_check_fails_the_outer_call_and_writes_nothing():
    w, calls, loss = _model()
    g = grad(loss, grad_states=w, debug_nan=True, return_value=True)

    @jit
    def step(x):
        grads, value = g(x)
        w.value = w.value - 0.1 * grads
        return value

    with pytest.raises(Exception, match=r"grad\(loss\): NaN or Inf in the value of loss"):
        step(jnp.array([1.0, 1.0]))
    np.testing.assert_allclose(w.value, [1.0, -1.0])
    np.testing.assert_allclose(calls.value, 0.0)
    np.testing.assert_allclose(step(jnp.array([1.0, -1.0])), 2.0)
    np.testing.assert_allclose(w.value, [0.95, -0.95])


def test_in_new_state_probe_is_false_in_the_one_init_pass():
    seen = []

    class Cell:
        def init_all_states(self):
            seen.append(in_new_state_probe())
            self.w = ParamState(jnp.zeros(2))

    cell = Cell()
    vmap2_new_states(cell, {}, axis_size=3)
    assert seen == [False]
    assert cell.w.value.shape == (3, 2)
    assert in_new_state_probe() is False
