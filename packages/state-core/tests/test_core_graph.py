"""state_core.graph: brainstate's treefy_split / treefy_merge / treefy_states / update_states / states."""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import ParamState, ShortTermState, State, StateDict
from state_core.filter import OfType
from state_core.graph import GraphDef, states, treefy_merge, treefy_split, treefy_states, update_states


class Count(State):
    pass


class Layer:
    def __init__(self, n_in, n_out, seed):
        self.w = ParamState(jax.random.normal(jax.random.key(seed), (n_in, n_out)))
        self.b = ParamState(jnp.zeros(n_out))
        self.scale = np.float32(2.0)  # a plain attribute: kept as is
        self.table = jnp.arange(3.0)  # an array attribute: shared, not copied

    def __call__(self, x):
        return (x @ self.w.value + self.b.value) * self.scale


class MLP:
    def __init__(self):
        self.count = Count(jnp.array(0))
        self.layers = [Layer(1, 4, 0), Layer(4, 1, 1)]
        self.tied = self.layers[0].b  # one state reachable by two paths

    def __call__(self, x):
        self.count.value = self.count.value + 1
        return self.layers[1](jax.nn.relu(self.layers[0](x)))


def test_treefy_states_nested_values_and_filters():
    model = MLP()
    values = treefy_states(model)
    assert list(values) == ["count", "layers"]
    assert list(values["layers"]) == [0, 1]
    assert_allclose(values["layers"][0]["w"], model.layers[0].w.value)
    assert "tied" not in values  # a shared state appears once, under its first path
    params = treefy_states(model, ParamState)
    assert "count" not in params and jax.tree.map(jnp.shape, params)["layers"][1]["w"] == (4, 1)
    params, counts = treefy_states(model, ParamState, Count)
    assert list(counts) == ["count"]


def test_split_merge_roundtrip_builds_new_states():
    model = MLP()
    graphdef, params, counts = treefy_split(model, ParamState, Count)
    assert isinstance(graphdef, GraphDef)
    assert graphdef.paths[0] == ("count",)
    rebuilt = treefy_merge(graphdef, params, counts)
    assert type(rebuilt) is MLP and rebuilt is not model
    assert rebuilt.layers[0].w is not model.layers[0].w and type(rebuilt.count) is Count
    assert rebuilt.tied is rebuilt.layers[0].b  # sharing survives the round trip
    assert rebuilt.layers[0].table is model.layers[0].table  # arrays are shared
    x = jnp.ones((2, 1))
    assert_allclose(rebuilt(x), model(x))
    assert int(rebuilt.count.value) == 1 and int(model.count.value) == 1  # separate counters


def test_merge_inside_jit_and_grad_matches_pure_jax():
    """brainstate's functional-API example: treefy_merge inside jax.jit / jax.grad, new counts read back."""
    graphdef, params, counts = treefy_split(MLP(), ParamState, Count)
    x, y = jnp.linspace(0, 1, 8)[:, None], jnp.linspace(0, 1, 8)[:, None] ** 2

    @jax.jit
    def train_step(params, counts):
        def loss_fn(params):
            model = treefy_merge(graphdef, params, counts)
            loss = jnp.mean((y - model(x)) ** 2)
            return loss, treefy_states(model, Count)

        grads, counts = jax.grad(loss_fn, has_aux=True)(params)
        return jax.tree.map(lambda w, g: w - 0.1 * g, params, grads), counts

    def pure_loss(p):
        h = jax.nn.relu((x @ p["layers"][0]["w"] + p["layers"][0]["b"]) * 2.0)
        return jnp.mean((y - (h @ p["layers"][1]["w"] + p["layers"][1]["b"]) * 2.0) ** 2)

    expected = jax.tree.map(lambda w, g: w - 0.1 * g, params, jax.grad(pure_loss)(params))
    new_params, new_counts = train_step(params, counts)
    jax.tree.map(lambda a, b: assert_allclose(a, b, rtol=1e-5), new_params, expected)
    assert int(new_counts["count"]) == 1
    new_params, new_counts = train_step(new_params, new_counts)
    assert int(new_counts["count"]) == 2


def test_split_filters_must_be_exhaustive_and_merge_needs_every_value():
    model = MLP()
    with pytest.raises(ValueError, match=r"no filter matches the state at count \(Count\)"):
        treefy_split(model, ParamState)
    graphdef, params, rest = treefy_split(model, lambda path, s: "layers" in path and path[1] == 0, ...)
    assert list(params["layers"]) == [0]
    with pytest.raises(ValueError, match="no value for the state at count"):
        treefy_merge(graphdef, params)
    with pytest.raises(TypeError, match="expected the GraphDef"):
        treefy_merge(params, rest)


def test_update_states_nested_flat_and_atomic():
    model = MLP()
    saved = copy.deepcopy(treefy_states(model))
    update_states(model, jax.tree.map(jnp.zeros_like, saved))
    assert_allclose(model.layers[1].w.value, jnp.zeros((4, 1)))
    update_states(model, {("layers", 1, "w"): saved["layers"][1]["w"]}, {"count": jnp.array(5)})
    assert_allclose(model.layers[1].w.value, saved["layers"][1]["w"])
    assert int(model.count.value) == 5
    before = treefy_states(model)
    with pytest.raises(KeyError, match=r"no state at layers\.0\.bias"):
        update_states(model, {"layers": {0: {"bias": jnp.ones(4)}}, "count": jnp.array(9)})
    with pytest.raises(ValueError):
        update_states(model, {"count": jnp.array(1), "layers": {0: {"w": {"a": jnp.ones(3)}}}})
    jax.tree.map(lambda a, b: assert_allclose(a, b), treefy_states(model), before)  # nothing written


def test_update_states_from_states_and_graphdef_is_static():
    a, b = MLP(), MLP()
    update_states(a, states(b))  # States as entries give their values
    assert_allclose(a.layers[0].w.value, b.layers[0].w.value)
    graphdef, values = treefy_split(a)
    out = jax.jit(lambda g, v: treefy_merge(g, v)(jnp.ones((1, 1))))(graphdef, values)
    assert_allclose(out, a(jnp.ones((1, 1))))
    assert repr(graphdef).startswith("GraphDef(MLP, paths=[('count',)")


def test_states_returns_state_dicts():
    net = {"w": ParamState(jnp.ones(2)), "h": ShortTermState(jnp.zeros(2)), "c": Count(0)}
    everything = states(net)
    assert isinstance(everything, StateDict) and list(everything) == [("w",), ("h",), ("c",)]
    assert list(states(net, OfType(ShortTermState))) == [("h",)]
    params, counts = states(net, ParamState, Count)
    assert list(params) == [("w",)] and list(counts) == [("c",)]
