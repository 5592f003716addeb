"""Tracer hygiene across transformations: our StateLeakError, never a stale tracer or JAX's error."""

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose

import state_transform as st
from state_core import State, StateLeakError


@pytest.fixture
def counter():
    return State(jnp.zeros(3), name="counter")


def _inc_of(state):
    def inc():
        state.value = state.value + 1

    return inc


LEAK = r"'counter' is written by a state-aware transformation .* not state-aware .*state_transform\.scan"


def test_our_jit_inside_plain_scan_inside_our_jit(counter):
    inner = st.jit(_inc_of(counter))

    @st.jit
    def outer(xs):
        def body(c, x):
            inner()
            return c + x, None

        return jax.lax.scan(body, 0.0, xs)[0]

    with pytest.raises(StateLeakError, match=LEAK):
        outer(jnp.arange(3.0))
    assert_allclose(counter.value, [0.0, 0.0, 0.0])  # unchanged by the failed call
    # The same inner function still works where it is allowed.
    inner()
    assert_allclose(counter.value, [1.0, 1.0, 1.0])


def test_our_vmap2_inside_plain_cond_inside_our_jit(counter):
    inc = _inc_of(counter)
    mapped = st.vmap2(lambda x: (inc(), x * 2)[1])

    @st.jit
    def outer(flag):
        return jax.lax.cond(flag, lambda: mapped(jnp.ones(3)), lambda: jnp.zeros(3))

    with pytest.raises(StateLeakError, match=LEAK):
        outer(True)
    assert_allclose(counter.value, [0.0, 0.0, 0.0])


def test_our_jit_inside_plain_checkpoint_inside_our_jit(counter):
    inner = st.jit(_inc_of(counter))

    @st.jit
    def outer(x):
        return jax.checkpoint(lambda y: (inner(), y * 2)[1])(x)

    with pytest.raises(StateLeakError, match=LEAK):
        outer(1.0)
    assert_allclose(counter.value, [0.0, 0.0, 0.0])


def test_reads_from_inside_plain_scan_are_allowed(counter):
    counter.value = jnp.ones(3)
    read = st.jit(lambda: counter.value.sum())

    @st.jit
    def outer(xs):
        return jax.lax.scan(lambda c, x: (c + read() * x, None), 0.0, xs)[0]

    assert_allclose(outer(jnp.arange(3.0)), 9.0)


def test_state_created_inside_shard_map_read_afterwards():
    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    box = {}

    def fun(x):
        box["s"] = State(x * 2, name="born_in_shard_map")
        return box["s"].value

    f = st.shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"))
    data = jnp.arange(16.0)
    assert_allclose(f(data), data * 2)
    # The new state comes out concrete, its shards side by side like the data's.
    assert_allclose(box["s"].value, data * 2)
    assert_allclose(f(data + 1), (data + 1) * 2)  # a cached call writes the same state
    assert_allclose(box["s"].value, (data + 1) * 2)


def test_state_created_inside_plain_jit_read_afterwards():
    box = {}

    @jax.jit
    def f(x):
        box["s"] = State(x, name="born_in_jit")
        return x

    f(jnp.ones(2))
    with pytest.raises(StateLeakError, match="'born_in_jit' was created inside a traced function"):
        _ = box["s"].value
