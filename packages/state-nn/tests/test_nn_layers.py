"""Linear, Dropout and Sequential."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import state_core
import state_nn
import state_random
import state_transform


# ---------------------------------------------------------------------- Linear
def test_linear_values_and_parameters():
    w = jnp.arange(6.0).reshape(3, 2)
    layer = state_nn.Linear(3, 2, w_init=w, b_init=jnp.array([1.0, -1.0]))
    assert isinstance(layer.weight, state_core.ParamState)
    assert layer.weight.value.shape == (3, 2) and layer.bias.value.shape == (2,)
    x = jnp.array([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]])
    assert jnp.array_equal(layer(x), x @ w + jnp.array([1.0, -1.0]))
    assert list(layer.states()) == [("weight",), ("bias",)]


@pytest.mark.numerics  # sample statistics
def test_linear_default_init_is_lecun_normal_from_state_random():
    state_random.seed(3)
    a = state_nn.Linear(256, 128)
    state_random.seed(3)
    b = state_nn.Linear(256, 128)
    assert jnp.array_equal(a.weight.value, b.weight.value)
    assert jnp.array_equal(a.bias.value, jnp.zeros(128))
    assert abs(float(jnp.std(a.weight.value)) - 1 / np.sqrt(256)) < 0.005
    assert abs(float(jnp.mean(a.weight.value))) < 0.005
    c = state_nn.Linear(256, 128)  # the stream moved on: a different draw
    assert not jnp.array_equal(a.weight.value, c.weight.value)


def test_linear_jax_initializers_dtype_and_no_bias():
    layer = state_nn.Linear(4, 3, w_init=jax.nn.initializers.ones, use_bias=False, dtype=jnp.float16)
    assert layer.bias is None
    assert layer.weight.value.dtype == jnp.float16
    assert jnp.array_equal(layer(jnp.ones(4, jnp.float16)), jnp.full(3, 4.0, jnp.float16))
    assert list(layer.states()) == [("weight",)]
    assert repr(layer) == (
        "Linear(\n  in_size=(4,),\n  out_size=(3,),\n  weight=ParamState(\n    value=ShapedArray(float16[4,3])\n  )\n)"
    )


def test_linear_errors():
    with pytest.raises(ValueError, match=r"must have shape \(3, 2\), got \(2, 3\)"):
        state_nn.Linear(3, 2, w_init=jnp.ones((2, 3)))
    with pytest.raises(ValueError, match="in_size must be a positive int"):
        state_nn.Linear(0, 2)
    with pytest.raises(ValueError, match="last axis has size 3"):
        state_nn.Linear(3, 2)(jnp.ones(4))


def test_linear_under_jit_and_grad():
    layer = state_nn.Linear(2, 1, w_init=jnp.array([[1.0], [2.0]]), b_init=jnp.array([0.5]))
    f = state_transform.jit(layer)
    assert jnp.array_equal(f(jnp.array([1.0, 1.0])), jnp.array([3.5]))
    grads = state_transform.grad(lambda x: layer(x).sum(), grad_states={"w": layer.weight, "b": layer.bias})(
        jnp.array([3.0, 4.0])
    )
    assert jnp.array_equal(grads["w"], jnp.array([[3.0], [4.0]]))
    assert jnp.array_equal(grads["b"], jnp.array([1.0]))


# ---------------------------------------------------------------------- Dropout
def test_dropout_rate_validation():
    for bad in (-0.1, 1.0, 1.5, "0.5", True):
        with pytest.raises(ValueError, match="rate must be a float in"):
            state_nn.Dropout(bad)


@pytest.mark.numerics  # sample statistics
def test_dropout_mask_scaling_and_statistics():
    state_random.seed(0)
    drop = state_nn.Dropout(0.25)
    y = drop(jnp.ones(20000))
    values = np.unique(np.asarray(y))
    assert values.shape == (2,) and values[0] == 0.0
    assert np.isclose(values[1], 1 / 0.75)
    kept = float(jnp.mean(y > 0))
    assert abs(kept - 0.75) < 0.02
    assert abs(float(jnp.mean(y)) - 1.0) < 0.03  # expectation preserved


def test_dropout_reproducible_and_matches_bernoulli():
    x = jnp.arange(1.0, 11.0)
    state_random.seed(5)
    y1 = state_nn.Dropout(0.5)(x)
    state_random.seed(5)
    keep = state_random.bernoulli(0.5, (10,))
    assert jnp.array_equal(y1, jnp.where(keep, x * 2.0, 0.0))


def test_dropout_deterministic_switches():
    x = jnp.ones(8)
    drop = state_nn.Dropout(0.9, deterministic=True)
    assert jnp.array_equal(drop(x), x)
    drop.train()
    assert drop.deterministic is False
    state_random.seed(0)
    assert not jnp.array_equal(drop(x), x)
    assert jnp.array_equal(drop(x, deterministic=True), x)
    assert jnp.array_equal(drop.eval()(x), x)
    assert jnp.array_equal(state_nn.Dropout(0.0)(x), x)
    with pytest.raises(TypeError, match="Python bool"):
        drop.update(x, deterministic=jnp.array(True))


def test_dropout_under_jit_draws_fresh_masks():
    drop = state_nn.Dropout(0.5)
    f = state_transform.jit(drop)
    state_random.seed(2)
    a, b = f(jnp.ones(64)), f(jnp.ones(64))
    assert not jnp.array_equal(a, b)
    state_random.seed(2)
    assert jnp.array_equal(f(jnp.ones(64)), a)


def test_dropout_per_member_masks_in_map():
    class Member(state_nn.Module):
        def init_state(self):
            self.drop = state_nn.Dropout(0.5)

        def update(self, x):
            return self.drop(x)

    ens = state_nn.Map(Member(), 4, in_axes=None)
    ens.init_all_states()
    state_random.seed(11)
    out = ens(jnp.ones(32))
    assert out.shape == (4, 32)
    assert len({tuple(row.tolist()) for row in out}) == 4


# ---------------------------------------------------------------------- Sequential
def test_sequential_composition_indexing_and_states():
    l1 = state_nn.Linear(2, 3, w_init=jnp.ones((2, 3)), b_init=jnp.array([-1.0, 0.0, 1.0]))
    l2 = state_nn.Linear(3, 1, w_init=jnp.ones((3, 1)))
    net = state_nn.Sequential(l1, jax.nn.relu, l2)
    x = jnp.array([[0.25, 0.25], [-2.0, 0.0]])
    assert jnp.allclose(net(x), jax.nn.relu(x @ jnp.ones((2, 3)) + jnp.array([-1.0, 0.0, 1.0])).sum(-1, keepdims=True))
    assert len(net) == 3 and net[0] is l1 and net[2] is l2
    assert list(net.states()) == [
        ("layers", 0, "weight"),
        ("layers", 0, "bias"),
        ("layers", 2, "weight"),
        ("layers", 2, "bias"),
    ]
    assert list(net.named_modules()) == [(), ("layers", 0), ("layers", 2)]


def test_sequential_repr_and_errors():
    net = state_nn.Sequential(state_nn.Linear(1, 1, use_bias=False), jax.nn.relu, state_nn.Dropout(0.1))
    assert repr(net) == (
        "Sequential(\n"
        "  in_size=(1,),\n"
        "  out_size=(1,),\n"
        "  layers=[\n"
        "    Linear(\n"
        "      in_size=(1,),\n"
        "      out_size=(1,),\n"
        "      weight=ParamState(\n"
        "        value=ShapedArray(float32[1,1])\n"
        "      )\n"
        "    ),\n"
        "    relu,\n"
        "    Dropout(\n"
        "      rate=0.1,\n"
        "      deterministic=False\n"
        "    )\n"
        "  ]\n"
        ")"
    )
    assert repr(state_nn.Sequential()) == "Sequential(\n  layers=[]\n)"
    assert state_nn.Sequential()(5) == 5
    with pytest.raises(TypeError, match="layer 1 is a int"):
        state_nn.Sequential(jax.nn.relu, 3)
