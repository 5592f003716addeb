"""Every transform, loop and branch runs on the one pipeline, with the same guarantees.

Each test here pins a behaviour that the loops, branches, remat and Jacobians
did not have while they ran on a second path of their own: the object-graph
check, ``clear_caches``, waiting before write-back, the trace context, programs
shared by transform objects built inline, and atomic random keys.
"""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_random
from state_core import HiddenState, ParamState, ShortTermState, State, clear_caches
from state_nn import Module
from state_transform import checkpoint, cond, for_loop, grad, jit, scan, vmap2


class Neuron(Module):
    """A module that re-creates its state in init_state, as brainstate models do."""

    def __init__(self):
        super().__init__()
        self.init_state()

    def init_state(self, *args, **kwargs):
        self.v = HiddenState(jnp.zeros(2), name="v")

    def step(self, x):
        self.v.value = self.v.value + x
        return self.v.value.sum()

    def positive(self, x):
        self.v.value = self.v.value + x
        return x

    def negative(self, x):
        self.v.value = self.v.value - x
        return x


# --------------------------------------------------------------------------- re-created States
def test_loops_write_the_state_the_object_holds_now():
    n = Neuron()
    xs = jnp.ones(3)
    for_loop(n.step, xs)
    n.init_state()  # a new State at the same path
    for_loop(n.step, xs)
    assert_allclose(n.v.value, [3.0, 3.0])  # the new State was written, not the old one


def test_a_loop_over_a_closure_writes_the_new_state():
    n = Neuron()

    def body(x):
        return n.step(x)

    for_loop(body, jnp.ones(2))
    n.init_state()
    for_loop(body, jnp.ones(2))
    assert_allclose(n.v.value, [2.0, 2.0])


def test_cond_with_the_same_branches_writes_the_new_state():
    n = Neuron()
    cond(True, n.positive, n.negative, 1.0)
    n.init_state()
    cond(True, n.positive, n.negative, 1.0)
    assert_allclose(n.v.value, [1.0, 1.0])


def test_checkpoint_of_a_method_writes_the_new_state():
    n = Neuron()
    checkpoint(n.step)(1.0)
    n.init_state()
    checkpoint(n.step)(1.0)
    assert_allclose(n.v.value, [1.0, 1.0])


def test_jit_of_a_loop_over_a_method_writes_the_new_state():
    n = Neuron()
    f = jit(lambda ts: for_loop(n.step, ts))
    f(jnp.ones(3))
    n.init_state()
    f(jnp.ones(3))
    assert_allclose(n.v.value, [3.0, 3.0])


def test_a_module_global_is_part_of_the_object_graph():
    global _GLOBAL_NEURON
    _GLOBAL_NEURON = Neuron()
    f = jit(_step_global_neuron)
    f(1.0)
    _GLOBAL_NEURON.init_state()
    f(1.0)
    assert_allclose(_GLOBAL_NEURON.v.value, [1.0, 1.0])


_GLOBAL_NEURON = None


def _step_global_neuron(x):
    return _GLOBAL_NEURON.step(x)


# --------------------------------------------------------------------------- clear_caches
def test_clear_caches_forgets_loop_bodies():
    v = State(jnp.zeros(()), name="v")
    traces = []

    def body(x):
        traces.append(1)
        v.value = v.value + x
        return x

    for_loop(body, jnp.ones(3))
    for_loop(body, jnp.ones(3))
    assert len(traces) == 1
    clear_caches()
    for_loop(body, jnp.ones(3))
    assert len(traces) == 2
    assert_allclose(v.value, 9.0)


# --------------------------------------------------------------------------- waiting before write-back
@pytest.mark.parametrize("run", ["for_loop", "scan", "cond"])
def test_a_loop_that_may_fail_after_dispatch_waits_and_writes_nothing_on_failure(run):
    v = State(jnp.zeros(()), name="v")
    calls = []

    def check(x):
        calls.append(1)
        if x > 1:
            raise RuntimeError("callback refused")

    def body(x):
        v.value = v.value + x
        jax.debug.callback(check, v.value)
        return x

    xs = jnp.ones(3)
    with pytest.raises(Exception, match="callback refused"):
        if run == "for_loop":
            for_loop(body, xs)
        elif run == "scan":
            scan(lambda c, x: (c, body(x)), 0.0, xs)
        else:
            cond(True, body, body, 2.0)
    assert float(v.value) == 0.0  # nothing written
    assert 1 <= len(calls) <= 3  # the program ran once


# --------------------------------------------------------------------------- trace context
def test_a_jit_traced_nested_is_traced_again_at_the_top_level():
    class Cell(Module):
        def __init__(self):
            super().__init__()
            self.w = ParamState(jnp.ones(3))

        def init_state(self, batch_size=None):
            self.h = HiddenState(jnp.zeros((batch_size, 3)))

        def update(self, x):
            self.h.value = self.h.value * 0.5 + x * self.w.value
            return self.h.value

    model = Cell()
    params = model.states(ParamState)

    @jit
    def predict(xs):
        model.init_all_states(batch_size=xs.shape[1])
        return for_loop(model.update, xs)

    @jit
    def train(xs):
        _, loss = grad(lambda xs: predict(xs).sum(), params, return_value=True)(xs)
        return loss

    xs = jnp.ones((5, 2, 3))
    loss = train(xs)
    out = predict(xs)  # the same shapes, now at the top level
    assert_allclose(out.sum(), loss, rtol=1e-6)
    assert_allclose(model.h.value, out[-1], rtol=1e-6)  # the created state holds a concrete value


def test_a_state_created_lazily_inside_jit_comes_out_concrete_and_the_next_call_sees_it():
    class Lazy(Module):
        def update(self, x):
            if not hasattr(self, "h"):
                self.h = HiddenState(jnp.zeros_like(x), name="h")
            self.h.value = self.h.value + x
            return self.h.value

    m = Lazy()
    f = jit(m.update)
    assert_allclose(f(jnp.ones(2)), [1.0, 1.0])
    assert_allclose(m.h.value, [1.0, 1.0])  # concrete after the first call
    assert_allclose(f(jnp.ones(2)), [2.0, 2.0])  # the second call takes the other branch
    assert_allclose(f(jnp.ones(2)), [3.0, 3.0])


# --------------------------------------------------------------------------- inline transforms
def test_grad_built_inline_every_step_traces_and_compiles_once(count_compiles):
    w = ParamState(jnp.ones((4, 4)), name="w")
    traces = []

    def loss(x):
        traces.append(1)
        return jnp.sum(jnp.tanh(x @ w.value) ** 2)

    x = jnp.ones((8, 4))
    grad(loss, grad_states=w)(x)  # first: traced, run op by op
    grad(loss, grad_states=w)(x)  # second: compiled
    with count_compiles() as compiles:
        for _ in range(5):
            g = grad(loss, grad_states=w)(x)
    assert traces == [1]
    assert compiles == []
    assert_allclose(g, jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w) ** 2))(w.value), rtol=1e-6)


def test_a_lambda_written_inline_in_a_loop_is_found_again():
    w = ParamState(jnp.ones(3), name="w")
    traces = []
    x = jnp.arange(6.0).reshape(2, 3)
    for _ in range(4):
        out = vmap2(lambda row: traces.append(1) or row * w.value)(x)
    assert traces == [1]
    assert_allclose(out, np.arange(6.0).reshape(2, 3))


def test_vmap2_built_inline_reuses_one_strategy_and_skips_the_slow_path(monkeypatch):
    import state_core._stateful_function as stateful_function_module

    w = ShortTermState(jnp.zeros(3), name="w")

    def step(row):
        w.value = w.value + 1.0  # the same on every lane: written back whole
        return row * 2.0

    x = jnp.ones((4, 3))
    vmap2(step)(x)  # traced and compiled once
    first = vmap2(step)
    assert vmap2(step).strategy is first.strategy  # plain options: one strategy, keyed once
    assert vmap2(step, in_axes=1).strategy is not first.strategy
    # A state in the rules is never kept by the table.
    assert vmap2(step, state_in_axes={0: w}).strategy is not vmap2(step, state_in_axes={0: w}).strategy
    resolved = []
    original = stateful_function_module.StatefulFunction._resolve
    monkeypatch.setattr(
        stateful_function_module.StatefulFunction,
        "_resolve",
        lambda self, *a, **k: resolved.append(1) or original(self, *a, **k),
    )
    for _ in range(3):
        out = vmap2(step)(x)
    assert resolved == []  # each new object finds the program on the cached path
    assert_allclose(out, np.full((4, 3), 2.0))
    assert_allclose(w.value, [4.0, 4.0, 4.0])  # written back by every call


def test_grad_of_a_new_closure_runs_op_by_op_without_compiling(count_compiles):
    w = ParamState(jnp.ones((4, 4)), name="w")

    def step(x):
        def loss():  # a new closure every step, over this step's data
            return jnp.sum(jnp.tanh(x @ w.value) ** 2)

        return grad(loss, grad_states=w)()

    step(jnp.ones((8, 4)))  # JAX's op caches warm
    x = jnp.full((8, 4), 0.5, dtype=jnp.float32)  # the same type as the warm-up data
    with count_compiles() as compiles:
        g = step(x)  # traced, then run op by op: no XLA compile of a program that runs once
    assert compiles == []
    assert_allclose(g, jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w) ** 2))(w.value), rtol=1e-6)


# --------------------------------------------------------------------------- random keys and threads
def test_threads_drawing_through_one_mapping_never_share_a_key():
    state_random.seed(0)
    draw = vmap2(lambda s: state_random.normal(0.0, s))
    scales = jnp.ones(4)
    draw(scales)  # traced and compiled before the threads start
    results: list = []
    lock = threading.Lock()

    def worker():
        mine = [np.asarray(draw(scales)) for _ in range(100)]
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 800
    assert len({r.tobytes() for r in results}) == 800  # every call drew with its own key
