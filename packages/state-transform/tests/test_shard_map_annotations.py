"""``shard_map`` lays out a state by its ``sharding`` annotation unless a spec names it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose

from state_core import ParamState, State
from state_transform import shard_map

N = 8


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((N,), ("x",))


def test_annotation_is_the_default_state_spec(mesh):
    buffer = State(jnp.zeros(2 * N), sharding=P("x"))
    weight = ParamState(jnp.array(3.0))
    seen = []

    def step(data):
        seen.append(buffer.value.shape)
        buffer.value = buffer.value + data * weight.value
        return jax.lax.psum(data.sum(keepdims=True), "x")

    f = shard_map(step, mesh, in_specs=(P("x"),), out_specs=P())
    data = jnp.arange(2.0 * N)
    out = f(data)
    f(data)
    assert seen == [(2,)]  # traced once, with the per-shard shape of the annotated buffer
    assert_allclose(np.asarray(out), [float(data.sum())])
    assert buffer.value.sharding == NamedSharding(mesh, P("x"))
    assert_allclose(np.asarray(buffer.value), 2 * 3.0 * np.asarray(data))


def test_a_named_sharding_annotation_gives_its_spec(mesh):
    buffer = State(jnp.zeros(N), sharding=NamedSharding(mesh, P("x")))

    def step(data):
        buffer.value = buffer.value + data
        return data

    shard_map(step, mesh, in_specs=(P("x"),), out_specs=P("x"))(jnp.ones(N))
    assert buffer.value.sharding.spec == P("x")
    assert [s.data.shape for s in buffer.value.addressable_shards] == [(1,)] * N


def test_explicit_specs_win_over_the_annotation(mesh):
    total = State(jnp.zeros(2), sharding=P("x"))  # would not even fit: 2 is not divisible by 8
    seen = []

    def step(data):
        seen.append(total.value.shape)
        total.value = total.value + jax.lax.psum(data.sum(), "x")
        return data

    f = shard_map(step, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={total: P()})
    f(jnp.ones(N))
    assert seen == [(2,)]
    assert total.value.sharding.is_fully_replicated
    assert_allclose(np.asarray(total.value), [8.0, 8.0])


def test_out_spec_given_explicitly_wins_for_written_states(mesh):
    acc = State(jnp.zeros(N), sharding=P("x"))

    def step(data):
        acc.value = jnp.zeros(N) + jax.lax.psum(data.sum(), "x")
        return data

    f = shard_map(step, mesh, in_specs=(P("x"),), out_specs=P("x"), state_out_specs={acc: P()})
    f(jnp.arange(float(N)))
    assert acc.value.sharding.is_fully_replicated
    assert_allclose(np.asarray(acc.value), np.full(N, 28.0))


def test_an_annotation_that_does_not_fit_names_the_state(mesh):
    bad = State(jnp.zeros(3), name="bad", sharding=P("x"))

    def step(data):
        bad.value = bad.value + 1.0
        return data

    f = shard_map(step, mesh, in_specs=(P("x"),), out_specs=P("x"))
    with pytest.raises(ValueError, match=r"State 'bad' has size 3 along dimension 0.*not divisible by 8"):
        f(jnp.ones(N))
    assert_allclose(np.asarray(bad.value), np.zeros(3))


def test_states_that_come_back_in_the_full_rank_form_are_not_moved_again(mesh, count_calls, count_compiles):
    import state_core._sharding as sharding_module

    # The program's outputs come back as P(None, None) / P('x', None): the same layouts
    # as the declared P() / P('x'), so a steady call moves nothing and compiles nothing.
    w = ParamState(jnp.ones((3, 2)))  # replicated (P())
    h = State(jax.device_put(jnp.zeros((N, 2)), NamedSharding(mesh, P("x"))))

    def step(x):
        h.value = h.value + x * w.value.sum()
        w.value = w.value * 0.5
        return jax.lax.psum(x.sum(), "x")

    f = shard_map(
        step, mesh, in_specs=(P("x"),), out_specs=P(), state_in_specs={h: P("x")}, state_out_specs={h: P("x")}
    )
    x = jax.device_put(jnp.ones((N, 2)), NamedSharding(mesh, P("x")))
    f(x)
    assert w.value.sharding.spec == P(None, None) and h.value.sharding.spec == P("x", None)
    f(x)  # (the program's in-place form, the written states donated, compiles at its second call)
    moves = count_calls(sharding_module, "_put_leaf")
    with count_compiles() as compiles:
        for _ in range(2):
            out = f(x)
        assert moves == [] and compiles == []
    assert float(out) == 2.0 * N
    # w halves every call (6 -> 3, 1.5, 0.75, 0.375 summed); h adds x * sum(w) before it halves.
    assert_allclose(np.asarray(w.value), np.full((3, 2), 0.0625))
    assert_allclose(np.asarray(h.value), np.full((N, 2), 6.0 + 3.0 + 1.5 + 0.75))
