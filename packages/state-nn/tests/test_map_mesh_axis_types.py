"""Map on meshes of Explicit and of Auto axes, with and without ``jax.set_mesh``, and checkpoints of them.

``jax.make_mesh`` makes Explicit axes unless given ``axis_types=``. The members of
``Map(behavior='shard', mesh=mesh)`` stay on that mesh (so they mix with other
values under ``jax.set_mesh(mesh)``) and compute, bit for bit, what
``behavior='vmap'`` computes. Every mesh here is built with explicit
``axis_types=`` so the tests run the same at both JAX ends.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose, assert_array_equal

import state_core
import state_nn
import state_random
import state_transform
from state_nn import Map, checkpoint

N = 64  # members: 16 per shard along 'data' of a (4, 2) mesh
# Explicit axes at both JAX ends; the Auto half of the matrix at the newest only (marker
# `auto_axes`): Auto meshes run at both ends in the Map, shard_map and jit sharding suites.
KINDS = [AxisType.Explicit, pytest.param(AxisType.Auto, marks=pytest.mark.auto_axes)]


class Noisy(state_nn.Module):
    """Per-member weights drawn at init, a hidden state, and a random draw in every update."""

    def __init__(self):
        super().__init__()
        self.traces = 0

    def init_state(self):
        self.w = state_core.ParamState(state_random.normal(size=3))
        self.h = state_core.HiddenState(jnp.zeros(3))

    def update(self, x):
        self.traces += 1
        self.h.value = 0.5 * self.h.value + x * self.w.value + state_random.normal(size=3)
        return self.h.value.sum()


def _mesh(kind):
    return jax.make_mesh((4, 2), ("data", "model"), axis_types=(kind, kind))


def _maybe_set(mesh, set_mesh):
    return jax.set_mesh(mesh) if set_mesh else contextlib.nullcontext()


def _inputs():
    return np.linspace(-1.0, 1.0, N * 3, dtype=np.float32).reshape(N, 3)


def _ensemble(**kwargs):
    state_random.seed(42)
    ens = Map(Noisy(), init_map_size=N, **kwargs)
    ens.init_all_states()
    return ens


@pytest.fixture(scope="module")
def reference():
    """Three updates of the same ensemble with behavior='vmap'."""
    ens = _ensemble()
    init_w = np.asarray(ens.module.w.value)
    outs = [np.asarray(ens(jnp.asarray(_inputs()))) for _ in range(3)]
    return init_w, outs


@pytest.fixture(params=KINDS, ids=lambda k: k.name)
def kind(request):
    return request.param


@pytest.fixture(params=[False, True], ids=["no_set_mesh", "set_mesh"])
def set_mesh(request):
    return request.param


def test_shard_on_the_mesh_equals_vmap_and_stays_on_that_mesh(reference, kind, set_mesh):
    mesh = _mesh(kind)
    init_w, outs = reference
    with _maybe_set(mesh, set_mesh):
        ens = _ensemble(behavior="shard", mesh=mesh, mesh_axis="data")
        got = [np.asarray(ens(jnp.asarray(_inputs()))) for _ in range(3)]
        # The members are values of this mesh: they mix with the caller's own values.
        doubled = np.asarray(ens.module.w.value * 2.0)
    assert_array_equal(np.asarray(ens.module.w.value), init_w)
    for out, expected in zip(got, outs, strict=True):
        assert_array_equal(out, expected)
    assert_allclose(doubled, 2.0 * init_w)
    assert ens.mesh is mesh
    assert ens.module.w.value.sharding == NamedSharding(mesh, P("data"))
    assert ens.module.h.value.sharding == NamedSharding(mesh, P("data"))


def test_arguments_placed_elsewhere_are_moved_to_the_members(reference, kind, set_mesh):
    mesh = _mesh(kind)
    _, outs = reference
    with _maybe_set(mesh, set_mesh):
        ens = _ensemble(behavior="shard", mesh=mesh, mesh_axis="data")
        elsewhere = jax.device_put(_inputs(), NamedSharding(mesh, P("model")))
        replicated = jax.device_put(_inputs(), NamedSharding(mesh, P()))
        first, second = np.asarray(ens(elsewhere)), np.asarray(ens(replicated))
        traced = ens.module.traces
        third = np.asarray(ens(elsewhere))
    for got, expected in zip((first, second, third), outs, strict=True):
        assert_array_equal(got, expected)
    assert ens.module.traces == traced  # the same program for every placement of the argument


def test_map_method_and_an_outer_jit(reference, kind, set_mesh):
    mesh = _mesh(kind)
    init_w, outs = reference
    with _maybe_set(mesh, set_mesh):
        ens = _ensemble(behavior="shard", mesh=mesh, mesh_axis="data")
        scaled = np.asarray(ens.map(lambda member, x: member.w.value * x)(jnp.asarray(_inputs())))
        jitted = np.asarray(state_transform.jit(lambda x: ens(x))(jnp.asarray(_inputs())))
    assert_allclose(scaled, init_w * _inputs(), rtol=1e-6)
    assert_allclose(jitted, outs[0], rtol=1e-6, atol=1e-6)


def test_pmap_members_under_a_mesh_set(reference, kind):
    # behavior='pmap' keeps its members on a mesh of its own; the program still runs
    # while the caller has set another mesh.
    init_w, outs = reference
    with jax.set_mesh(_mesh(kind)):
        ens = _ensemble(behavior="pmap")
        got = np.asarray(ens(jnp.asarray(_inputs())))
    assert_array_equal(np.asarray(ens.module.w.value), init_w)
    assert_array_equal(got, outs[0])


# ---------------------------------------------------------------------- checkpoints
def test_checkpoint_of_a_sharded_ensemble_keeps_values_and_placement(tmp_path, kind, set_mesh):
    mesh = _mesh(kind)
    path = str(tmp_path / "ens")
    with _maybe_set(mesh, set_mesh):
        source = _ensemble(behavior="shard", mesh=mesh, mesh_axis="data")
        source(jnp.asarray(_inputs()))
        checkpoint.save(path, source)
        expected_next = np.asarray(source(jnp.asarray(_inputs())))
        target = _ensemble(behavior="shard", mesh=mesh, mesh_axis="data")
        target.module.w.value = target.module.w.value * 0.0
        checkpoint.restore(path, target)
        restored_w = np.asarray(target.module.w.value)
        resumed = np.asarray(target(jnp.asarray(_inputs())))
    # The restored weights, hidden states and DEFAULT stream continue exactly as the source did.
    assert_array_equal(resumed, expected_next)
    assert not np.allclose(restored_w, 0.0)
    assert target.module.w.value.sharding.mesh is mesh
    assert target.module.w.value.sharding.is_equivalent_to(NamedSharding(mesh, P("data")), 2)


def test_checkpoint_of_annotated_states_restores_their_layout(tmp_path, kind, set_mesh):
    mesh = _mesh(kind)
    path = str(tmp_path / "annotated")
    w = state_core.ParamState(
        jnp.arange(32.0).reshape(8, 4), sharding=NamedSharding(mesh, P("data", "model")), name="w"
    )
    h = state_core.State(jnp.zeros((8, 4)), sharding=NamedSharding(mesh, P("data")), name="h")

    @state_transform.jit
    def step(x):
        h.value = h.value + x * w.value
        return h.value.sum()

    with _maybe_set(mesh, set_mesh):
        step(jnp.ones((8, 4)))
        checkpoint.save(path, {"w": w, "h": h}, include_default=False)
        w.value = jnp.zeros((8, 4))  # a fresh value, not yet on the mesh
        h.value = jnp.zeros((8, 4))
        checkpoint.restore(path, {"w": w, "h": h}, shardings={("w",): NamedSharding(mesh, P("data", "model"))})
        assert w.value.sharding == NamedSharding(mesh, P("data", "model"))
        total = float(step(jnp.ones((8, 4))))
    assert_allclose(np.asarray(w.value), np.arange(32.0).reshape(8, 4))
    assert_allclose(np.asarray(h.value), 2.0 * np.arange(32.0).reshape(8, 4))
    assert total == 2.0 * float(np.arange(32.0).sum())
    assert h.value.sharding == NamedSharding(mesh, P("data"))


def test_a_pmap_ensemble_runs_while_the_random_key_lies_on_another_mesh():
    # The first call of a program spread over devices asks JAX for its output types
    # (may it update its states in place?) before its inputs are placed: where a value
    # lies then (the global key, left on a shard ensemble's mesh) must not matter.
    def run(key_on_mesh):
        state_random.seed(3)
        if key_on_mesh:
            mesh = _mesh(AxisType.Explicit)
            state_random.DEFAULT.value = jax.device_put(state_random.DEFAULT.value, NamedSharding(mesh, P()))
        ens = Map(Noisy(), init_map_size=N, behavior="pmap")
        ens.init_all_states()
        x = jnp.ones((N, 3))
        return [np.asarray(ens(x)) for _ in range(2)]

    for got, want in zip(run(key_on_mesh=True), run(key_on_mesh=False), strict=True):
        assert_array_equal(got, want)
