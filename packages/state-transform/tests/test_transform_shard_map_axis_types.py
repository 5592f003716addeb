"""``shard_map`` and annotated ``jit`` on meshes of Explicit and of Auto axes, with and without ``jax.set_mesh``.

``jax.make_mesh`` makes Explicit axes unless given ``axis_types=``; on such axes a
value's type carries its sharding and ``jax.shard_map`` checks inputs against its
in_specs instead of moving them. Every test builds its mesh with explicit
``axis_types=`` so it runs the same at both JAX ends. Refused calls must raise our
message (naming the function or the state, both meshes and the fix) and change no
state, random keys included.
"""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose

import state_random
from state_core import ParamState, State
from state_transform import jit, shard_map

N = 8
# Explicit axes at both JAX ends; the Auto half of the matrix at the newest only (marker
# `auto_axes`): Auto meshes run at both ends in the Map, shard_map and jit sharding suites.
KINDS = [AxisType.Explicit, pytest.param(AxisType.Auto, marks=pytest.mark.auto_axes)]
OTHER = {AxisType.Explicit: AxisType.Auto, AxisType.Auto: AxisType.Explicit}


def _mesh(kind, shape=(N,), names=("x",)):
    return jax.make_mesh(shape, names, axis_types=(kind,) * len(names))


def _maybe_set(mesh, set_mesh):
    return jax.set_mesh(mesh) if set_mesh else contextlib.nullcontext()


def _key_data(key):
    return np.asarray(jax.random.key_data(key))


@pytest.fixture(params=KINDS, ids=lambda k: k.name)
def kind(request):
    return request.param


@pytest.fixture(params=[False, True], ids=["no_set_mesh", "set_mesh"])
def set_mesh(request):
    return request.param


# ---------------------------------------------------------------------- shard_map works on both
def test_sharded_and_replicated_states(kind, set_mesh):
    mesh = _mesh(kind)
    buffer = State(jnp.zeros(2 * N), name="buffer")
    gain = State(jnp.array(3.0), name="gain")

    def step(data):
        buffer.value = buffer.value + gain.value * data
        return jax.lax.psum(jnp.sum(data, keepdims=True), "x")

    with _maybe_set(mesh, set_mesh):
        run = shard_map(step, mesh, in_specs=(P("x"),), out_specs=P(), state_in_specs={buffer: P("x")})
        total = run(jnp.arange(2.0 * N))
        run(jnp.ones(2 * N))
    assert_allclose(np.asarray(total), [120.0])
    assert_allclose(np.asarray(buffer.value), 3.0 * np.arange(2.0 * N) + 3.0)
    assert buffer.value.sharding == NamedSharding(mesh, P("x"))


def test_inputs_placed_with_another_sharding_are_moved(kind, set_mesh):
    # On Explicit axes jax.shard_map asserts that an input already matches its in_spec;
    # ours moves a value placed otherwise (here replicated) to the spec first.
    mesh = _mesh(kind)
    replicated = NamedSharding(mesh, P())
    buffer = State(jax.device_put(jnp.zeros(2 * N), replicated), name="buffer")

    def step(data):
        buffer.value = buffer.value + data
        return data * 2.0

    with _maybe_set(mesh, set_mesh):
        run = shard_map(step, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("x")})
        out = run(jax.device_put(jnp.arange(2.0 * N), replicated))
    assert_allclose(np.asarray(out), 2.0 * np.arange(2.0 * N))
    assert_allclose(np.asarray(buffer.value), np.arange(2.0 * N))
    assert buffer.value.sharding.spec == P("x")


def test_inside_state_transform_jit_and_jax_jit(kind, set_mesh):
    mesh = _mesh(kind)
    buffer = State(jnp.zeros(2 * N), name="buffer")
    bias = State(jnp.array(5.0), name="bias")

    def step(data):
        buffer.value = buffer.value + data
        return data + bias.value

    with _maybe_set(mesh, set_mesh):
        run = shard_map(step, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("x")})
        out = jit(run)(jnp.arange(2.0 * N))
        shifted = shard_map(lambda d: d + bias.value, mesh, in_specs=(P("x"),), out_specs=P("x"))
        plain = jax.jit(shifted)(jnp.arange(2.0 * N))
    assert_allclose(np.asarray(out), np.arange(2.0 * N) + 5.0)
    assert_allclose(np.asarray(plain), np.arange(2.0 * N) + 5.0)
    assert_allclose(np.asarray(buffer.value), np.arange(2.0 * N))


def test_annotated_state_is_laid_out_as_annotated(kind, set_mesh):
    mesh = _mesh(kind)
    hidden = State(jnp.zeros(2 * N), sharding=NamedSharding(mesh, P("x")), name="hidden")

    def step(data):
        hidden.value = hidden.value + data
        return data

    with _maybe_set(mesh, set_mesh):
        shard_map(step, mesh, in_specs=(P("x"),), out_specs=P("x"))(jnp.arange(2.0 * N))
    assert_allclose(np.asarray(hidden.value), np.arange(2.0 * N))
    assert hidden.value.sharding == NamedSharding(mesh, P("x"))


def test_a_fresh_random_state_draws_the_same_numbers_with_and_without_set_mesh(kind):
    # A RandomState made from a seed creates its key on first use; inside a shard_map traced
    # under jax.set_mesh that first use happens where the mesh axes are manual.
    mesh = _mesh(kind)

    def draws(set_mesh):
        rng = state_random.RandomState(7)
        with _maybe_set(mesh, set_mesh):
            run = shard_map(lambda d: d + rng.normal(size=d.shape), mesh, in_specs=(P("x"),), out_specs=P("x"))
            return np.asarray(run(jnp.zeros(2 * N))), _key_data(rng.value)

    (plain, plain_key), (under_mesh, mesh_key) = draws(False), draws(True)
    assert_allclose(under_mesh, plain, rtol=0, atol=0)
    np.testing.assert_array_equal(mesh_key, plain_key)
    assert len({float(v) for v in plain.reshape(N, 2)[:, 0]}) == N  # one key per shard


def test_mixed_mesh_of_explicit_and_auto_axes(set_mesh):
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit, AxisType.Auto))
    table = State(jnp.zeros((4, 8)), name="table")

    def step(data):
        table.value = table.value + data
        return data.sum(keepdims=True)

    with _maybe_set(mesh, set_mesh):
        run = shard_map(
            step,
            mesh,
            in_specs=(P("data", "model"),),
            out_specs=P("data", "model"),
            state_in_specs={table: P("data", "model")},
        )
        data = jax.device_put(jnp.arange(32.0).reshape(4, 8), NamedSharding(mesh, P(None, "data")))
        sums = run(data)
    assert_allclose(np.asarray(table.value), np.arange(32.0).reshape(4, 8))
    expected = np.arange(32.0).reshape(4, 2, 4).sum(axis=2)  # one sum per (data, model) shard
    assert_allclose(np.asarray(sums), expected)


# ---------------------------------------------------------------------- shard_map under another mesh
def test_called_under_the_same_mesh_with_other_axis_types_is_our_error(kind):
    mesh = _mesh(kind)
    buffer = State(jnp.zeros(2 * N), name="buffer")
    state_random.seed(3)
    key_before = _key_data(state_random.DEFAULT.value)

    def step(data):
        buffer.value = buffer.value + data + state_random.normal(size=data.shape)
        return data

    run = shard_map(step, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("x")})
    message = (
        rf"shard_map\(step\) runs on the mesh \{{'x': 8\}} \(axis types {kind.name}\), but it was called "
        rf"under jax.set_mesh\(...\) of another mesh, \{{'x': 8\}} \(axis types {OTHER[kind].name}\).*"
        r"Pass that mesh to shard_map.*differ only in their axis types.*No state was changed"
    )
    with jax.set_mesh(_mesh(OTHER[kind])), pytest.raises(ValueError, match=message):
        run(jnp.ones(2 * N))
    assert_allclose(np.asarray(buffer.value), np.zeros(2 * N))
    np.testing.assert_array_equal(_key_data(state_random.DEFAULT.value), key_before)


def test_a_cached_call_under_another_mesh_is_refused_before_it_runs(kind):
    mesh = _mesh(kind)
    buffer = State(jnp.zeros(2 * N), name="buffer")
    state_random.seed(4)

    def step(data):
        buffer.value = buffer.value + data + state_random.normal(size=data.shape)
        return data

    run = shard_map(step, mesh, in_specs=(P("x"),), out_specs=P("x"), state_in_specs={buffer: P("x")})
    run(jnp.ones(2 * N))  # traced and compiled without a mesh set
    before, key_before = np.asarray(buffer.value), _key_data(state_random.DEFAULT.value)
    other = _mesh(kind, (2, 4), ("a", "b"))
    with jax.set_mesh(other), pytest.raises(ValueError, match=r"another mesh, \{'a': 2, 'b': 4\}"):
        run(jnp.ones(2 * N))
    assert_allclose(np.asarray(buffer.value), before)
    np.testing.assert_array_equal(_key_data(state_random.DEFAULT.value), key_before)
    with jax.set_mesh(mesh):  # the mesh it runs on: fine
        run(jnp.ones(2 * N))


# ---------------------------------------------------------------------- annotated jit
def test_partition_spec_annotations_follow_the_mesh_set(kind):
    mesh = _mesh(kind, (2, 4), ("data", "model"))
    with jax.set_mesh(mesh):
        w = ParamState(jnp.arange(32.0).reshape(8, 4), sharding=P("data", "model"), name="w")
        h = State(jnp.zeros((8, 4)), sharding=P("data"), name="h")

        @jit
        def step(x):
            h.value = h.value + x * w.value
            return h.value.sum()

        first, second = float(step(jnp.ones((8, 4)))), float(step(jnp.ones((8, 4))))
    assert (first, second) == (496.0, 992.0)
    assert_allclose(np.asarray(h.value), 2.0 * np.arange(32.0).reshape(8, 4))
    assert w.value.sharding == NamedSharding(mesh, P("data", "model"))
    assert h.value.sharding == NamedSharding(mesh, P("data"))


def test_named_sharding_annotation_without_set_mesh(kind):
    mesh = _mesh(kind)
    buffer = State(jnp.zeros(2 * N), sharding=NamedSharding(mesh, P("x")), name="buffer")

    @jit
    def step(x):
        buffer.value = buffer.value + x
        return buffer.value.sum()

    assert float(step(jnp.ones(2 * N))) == 2.0 * N
    assert buffer.value.sharding == NamedSharding(mesh, P("x"))


def test_annotation_on_a_mesh_of_other_axis_types_is_our_error(kind):
    annotated_on = _mesh(OTHER[kind])
    buffer = State(jnp.zeros(2 * N), sharding=NamedSharding(annotated_on, P("x")), name="buffer")

    @jit
    def step(x):
        buffer.value = buffer.value + x
        return buffer.value.sum()

    message = (
        rf"jit\(step\): State 'buffer' is annotated with a NamedSharding on the mesh \{{'x': 8\}} \(axis types "
        rf"{OTHER[kind].name}\), but it was called under jax.set_mesh\(...\) of another mesh, "
        rf"\{{'x': 8\}} \(axis types {kind.name}\).*sharding=P\('x',?\).*No state was changed"
    )
    with jax.set_mesh(_mesh(kind)), pytest.raises(ValueError, match=message):
        step(jnp.ones(2 * N))
    assert_allclose(np.asarray(buffer.value), np.zeros(2 * N))
    # The same program runs under the annotation's own mesh, and a cached call under the
    # other mesh is refused before it runs.
    with jax.set_mesh(annotated_on):
        assert float(step(jnp.ones(2 * N))) == 2.0 * N
    with jax.set_mesh(_mesh(kind)), pytest.raises(ValueError, match="State 'buffer' is annotated with a NamedSharding"):
        step(jnp.ones(2 * N))
    assert_allclose(np.asarray(buffer.value), np.ones(2 * N))


def test_auto_annotation_under_another_auto_mesh_runs():
    # JAX lets values of meshes with only Auto axes meet: nothing to refuse.
    annotated_on = _mesh(AxisType.Auto, (2, 4), ("a", "b"))
    buffer = State(jnp.zeros(2 * N), sharding=NamedSharding(annotated_on, P("a")), name="buffer")

    @jit
    def step(x):
        buffer.value = buffer.value + x
        return buffer.value.sum()

    with jax.set_mesh(_mesh(AxisType.Auto)):
        assert float(step(jnp.ones(2 * N))) == 2.0 * N


def test_partition_spec_annotation_called_later_under_another_mesh_is_our_error(kind):
    first, later = _mesh(kind), _mesh(OTHER[kind])
    with jax.set_mesh(first):
        buffer = State(jnp.zeros(2 * N), sharding=P("x"), name="buffer")

        @jit
        def step(x):
            buffer.value = buffer.value + x
            return buffer.value.sum()

        step(jnp.ones(2 * N))
    message = (
        r"jit\(step\): State 'buffer' is annotated with P\('x',?\), which it laid out on the mesh in effect "
        rf"at its first call, \{{'x': 8\}} \(axis types {kind.name}\), but it was called under "
        r"jax.set_mesh\(...\) of another mesh.*make a new jit for the new mesh"
    )
    with jax.set_mesh(later), pytest.raises(ValueError, match=message):
        step(jnp.ones(2 * N))
    assert_allclose(np.asarray(buffer.value), np.ones(2 * N))
