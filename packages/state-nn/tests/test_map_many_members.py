"""Map with more members than devices: behavior='pmap' (local devices) and behavior='shard' (a mesh).

Every result is compared with the same ensemble run by behavior='vmap', bit for
bit: the sharded program is the vmap program with its member axis split over
the devices, and the per-member random keys are split exactly as vmap splits them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import state_core
import state_nn
import state_random
from state_nn import Map, checkpoint

N_DEV = 8
N = 64


class Noisy(state_nn.Module):
    """Per-member weights drawn at init, a hidden state, and a random draw in every update."""

    def __init__(self):
        super().__init__()
        self.traces = 0

    def init_state(self, size=3):
        self.w = state_core.ParamState(state_random.normal(size=size))
        self.h = state_core.HiddenState(jnp.zeros(size))

    def update(self, x):
        self.traces += 1
        self.h.value = 0.5 * self.h.value + x * self.w.value + state_random.normal(size=self.h.value.shape)
        return self.h.value.sum()

    def noise(self):
        return state_random.uniform(size=2)


def _run(behavior, steps=3, **kwargs):
    state_random.seed(42)
    module = Noisy()
    ens = Map(module, init_map_size=N, behavior=behavior, axis_name="members", **kwargs)
    ens.init_all_states()
    init_w = np.asarray(module.w.value)
    x = jnp.linspace(-1.0, 1.0, N * 3).reshape(N, 3)
    outs = [np.asarray(ens(x)) for _ in range(steps)]
    return ens, module, init_w, outs


@pytest.fixture(scope="module")
def vmap_run():
    _, module, init_w, outs = _run("vmap")
    return init_w, outs, np.asarray(module.h.value), np.asarray(jax.random.key_data(state_random.DEFAULT.value))


def _check_per_device(value, per_device):
    shards = value.addressable_shards
    assert len(shards) == N_DEV
    assert {s.data.shape[0] for s in shards} == {per_device}
    assert len({s.device for s in shards}) == N_DEV


@pytest.mark.parametrize(
    "behavior, kwargs",
    [
        ("pmap", {}),
        ("shard", {}),
        ("shard", {"mesh": "2d", "mesh_axis": ("a", "b")}),
    ],
)
def test_64_members_on_8_devices_equal_vmap_bit_for_bit(vmap_run, behavior, kwargs):
    if kwargs.get("mesh") == "2d":
        kwargs = dict(kwargs, mesh=jax.make_mesh((4, 2), ("a", "b")))
    _, module, init_w, outs = _run(behavior, **kwargs)
    v_init, v_outs, v_h, v_key = vmap_run
    np.testing.assert_array_equal(init_w, v_init)  # init draws per member
    for out, expected in zip(outs, v_outs, strict=True):
        np.testing.assert_array_equal(out, expected)  # update draws per member
    np.testing.assert_array_equal(np.asarray(module.h.value), v_h)
    np.testing.assert_array_equal(np.asarray(jax.random.key_data(state_random.DEFAULT.value)), v_key)
    assert len(set(init_w[:, 0].tolist())) == N
    _check_per_device(module.w.value, N // N_DEV)
    _check_per_device(module.h.value, N // N_DEV)
    assert module.traces == 1  # traced once for three calls


def test_shard_on_one_axis_of_a_2d_mesh_replicates_over_the_other(vmap_run):
    mesh = jax.make_mesh((4, 2), ("a", "b"))
    ens, module, init_w, outs = _run("shard", mesh=mesh, mesh_axis="a")
    np.testing.assert_array_equal(init_w, vmap_run[0])
    np.testing.assert_array_equal(outs[-1], vmap_run[1][-1])
    assert module.w.value.sharding.spec == P("a")
    assert {s.data.shape[0] for s in module.w.value.addressable_shards} == {N // 4}
    assert ens.mesh_axis == ("a",) and ens.mesh.shape == {"a": 4, "b": 2}


@pytest.mark.parametrize("behavior", ["pmap", "shard"])
def test_update_is_traced_and_compiled_once(behavior, count_compiles):
    module = Noisy()
    ens = Map(module, init_map_size=N, behavior=behavior)
    ens.init_all_states()
    x = jnp.ones((N, 3))
    ens(x)  # traces and compiles
    ens(x)  # at most the in-place form of the same program
    with count_compiles() as compiles:
        for _ in range(3):
            ens(x)
    assert compiles == []
    assert module.traces == 1


def test_pmap_with_one_member_per_device_compiles_once(count_compiles):
    module = Noisy()
    ens = Map(module, init_map_size=N_DEV, behavior="pmap", axis_name="d")
    ens.init_all_states()
    x = jnp.ones((N_DEV, 3))
    with count_compiles() as compiles:
        ens(x)
        ens(x)  # the program, then at most its in-place form (the states' buffers donated)
        first = len(compiles)
        ens(x)
        ens(x)
    assert first >= 1 and len(compiles) == first  # later calls reuse them
    assert module.traces == 1


# ---------------------------------------------------------------------- errors
def test_pmap_members_not_a_multiple_of_the_devices():
    with pytest.raises(
        ValueError, match=r"init_map_size=12 members do not divide evenly: only 8 local device.*8 or 16"
    ):
        Map(Noisy(), init_map_size=12, behavior="pmap")


def test_shard_members_not_a_multiple_of_the_mesh_axis():
    mesh = jax.make_mesh((4, 2), ("a", "b"))
    with pytest.raises(
        ValueError, match=r"mesh axes \('a', 'b'\) \(8 device\(s\)\).*init_map_size=12 is not a multiple"
    ):
        Map(Noisy(), init_map_size=12, behavior="shard", mesh=mesh)
    Map(Noisy(), init_map_size=12, behavior="shard", mesh=mesh, mesh_axis="a")  # 3 per shard


def test_placement_argument_errors():
    with pytest.raises(ValueError, match=r"mesh_axis='c' names no axis of the mesh, whose axes are \('a', 'b'\)"):
        Map(Noisy(), 8, behavior="shard", mesh=jax.make_mesh((4, 2), ("a", "b")), mesh_axis="c")
    with pytest.raises(TypeError, match=r"mesh must be a jax\.sharding\.Mesh.*got list"):
        Map(Noisy(), 8, behavior="shard", mesh=jax.devices())
    with pytest.raises(ValueError, match="only used with behavior='shard'"):
        Map(Noisy(), 8, mesh=jax.make_mesh((8,), ("x",)))
    with pytest.raises(ValueError, match="takes no mesh"):
        Map(Noisy(), 8, behavior="pmap", mesh=jax.make_mesh((8,), ("x",)))


def test_failing_update_keeps_every_state():
    class Picky(state_nn.Module):
        def init_state(self):
            self.w = state_core.ParamState(state_random.normal(size=3))
            self.h = state_core.HiddenState(jnp.zeros(3))

        def update(self, x):
            self.h.value = self.h.value + self.w.value
            if x.shape[-1] != 3:
                raise ValueError("Picky wants 3 features")
            self.h.value = self.h.value * x
            return self.h.value

    module = Picky()
    ens = Map(module, init_map_size=N, behavior="pmap")
    ens.init_all_states()
    ens(jnp.ones((N, 3)))
    w, h = np.asarray(module.w.value), np.asarray(module.h.value)
    with pytest.raises(ValueError, match="Picky wants 3 features"):
        ens(jnp.ones((N, 4)))
    with pytest.raises(ValueError, match="inconsistent sizes"):
        ens(jnp.ones((N + 8, 3)))  # more inputs than members
    np.testing.assert_array_equal(np.asarray(module.w.value), w)
    np.testing.assert_array_equal(np.asarray(module.h.value), h)
    _check_per_device(module.h.value, N // N_DEV)
    np.testing.assert_array_equal(np.asarray(ens(jnp.ones((N, 3)))), h + w)  # x = 1


# ---------------------------------------------------------------------- everything Map supports
class Counter(state_nn.Module):
    def __init__(self):
        super().__init__()
        self.steps = state_core.State(jnp.zeros((), jnp.int32))  # shared by all members
        self.scratch = state_core.State(jnp.zeros(2))  # shared, written per member (warned)

    def init_state(self):
        self.w = state_core.ParamState(jnp.arange(2.0))

    def update(self, x):
        self.steps.value = self.steps.value + 1
        return x * self.w.value

    def scribble(self, x):
        self.scratch.value = x * self.w.value
        return self.scratch.value


@pytest.mark.parametrize("behavior", ["vmap", "pmap", "shard"])
def test_shared_state_write_back_and_warning(behavior):
    module = Counter()
    ens = Map(module, N, behavior=behavior, call_state_axes={None: module.steps})
    ens.init_all_states()
    x = jnp.arange(float(N))
    ens(x)
    ens(x)
    assert int(module.steps.value) == 2  # one shared counter, written back once per call
    out = ens.map("scribble")(x)
    expected = x[:, None] * jnp.arange(2.0)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(module.scratch.value, expected)  # stacked on a new member axis


def test_update_warns_about_a_written_shared_state_with_many_members():
    class Leaky(state_nn.Module):
        def __init__(self):
            super().__init__()
            self.last = state_core.State(jnp.zeros(()))

        def init_state(self):
            self.w = state_core.ParamState(jnp.ones(()))

        def update(self, x):
            self.last.value = x * self.w.value
            return self.last.value

    module = Leaky()
    ens = Map(module, N, behavior="pmap")
    ens.init_all_states()
    with pytest.warns(UserWarning, match=r"Map\(Leaky\).update wrote State 'last', which is shared by all 64"):
        ens(jnp.arange(float(N)))
    np.testing.assert_array_equal(module.last.value, np.arange(float(N)))
    _check_per_device(module.last.value, N // N_DEV)


def test_map_reset_and_state_axes_with_many_members():
    class Cell(state_nn.Module):
        def init_state(self, batch=2):
            self.h = state_core.HiddenState(jnp.zeros((batch,)))
            self.rng = state_random.RandomState(state_random.split_key())

        def reset_state(self, batch=2, value=0.0):
            self.h.value = jnp.full((batch,), value)

        def update(self, x):
            self.h.value = self.h.value + x
            return self.h.value

        def draw(self):
            return self.rng.normal(size=())

    results = {}
    for behavior in ("vmap", "pmap"):
        state_random.seed(3)
        module = Cell()
        ens = Map(module, N, behavior=behavior, init_state_axes={1: state_core.HiddenState})
        ens.init_all_states()
        assert module.h.value.shape == (2, N)
        ens.map("update", out_axes=1)(jnp.ones((N, 2)))
        ens.reset_all_states(batch=2, value=3.0)
        first = np.asarray(module.h.value)
        draws = np.asarray(ens.map("draw")())
        results[behavior] = (first, draws, np.asarray(jax.random.key_data(module.rng.value)))
        if behavior == "pmap":
            assert module.h.value.sharding.spec == P(None, "members")
            assert {s.data.shape for s in module.h.value.addressable_shards} == {(2, N // N_DEV)}
    np.testing.assert_array_equal(results["pmap"][0], np.full((2, N), 3.0))
    for a, b in zip(results["vmap"], results["pmap"], strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(set(results["pmap"][1].tolist())) == N  # one stream per member


def test_collective_over_members_spans_all_devices():
    def centred(behavior):
        state_random.seed(5)
        ens = Map(Noisy(), N, behavior=behavior, axis_name="members")
        ens.init_all_states()
        return np.asarray(
            ens.map(lambda m, x: m.w.value.sum() * x - jax.lax.pmean(m.w.value.sum() * x, "members"))(
                jnp.arange(float(N))
            )
        )

    expected, got = centred("vmap"), centred("pmap")
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert abs(float(got.sum())) < 1e-2


def test_one_member_per_device_and_fewer_members_than_devices():
    state_random.seed(1)
    full = Map(Noisy(), N_DEV, behavior="pmap", axis_name="d")
    full.init_all_states()
    _check_per_device(full.module.w.value, 1)
    out = full(jnp.ones((N_DEV, 3)))
    assert out.shape == (N_DEV,)
    few = Map(Noisy(), 2, behavior="pmap", axis_name="d")
    few.init_all_states()
    assert len(few.module.w.value.sharding.device_set) == 2
    assert few(jnp.ones((2, 3))).shape == (2,)
    assert len(few.module.h.value.sharding.device_set) == 2


def test_checkpoint_round_trip_of_a_sharded_ensemble(tmp_path):
    path = str(tmp_path / "ens")
    state_random.seed(0)
    source = Map(Noisy(), N, behavior="pmap")
    source.init_all_states()
    source(jnp.ones((N, 3)))
    checkpoint.save(path, source)
    target = Map(Noisy(), N, behavior="pmap")
    target.init_all_states()
    checkpoint.restore(path, target)
    for name in ("w", "h"):
        restored = getattr(target.module, name).value
        np.testing.assert_array_equal(restored, getattr(source.module, name).value)
        _check_per_device(restored, N // N_DEV)


def test_many_members_inside_jit_and_vmap2_equal_vmap():
    import state_transform

    results = {}
    for behavior in ("vmap", "pmap"):
        state_random.seed(0)
        module = Noisy()
        ens = Map(module, N, behavior=behavior)
        ens.init_all_states()
        twice = state_transform.jit(lambda x, ens=ens: ens(x) * 2)
        first, second = twice(jnp.ones((N, 3))), twice(jnp.ones((N, 3)))
        per_column = state_transform.vmap2(
            lambda x, ens=ens: ens.map(lambda m, y: (m.w.value * y).sum())(x), in_axes=1
        )(jnp.ones((N, 2, 3)))
        results[behavior] = [np.asarray(v) for v in (first, second, per_column, module.h.value)]
        assert module.traces == 1
    assert results["pmap"][2].shape == (2, N)
    for got, expected in zip(results["pmap"], results["vmap"], strict=True):
        np.testing.assert_array_equal(got, expected)
    assert not np.array_equal(results["pmap"][0], results["pmap"][1])  # new draws on the second call


def test_pmap2_new_states_is_eager_and_draws_like_vmap2_new_states(count_compiles):
    import state_transform

    def init(fn, **kwargs):
        state_random.seed(9)
        module = Noisy()
        fn(module, axis_size=N_DEV, state_out_axes={-1: state_core.HiddenState}, **kwargs)
        return module

    reference = init(state_transform.vmap2_new_states)
    init(state_transform.pmap2_new_states)  # JAX compiles its library primitives once
    with count_compiles() as compiles:
        module = init(state_transform.pmap2_new_states)
    assert compiles == []  # nothing compiled for a one-shot init
    np.testing.assert_array_equal(module.w.value, reference.w.value)
    _check_per_device(module.w.value, 1)
    assert module.h.value.shape == (3, N_DEV) and module.h.value.sharding.spec == P(None, "copies")
    with pytest.raises(ValueError, match=r"axis_size=9 copies need one device each, but only 8 device"):
        state_transform.pmap2_new_states(Noisy(), axis_size=9)
