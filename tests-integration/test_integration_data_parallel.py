"""The data-parallel MLP example: both state-aware steps equal the hand-written pure-JAX steps."""

import importlib.util
import pathlib

import jax
import numpy as np
import pytest
from numpy.testing import assert_allclose

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "data_parallel_mlp.py"


def _load():
    spec = importlib.util.spec_from_file_location("data_parallel_mlp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results():
    return _load().train(steps=6)


@pytest.mark.parametrize("ours,reference", [("shard_map", "pure shard_map"), ("jit", "pure jit")])
def test_losses_and_parameters_equal_pure_jax(results, ours, reference):
    losses, weights = results[ours]
    ref_losses, ref_weights = results[reference]
    assert len(losses) == 6
    assert_allclose(losses, ref_losses, rtol=1e-6, atol=1e-7)
    assert losses[-1] < 0.8 * losses[0]  # it trains
    for got, want in zip(jax.tree.leaves(weights), jax.tree.leaves(ref_weights), strict=True):
        assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_shard_map_and_jit_steps_agree(results):
    assert_allclose(results["shard_map"][0], results["jit"][0], rtol=1e-5, atol=1e-6)
    first = np.asarray(results["shard_map"][1][0][0])
    assert first.shape == (4, 32)


def test_main_prints_losses_and_checks(capsys):
    assert _load().main() == 0
    out = capsys.readouterr().out
    assert "all variants agree with pure JAX" in out
    assert "pure shard_map" in out.splitlines()[0]
