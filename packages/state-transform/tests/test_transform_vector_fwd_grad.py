"""vector_grad and fwd_grad with States: values against pure JAX, brainstate's layouts, state write-back."""

import jax
import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

import state_random
from state_core import ParamState, State, collect_states
from state_transform import fwd_grad, jit, vector_grad


def test_vector_grad_is_vjp_with_ones():
    def f(x, y):
        return jnp.stack([x[0] ** 2 * y, x[1] ** 3, x[0] * x[1]])

    x, y = jnp.array([2.0, 3.0]), jnp.array(1.5)
    ref = jax.vjp(f, x, y)[1](jnp.ones(3))
    assert_allclose(vector_grad(f)(x, y), ref[0])
    gx, gy = vector_grad(f, argnums=(0, 1))(x, y)
    assert_allclose(gx, ref[0])
    assert_allclose(gy, ref[1])


def test_vector_grad_layouts_with_states():
    w = ParamState(jnp.array([1.0, 2.0]), name="w")
    hits = State(jnp.array(0), name="hits")

    def model(x):
        hits.value = hits.value + 1
        out = jnp.tanh(w.value * x)
        return out, {"sum": out.sum()}

    x = jnp.array(0.7)
    ref_w, ref_x = jax.vjp(lambda wv, xv: jnp.tanh(wv * xv), w.value, x)[1](jnp.ones(2))
    value = jnp.tanh(w.value * x)
    # brainstate's layout: ((state grads, arg grads), value, aux)
    (g_states, g_x), out, aux = vector_grad(model, grad_states={"w": w}, argnums=0, return_value=True, has_aux=True)(x)
    assert_allclose(g_states["w"], ref_w, rtol=1e-6)
    assert_allclose(g_x, ref_x, rtol=1e-6)
    assert_allclose(out, value, rtol=1e-6)
    assert_allclose(aux["sum"], value.sum(), rtol=1e-6)
    g, a = vector_grad(model, grad_states=w, has_aux=True)(x)
    assert_allclose(a["sum"], value.sum(), rtol=1e-6)
    assert_allclose(g, ref_w, rtol=1e-6)
    assert int(hits.value) == 2


def test_vector_grad_decorator_and_state_dict():
    class Net:
        def __init__(self):
            self.a = ParamState(jnp.array([1.0, 2.0]))
            self.b = ParamState(jnp.array(3.0))

    net = Net()
    params = collect_states(net)

    @vector_grad(grad_states=params)
    def f(x):
        return net.a.value * x + net.b.value

    g = f(2.0)
    assert type(g) is dict and list(g) == [("a",), ("b",)]
    assert_allclose(g[("a",)], [2.0, 2.0])
    assert_allclose(g[("b",)], 2.0)


def _reference_fwd_grad(f, primals, key, n=None, clip=None):
    """v * (J v) with the directions fwd_grad draws: one normal per leaf, from split(key, n_leaves)."""
    leaves, treedef = jax.tree.flatten(primals)
    keys = jax.random.split(key, len(leaves))
    lead = () if n is None else (n,)
    v = jax.tree.unflatten(
        treedef, [jax.random.normal(k, lead + x.shape, x.dtype) for k, x in zip(keys, leaves, strict=True)]
    )

    def one(t):
        slope = jax.jvp(f, (primals,), (t,))[1]
        return slope if clip is None else jnp.clip(slope, -clip, clip)

    if n is None:
        slope = one(v)
        return jax.tree.map(lambda t: t * slope, v)
    slopes = jax.vmap(one)(v)
    return jax.tree.map(lambda t: jnp.mean(t * slopes.reshape((-1,) + (1,) * (t.ndim - 1)), axis=0), v)


@pytest.mark.numerics  # a statistical estimator
def test_fwd_grad_matches_pure_jax_estimator():
    w = ParamState(jnp.array([0.5, -1.0, 2.0]), name="w")
    b = ParamState(jnp.array(0.3), name="b")

    def loss(x):
        return jnp.sum(jnp.sin(w.value * x) + b.value)

    x = jnp.array([1.0, 2.0, 3.0])

    def pure(primals):
        (wv, bv), (xv,) = primals
        return jnp.sum(jnp.sin(wv * xv) + bv)

    primals = ([w.value, b.value], (x,))
    for n, clip in [(None, None), (7, None), (5, 0.5)]:
        ref = _reference_fwd_grad(pure, primals, jax.random.key(3), n, clip)
        (g_states, g_x) = fwd_grad(loss, grad_states=[w, b], argnums=0, key=3, tangent_size=n, drct_der_clip=clip)(x)
        assert_allclose(g_states[0], ref[0][0], rtol=1e-5)
        assert_allclose(g_states[1], ref[0][1], rtol=1e-5)
        assert_allclose(g_x, ref[1][0], rtol=1e-5)


def test_fwd_grad_estimates_the_gradient():
    w = ParamState(jnp.array([1.0, -2.0, 0.5]), name="w")
    g = fwd_grad(lambda: jnp.sum(w.value**2), grad_states=w, tangent_size=50_000, key=1)()
    assert_allclose(g, 2 * w.value, atol=0.1)


def test_fwd_grad_draws_from_default_and_updates_states():
    w = ParamState(jnp.array([1.0, 2.0]), name="w")
    calls = State(jnp.array(0), name="calls")

    def loss(x):
        calls.value = calls.value + 1
        return jnp.sum(w.value * x), x * 2

    state_random.seed(0)
    f = fwd_grad(loss, grad_states=w, has_aux=True, return_value=True)
    g1, value, aux = f(1.5)
    g2, _, _ = f(1.5)
    assert not jnp.allclose(g1, g2)  # a new key from DEFAULT at every call
    assert_allclose(value, 4.5)
    assert_allclose(aux, 3.0)
    assert int(calls.value) == 2
    state_random.seed(0)
    assert_allclose(f(1.5)[0], g1)  # seeding DEFAULT reproduces the directions


def test_fwd_grad_inside_jit_with_module_states():
    class MLP:
        def __init__(self):
            self.w1 = ParamState(jnp.full((3, 4), 0.1))
            self.w2 = ParamState(jnp.full((4, 2), 0.2))

        def __call__(self, x):
            return jax.nn.relu(x @ self.w1.value) @ self.w2.value

    mlp = MLP()
    weights = collect_states(mlp, ParamState)

    def loss_fn(xs, ys):
        predicts = mlp(xs)
        return jnp.mean((predicts - ys) ** 2), jnp.mean(jnp.argmax(predicts, 1) == jnp.argmax(ys, 1))

    @jit
    def train(xs, ys):
        grads, loss, acc = fwd_grad(
            loss_fn, grad_states=weights, return_value=True, has_aux=True, tangent_size=16, key=0
        )(xs, ys)
        for path, g in grads.items():
            weights[path].value = weights[path].value - 0.1 * g
        return loss, acc

    xs, ys = jnp.ones((5, 3)), jnp.zeros((5, 2))
    before = jnp.mean((mlp(xs) - ys) ** 2)
    loss, _ = train(xs, ys)
    assert_allclose(loss, before, rtol=1e-6)
    assert mlp.w1.value.shape == (3, 4) and not jnp.allclose(mlp.w1.value, 0.1)


def test_fwd_grad_errors():
    w = ParamState(jnp.ones(2), name="w")
    with pytest.raises(ValueError, match="must return a scalar"):
        fwd_grad(lambda: w.value * 2, grad_states=w, key=0)()
    with pytest.raises(TypeError, match="floating point"):
        fwd_grad(lambda n: n * 2.0, key=0)(jnp.array(3))
    with pytest.raises(ValueError, match="tangent_size must be a positive int"):
        fwd_grad(lambda: w.value.sum(), grad_states=w, tangent_size=0)
    with pytest.raises(ValueError, match="drct_der_clip must be a positive"):
        fwd_grad(lambda: w.value.sum(), grad_states=w, drct_der_clip=-1.0)
    with pytest.raises(TypeError, match="key must be an int seed"):
        fwd_grad(lambda: w.value.sum(), grad_states=w, key="seed")


def test_fwd_grad_takes_a_one_element_integer_array_as_a_seed():
    import numpy as np

    w = ParamState(jnp.array([1.0, 2.0]))

    def loss():
        return jnp.sum(w.value**2)

    by_array = fwd_grad(loss, grad_states=w, key=np.array([42]))()
    assert_allclose(by_array, fwd_grad(loss, grad_states=w, key=42)())
    assert_allclose(fwd_grad(loss, grad_states=w, key=jnp.array([42]))(), by_array)
    with pytest.raises(TypeError, match="key must be an int seed"):
        fwd_grad(loss, grad_states=w, key=np.array([1.5]))()
