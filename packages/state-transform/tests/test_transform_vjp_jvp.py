"""vjp / jvp with States: values against jax.vjp / jax.jvp, layouts as brainstate's, state write-back."""

import jax
import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

from state_core import ParamState, State
from state_transform import jit, jvp, vjp


def test_vjp_plain_matches_jax():
    def f(x):
        return jnp.sin(x) * x

    x = jnp.array([0.3, 1.2, -0.7])
    out, vjp_fn = vjp(f, x)
    ref_out, ref_pull = jax.vjp(f, x)
    ct = jnp.array([1.0, -2.0, 0.5])
    assert_allclose(out, ref_out, rtol=1e-6)
    assert_allclose(vjp_fn(ct), ref_pull(ct)[0], rtol=1e-6)


def test_vjp_states_and_args_layouts():
    w = ParamState(jnp.array([2.0, 3.0]), name="w")
    b = ParamState(jnp.array(0.5), name="b")

    def loss(x, y):
        return jnp.sum(w.value * x * y) + b.value

    x, y = jnp.array([5.0, 7.0]), jnp.array([1.0, 2.0])
    ref = jax.grad(lambda wv, bv, xv, yv: jnp.sum(wv * xv * yv) + bv, argnums=(0, 1, 2, 3))(w.value, b.value, x, y)
    # grad_states and an int argnums: (state cts, arg ct)
    _, fn = vjp(loss, x, y, grad_states=w)
    state_ct, arg_ct = fn(1.0)
    assert_allclose(state_ct, ref[0])
    assert_allclose(arg_ct, ref[2])
    # a dict of states, a sequence argnums
    _, fn = vjp(loss, x, y, grad_states={"w": w, "b": b}, argnums=(0, 1))
    state_ct, (gx, gy) = fn(2.0)
    assert set(state_ct) == {"w", "b"}
    assert_allclose(state_ct["w"], 2 * ref[0])
    assert_allclose(state_ct["b"], 2 * ref[1])
    assert_allclose(gx, 2 * ref[2])
    assert_allclose(gy, 2 * ref[3])
    # argnums=None: the state cotangents only, in grad_states' structure
    _, fn = vjp(loss, x, y, grad_states=[w, b], argnums=None)
    gw, gb = fn(1.0)
    assert_allclose(gw, ref[0])
    assert_allclose(gb, ref[1])
    # negative argnums
    _, fn = vjp(loss, x, y, argnums=-1)
    assert_allclose(fn(1.0), ref[3])


def test_vjp_no_primals_differentiates_states_only():
    weight = ParamState(jnp.array([[1.0, 2.0], [3.0, 4.0]]), name="weight")
    bias = ParamState(jnp.array([0.0, 1.0]), name="bias")
    data = jnp.array([1.0, -1.0])

    def predict_loss():
        y = data @ weight.value + bias.value
        return jnp.sum(y**2)

    out, fn = vjp(predict_loss, grad_states=[weight, bias])
    gw, gb = fn(1.0)
    ref = jax.grad(lambda wv, bv: jnp.sum((data @ wv + bv) ** 2), argnums=(0, 1))(weight.value, bias.value)
    assert_allclose(out, predict_loss())
    assert_allclose(gw, ref[0])
    assert_allclose(gb, ref[1])


def test_vjp_writes_states_once_and_differentiates_input_values():
    counter = State(jnp.array(0.0), name="counter")
    w = ParamState(jnp.array(2.0), name="w")

    def f(x):
        counter.value = counter.value + 1.0
        w.value = w.value * 3.0  # read then written: differentiated at its value on entry
        return jnp.sum(x**2) * w.value, {"mean": jnp.mean(x)}

    x = jnp.array([1.0, 2.0])
    out, fn, aux = vjp(f, x, grad_states=w, has_aux=True)
    assert_allclose(out, 5.0 * 6.0)
    assert_allclose(aux["mean"], 1.5)
    assert_allclose(counter.value, 1.0)
    assert_allclose(w.value, 6.0)
    gw, gx = fn(1.0)
    assert_allclose(gw, 3.0 * 5.0)  # d(sum(x^2) * 3w)/dw
    assert_allclose(gx, 2 * x * 6.0)
    fn(1.0)
    assert_allclose(counter.value, 1.0)  # the pullback writes nothing


def test_vjp_pullback_reused_for_jacobian_and_through_jit():
    def vector_fn(x):
        return jnp.array([jnp.sum(x), jnp.sum(x**2)])

    x = jnp.array([1.0, 2.0, 3.0])
    _, fn = vjp(vector_fn, x)
    assert_allclose(jax.vmap(fn)(jnp.eye(2)), jax.jacrev(vector_fn)(x))
    assert_allclose(jax.jit(lambda g, v: g(v))(fn, jnp.array([1.0, 0.0])), jnp.ones(3))


def test_vjp_inside_jit_updates_states():
    w = ParamState(jnp.array([1.0, -1.0]), name="w")
    steps = State(jnp.array(0), name="steps")

    @jit
    def train(x):
        def loss():
            steps.value = steps.value + 1
            return jnp.sum((w.value * x) ** 2)

        value, back = vjp(loss, grad_states=w)
        w.value = w.value - 0.1 * back(1.0)
        return value

    x = jnp.array([1.0, 2.0])
    w0 = w.value
    train(x)
    assert_allclose(w.value, w0 - 0.1 * 2 * w0 * x**2, rtol=1e-6)
    train(x)
    assert int(steps.value) == 2


def test_vjp_unread_and_duplicate_grad_states():
    used = ParamState(jnp.array(2.0), name="used")
    unused = ParamState(jnp.ones(3), name="unused")
    _, fn = vjp(lambda: used.value**2, grad_states=[used, unused, used])
    g_used, g_unused, g_again = fn(1.0)
    assert_allclose(g_used, 4.0)
    assert_allclose(g_again, 4.0)
    assert_allclose(g_unused, jnp.zeros(3))


def test_vjp_errors():
    with pytest.raises(ValueError, match="nothing to differentiate"):
        vjp(lambda: 1.0)
    with pytest.raises(ValueError, match="argnums contains 2"):
        vjp(lambda x: x, 1.0, argnums=2)
    with pytest.raises(ValueError, match="names a positional argument twice"):
        vjp(lambda x, y: x * y, 1.0, 2.0, argnums=(0, -2))
    with pytest.raises(TypeError, match="grad_states must be a State"):
        vjp(lambda x: x, 1.0, grad_states=[jnp.ones(2)])
    with pytest.raises(TypeError, match=r"return a \(value, aux\) pair"):
        vjp(lambda x: x, 1.0, has_aux=True)


def test_vjp_failed_call_leaves_states_unchanged():
    s = State(jnp.array(1.0), name="s")

    def f(x):
        s.value = s.value + 1.0
        return x, None, None  # not a pair: fails after the write was traced

    with pytest.raises(TypeError, match="pair"):
        vjp(f, 1.0, has_aux=True)
    assert_allclose(s.value, 1.0)


def test_jvp_matches_jax_and_keeps_states_constant():
    gain = ParamState(jnp.array(4.0), name="gain")
    calls = State(jnp.array(0.0), name="calls")

    def scaled(x, y):
        calls.value = calls.value + 1.0
        return gain.value * jnp.sin(x) * y

    primals = (jnp.array([0.1, 0.2]), jnp.array([1.0, 2.0]))
    tangents = (jnp.array([1.0, 0.0]), jnp.array([0.5, 0.5]))
    out, tan = jvp(scaled, primals, tangents)
    ref_out, ref_tan = jax.jvp(lambda x, y: 4.0 * jnp.sin(x) * y, primals, tangents)
    assert_allclose(out, ref_out, rtol=1e-6)
    assert_allclose(tan, ref_tan, rtol=1e-6)
    assert_allclose(calls.value, 1.0)
    assert_allclose(gain.value, 4.0)


def test_jvp_has_aux_and_column_jacobian():
    def f_aux(x):
        return jnp.sum(x**3), {"max": jnp.max(x)}

    x = jnp.array([1.0, 2.0, 3.0])
    out, tan, aux = jvp(f_aux, [x], [jnp.ones(3)], has_aux=True)
    assert_allclose(out, 36.0)
    assert_allclose(tan, jnp.dot(3 * x**2, jnp.ones(3)))
    assert_allclose(aux["max"], 3.0)

    def vector_fn(v):
        return jnp.array([jnp.sum(v), jnp.sum(v**2), jnp.prod(v)])

    cols = jax.vmap(lambda e: jvp(vector_fn, (x,), (e,))[1])(jnp.eye(3))
    assert_allclose(cols.T, jax.jacfwd(vector_fn)(x), rtol=1e-6)


def test_jvp_errors():
    with pytest.raises(TypeError, match="primals must be a tuple or list"):
        jvp(lambda x: x, 1.0, (1.0,))
    with pytest.raises(TypeError, match="tangents must be a tuple or list"):
        jvp(lambda x: x, (1.0,), 1.0)
    with pytest.raises(ValueError, match="one tangent per primal"):
        jvp(lambda x: x, (1.0,), (1.0, 2.0))
