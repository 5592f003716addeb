"""checkpoint/remat and value_and_grad with States."""

import jax
import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

from state_core import ParamState, State
from state_transform import JacobianFunction, checkpoint, for_loop, grad, jacrev, jit, remat, value_and_grad


def test_checkpoint_values_state_writes_and_trace_once():
    calls = State(jnp.array(0), name="calls")
    w = ParamState(jnp.array(1.5), name="w")
    traces = []

    @checkpoint
    def block(x):
        traces.append(1)
        calls.value = calls.value + 1
        return jnp.tanh(x * w.value)

    assert_allclose(block(0.5), jnp.tanh(0.75), rtol=1e-6)
    assert_allclose(block(0.25), jnp.tanh(0.375), rtol=1e-6)
    assert int(calls.value) == 2
    assert len(traces) == 1


def test_checkpoint_under_grad_matches_and_records_remat():
    w = ParamState(jnp.array(1.5), name="w")
    counter = State(jnp.array(0), name="counter")

    def layer(x):
        counter.value = counter.value + 1
        return jnp.sin(x * w.value)

    blk = remat(layer, policy=jax.checkpoint_policies.nothing_saveable)

    def loss(x):
        return blk(blk(x)) ** 2

    g = grad(loss, grad_states=w)(0.3)
    ref = jax.grad(lambda wv: jnp.sin(jnp.sin(0.3 * wv) * wv) ** 2)(1.5)
    assert_allclose(g, ref, rtol=1e-5)
    assert int(counter.value) == 2
    # the program really rematerialises: jax.checkpoint shows up in the differentiated jaxpr
    read_only = remat(lambda x: jnp.sin(x * w.value))
    jaxpr = str(jax.make_jaxpr(jax.grad(read_only))(0.3))
    assert "checkpoint" in jaxpr or "remat" in jaxpr


def test_checkpoint_static_argnums_and_bad_input():
    @checkpoint(static_argnums=1)
    def power(x, n):
        return x**n

    assert_allclose(power(2.0, 3), 8.0)
    assert_allclose(power(2.0, 2), 4.0)
    with pytest.raises(TypeError, match="checkpoint: fun must be a callable"):
        checkpoint(3)


def test_jacobian_messages_name_the_transformation():
    w = ParamState(jnp.ones(2), name="w")
    with pytest.raises(
        ValueError, match=r"JacobianFunction: mode must be one of \['fwd', 'hessian', 'rev'\], got 'up'"
    ):
        JacobianFunction(lambda: w.value, grad_states=w, mode="up")
    with pytest.raises(
        TypeError, match="jacrev: grad_states must be a State or a list/tuple/dict of States, but it contains a float"
    ):
        jacrev(lambda: w.value, grad_states=[w, 1.0])
    assert_allclose(jacrev(lambda: w.value**2, grad_states=w)(), [[2.0, 0.0], [0.0, 2.0]])


def test_checkpoint_failure_keeps_states():
    s = State(jnp.zeros(2), name="s")

    def bad(x):
        s.value = s.value + x
        raise RuntimeError("remat body failed")

    with pytest.raises(RuntimeError, match="remat body failed"):
        checkpoint(bad)(1.0)
    assert_allclose(s.value, [0.0, 0.0])


def test_checkpoint_inside_for_loop_under_grad():
    w = ParamState(jnp.array(0.9), name="w")
    h = State(jnp.array(1.0), name="h")

    @checkpoint
    def cell(t):
        h.value = h.value * w.value + t
        return h.value

    def loss():
        return for_loop(cell, jnp.arange(4.0)).sum()

    g, val = grad(loss, grad_states=w, return_value=True)()

    def pure(wv):
        def body(c, t):
            c = c * wv + t
            return c, c

        return jax.lax.scan(body, 1.0, jnp.arange(4.0))[1].sum()

    assert_allclose(val, pure(0.9), rtol=1e-6)
    assert_allclose(g, jax.grad(pure)(0.9), rtol=1e-5)


def test_value_and_grad_orders_like_jax():
    w = ParamState(jnp.array([1.0, -2.0]), name="w")
    stats = State(jnp.array(0.0), name="stats")

    def loss(x):
        stats.value = stats.value + 1
        return jnp.sum((w.value * x) ** 2), w.value.sum()

    (value, aux), g = value_and_grad(loss, grad_states=w, has_aux=True)(jnp.array([3.0, 4.0]))
    assert_allclose(value, 9.0 + 64.0)
    assert_allclose(aux, -1.0)
    assert_allclose(g, [2 * 3.0 * 3.0, 2 * -8.0 * 4.0])
    assert_allclose(stats.value, 1.0)

    f = lambda x: jnp.sum(x**3)
    v, gx = jit(value_and_grad(f))(jnp.array([1.0, 2.0]))
    v_ref, g_ref = jax.value_and_grad(f)(jnp.array([1.0, 2.0]))
    assert_allclose(v, v_ref)
    assert_allclose(gx, g_ref)

    (v2, (gs, ga)) = value_and_grad(lambda x: jnp.sum(w.value * x), grad_states=[w], argnums=0)(jnp.ones(2))
    assert_allclose(v2, -1.0)
    assert_allclose(gs[0], [1.0, 1.0])
    assert_allclose(ga, [1.0, -2.0])


# ---------------------------------------------------------------- jacobians and hessians
def test_jacrev_jacfwd_wrt_states_and_args_match_jax():
    from state_transform import jacfwd, jacrev

    w = ParamState(jnp.array([1.0, 2.0, 3.0]), name="w")
    calls = State(jnp.array(0), name="calls")
    traces = []

    def f(x):
        traces.append(1)
        calls.value = calls.value + 1
        return jnp.tanh(w.value * x)

    def pure(wv, x):
        return jnp.tanh(wv * x)

    x = jnp.array([0.5, -1.0, 2.0])
    for transform, ref in ((jacrev, jax.jacrev), (jacfwd, jax.jacfwd)):
        js, ja = transform(f, grad_states=w, argnums=0)(x)
        assert_allclose(js, ref(pure, argnums=0)(w.value, x), rtol=1e-6)
        assert_allclose(ja, ref(pure, argnums=1)(w.value, x), rtol=1e-6)
        only_states = transform(f, grad_states={"w": w})(x)
        assert_allclose(only_states["w"], ref(pure, argnums=0)(w.value, x), rtol=1e-6)
    assert int(calls.value) == 4
    jr = jacrev(f, grad_states=w)
    jr(x)
    jr(x + 1)
    assert int(calls.value) == 6


def test_hessian_wrt_state_and_args_with_value_and_aux():
    from state_transform import hessian

    w = ParamState(jnp.array([1.0, 2.0]), name="w")

    def loss(x):
        return jnp.sum(w.value**3 * x), w.value.sum()

    h, value, aux = hessian(loss, grad_states=w, has_aux=True, return_value=True)(2.0)
    assert_allclose(h, jnp.diag(6 * w.value * 2.0))
    assert_allclose(value, 2.0 * 9.0)
    assert_allclose(aux, 3.0)
    hx = hessian(lambda x: jnp.sum(x**3) * w.value[0])(jnp.array([1.0, 2.0]))
    assert_allclose(hx, jnp.diag(jnp.array([6.0, 12.0])))
    with pytest.raises(TypeError, match="grad_states must be a State"):
        hessian(loss, grad_states=[1.0])


def test_checkpoint_as_method_decorator():
    class Block:
        def __init__(self, w):
            self.w = ParamState(jnp.array(w), name="w")
            self.calls = State(jnp.array(0), name="calls")
            self.traces = 0

        @checkpoint
        def __call__(self, x):
            self.traces += 1
            self.calls.value = self.calls.value + 1
            return jnp.sin(self.w.value * x)

    a, b = Block(2.0), Block(3.0)
    assert_allclose(a(1.0), jnp.sin(2.0), rtol=1e-6)
    assert_allclose(b(1.0), jnp.sin(3.0), rtol=1e-6)
    a(0.5)
    assert a.traces == 1 and int(a.calls.value) == 2
    g = grad(lambda x: a(b(x)), grad_states=a.w)(1.0)
    assert_allclose(g, jnp.cos(2.0 * jnp.sin(3.0)) * jnp.sin(3.0), rtol=1e-5)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_jacobians_of_a_tuple_or_dict_output_keep_every_element(mode):
    from state_transform import jacfwd, jacrev

    ours, theirs = (jacrev, jax.jacrev) if mode == "rev" else (jacfwd, jax.jacfwd)
    x = jnp.array([1.0, 2.0])

    def pair(v):
        return v**2, jnp.sum(v)

    got, want = ours(pair)(x), theirs(pair)(x)
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want, strict=True):
        assert_allclose(g, w)
    got = ours(lambda v: {"a": v * 3.0, "b": v[0]})(x)
    assert_allclose(got["a"], 3.0 * jnp.eye(2))
    assert_allclose(got["b"], [1.0, 0.0])

    w = ParamState(jnp.array([1.0, 2.0]))
    (state_part,), (sum_part,) = ours(lambda: (w.value**2, w.value.sum()), grad_states=[w])()
    assert_allclose(state_part, jnp.diag(jnp.array([2.0, 4.0])))
    assert_allclose(sum_part, [1.0, 1.0])
