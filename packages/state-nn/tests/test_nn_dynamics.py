"""``Dynamics``: sizes, hooks around ``update``, registered inputs, prefetch; the collective functions."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
import state_nn
from state_core import HiddenState, environ


class Leaky(state_nn.Dynamics):
    def __init__(self, in_size, tau=10.0, name=None):
        super().__init__(in_size, name=name)
        self.tau = tau

    def init_state(self, batch_size=None, **kwargs):
        shape = self.varshape if batch_size is None else (batch_size, *self.varshape)
        self.v = HiddenState(jnp.zeros(shape))

    def reset_state(self, batch_size=None, **kwargs):
        self.v.value = jnp.zeros_like(self.v.value)

    def update(self, current):
        self.v.value = state_nn.exp_euler_step(lambda v: (-v + current) / self.tau, self.v.value)
        return self.v.value


@pytest.mark.parametrize(("in_size", "shape"), [(10, (10,)), ((10,), (10,)), ([4, 5], (4, 5)), (np.int64(3), (3,))])
def test_sizes(in_size, shape):
    model = state_nn.Dynamics(in_size)
    assert model.in_size == model.out_size == model.varshape == shape


@pytest.mark.parametrize(
    ("in_size", "error", "message"),
    [
        ((), TypeError, r"in_size must be an int or a non-empty tuple of ints .* got tuple \(\)"),
        ("10", TypeError, "got str '10'"),
        (True, TypeError, "got bool True"),
        ((3, -1), ValueError, r"in_size must hold non-negative ints, got \(3, -1\)"),
        ((3, 2.5), ValueError, "non-negative ints"),
    ],
)
def test_bad_sizes(in_size, error, message):
    with pytest.raises(error, match=message):
        state_nn.Dynamics(in_size)


def test_varshape_without_init_says_what_to_call():
    class Forgot(state_nn.Dynamics):
        def __init__(self):
            pass

    with pytest.raises(AttributeError, match=r"Forgot has no varshape: call super\(\).__init__\(in_size\)"):
        _ = Forgot().varshape


def test_init_and_reset_with_batch_size_and_repr():
    cell = state_nn.init_all_states(Leaky((2, 3), name="leaky"), batch_size=4)
    assert cell.v.value.shape == (4, 2, 3)
    with environ.context(dt=1.0):
        cell(1.0)
    assert float(cell.v.value.sum()) > 0
    assert state_nn.reset_all_states(cell) is cell
    assert float(cell.v.value.sum()) == 0
    assert repr(cell).startswith("Leaky(\n  name='leaky',\n  in_size=(2, 3),\n  out_size=(2, 3),\n  v=HiddenState(")
    with pytest.raises(TypeError, match=r"init_all_states expects a state_nn\.Module as its first argument, got dict"):
        state_nn.init_all_states({})


def test_hooks_run_in_order_around_update():
    calls = []

    class Echo(state_nn.Dynamics):
        def update(self, x, scale=1):
            calls.append(("update", x, scale))
            return x * scale

    echo = Echo(1)
    echo.add_before_update("plain", lambda: calls.append("before"))
    echo.add_before_update("inputs", state_nn.receive_update_input(lambda x, scale=1: calls.append(("in", x, scale))))
    echo.add_after_update("out", lambda out: calls.append(("out", out)))
    echo.add_after_update("bare", state_nn.not_receive_update_output(lambda: calls.append("after")))
    assert echo(3, scale=2) == 6
    assert calls == ["before", ("in", 3, 2), ("update", 3, 2), ("out", 6), "after"]
    assert list(echo.before_updates) == ["plain", "inputs"] and list(echo.after_updates) == ["out", "bare"]
    assert echo.has_before_update("plain") and not echo.has_after_update("plain")


def test_hook_errors():
    model = state_nn.Dynamics(1)
    assert model.before_updates is None and model.after_updates is None
    with pytest.raises(KeyError, match="no before-update hook named 'x'"):
        model.get_before_update("x")
    model.add_after_update("x", print)
    with pytest.raises(KeyError, match="an after-update hook named 'x' is already registered"):
        model.add_after_update("x", repr)
    with pytest.raises(TypeError, match="add_before_update: 'y' must be callable, got 3"):
        model.add_before_update("y", 3)
    assert model.get_after_update("x") is print


def test_markers_can_be_removed_again():
    def hook():
        return None

    state_nn.not_receive_update_output(hook)
    state_nn.receive_update_input(hook)
    assert hook._not_receive_update_output and hook._receive_update_input
    state_nn.receive_update_output(state_nn.not_receive_update_input(hook))
    assert not hasattr(hook, "_not_receive_update_output") and not hasattr(hook, "_receive_update_input")


def test_current_and_delta_inputs():
    model = state_nn.Dynamics(2)
    assert model.current_inputs is None and model.sum_current_inputs(1.5) == 1.5
    model.add_current_input("leak", lambda v, gain=1.0: -gain * v)
    model.add_current_input("pulse", jnp.array([1.0, 2.0]), label="exc")
    model.add_current_input("tonic", 0.25, label="exc")
    v = jnp.array([1.0, -1.0])
    assert_allclose(model.sum_current_inputs(0.0, v, label="exc"), [1.25, 2.25])  # labelled only
    assert list(model.current_inputs) == ["leak"]  # both values were used up
    assert_allclose(model.sum_current_inputs(10.0, v, gain=2.0), [8.0, 12.0])
    assert_allclose(model.sum_current_inputs(10.0, v, gain=2.0), [8.0, 12.0])  # callables stay
    model.add_delta_input("reset", -5.0)
    assert model.get_input("reset") == -5.0
    assert model.sum_delta_inputs(init=1.0) == -4.0 and model.sum_delta_inputs(init=1.0) == 1.0
    leak = model.get_input("leak")
    model.add_current_input("leak", leak)  # the same object again: fine
    with pytest.raises(ValueError, match="a current input named 'leak' is already registered"):
        model.add_current_input("leak", lambda v: v)
    with pytest.raises(KeyError, match="no current or delta input named 'nothing'"):
        model.get_input("nothing")


def test_inputs_sum_quantities():
    u = pytest.importorskip("brainunit")
    model = state_nn.Dynamics(2)
    model.add_current_input("syn", lambda v: (v - 0.0 * u.mV) * (2.0 * u.nS))
    total = model.sum_current_inputs(1.0 * u.pA, jnp.array([10.0, 20.0]) * u.mV)
    assert_allclose(total.to_decimal(u.pA), [21.0, 41.0], rtol=1e-6)


def test_prefetch_reads_the_state_when_called():
    model = state_nn.Dynamics(2)
    ref = model.prefetch("V")
    assert repr(ref) == "Prefetch(Dynamics, 'V')"
    with pytest.raises(AttributeError, match=r"Dynamics has no attribute 'V' \(prefetched\)"):
        ref()
    model.V = state_core.State(jnp.ones(2))
    assert_allclose(ref(), [1.0, 1.0])
    assert ref.get_item() is model.V
    model.V.value = jnp.zeros(2)
    assert_allclose(ref.get_item_value(), [0.0, 0.0])
    model.gain = 3.0
    assert state_nn.Prefetch(model, "gain")() == 3.0


def test_calls_trace_through_state_aware_transforms():
    import state_transform

    cell = state_nn.init_all_states(Leaky(3))
    seen = []
    cell.add_after_update("count", lambda out: seen.append(out.shape))
    step = state_transform.jit(lambda current: cell(current))
    with environ.context(dt=0.5):
        step(1.0)
        step(1.0)
    assert_allclose(cell.v.value, 1 - np.exp(-1.0 / 10.0) * np.ones(3), rtol=1e-5)
    assert seen == [(3,)]  # the hook ran while tracing; the cached program replays its effect on states
