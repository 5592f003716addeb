"""``state_transform.shard_map``: seed 001 examples, state specs, random keys, caching, errors, jit.

Seed 001 is the ``brainstate.transform.shard_map`` reference page; its examples are run here
with this project's names (``brainstate.State`` -> ``state_core.State``,
``brainstate.transform.shard_map`` -> ``state_transform.shard_map``). The conftest exposes
8 CPU devices.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose

import state_core
import state_random
import state_transform
from state_core import ParamState, ShortTermState, State
from state_core.filter import OfType
from state_transform import shard_map

N_DEV = 8


@pytest.fixture
def mesh():
    return jax.make_mesh((jax.device_count(),), ("x",))


def _key_data(key):
    return np.asarray(jax.random.key_data(key))


def test_eight_cpu_devices():
    assert jax.device_count() == N_DEV


# ---------------------------------------------------------------- seed 001 examples
def test_seed001_replicated_state_read(mesh):
    w = State(jnp.array(3.0))

    def fun(data):
        return data * w.value

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"))
    data = jnp.arange(jax.device_count() * 2, dtype=jnp.float32)
    out = f(data)
    assert out.shape == (16,)
    assert out.dtype == jnp.float32
    assert_allclose(np.asarray(out), np.arange(16, dtype=np.float32) * 3.0)
    # A read-only state is not changed.
    assert_allclose(np.asarray(w.value), 3.0)
    # The docstring example's first four values (read on the host: the mesh axes are
    # Explicit in this JAX, so slicing the sharded array directly needs an out_sharding).
    assert_allclose(np.asarray(out)[:4], [0.0, 3.0, 6.0, 9.0])


def test_seed001_per_shard_buffer_updated_in_place(mesh):
    buffer = State(jnp.zeros(jax.device_count() * 2))

    def accumulate(data):
        buffer.value = buffer.value + data
        return data

    f = shard_map(
        accumulate,
        mesh,
        in_specs=(P("x"),),
        out_specs=P("x"),
        state_in_specs={buffer: P("x")},
        state_out_specs={buffer: P("x")},
    )
    out = f(jnp.ones(jax.device_count() * 2))
    assert_allclose(np.asarray(out), np.ones(16))
    assert buffer.value.shape == (16,)
    assert_allclose(np.asarray(buffer.value), np.ones(16))
    assert buffer.value.sharding.spec == P("x")
    # A second call accumulates into the sharded buffer.
    f(jnp.arange(16.0))
    assert_allclose(np.asarray(buffer.value), 1.0 + np.arange(16.0))
    assert buffer.value.sharding.spec == P("x")


def test_seed001_psum_global_sum(mesh):
    def global_sum(data):
        return jax.lax.psum(jnp.sum(data, keepdims=True), axis_name="x")

    f = shard_map(global_sum, mesh, in_specs=(P("x"),), out_specs=P())
    out = f(jnp.arange(jax.device_count() * 2, dtype=jnp.float32))
    assert out.shape == (1,)
    assert_allclose(np.asarray(out), [float(np.arange(16).sum())])  # 120
    assert_allclose(np.asarray(out), [120.0])


def test_seed001_jax_jit_around_read_only_shard_map(mesh):
    bias = State(jnp.array(5.0))
    f = shard_map(lambda data: data + bias.value, mesh, in_specs=(P("x"),), out_specs=P("x"))
    jit_f = jax.jit(f)
    data = jnp.arange(jax.device_count() * 2, dtype=jnp.float32)
    assert_allclose(np.asarray(jit_f(data)), np.arange(16.0) + 5.0)
    # Called again (cached by jax.jit) it gives the same result.
    assert_allclose(np.asarray(jit_f(data * 2)), np.arange(16.0) * 2 + 5.0)
    assert_allclose(np.asarray(bias.value), 5.0)


def test_seed001_two_dimensional_mesh():
    n = jax.device_count()
    mesh2d = jax.make_mesh((n // 2, 2), ("data", "model"))
    assert dict(mesh2d.shape) == {"data": 4, "model": 2}
    f = shard_map(
        lambda data: data + 1.0,
        mesh2d,
        in_specs=(P("data", "model"),),
        out_specs=P("data", "model"),
    )
    out = f(jnp.ones((n // 2, 2)))
    assert out.shape == (4, 2)
    assert_allclose(np.asarray(out), np.full((4, 2), 2.0))


def test_two_dimensional_mesh_with_sharded_state_and_collective():
    mesh2d = jax.make_mesh((4, 2), ("data", "model"))
    acc = State(jnp.zeros((8, 4)))

    def step(x):
        acc.value = acc.value + x
        # Sum over the model axis only: each data row gets the sum of its model shards.
        return jax.lax.psum(jnp.sum(x, axis=1, keepdims=True), axis_name="model")

    f = shard_map(
        step,
        mesh2d,
        in_specs=(P("data", "model"),),
        out_specs=P("data"),
        state_in_specs={acc: P("data", "model")},
    )
    x = jnp.arange(32.0).reshape(8, 4)
    out = f(x)
    assert_allclose(np.asarray(acc.value), np.arange(32.0).reshape(8, 4))
    assert acc.value.sharding.spec == P("data", "model")
    assert_allclose(np.asarray(out), np.arange(32.0).reshape(8, 4).sum(axis=1, keepdims=True))


# ---------------------------------------------------------------- state specs
def test_single_partition_spec_applies_to_all_states(mesh):
    a = State(jnp.arange(16.0))
    b = State(jnp.ones(8))

    def fun(x):
        # Per shard: a has 2 elements, b has 1, x has 2.
        assert a.value.shape == (2,)
        assert b.value.shape == (1,)
        a.value = a.value + x
        b.value = b.value * 2.0
        return x

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs=P("x"))
    f(jnp.full(16, 10.0))
    assert_allclose(np.asarray(a.value), np.arange(16.0) + 10.0)
    assert_allclose(np.asarray(b.value), np.full(8, 2.0))
    assert a.value.sharding.spec == P("x")
    assert b.value.sharding.spec == P("x")


def test_filters_as_dict_keys(mesh):
    w = ParamState(jnp.array(2.0))
    h = ShortTermState(jnp.zeros(16))
    seen = {}

    def fun(x):
        seen["w"] = w.value.shape
        seen["h"] = h.value.shape
        h.value = h.value + x * w.value
        return h.value

    f = shard_map(
        fun,
        mesh,
        in_specs=(P("x"),),
        out_specs=P("x"),
        state_in_specs={OfType(ParamState): P(), OfType(ShortTermState): P("x")},
    )
    out = f(jnp.arange(16.0))
    assert seen == {"w": (), "h": (2,)}
    assert_allclose(np.asarray(out), np.arange(16.0) * 2.0)
    assert_allclose(np.asarray(h.value), np.arange(16.0) * 2.0)
    assert h.value.sharding.spec == P("x")
    assert_allclose(np.asarray(w.value), 2.0)


def test_filter_dict_first_match_wins(mesh):
    h = ShortTermState(jnp.zeros(16))
    seen = {}

    def fun(x):
        seen["h"] = h.value.shape
        h.value = h.value + 1.0
        return x

    # ShortTermState is a State: the first matching entry (P('x')) wins.
    f = shard_map(
        fun,
        mesh,
        in_specs=(P("x"),),
        out_specs=P("x"),
        state_in_specs={OfType(ShortTermState): P("x"), OfType(State): P()},
    )
    f(jnp.zeros(16))
    assert seen["h"] == (2,)
    assert_allclose(np.asarray(h.value), np.ones(16))


def test_written_state_without_out_spec_keeps_in_spec(mesh):
    buffer = State(jnp.zeros(16))

    def fun(x):
        buffer.value = buffer.value + x
        return x

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("x")})
    f(jnp.arange(16.0))
    assert buffer.value.shape == (16,)
    assert_allclose(np.asarray(buffer.value), np.arange(16.0))
    assert buffer.value.sharding.spec == P("x")


def test_written_replicated_state(mesh):
    counter = State(jnp.array(0.0))
    total = State(jnp.array(0.0))

    def fun(x):
        counter.value = counter.value + 1.0
        total.value = total.value + jax.lax.psum(jnp.sum(x), "x")
        return x * 2.0

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"))
    out = f(jnp.arange(16.0))
    assert_allclose(np.asarray(out), np.arange(16.0) * 2.0)
    assert counter.value.shape == ()
    assert_allclose(np.asarray(counter.value), 1.0)
    assert_allclose(np.asarray(total.value), 120.0)
    f(jnp.arange(16.0))
    assert_allclose(np.asarray(counter.value), 2.0)
    assert_allclose(np.asarray(total.value), 240.0)


def test_state_out_spec_differs_from_in_spec(mesh):
    # Read sharded, write back replicated: every shard assembles the full updated buffer
    # (a psum of the shards' slices, so check_vma knows the result is replicated).
    buffer = State(jnp.zeros(16))
    seen = []

    def fun(x):
        seen.append(buffer.value.shape)
        local = buffer.value + x
        start = jax.lax.axis_index("x") * 2
        placed = jax.lax.dynamic_update_slice(jnp.zeros(16), local, (start,))
        buffer.value = jax.lax.psum(placed, "x")
        return x

    f = shard_map(
        fun,
        mesh,
        in_specs=(P("x"),),
        out_specs=P("x"),
        state_in_specs={buffer: P("x")},
        state_out_specs={buffer: P()},
    )
    f(jnp.arange(16.0))
    assert seen[-1] == (2,)
    assert buffer.value.shape == (16,)
    assert_allclose(np.asarray(buffer.value), np.arange(16.0))
    assert buffer.value.sharding.is_fully_replicated


def test_keyword_arguments_are_replicated(mesh):
    def fun(x, scale):
        return x * scale

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"))
    out = f(jnp.arange(16.0), scale=jnp.array([3.0]))
    assert_allclose(np.asarray(out), np.arange(16.0) * 3.0)


def test_single_in_spec_for_all_arguments(mesh):
    f = shard_map(lambda a, b: a + b, mesh, in_specs=P("x"), out_specs=P("x"))
    assert_allclose(np.asarray(f(jnp.arange(16.0), jnp.ones(16))), np.arange(16.0) + 1.0)


# ---------------------------------------------------------------- random states
def _draw_per_shard(mesh):
    def fun(x):
        return x + state_random.normal(size=(1,))

    return shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"))


def test_random_distinct_key_per_shard(mesh):
    state_random.seed(0)
    out = np.asarray(_draw_per_shard(mesh)(jnp.zeros(8)))
    assert out.shape == (8,)
    assert len(np.unique(out)) == 8


def test_random_reproducible_after_seed(mesh):
    f = _draw_per_shard(mesh)
    state_random.seed(7)
    a = np.asarray(f(jnp.zeros(8)))
    state_random.seed(7)
    b = np.asarray(f(jnp.zeros(8)))
    assert_allclose(a, b, rtol=0, atol=0)
    # A fresh wrapper (new trace) reproduces the same numbers too.
    state_random.seed(7)
    c = np.asarray(_draw_per_shard(mesh)(jnp.zeros(8)))
    assert_allclose(a, c, rtol=0, atol=0)


def test_random_key_advances_after_each_call(mesh):
    f = _draw_per_shard(mesh)
    state_random.seed(3)
    k0 = _key_data(state_random.DEFAULT.value)
    a = np.asarray(f(jnp.zeros(8)))
    k1 = _key_data(state_random.DEFAULT.value)
    b = np.asarray(f(jnp.zeros(8)))
    k2 = _key_data(state_random.DEFAULT.value)
    assert not np.array_equal(k0, k1)
    assert not np.array_equal(k1, k2)
    assert not np.array_equal(a, b)
    # The key stays a single typed key.
    assert state_random.is_single_key(state_random.DEFAULT.value)


def test_random_bit_exact_key_discipline(mesh):
    f = _draw_per_shard(mesh)
    state_random.seed(42)
    K = jax.random.key(42)
    out = np.asarray(f(jnp.zeros(8)))

    parts = jax.random.split(K, N_DEV + 1)
    expected = np.concatenate(
        [np.asarray(jax.random.normal(jax.random.split(parts[1 + i], 2)[1], (1,))) for i in range(N_DEV)]
    )
    assert_allclose(out, expected, rtol=0, atol=0)
    expected_key = jax.random.split(parts[0], 2)[1]
    assert np.array_equal(_key_data(state_random.DEFAULT.value), _key_data(expected_key))

    # Second (cached) call continues from the new key with the same discipline.
    out2 = np.asarray(f(jnp.zeros(8)))
    parts2 = jax.random.split(expected_key, N_DEV + 1)
    expected2 = np.concatenate(
        [np.asarray(jax.random.normal(jax.random.split(parts2[1 + i], 2)[1], (1,))) for i in range(N_DEV)]
    )
    assert_allclose(out2, expected2, rtol=0, atol=0)
    assert np.array_equal(_key_data(state_random.DEFAULT.value), _key_data(jax.random.split(parts2[0], 2)[1]))


def test_random_state_own_stream_bit_exact(mesh):
    rng = state_random.RandomState(5)

    def fun(x):
        return x + rng.uniform(size=(2,))

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"))
    out = np.asarray(f(jnp.zeros(16)))
    parts = jax.random.split(jax.random.key(5), N_DEV + 1)
    expected = np.concatenate(
        [np.asarray(jax.random.uniform(jax.random.split(parts[1 + i], 2)[1], (2,))) for i in range(N_DEV)]
    )
    assert_allclose(out, expected, rtol=0, atol=0)
    assert np.array_equal(_key_data(rng.value), _key_data(jax.random.split(parts[0], 2)[1]))


# ---------------------------------------------------------------- caching
def test_cached_call_does_not_run_function(mesh):
    calls = []
    w = State(jnp.array(2.0))

    def fun(x):
        calls.append(x.shape)
        return x * w.value

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"))
    out = f(jnp.arange(16.0))
    assert len(calls) == 1  # traced once, inside the shard_map context
    assert_allclose(np.asarray(out), np.arange(16.0) * 2.0)
    out = f(jnp.arange(16.0) + 1.0)
    assert len(calls) == 1  # cached: not run
    assert_allclose(np.asarray(out), (np.arange(16.0) + 1.0) * 2.0)
    # A state change of value (not shape) does not retrace and is picked up.
    w.value = jnp.array(5.0)
    out = f(jnp.arange(16.0))
    assert len(calls) == 1
    assert_allclose(np.asarray(out), np.arange(16.0) * 5.0)


def test_new_input_shape_retraces(mesh):
    calls = []

    def fun(x):
        calls.append(x.shape)
        return x + 1.0

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"))
    f(jnp.zeros(16))
    assert len(calls) == 1
    out = f(jnp.zeros(32))
    assert len(calls) == 2
    # Per-shard shapes are seen inside jax.shard_map.
    assert calls == [(2,), (4,)]
    assert_allclose(np.asarray(out), np.ones(32))
    f(jnp.zeros(16))
    f(jnp.zeros(32))
    assert len(calls) == 2


@pytest.mark.parametrize("sharded", [True, False], ids=["sharded_state", "replicated_state"])
def test_cached_call_after_state_write_does_not_run_function(mesh, sharded):
    # The second call has the same signature as the first; only the written state's value
    # changed (it now lives on the mesh). A cached call must not run the user function again.
    calls = []
    buffer = State(jnp.zeros(16))

    def fun(x):
        calls.append(1)
        buffer.value = buffer.value + (x if sharded else 1.0)
        return x

    specs = {buffer: P("x")} if sharded else None
    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs=specs)
    f(jnp.ones(16))
    assert len(calls) == 1
    f(jnp.ones(16))
    f(jnp.ones(16))
    assert_allclose(np.asarray(buffer.value), np.full(16, 3.0))
    assert len(calls) == 1


# ---------------------------------------------------------------- errors
def test_error_state_spec_axis_does_not_divide_state(mesh):
    buffer = State(jnp.arange(12.0))
    before = np.asarray(buffer.value)

    def fun(x):
        buffer.value = buffer.value + 1.0
        return x

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("x")})
    with pytest.raises(ValueError, match=r"(?s)size 12.*split.* into 8 shards.*not divisible"):
        f(jnp.zeros(16))
    assert_allclose(np.asarray(buffer.value), before)
    assert buffer.value.shape == (12,)


def test_error_state_spec_names_the_state(mesh):
    buffer = State(jnp.arange(12.0))

    def fun(x):
        return x + jnp.sum(buffer.value)

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("x")})
    with pytest.raises(ValueError) as info:
        f(jnp.zeros(16))
    assert buffer.describe() in str(info.value)
    assert_allclose(np.asarray(buffer.value), np.arange(12.0))


def test_error_state_out_spec_does_not_divide(mesh):
    buffer = State(jnp.arange(12.0))

    def fun(x):
        buffer.value = buffer.value + 1.0
        return x

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"), state_out_specs={buffer: P("x")})
    with pytest.raises(ValueError, match=r"(?s)state_out_specs.*12.*8"):
        f(jnp.zeros(16))
    assert_allclose(np.asarray(buffer.value), np.arange(12.0))


def test_error_unknown_mesh_axis_in_in_specs(mesh):
    w = State(jnp.array(1.0))
    f = shard_map(lambda x: x * w.value, mesh, in_specs=(P("y"),), out_specs=P("x"))
    with pytest.raises(ValueError, match=r"(?s)argument 0.*mesh axis 'y'.*\('x',\)"):
        f(jnp.zeros(16))
    assert_allclose(np.asarray(w.value), 1.0)


def test_error_unknown_mesh_axis_in_state_spec(mesh):
    buffer = State(jnp.zeros(16))

    def fun(x):
        buffer.value = buffer.value + x
        return x

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("model")})
    with pytest.raises(ValueError, match=r"mesh axis 'model'") as info:
        f(jnp.ones(16))
    assert buffer.describe() in str(info.value)
    assert_allclose(np.asarray(buffer.value), np.zeros(16))


def test_error_wrong_number_of_in_specs(mesh):
    buffer = State(jnp.zeros(16))

    def fun(x):
        buffer.value = buffer.value + x
        return x

    f = shard_map(fun, mesh, in_specs=(P("x"), P("x")), out_specs=P("x"))
    with pytest.raises(ValueError, match=r"in_specs has 2 entries.*1 positional argument"):
        f(jnp.ones(16))
    assert_allclose(np.asarray(buffer.value), np.zeros(16))


def test_error_input_not_divisible(mesh):
    buffer = State(jnp.zeros(16))
    state_random.seed(11)
    key_before = _key_data(state_random.DEFAULT.value)

    def fun(x):
        buffer.value = buffer.value + jnp.sum(x) + state_random.normal()
        return x

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("x")})
    with pytest.raises(ValueError, match=r"(?s)argument 0.*size 12.*8 shards.*not divisible"):
        f(jnp.ones(12))
    assert_allclose(np.asarray(buffer.value), np.zeros(16))
    assert np.array_equal(_key_data(state_random.DEFAULT.value), key_before)


def test_error_failure_leaves_random_key_unchanged(mesh):
    # A state-spec failure is detected while discovering states; no state changes, not even
    # the RandomState the function draws from.
    buffer = State(jnp.zeros(12))
    state_random.seed(11)
    key_before = _key_data(state_random.DEFAULT.value)

    def fun(x):
        buffer.value = buffer.value + state_random.normal()
        return x

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("x")})
    with pytest.raises(ValueError, match="not divisible"):
        f(jnp.ones(16))
    assert_allclose(np.asarray(buffer.value), np.zeros(12))
    assert np.array_equal(_key_data(state_random.DEFAULT.value), key_before)


def test_error_non_mesh(mesh):
    with pytest.raises(TypeError, match=r"mesh must be a jax.sharding.Mesh, got tuple"):
        shard_map(lambda x: x, (8,), in_specs=(P("x"),), out_specs=P("x"))
    with pytest.raises(TypeError, match=r"mesh must be a jax.sharding.Mesh, got str"):
        shard_map(lambda x: x, "x", in_specs=(P("x"),), out_specs=P("x"))


def test_error_bad_state_spec_type(mesh):
    buffer = State(jnp.zeros(16))
    with pytest.raises(TypeError, match=r"(?s)state_in_specs: the spec for .* must be a PartitionSpec, got 'x'"):
        shard_map(lambda x: x, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: "x"})
    with pytest.raises(TypeError, match=r"state_in_specs must be None, a PartitionSpec, or a dict"):
        shard_map(lambda x: x, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs=("x",))
    with pytest.raises(TypeError, match=r"state_out_specs must be None, a PartitionSpec, or a dict"):
        shard_map(lambda x: x, mesh, in_specs=(P("x"),), out_specs=P("x"), state_out_specs=3)
    assert_allclose(np.asarray(buffer.value), np.zeros(16))


def test_error_bad_in_spec_entry_type(mesh):
    f = shard_map(lambda x: x, mesh, in_specs=("x",), out_specs=P("x"))
    with pytest.raises(TypeError, match=r"in_specs\[0\] must be a PartitionSpec"):
        f(jnp.zeros(16))


def test_error_then_success_with_fixed_input(mesh):
    buffer = State(jnp.zeros(16))

    def fun(x):
        buffer.value = buffer.value + x
        return x

    f = shard_map(fun, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("x")})
    with pytest.raises(ValueError, match="not divisible"):
        f(jnp.ones(12))
    f(jnp.ones(16))
    assert_allclose(np.asarray(buffer.value), np.ones(16))


def test_error_spec_with_more_entries_than_dimensions(mesh):
    s = State(jnp.zeros(16))
    f = shard_map(lambda x: x + s.value, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={s: P("x", None)})
    with pytest.raises(ValueError, match=r"(?s)has 2 entries but the value has shape \(16,\)"):
        f(jnp.ones(16))
    assert_allclose(np.asarray(s.value), np.zeros(16))


def test_error_state_becomes_non_divisible_after_caching(mesh):
    # The same condition as test_error_state_spec_axis_does_not_divide_state, reached through a
    # cached entry: the error should still be the library's ValueError naming the state and sizes.
    w = State(jnp.ones(16))
    f = shard_map(
        lambda x: x * jnp.sum(w.value), mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={w: P("x")}
    )
    assert_allclose(np.asarray(f(jnp.ones(16))), np.full(16, 2.0))
    w.value = jnp.ones(12)
    with pytest.raises(ValueError, match=r"(?s)shard_map: .*size 12.*8 shards.*not divisible") as info:
        f(jnp.ones(16))
    assert w.describe() in str(info.value)
    assert_allclose(np.asarray(w.value), np.ones(12))


def test_state_shape_change_between_calls_is_followed(mesh):
    w = State(jnp.ones(16))
    f = shard_map(
        lambda x: x * jnp.sum(w.value), mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={w: P("x")}
    )
    assert_allclose(np.asarray(f(jnp.ones(16))), np.full(16, 2.0))  # per-shard sum of 2 ones
    w.value = jnp.ones(32)
    assert_allclose(np.asarray(f(jnp.ones(16))), np.full(16, 4.0))  # per-shard sum of 4 ones


def test_user_exception_restores_states(mesh):
    buffer = State(jnp.zeros(16))

    def bad(x):
        buffer.value = buffer.value + x
        raise RuntimeError("boom")

    f = shard_map(bad, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("x")})
    with pytest.raises(RuntimeError, match="boom"):
        f(jnp.ones(16))
    assert isinstance(buffer.value, jax.Array) and not isinstance(buffer.value, jax.core.Tracer)
    assert_allclose(np.asarray(buffer.value), np.zeros(16))


def test_user_exception_leaves_the_random_key_unchanged(mesh):
    # A call that fails changes no State, random keys included: a retry draws what the
    # failed call would have drawn.
    def bad(x):
        state_random.normal(size=x.shape)
        raise RuntimeError("boom")

    f = shard_map(bad, mesh, in_specs=(P("x"),), out_specs=P("x"))
    state_random.seed(5)
    with pytest.raises(RuntimeError, match="boom"):
        f(jnp.zeros(8))
    assert np.array_equal(_key_data(state_random.DEFAULT.value), _key_data(jax.random.key(5)))


def test_pytree_argument_sharded_per_leaf(mesh):
    f = shard_map(lambda d: d["a"] + d["b"], mesh, in_specs=(P("x"),), out_specs=P("x"))
    out = f({"a": jnp.ones(16), "b": jnp.arange(16.0)})
    assert_allclose(np.asarray(out), np.arange(16.0) + 1.0)


def test_docstring_example_runs():
    # The example in shard_map's own docstring must pass as a doctest.
    import doctest

    import state_transform._shard_map as module

    finder = doctest.DocTestFinder()
    (test,) = [t for t in finder.find(module) if t.name.endswith(".shard_map") and t.examples]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=lambda _: None)
    assert runner.failures == 0


# ---------------------------------------------------------------- composition with jit
def test_inside_state_transform_jit_updates_state(mesh):
    buffer = State(jnp.zeros(16))
    counter = State(jnp.array(0.0))

    def accumulate(x):
        buffer.value = buffer.value + x
        counter.value = counter.value + 1.0
        return x * 2.0

    sm = shard_map(accumulate, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("x")})

    @state_transform.jit
    def step(x):
        return sm(x) + 1.0

    out = step(jnp.arange(16.0))
    assert_allclose(np.asarray(out), np.arange(16.0) * 2.0 + 1.0)
    assert_allclose(np.asarray(buffer.value), np.arange(16.0))
    assert_allclose(np.asarray(counter.value), 1.0)
    step(jnp.ones(16))
    assert_allclose(np.asarray(buffer.value), np.arange(16.0) + 1.0)
    assert_allclose(np.asarray(counter.value), 2.0)


def test_inside_state_transform_jit_random_bit_exact(mesh):
    f = _draw_per_shard(mesh)
    step = state_transform.jit(lambda x: f(x))
    state_random.seed(42)
    out = np.asarray(step(jnp.zeros(8)))
    parts = jax.random.split(jax.random.key(42), N_DEV + 1)
    expected = np.concatenate(
        [np.asarray(jax.random.normal(jax.random.split(parts[1 + i], 2)[1], (1,))) for i in range(N_DEV)]
    )
    assert_allclose(out, expected, rtol=0, atol=0)
    assert np.array_equal(_key_data(state_random.DEFAULT.value), _key_data(jax.random.split(parts[0], 2)[1]))


def test_plain_jax_jit_around_state_writing_shard_map_raises(mesh):
    buffer = State(jnp.zeros(16))

    def accumulate(x):
        buffer.value = buffer.value + x
        return x

    sm = shard_map(accumulate, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("x")})
    with pytest.raises(state_core.StateLeakError, match=r"(?s)shard_map\(accumulate\) writes .*not state-aware"):
        jax.jit(sm)(jnp.ones(16))
    assert isinstance(buffer.value, jax.Array)
    assert not isinstance(buffer.value, jax.core.Tracer)
    assert_allclose(np.asarray(buffer.value), np.zeros(16))
    # The state is still usable eagerly afterwards.
    sm(jnp.ones(16))
    assert_allclose(np.asarray(buffer.value), np.ones(16))


def test_mesh_type_is_checked_as_mesh_instance(mesh):
    assert isinstance(mesh, Mesh)
    f = shard_map(lambda x: x, mesh, in_specs=(P("x"),), out_specs=P("x"))
    assert isinstance(f, state_transform.ShardMapFunction)
    assert f.mesh is mesh


def test_error_undeclared_state_written_per_shard_names_the_state(mesh):
    acc = State(jnp.zeros(()), name="acc")

    def f(x):
        acc.value = acc.value + x.sum()  # differs per shard, but acc is replicated
        return x

    g = shard_map(f, mesh, in_specs=P("x"), out_specs=P("x"))
    with pytest.raises(
        ValueError,
        match=r"State 'acc' is written with a value that differs between shards along mesh axes \('x',\).*jax.lax.psum",
    ):
        g(jnp.arange(8.0))
    assert_allclose(acc.value, 0.0)

    def reduced(x):
        acc.value = acc.value + jax.lax.psum(x.sum(), "x")
        return x

    shard_map(reduced, mesh, in_specs=P("x"), out_specs=P("x"))(jnp.arange(8.0))
    assert_allclose(acc.value, 28.0)
