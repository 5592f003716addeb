"""The tensor-parallel example: annotated weights stay sharded and training equals pure JAX."""

import importlib.util
import pathlib

import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "tensor_parallel_mlp.py"


@pytest.fixture(scope="module")
def tp():
    spec = importlib.util.spec_from_file_location("tensor_parallel_mlp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def runs(tp):
    mesh = tp.make_mesh()
    params = tp.init_params()
    x, y = tp.make_batch(mesh)
    ours = tp.train_ours(mesh, params, x, y, steps=5)
    pure = tp.train_pure(mesh, params, x, y, steps=5)
    return mesh, ours, pure


def test_training_equals_the_pure_jax_version(tp, runs):
    _, (ours_losses, ours_params, _), (pure_losses, pure_params) = runs
    assert len(ours_losses) == 5
    assert ours_losses[-1] < ours_losses[0]  # it trains
    assert_allclose(ours_losses, pure_losses, rtol=1e-6, atol=1e-7)
    for name in tp.SPECS:
        assert_allclose(np.asarray(ours_params[name]), np.asarray(pure_params[name]), rtol=1e-6, atol=1e-7)


def test_weights_are_really_sharded_over_the_model_axis(tp, runs):
    mesh, (_, _, model), (_, pure_params) = runs
    expected_shards = {"w1": (8, 8), "b1": (8,), "w2": (8, 4), "b2": (4,)}
    for name, spec in tp.SPECS.items():
        value = getattr(model, name).value
        assert value.sharding.mesh == mesh
        assert value.sharding.spec == spec
        assert len(value.addressable_shards) == 8
        assert {s.data.shape for s in value.addressable_shards} == {expected_shards[name]}
        assert pure_params[name].sharding.spec == spec  # the reference uses the same layout
    w1 = model.w1.value
    # Column-parallel: devices along 'model' hold different column blocks of w1.
    columns = {(s.index[1].start, s.index[1].stop) for s in w1.addressable_shards}
    assert columns == {(0, 8), (8, 16), (16, 24), (24, 32)}
    assert model.w2.value.sharding.spec == P("model", None)


def test_main_prints_losses_shardings_and_agreement(tp, capsys):
    tp.main()
    out = capsys.readouterr().out
    assert "ours and pure JAX agree" in out
    assert "w1: shape (8, 32), spec P(None, 'model'), per-device shard (8, 8)" in out
    assert out.count("\n   ") >= tp.STEPS


def test_checkpoint_restore_onto_annotated_weights_keeps_their_shards(tp, runs, tmp_path):
    import jax

    from state_core import ParamState, shard_states
    from state_nn import checkpoint

    mesh, (_, trained, model), _ = runs
    checkpoint.save(tmp_path / "ckpt", model)
    fresh = tp.TensorParallelMLP(tp.init_params(seed=5))
    with jax.set_mesh(mesh):
        shard_states(fresh.states(ParamState))  # place first: restore keeps each target's sharding
    checkpoint.restore(tmp_path / "ckpt", fresh)
    for name, spec in tp.SPECS.items():
        value = getattr(fresh, name).value
        assert value.sharding.spec == spec
        assert_allclose(np.asarray(value), np.asarray(trained[name]), rtol=0, atol=0)
