"""State accesses inside the state-aware transformations are never reported as plain-trace accesses.

The suite runs with ``set_plain_trace_policy('error')`` (see ``conftest.py``), so every
test here also fails if a transformation of ours reads a State while a JAX trace runs
without recording the read. A plain ``jax.jit`` around a random draw is reported: the
key would be frozen and every call would draw the same numbers.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_random
import state_transform as st
from state_core import PlainTraceStateAccessWarning, State, StateLeakError, plain_trace_policy


@pytest.fixture
def strict():
    with plain_trace_policy("error"), warnings.catch_warnings():
        warnings.simplefilter("error", PlainTraceStateAccessWarning)
        yield


def test_jit_vmap2_grad_record_reads_and_writes(strict):
    w = State(jnp.array(2.0), name="w")
    count = State(jnp.array(0), name="count")

    @st.jit
    def step(x):
        count.value = count.value + 1
        return w.value * x

    assert_allclose(step(3.0), 6.0)
    w.value = jnp.array(5.0)
    assert_allclose(step(3.0), 15.0)  # not frozen
    assert int(count.value) == 2

    assert_allclose(st.vmap2(lambda x: w.value * x)(jnp.arange(3.0)), [0.0, 5.0, 10.0])
    assert_allclose(st.grad(lambda: (w.value**2).sum(), grad_states=w)(), 10.0)


def test_control_flow_and_nested_plain_vmap_inside_our_jit(strict):
    acc = State(jnp.zeros(()), name="acc")
    scale = State(jnp.array(2.0), name="scale")

    def body(x):
        acc.value = acc.value + scale.value * x

    st.for_loop(body, jnp.arange(4.0))
    assert_allclose(acc.value, 12.0)

    @st.jit
    def branchy(x):
        # reads inside jax.lax.cond / jax.vmap bodies traced under our jit are recorded by it
        y = jax.lax.cond(x > 0, lambda v: v * scale.value, lambda v: v, x)
        z = jax.vmap(lambda v: v + scale.value)(jnp.ones(2))
        return st.cond(y > 0, lambda: y + z.sum(), lambda: y)

    assert_allclose(branchy(1.0), 8.0)
    assert_allclose(st.while_loop(lambda c: c < scale.value * 5, lambda c: c + scale.value, 0.0), 10.0)


def test_random_draws_under_our_transforms(strict):
    rng = state_random.RandomState(0)
    draws = st.jit(lambda: rng.normal(size=(2,)))
    first, second = np.asarray(draws()), np.asarray(draws())
    assert not np.allclose(first, second)  # the key advanced between calls
    lanes = st.vmap2(lambda x: x + rng.uniform(), axis_size=3)(jnp.zeros(3))
    assert len({float(v) for v in lanes}) == 3


def test_random_draw_in_plain_jit_is_reported():
    rng = state_random.RandomState(0)
    with plain_trace_policy("error"), pytest.raises(StateLeakError, match="RandomState"):
        jax.jit(lambda: rng.normal(size=(2,)))()
