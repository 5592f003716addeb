"""Handing a model's states to optax: values work end to end, a StateDict of States fails at once."""

import jax
import jax.numpy as jnp
import optax
import pytest
from numpy.testing import assert_allclose

import state_nn
import state_transform
from state_core import ParamState

NAMES_THE_FIX = r"ParamState was given where JAX expects an array.*pass `states.to_values\(\)`"


def _model():
    return state_nn.Linear(3, 2, w_init=jnp.arange(6.0).reshape(3, 2) / 10, b_init=jnp.array([0.5, -0.5]))


@pytest.mark.parametrize("make", [optax.adam, optax.adamw, lambda lr: optax.sgd(lr, momentum=0.9)])
def test_init_with_a_state_dict_raises_at_once_naming_to_values(make):
    params = _model().states(ParamState)
    with pytest.raises(TypeError, match=NAMES_THE_FIX):
        make(1e-3).init(params)


def test_apply_updates_with_states_raises_naming_to_values():
    model = _model()
    params = model.states(ParamState)
    updates = jax.tree.map(jnp.ones_like, params.to_values())
    with pytest.raises(TypeError, match=NAMES_THE_FIX):
        optax.apply_updates({p: s for p, s in params.items()}, updates)
    assert_allclose(model.bias.value, [0.5, -0.5])  # nothing written


def _loss_of(w, b, x, y):
    return jnp.mean((x @ w + b - y) ** 2)


def test_to_values_and_assign_values_train_exactly_like_pure_optax():
    x = jnp.linspace(-1.0, 1.0, 12).reshape(4, 3)
    y = jnp.stack([x.sum(axis=1), -x[:, 0]], axis=1)
    optimizer = optax.adam(0.1)

    # The reference: pure optax on a dict of arrays.
    pure = {("weight",): jnp.arange(6.0).reshape(3, 2) / 10, ("bias",): jnp.array([0.5, -0.5])}
    pure_state = optimizer.init(pure)
    for _ in range(5):
        g = jax.grad(lambda p: _loss_of(p["weight",], p["bias",], x, y))(pure)
        updates, pure_state = optimizer.update(g, pure_state, pure)
        pure = optax.apply_updates(pure, updates)

    # The same steps on the model's states.
    model = _model()
    params = model.states(ParamState)
    opt_state = optimizer.init(params.to_values())
    for _ in range(5):
        grads = state_transform.grad(lambda: jnp.mean((model(x) - y) ** 2), grad_states=params)()
        updates, opt_state = optimizer.update(grads, opt_state, params.to_values())
        params.assign_values(optax.apply_updates(params.to_values(), updates))

    assert_allclose(model.weight.value, pure["weight",], rtol=1e-6)
    assert_allclose(model.bias.value, pure["bias",], rtol=1e-6)
    # brainstate's spelling does the same.
    params.assign_dict_values({path: value + 1.0 for path, value in params.to_dict_values().items()})
    assert_allclose(model.bias.value, pure["bias",] + 1.0, rtol=1e-6)
