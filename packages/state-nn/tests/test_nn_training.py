"""A tiny optax training loop of a Map ensemble of Linear members."""

import jax
import jax.numpy as jnp
import optax
import pytest

import state_core
import state_nn
import state_random
import state_transform


class Member(state_nn.Module):
    """One ensemble member: a Linear layer created per member in init_state."""

    def init_state(self):
        self.layer = state_nn.Linear(3, 1)

    def update(self, x):
        return self.layer(x)


def _member_mse(module, x, y):
    return jnp.mean((module(x) - y) ** 2)


def _data():
    key_x, key_n = jax.random.split(jax.random.key(0))
    x = jax.random.normal(key_x, (64, 3))
    true_w = jnp.array([[1.5], [-2.0], [0.5]])
    y = x @ true_w + 0.3 + 0.01 * jax.random.normal(key_n, (64, 1))
    return x, y


@pytest.mark.parametrize("make_opt", [lambda: optax.sgd(0.1), lambda: optax.adam(0.05)], ids=["sgd", "adam"])
def test_ensemble_training_loss_decreases_for_every_member(make_opt):
    state_random.seed(0)
    x, y = _data()
    ensemble = state_nn.Map(Member(), init_map_size=4, in_axes=None)
    ensemble.init_all_states()
    params = ensemble.states(state_core.ParamState)
    assert isinstance(params, state_core.StateDict)
    assert list(params) == [("module", "layer", "weight"), ("module", "layer", "bias")]
    assert params[("module", "layer", "weight")].value.shape == (4, 3, 1)

    member_losses = ensemble.map(_member_mse, in_axes=None)

    def total_loss(x, y):
        # members are independent: the sum's gradient is each member's own gradient
        return member_losses(x, y).sum()

    grad_fn = state_transform.grad(total_loss, grad_states=params, return_value=True)
    optimizer = make_opt()
    opt_state = optimizer.init({k: s.value for k, s in params.items()})

    initial = member_losses(x, y)
    assert initial.shape == (4,)
    assert len(set(initial.tolist())) == 4  # different random initialisations

    @state_transform.jit
    def train_step(x, y, opt_state):
        grads, loss = grad_fn(x, y)
        updates, opt_state = optimizer.update(grads, opt_state, {k: s.value for k, s in params.items()})
        for k, s in params.items():
            s.value = s.value + updates[k]
        return loss, opt_state

    history = []
    for _ in range(30):
        loss, opt_state = train_step(x, y, opt_state)
        history.append(float(loss))
    final = member_losses(x, y)
    assert bool((final < 0.5 * initial).all()), (initial, final)
    assert history[-1] < history[0]
    assert params[("module", "layer", "weight")].value.shape == (4, 3, 1)


def test_ensemble_gradients_equal_each_members_own_gradient():
    state_random.seed(1)
    x, y = _data()
    ensemble = state_nn.Map(Member(), init_map_size=3, in_axes=None)
    ensemble.init_all_states()
    params = ensemble.states(state_core.ParamState)
    member_losses = ensemble.map(_member_mse, in_axes=None)
    grads = state_transform.grad(lambda x, y: member_losses(x, y).sum(), grad_states=params)(x, y)
    w_all = params[("module", "layer", "weight")].value
    b_all = params[("module", "layer", "bias")].value
    for i in range(3):
        single = state_nn.Linear(3, 1, w_init=w_all[i], b_init=b_all[i])
        expected = state_transform.grad(
            lambda x, y, single=single: _member_mse(single, x, y), grad_states=[single.weight, single.bias]
        )(x, y)
        assert jnp.allclose(grads[("module", "layer", "weight")][i], expected[0], atol=1e-6)
        assert jnp.allclose(grads[("module", "layer", "bias")][i], expected[1], atol=1e-6)
