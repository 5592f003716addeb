"""state_nn.checkpoint: round trips, keys, DEFAULT, shardings, partial restore, errors, resumed training."""

import gc
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import state_core
import state_nn
import state_random
import state_transform
from state_core import HiddenState, LongTermState, ParamState, State
from state_nn import checkpoint
from state_random import RandomState


@pytest.fixture
def ckpt(tmp_path):
    return str(tmp_path / "ckpt")


def _keys_equal(a, b):
    assert a.dtype == b.dtype  # same typed-key implementation
    np.testing.assert_array_equal(jax.random.key_data(a), jax.random.key_data(b))


# ---------------------------------------------------------------------- round trips
def test_values_dtypes_and_leaf_types_round_trip(ckpt):
    states = {
        "f32": ParamState(jnp.arange(6.0).reshape(2, 3)),
        "bf16": ParamState(jnp.array([1.5, -2.25], jnp.bfloat16)),
        "i32": HiddenState(jnp.array([3, -4], jnp.int32)),
        "flag": State(jnp.array([True, False])),
        "host": State(np.linspace(0, 1, 4)),  # numpy float64 stays numpy float64
        "scalars": State({"count": 3, "lr": 0.5, "n": np.int64(7)}),
        "tree": LongTermState((jnp.ones(2), {"mu": jnp.full((2, 2), 0.25)})),
    }
    before = {k: jax.tree.map(np.array, s.value) for k, s in states.items()}
    checkpoint.save(ckpt, states, include_default=False)
    for s in states.values():
        s.value = jax.tree.map(lambda x: ~x if getattr(x, "dtype", None) == np.bool_ else x * 0, s.value)

    assert checkpoint.restore(ckpt, states) == {}
    for name, s in states.items():
        jax.tree.map(np.testing.assert_array_equal, s.value, before[name])
    assert states["bf16"].value.dtype == jnp.bfloat16
    assert states["i32"].value.dtype == jnp.int32
    assert isinstance(states["host"].value, np.ndarray) and states["host"].value.dtype == np.float64
    scalars = states["scalars"].value
    assert type(scalars["count"]) is int and scalars["count"] == 3
    assert type(scalars["lr"]) is float and scalars["lr"] == 0.5
    assert type(scalars["n"]) is np.int64 and scalars["n"] == 7
    assert isinstance(states["tree"].value[1]["mu"], jax.Array)


def test_module_and_statedict_targets(ckpt, tmp_path):
    state_random.seed(3)
    model = state_nn.Sequential(state_nn.Linear(2, 3), state_nn.Linear(3, 1))
    weight = np.array(model.layers[0].weight.value)
    checkpoint.save(ckpt, model, include_default=False)
    assert checkpoint.read_metadata(ckpt)["paths"] == [
        ("layers", 0, "weight"),
        ("layers", 0, "bias"),
        ("layers", 1, "weight"),
        ("layers", 1, "bias"),
    ]
    other = state_nn.Sequential(state_nn.Linear(2, 3), state_nn.Linear(3, 1))
    checkpoint.restore(ckpt, other.states())  # a StateDict of the same paths
    np.testing.assert_array_equal(other.layers[0].weight.value, weight)

    single = ParamState(jnp.arange(3.0))
    path = str(tmp_path / "single")
    checkpoint.save(path, single, include_default=False)
    single.value = jnp.zeros(3)
    checkpoint.restore(path, single)
    np.testing.assert_array_equal(single.value, [0.0, 1.0, 2.0])


def test_typed_keys_round_trip_as_typed_keys(ckpt):
    rngs = {
        "one": RandomState(5),
        "many": RandomState(jax.random.split(jax.random.key(1), 4)),
        "rbg": RandomState(jax.random.key(2, impl="rbg")),
    }
    saved = {k: r.value for k, r in rngs.items()}
    checkpoint.save(ckpt, rngs, include_default=False)
    rngs["one"].normal()
    rngs["rbg"].normal()
    rngs["many"].set_key(jax.random.split(jax.random.key(9), 4))
    checkpoint.restore(ckpt, rngs)
    for name, r in rngs.items():
        assert jax.dtypes.issubdtype(r.value.dtype, jax.dtypes.prng_key), name
        _keys_equal(r.value, saved[name])
    assert str(jax.random.key_impl(rngs["rbg"].value)) == "rbg"
    # the restored stream draws what the saved one would have drawn
    np.testing.assert_array_equal(rngs["one"].normal(size=3), RandomState(5).normal(size=3))


def test_default_stream_is_saved_and_restored(ckpt):
    model = state_nn.Sequential(state_nn.Linear(16, 16), state_nn.Dropout(0.5))
    state_random.seed(11)
    checkpoint.save(ckpt, model)
    assert checkpoint.read_metadata(ckpt)["paths"][-1] == checkpoint.DEFAULT_PATH
    first = model(jnp.ones(16))
    state_random.seed(999)
    checkpoint.restore(ckpt, model)
    np.testing.assert_array_equal(model(jnp.ones(16)), first)


def test_include_default_options(ckpt, tmp_path):
    w = ParamState(jnp.ones(2))
    state_random.seed(0)
    checkpoint.save(ckpt, {"w": w}, include_default=False)
    assert checkpoint.read_metadata(ckpt)["paths"] == [("w",)]
    with pytest.raises(ValueError, match=r"'state_random.DEFAULT'.* not in the checkpoint"):
        checkpoint.restore(ckpt, {"w": w}, include_default=True)

    with_default = str(tmp_path / "with_default")
    checkpoint.save(with_default, {"w": w})
    key = state_random.get_key()
    state_random.seed(1)
    moved = state_random.get_key()
    checkpoint.restore(with_default, {"w": w}, include_default=False)
    _keys_equal(state_random.get_key(), moved)
    checkpoint.restore(with_default, {"w": w})
    _keys_equal(state_random.get_key(), key)


def test_default_inside_target_is_saved_once_under_its_own_path(ckpt):
    checkpoint.save(ckpt, {"rng": state_random.DEFAULT})
    assert checkpoint.read_metadata(ckpt)["paths"] == [("rng",)]


def test_metadata_and_versions(ckpt):
    checkpoint.save(ckpt, {"w": ParamState(jnp.ones(1))}, metadata={"step": 12, "config": {"lr": 0.1}})
    info = checkpoint.read_metadata(ckpt)
    assert info["format_version"] == checkpoint.FORMAT_VERSION == 1
    assert info["metadata"] == {"step": 12, "config": {"lr": 0.1}}
    assert info["versions"]["state-nn"] == state_nn.__version__
    assert info["versions"]["jax"] == jax.__version__
    assert set(info["versions"]) >= {"state-core", "state-random", "state-transform", "orbax-checkpoint"}
    assert checkpoint.restore(ckpt, {"w": ParamState(jnp.zeros(1))}) == {"step": 12, "config": {"lr": 0.1}}


# ---------------------------------------------------------------------- shardings
def _mesh():
    return jax.sharding.Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))


def test_restore_gives_each_value_the_targets_sharding(ckpt):
    mesh = _mesh()
    rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data", "model"))
    keys_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    source = {
        "w": ParamState(jnp.arange(32.0).reshape(8, 4)),
        "keys": RandomState(jax.random.split(jax.random.key(0), 8)),
    }
    checkpoint.save(ckpt, source, include_default=False)
    target = {
        "w": ParamState(jax.device_put(jnp.zeros((8, 4)), rows)),
        "keys": RandomState(jax.device_put(jax.random.split(jax.random.key(7), 8), keys_sharding)),
    }
    checkpoint.restore(ckpt, target)
    assert target["w"].value.sharding == rows
    np.testing.assert_array_equal(target["w"].value, np.arange(32.0).reshape(8, 4))
    assert target["keys"].value.sharding.spec == keys_sharding.spec
    _keys_equal(target["keys"].value, source["keys"].value)


def test_restore_with_explicit_shardings(ckpt):
    mesh = _mesh()
    cols = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "model"))
    states = {"w": ParamState(jnp.ones((4, 4))), "b": ParamState(jnp.ones(4))}
    checkpoint.save(ckpt, states, include_default=False)
    checkpoint.restore(ckpt, states, shardings={"w": cols})
    assert states["w"].value.sharding == cols
    assert not isinstance(states["b"].value.sharding, jax.sharding.NamedSharding)
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    checkpoint.restore(ckpt, states, shardings=replicated)
    assert states["w"].value.sharding == replicated and states["b"].value.sharding == replicated
    with pytest.raises(ValueError, match=r"`shardings` names 'nope'"):
        checkpoint.restore(ckpt, states, shardings={"nope": cols})
    with pytest.raises(TypeError, match=r"`shardings\['w'\]` must be a jax.sharding.Sharding"):
        checkpoint.restore(ckpt, states, shardings={"w": "data"})
    with pytest.raises(TypeError, match=r"`shardings` must be a jax.sharding.Sharding or a dict"):
        checkpoint.restore(ckpt, states, shardings=[cols])


# ---------------------------------------------------------------------- partial restore
def test_partial_restore_by_filter(ckpt):
    model = state_nn.Linear(2, 2)
    hidden = HiddenState(jnp.ones(2))
    target = {"model": model, "hidden": hidden}
    checkpoint.save(ckpt, target)
    saved_w = np.array(model.weight.value)
    model.weight.value = jnp.zeros((2, 2))
    hidden.value = jnp.full(2, 5.0)
    state_random.seed(4)
    key = state_random.get_key()

    checkpoint.restore(ckpt, target, ParamState)
    np.testing.assert_array_equal(model.weight.value, saved_w)
    np.testing.assert_array_equal(hidden.value, [5.0, 5.0])  # not selected: untouched
    _keys_equal(state_random.get_key(), key)  # DEFAULT is a RandomState: not selected

    # a partial target (weights only) restores from a fuller checkpoint
    fresh = state_nn.Linear(2, 2)
    checkpoint.restore(ckpt, {"model": fresh}, state_core.filter.PathContains("weight"))
    np.testing.assert_array_equal(fresh.weight.value, saved_w)


def test_save_with_filter(ckpt):
    model = state_nn.Linear(2, 2)
    checkpoint.save(ckpt, model, state_core.filter.PathContains("weight"))
    assert checkpoint.read_metadata(ckpt)["paths"] == [("weight",)]
    with pytest.raises(ValueError, match=r"no state of `target` matches the filters"):
        checkpoint.save(ckpt + "2", model, HiddenState)


# ---------------------------------------------------------------------- errors leave the target untouched
def _values(states):
    return {k: np.array(s.value) for k, s in states.items()}


def test_missing_state_raises_and_restores_nothing(ckpt):
    checkpoint.save(ckpt, {"a": ParamState(jnp.ones(2))}, include_default=False)
    target = {"a": ParamState(jnp.zeros(2)), "extra": ParamState(jnp.zeros(3))}
    before = _values(target)
    with pytest.raises(
        ValueError, match=r"nothing was restored:\n  - the target's states 'extra' are not in the checkpoint"
    ):
        checkpoint.restore(ckpt, target)
    for k, v in _values(target).items():
        np.testing.assert_array_equal(v, before[k])


def test_shape_and_dtype_mismatch_name_the_state(ckpt):
    checkpoint.save(ckpt, {"a": ParamState(jnp.ones(2)), "b": ParamState(jnp.ones((2, 3)))}, include_default=False)
    target = {"a": ParamState(jnp.zeros(2)), "b": ParamState(jnp.zeros((3, 2)))}
    with pytest.raises(ValueError, match=r"state 'b': saved float32\[2, 3\], target holds float32\[3, 2\]"):
        checkpoint.restore(ckpt, target)
    np.testing.assert_array_equal(target["a"].value, [0.0, 0.0])  # checked first, written never

    target = {"a": ParamState(jnp.zeros(2, jnp.int32)), "b": ParamState(jnp.zeros((2, 3)))}
    with pytest.raises(ValueError, match=r"state 'a': saved float32\[2\], target holds int32\[2\]"):
        checkpoint.restore(ckpt, target)


def test_structure_and_key_mismatch(ckpt):
    checkpoint.save(ckpt, {"s": State({"x": jnp.ones(2)}), "r": RandomState(0)}, include_default=False)
    with pytest.raises(ValueError, match=r"state 's': the saved value has 1 leaves \[\"\['x'\]\"\]"):
        checkpoint.restore(ckpt, {"s": State({"y": jnp.ones(2)}), "r": RandomState(0)})
    with pytest.raises(ValueError, match=r"state 'r': saved key<threefry2x32>\[\], target holds uint32\[2\]"):
        checkpoint.restore(ckpt, {"s": State({"x": jnp.ones(2)}), "r": State(jnp.zeros(2, jnp.uint32))})


def test_extra_states_in_checkpoint_need_a_filter(ckpt):
    checkpoint.save(ckpt, {"a": ParamState(jnp.ones(2)), "b": HiddenState(jnp.ones(2))}, include_default=False)
    with pytest.raises(ValueError, match=r"the checkpoint holds states the target lacks: 'b'"):
        checkpoint.restore(ckpt, {"a": ParamState(jnp.zeros(2))})
    a = ParamState(jnp.zeros(2))
    checkpoint.restore(ckpt, {"a": a}, ParamState)
    np.testing.assert_array_equal(a.value, [1.0, 1.0])


# orbax leaves an asyncio callback behind when a read fails; it is reported at garbage collection.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_unreadable_checkpoint_leaves_target_untouched(ckpt):
    states = {"a": ParamState(jnp.ones(2)), "b": ParamState(jnp.ones(2))}
    checkpoint.save(ckpt, states, include_default=False)
    for s in states.values():
        s.value = jnp.full(2, 7.0)
    values_dir = os.path.join(ckpt, "values")
    for root, _, files in os.walk(values_dir):
        for name in files:
            if name not in ("_METADATA", "_sharding", "_CHECKPOINT_METADATA", "manifest.ocdbt"):
                os.remove(os.path.join(root, name))
    with pytest.raises(ValueError, match=r"is damaged or incomplete: reading its arrays failed"):
        checkpoint.restore(ckpt, states)
    for s in states.values():
        np.testing.assert_array_equal(s.value, [7.0, 7.0])
    gc.collect()  # report orbax's leftover callback here, under this test's filter


def test_wrong_paths(ckpt, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no checkpoint directory at '.*nowhere'"):
        checkpoint.restore(str(tmp_path / "nowhere"), {"a": ParamState(jnp.ones(1))})
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("hi")
    with pytest.raises(ValueError, match=r"is not a checkpoint written by state_nn.checkpoint.save"):
        checkpoint.restore(str(plain), {"a": ParamState(jnp.ones(1))})
    with pytest.raises(TypeError, match=r"`path` must be a str or os.PathLike, got int"):
        checkpoint.save(3, {"a": ParamState(jnp.ones(1))})


def test_overwrite(ckpt, tmp_path):
    a = ParamState(jnp.ones(1))
    checkpoint.save(ckpt, {"a": a})
    with pytest.raises(FileExistsError, match=r"already exists; choose a new path or pass overwrite=True"):
        checkpoint.save(ckpt, {"a": a})
    a.value = jnp.full(1, 2.0)
    checkpoint.save(ckpt, {"a": a}, overwrite=True)
    a.value = jnp.zeros(1)
    checkpoint.restore(ckpt, {"a": a})
    np.testing.assert_array_equal(a.value, [2.0])
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "keep.txt").write_text("precious")
    with pytest.raises(FileExistsError, match=r"is not a checkpoint written by state_nn.checkpoint.save"):
        checkpoint.save(str(plain), {"a": a}, overwrite=True)
    assert (plain / "keep.txt").read_text() == "precious"


def test_bad_targets_and_arguments(ckpt):
    with pytest.raises(TypeError, match=r"`target` must be a Module, a StateDict.*got int"):
        checkpoint.save(ckpt, 3)
    with pytest.raises(ValueError, match=r"`target` \(dict\) holds no State"):
        checkpoint.save(ckpt, {"x": jnp.ones(2)})
    with pytest.raises(TypeError, match=r"state 's' holds a str at \['name'\]"):
        checkpoint.save(ckpt, {"s": State({"name": "adam"})})
    with pytest.raises(TypeError, match=r"state \"\('a', 1\)\" is reached through the key \('a', 1\) of type tuple"):
        checkpoint.save(ckpt, {("a", 1): ParamState(jnp.ones(1))})
    with pytest.raises(TypeError, match=r"`metadata` must be JSON-serialisable"):
        checkpoint.save(ckpt, {"a": ParamState(jnp.ones(1))}, metadata={"x": object()})
    with pytest.raises(TypeError, match=r"`metadata` must be a dict \(JSON-serialisable\), got list"):
        checkpoint.save(ckpt, {"a": ParamState(jnp.ones(1))}, metadata=[1])
    with pytest.raises(TypeError, match=r"`include_default` must be a bool"):
        checkpoint.save(ckpt, {"a": ParamState(jnp.ones(1))}, include_default="yes")
    assert not os.path.exists(ckpt)  # nothing was written by a rejected call


def test_refused_inside_a_transformation(ckpt):
    w = ParamState(jnp.ones(2))

    @state_transform.jit
    def step():
        checkpoint.save(ckpt, {"w": w})
        return w.value

    with pytest.raises(RuntimeError, match=r"save cannot run inside a state-aware transformation"):
        step()
    np.testing.assert_array_equal(w.value, [1.0, 1.0])


# ---------------------------------------------------------------------- optional dependency
def test_missing_orbax_names_the_extra(ckpt, monkeypatch):
    monkeypatch.setitem(sys.modules, "orbax.checkpoint", None)
    with pytest.raises(ImportError, match=r"pip install state-nn\[checkpoint\]"):
        checkpoint.save(ckpt, {"a": ParamState(jnp.ones(1))})
    with pytest.raises(ImportError, match=r"pip install state-nn\[checkpoint\]"):
        checkpoint.restore(ckpt, {"a": ParamState(jnp.ones(1))})


def test_importing_state_nn_does_not_import_orbax():
    code = "import sys, state_nn; print(any(m.split('.')[0] == 'orbax' for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------- resumed training
class _Net(state_nn.Module):
    def __init__(self):
        self.hidden = state_nn.Linear(3, 16)
        self.dropout = state_nn.Dropout(0.3)
        self.out = state_nn.Linear(16, 1)

    def update(self, x):
        return self.out(self.dropout(jnp.tanh(self.hidden(x))))


class _Trainer:
    """A model, its optax state in a LongTermState, and a jitted step."""

    optimizer = optax.adam(1e-2)

    def __init__(self):
        self.model = _Net()
        self.params = self.model.states(ParamState)
        self.opt_state = LongTermState(self.optimizer.init(self.params.to_values()))
        grad_fn = state_transform.grad(self._loss, grad_states=self.params, return_value=True)

        @state_transform.jit
        def step(x, y):
            grads, loss = grad_fn(x, y)
            updates, self.opt_state.value = self.optimizer.update(grads, self.opt_state.value)
            self.params.assign_values(optax.apply_updates(self.params.to_values(), updates))
            return loss

        self.step = step

    def _loss(self, x, y):
        return jnp.mean((self.model(x) - y) ** 2)

    def checkpoint_target(self):
        return {"model": self.model, "opt_state": self.opt_state}


def test_training_resumed_from_a_checkpoint_is_bit_identical(ckpt):
    x = jax.random.normal(jax.random.key(0), (32, 3))
    y = jnp.sin(x.sum(1, keepdims=True))

    state_random.seed(0)
    straight = _Trainer()
    for _ in range(3):
        straight.step(x, y)
    checkpoint.save(ckpt, straight.checkpoint_target(), metadata={"step": 3})
    # the run that never stopped goes on
    straight_losses = [np.asarray(straight.step(x, y)) for _ in range(4)]
    straight_key = state_random.get_key()

    state_random.seed(123)  # a fresh process: other weights, another random stream
    resumed = _Trainer()
    assert checkpoint.restore(ckpt, resumed.checkpoint_target()) == {"step": 3}
    resumed_losses = [np.asarray(resumed.step(x, y)) for _ in range(4)]

    assert len(set(np.stack(straight_losses).tolist())) == 4  # dropout masks differ per step
    np.testing.assert_array_equal(np.stack(resumed_losses), np.stack(straight_losses))
    for path, state in straight.params.items():
        np.testing.assert_array_equal(resumed.params[path].value, state.value)
    jax.tree.map(np.testing.assert_array_equal, resumed.opt_state.value, straight.opt_state.value)
    _keys_equal(state_random.get_key(), straight_key)  # DEFAULT, which Dropout draws from


def test_restored_rng_without_default_diverges(ckpt):
    """Why DEFAULT is saved: weights alone do not reproduce a stochastic model."""
    model = state_nn.Sequential(state_nn.Linear(4, 8), state_nn.Dropout(0.5))
    state_random.seed(0)
    checkpoint.save(ckpt, model, include_default=False)
    expected = model(jnp.ones((2, 4)))
    state_random.seed(1)
    checkpoint.restore(ckpt, model)
    assert not np.array_equal(model(jnp.ones((2, 4))), expected)


class _Member(state_nn.Module):
    def init_state(self):
        self.layer = state_nn.Linear(2, 3)
        self.rng = RandomState(0)  # a per-member stream, split across members by Map


@pytest.mark.parametrize("behavior", ["vmap", "pmap"])
def test_map_ensemble_round_trip_keeps_the_member_placement(ckpt, behavior):
    state_random.seed(0)
    source = state_nn.Map(_Member(), init_map_size=8, behavior=behavior)
    source.init_all_states()
    checkpoint.save(ckpt, source)

    state_random.seed(1)
    target = state_nn.Map(_Member(), init_map_size=8, behavior=behavior)
    target.init_all_states()
    placement = {p: _sharding(s.value) for p, s in target.states().items()}
    checkpoint.restore(ckpt, target)
    assert list(target.states()) == [("module", "layer", "weight"), ("module", "layer", "bias"), ("module", "rng")]
    for path, state in source.states().items():
        restored = target.states()[path].value
        assert _sharding(restored) == placement[path], path
        if path[-1] == "rng":
            assert restored.shape == (8,)
            _keys_equal(restored, state.value)
        else:
            np.testing.assert_array_equal(restored, state.value)


def _sharding(value):
    return (
        jax.random.key_data(value).sharding
        if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key)
        else value.sharding
    )
