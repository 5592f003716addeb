"""State-aware cond / switch / ifelse: values, union of written states, trace counts, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_random
from state_core import State, StateTraceStack
from state_core.filter import OfType
from state_transform import cond, for_loop, grad, ifelse, jit, switch, vmap2


def _branches():
    a = State(jnp.zeros(2), name="a")
    b = State(jnp.ones(2), name="b")
    w = State(jnp.array(3.0), name="w")

    def left(x):
        a.value = a.value + x * w.value
        return x + 1

    def right(x):
        b.value = b.value * x
        return x - 1

    return a, b, w, left, right


def test_cond_writes_union_and_passes_through():
    a, b, _w, left, right = _branches()
    assert_allclose(cond(True, left, right, 2.0), 3.0)
    assert_allclose(a.value, [6.0, 6.0])
    assert_allclose(b.value, [1.0, 1.0])
    assert_allclose(cond(False, left, right, 2.0), 1.0)
    assert_allclose(a.value, [6.0, 6.0])
    assert_allclose(b.value, [2.0, 2.0])
    with StateTraceStack() as trace:
        cond(jnp.array(True), left, right, 1.0)
    assert {s.name for s in trace.get_write_states()} == {"a", "b"}
    assert {s.name for s in trace.get_read_states()} == {"w"}


def test_cond_matches_lax_cond_under_jit_and_traces_once():
    a, b, _w, left, right = _branches()
    traces = []

    def counted(x):
        traces.append(1)
        return left(x)

    @jit
    def f(p, x):
        return cond(p, counted, right, x)

    for p in (True, False, True):
        f(p, jnp.float32(2.0))
    assert len(traces) == 1
    assert_allclose(a.value, [12.0, 12.0])
    assert_allclose(b.value, [2.0, 2.0])
    ref = jax.lax.cond(True, lambda x: x + 1, lambda x: x - 1, 2.0)
    assert_allclose(f(True, jnp.float32(2.0)), ref)


def test_eager_cond_traces_once_per_signature():
    _a, _b, _w, left, right = _branches()
    traces = []

    def counted(x):
        traces.append(1)
        return right(x)

    for p in (True, False, False):
        cond(p, left, counted, jnp.float32(1.0))
    assert len(traces) == 1


def test_switch_matches_lax_switch_and_clamps():
    log = State(jnp.zeros(3), name="log")

    def make(k):
        def f(x):
            log.value = log.value.at[k].add(x)
            return x * (k + 1)

        return f

    branches = [make(k) for k in range(3)]
    for i in (0, 1, 2, 7, -3):
        out = switch(i, branches, 2.0)
        ref = jax.lax.switch(i, [lambda x, k=k: x * (k + 1) for k in range(3)], 2.0)
        assert_allclose(out, ref)
    assert_allclose(log.value, [4.0, 2.0, 4.0])


def test_ifelse_first_true_else_last():
    hits = State(jnp.zeros(3, jnp.int32), name="hits")

    def mark(k):
        def f(x):
            hits.value = hits.value.at[k].add(1)
            return x + k

        return f

    branches = [mark(0), mark(1), mark(2)]
    for x in (-5.0, 0.5, 9.0):
        ifelse([x < 0, x < 1], branches, x)
    assert_allclose(hits.value, [1, 1, 1])
    # brainstate's convention: one branch per condition, exactly one true (checked when concrete)
    assert_allclose(ifelse([False, True], branches[:2], 1.0), 2.0)
    with pytest.raises(ValueError, match="2 of the 2 conditions are true"):
        ifelse([True, True], branches[:2], 1.0)
    # without the check the first true condition wins
    assert_allclose(ifelse([True, True], branches[:2], 1.0, check_cond=False), 1.0)
    with pytest.raises(ValueError, match=r"2 condition.*4 branch"):
        ifelse([True, False], branches + branches[:1], 1.0)


def test_random_state_in_branch():
    rng = state_random.RandomState(1)
    rng2 = state_random.RandomState(1)
    draw = lambda: rng.normal()
    out = cond(True, draw, lambda: jnp.float32(0.0))
    assert_allclose(out, rng2.normal())
    np.testing.assert_array_equal(jax.random.key_data(rng.value), jax.random.key_data(rng2.value))
    # a branch that does not draw keeps the key
    cond(False, draw, lambda: jnp.float32(0.0))
    np.testing.assert_array_equal(jax.random.key_data(rng.value), jax.random.key_data(rng2.value))


def test_branch_output_mismatch_names_branches():
    with pytest.raises(TypeError, match=r"true_fun returns .* false_fun returns"):
        cond(True, lambda x: x, lambda x: (x, x), 1.0)


def test_branch_changing_state_shape_is_error_and_transactional():
    s = State(jnp.zeros(2), name="buffer")

    def grow(x):
        s.value = jnp.zeros(3)
        return x

    with pytest.raises(ValueError, match=r"buffer.*float32\[3\].*float32\[2\]"):
        cond(True, grow, lambda x: x, 1.0)
    assert_allclose(s.value, [0.0, 0.0])


def test_pred_must_be_scalar():
    with pytest.raises(TypeError, match="pred must be a scalar"):
        cond(jnp.array([True, False]), lambda: 1, lambda: 2)


def test_trace_failure_in_one_branch_leaves_states():
    a, b, _w, left, _right = _branches()

    def bad(x):
        b.value = b.value + 100
        raise RuntimeError("bad branch")

    with pytest.raises(RuntimeError, match="bad branch"):
        cond(True, left, bad, 1.0)
    assert_allclose(a.value, [0.0, 0.0])
    assert_allclose(b.value, [1.0, 1.0])


def test_cond_in_loop_in_vmap2_and_grad():
    v = State(jnp.zeros(()), name="v")
    spikes = State(jnp.zeros((), jnp.int32), name="spikes")

    def fire():
        v.value = jnp.zeros(())
        spikes.value = spikes.value + 1

    def step(i_ext):
        v.value = v.value + i_ext
        cond(v.value > 1.0, fire, lambda: None)
        return v.value

    ys = for_loop(step, jnp.full(6, 0.6))
    assert_allclose(ys, [0.6, 0.0, 0.6, 0.0, 0.6, 0.0], atol=1e-6)
    assert int(spikes.value) == 3

    v.value = jnp.zeros(3)
    spikes.value = jnp.zeros(3, jnp.int32)
    states = OfType(State)
    sim = vmap2(lambda drive: for_loop(step, drive), in_axes=1, state_in_axes={0: states}, state_out_axes={0: states})
    sim(jnp.stack([jnp.full(6, 0.6), jnp.full(6, 0.3), jnp.full(6, 1.5)], axis=1))
    assert_allclose(spikes.value, [3, 1, 6])

    w = State(jnp.array(2.0), name="w")
    g = grad(lambda x: cond(x > 0, lambda: w.value * x, lambda: -x), grad_states=w)
    assert_allclose(g(3.0), 3.0)


# ---------------------------------------------------------------- states local to a branch
def test_cond_and_switch_branches_with_local_states_match_lax():
    a = State(jnp.zeros(2), name="a")
    traces = []

    def left(x):
        traces.append("left")
        tmp = State(x * 3.0, name="tmp")  # local to the branch, from its operand
        tmp.value = tmp.value + 1.0
        a.value = a.value + tmp.value
        return tmp.value

    def right(x):
        traces.append("right")
        buf = State(jnp.zeros(2), name="buf")
        buf.value = buf.value - x
        return buf.value

    x = jnp.array([1.0, 2.0])
    for pred in (True, False):
        assert_allclose(cond(pred, left, right, x), jax.lax.cond(pred, lambda v: v * 3 + 1, lambda v: -v, x))
    assert_allclose(a.value, [4.0, 7.0])
    assert sorted(traces) == ["left", "right"]  # each branch traced once for both calls

    for index in (0, 1, 5):
        ref = jax.lax.switch(index, [lambda v: v * 3 + 1, lambda v: -v], x)
        assert_allclose(switch(index, [left, right], x), ref)
    assert_allclose(a.value, [8.0, 14.0])


def test_cond_refuses_a_state_a_branch_keeps_on_an_outer_object():
    class Holder:
        pass

    holder = Holder()
    w = State(jnp.ones(()), name="w")

    def left(x):
        holder.made = State(x * w.value, name="made")
        w.value = w.value + 1
        return x

    with pytest.raises(
        ValueError, match=r"cond: true_fun creates State 'made' and keeps it at path 'made' of the Holder"
    ):
        cond(jnp.bool_(True), left, lambda x: x, jnp.float32(2.0))
    assert_allclose(w.value, 1.0)
