"""brainstate's autodiff examples (013 vjp, 014 jvp, 010 fwd_grad MNIST) with the imports renamed.

Each test is the example's core computation, ported by changing
``brainstate.transform.X`` to ``state_transform.X``, ``brainstate.ParamState`` to
``state_core.ParamState``, ``brainstate.nn`` to ``state_nn`` and
``brainstate.random`` to ``state_random``; the example's own assertions are kept.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numpy.testing import assert_allclose

import state_core
import state_nn
import state_random
import state_transform


def _rosen(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def test_example_013_vjp_reverse_mode():
    def f(x):
        return jnp.sum(x**2)

    x = jnp.array([1.0, 2.0, 3.0])
    out, vjp_fn = state_transform.vjp(f, x)
    assert_allclose(out, 14.0)
    assert_allclose(vjp_fn(1.0), jax.grad(f)(x))

    w = state_core.ParamState(jnp.array([2.0, 3.0]))
    inp = jnp.array([5.0, 7.0])
    _, vjp_fn = state_transform.vjp(lambda i: jnp.sum(w.value * i), inp, grad_states=w)
    state_ct, arg_ct = vjp_fn(1.0)
    assert_allclose(state_ct, inp)
    assert_allclose(arg_ct, w.value)

    weight = state_core.ParamState(jnp.array([[1.0, 2.0], [3.0, 4.0]]))
    bias = state_core.ParamState(jnp.array([0.0, 0.0]))
    data = jnp.array([1.0, 1.0])

    def predict_loss():
        return jnp.sum((data @ weight.value + bias.value) ** 2)

    _, vjp_fn = state_transform.vjp(predict_loss, grad_states=[weight, bias])
    grad_w, grad_b = vjp_fn(1.0)
    ref_w, ref_b = state_transform.grad(predict_loss, grad_states=[weight, bias])()
    assert_allclose(grad_w, ref_w)
    assert_allclose(grad_b, ref_b)

    counter = state_core.State(jnp.array(0.0))

    def loss_with_aux(x):
        counter.value = counter.value + 1.0
        return jnp.sum(x**2), {"mean": jnp.mean(x)}

    x = jnp.array([1.0, 2.0])
    _, vjp_fn, aux = state_transform.vjp(loss_with_aux, x, has_aux=True)
    assert_allclose(vjp_fn(1.0), 2.0 * x)
    assert_allclose(aux["mean"], 1.5)
    assert_allclose(counter.value, 1.0)

    def vector_fn(x):
        return jnp.array([jnp.sum(x), jnp.sum(x**2)])

    x = jnp.array([1.0, 2.0, 3.0])
    _, vjp_fn = state_transform.vjp(vector_fn, x)
    assert_allclose(jax.vmap(vjp_fn)(jnp.eye(2)), jax.jacrev(vector_fn)(x))

    a, b = jnp.array([1.0, 2.0]), jnp.array([3.0, 4.0])
    _, vjp_fn = state_transform.vjp(lambda p, q: jnp.sum(p * q), a, b, argnums=(0, 1))
    ga, gb = vjp_fn(1.0)
    assert_allclose(ga, b)
    assert_allclose(gb, a)

    x = jnp.array([0.5, 1.5, 2.0])
    _, hvp_fn = state_transform.vjp(jax.grad(_rosen), x)
    v = jnp.array([1.0, 0.0, 0.0])
    assert_allclose(hvp_fn(v), jax.hessian(_rosen)(x) @ v, rtol=1e-5)

    state_random.seed(0)
    xs = state_random.uniform(-1.0, 1.0, (128, 1))
    ys = 2.0 * xs + 1.0
    slope = state_core.ParamState(jnp.zeros((1, 1)))
    intercept = state_core.ParamState(jnp.zeros((1,)))

    def mse():
        return jnp.mean((xs @ slope.value + intercept.value - ys) ** 2)

    for _ in range(201):
        _, back = state_transform.vjp(mse, grad_states=[slope, intercept])
        g_slope, g_intercept = back(1.0)
        slope.value = slope.value - 0.5 * g_slope
        intercept.value = intercept.value - 0.5 * g_intercept
    assert_allclose(slope.value, 2.0, atol=1e-2)
    assert_allclose(intercept.value, 1.0, atol=1e-2)


def test_example_014_jvp_forward_mode():
    x, v = jnp.array([1.0, 2.0, 3.0]), jnp.array([1.0, 0.0, 0.0])
    _, tangent = state_transform.jvp(lambda x: jnp.sum(x**2), (x,), (v,))
    assert_allclose(tangent, jnp.dot(2.0 * x, v))

    gain = state_core.ParamState(jnp.array(4.0))
    calls = state_core.State(jnp.array(0.0))

    def scaled(x):
        calls.value = calls.value + 1.0
        return gain.value * x

    _, tangent = state_transform.jvp(scaled, (jnp.array([1.0, 2.0]),), (jnp.array([1.0, 1.0]),))
    assert_allclose(tangent, gain.value * jnp.ones(2))
    assert_allclose(calls.value, 1.0)

    def expand(x):
        freqs = jnp.linspace(1.0, 5.0, 50)
        return jnp.sin(freqs * x[0]) + jnp.cos(freqs * x[1])

    x = jnp.array([0.3, 0.7])
    cols = jax.vmap(lambda e: state_transform.jvp(expand, (x,), (e,))[1])(jnp.eye(2))
    assert_allclose(cols.T, jax.jacfwd(expand)(x), atol=1e-5)

    # brainstate.nn.ReLU() -> the function state_nn.relu
    net = state_nn.Sequential(state_nn.Linear(3, 8), state_nn.relu, state_nn.Linear(8, 2))
    x = state_random.randn(3)
    _, tangent = state_transform.jvp(lambda inp: net(inp), (x,), (v,))
    with state_core.plain_trace_policy("ignore"):  # the reference reads the weights as constants, on purpose
        reference = jax.jacfwd(lambda inp: net(inp))(x)
    assert_allclose(tangent, reference @ v, atol=1e-5)

    x = jnp.array([0.5, 1.5, 2.0])
    _, hvp = state_transform.jvp(jax.grad(_rosen), (x,), (v,))
    assert_allclose(hvp, jax.hessian(_rosen)(x) @ v, rtol=1e-5)


class _MLP(state_nn.Module):
    def __init__(self, n_in, n_hiddens, n_out):
        self.layers = []
        for n_hidden in n_hiddens:
            self.layers.append(state_nn.Linear(n_in, n_hidden))
            self.layers.append(jax.nn.mish)
            n_in = n_hidden
        self.layers.append(state_nn.Linear(n_in, n_out))

    def update(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_example_010_mnist_fwd_grad_train_step():
    """The jitted train step of 010 (``ad_type='jvp'``) on a small synthetic batch, with optax for braintools."""
    import optax

    state_random.seed(1)
    mlp = _MLP(16, [32], 4)
    trainable_weights = mlp.states(state_core.ParamState)
    opt = optax.adam(1e-2)
    opt_state = state_core.State(opt.init(trainable_weights.to_values()))

    def loss_fn(xs, ys):
        predicts = mlp(xs)
        loss = optax.softmax_cross_entropy_with_integer_labels(predicts, ys).mean()
        return loss, jnp.mean(jnp.argmax(predicts, axis=1) == ys)

    @state_transform.jit
    def train(batch):
        xs, ys = batch
        grads, loss, acc = state_transform.fwd_grad(
            loss_fn, grad_states=trainable_weights, return_value=True, has_aux=True, tangent_size=128
        )(xs, ys)
        updates, opt_state.value = opt.update(grads, opt_state.value)
        trainable_weights.assign_values(optax.apply_updates(trainable_weights.to_values(), updates))
        return loss, acc

    rng = np.random.default_rng(0)
    xs = jnp.asarray(rng.normal(size=(64, 16)), jnp.float32)
    ys = jnp.asarray(np.argmax(np.asarray(xs[:, :4]), axis=1))
    before = float(loss_fn(xs, ys)[0])
    first_loss, first_acc = train((xs, ys))
    assert_allclose(first_loss, before, rtol=1e-5)
    assert 0.0 <= float(first_acc) <= 1.0
    for _ in range(60):
        loss, _ = train((xs, ys))
    assert float(loss) < 0.8 * before  # the forward-mode estimate trains the model
