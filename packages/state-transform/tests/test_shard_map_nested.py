"""State-aware transforms nested inside ``shard_map`` under ``check_vma=True``.

Each nested program is traced in the shard_map context, so its values carry the
mesh axes they vary over and JAX's semantics hold: the gradient of a replicated
parameter of a loss on the sharded batch is the sum over shards (JAX inserts a
pvary in the forward pass whose transpose is a psum), exactly as pure
``jax.shard_map`` + ``jax.grad`` computes it.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose

import state_transform as st
from state_core import ParamState, State

N = 8


@pytest.fixture
def mesh():
    return jax.make_mesh((N,), ("x",))


def _data(mesh):
    x = jnp.arange(2.0 * N * 2).reshape(2 * N, 2) / 10.0
    y = jnp.sin(jnp.arange(2.0 * N))
    place = NamedSharding(mesh, P("x"))
    return jax.device_put(x, place), jax.device_put(y, place)


W0 = np.array([1.0, -2.0], np.float32)


def _loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)


def _pure_grad(mesh, x, y):
    """Pure JAX: the parameter is a replicated argument of shard_map."""
    w = jax.device_put(jnp.asarray(W0), NamedSharding(mesh, P()))
    step = jax.shard_map(
        lambda w, x, y: (lambda lg: (lg[0][None], lg[1]))(jax.value_and_grad(_loss)(w, x, y)),
        mesh=mesh,
        in_specs=(P(), P("x"), P("x")),
        out_specs=(P("x"), P()),
    )
    loss, g = jax.jit(step)(w, x, y)
    return np.asarray(loss), np.asarray(g)


def test_grad_of_replicated_param_matches_pure_jax(mesh):
    x, y = _data(mesh)
    _, expected = _pure_grad(mesh, x, y)
    # The replicated gradient is the sum over shards of each shard's gradient.
    xs, ys = np.asarray(x), np.asarray(y)
    per_shard = [jax.grad(_loss)(W0, xs[2 * i : 2 * i + 2], ys[2 * i : 2 * i + 2]) for i in range(N)]
    assert_allclose(expected, np.sum(per_shard, axis=0), rtol=1e-5)
    w = ParamState(jnp.asarray(W0))

    def step(x, y):
        return st.grad(lambda x, y: _loss(w.value, x, y), grad_states=w)(x, y)

    got = st.shard_map(step, mesh, in_specs=(P("x"), P("x")), out_specs=P())(x, y)
    assert_allclose(np.asarray(got), expected, rtol=1e-5)


def test_value_and_grad_and_jacrev_nested(mesh):
    x, y = _data(mesh)
    loss_pure, g_pure = _pure_grad(mesh, x, y)
    w = ParamState(jnp.asarray(W0))

    def step(x, y):
        loss, g = st.value_and_grad(lambda x, y: _loss(w.value, x, y), grad_states=w)(x, y)
        jac = st.jacrev(lambda x, y: _loss(w.value, x, y), grad_states=w)(x, y)
        return loss[None], g, jac

    loss, g, jac = st.shard_map(step, mesh, in_specs=(P("x"), P("x")), out_specs=(P("x"), P(), P()))(x, y)
    assert_allclose(np.asarray(loss), loss_pure, rtol=1e-5)
    assert_allclose(np.asarray(g), g_pure, rtol=1e-5)
    assert_allclose(np.asarray(jac), g_pure, rtol=1e-5)


def test_sgd_step_writes_replicated_param(mesh):
    x, y = _data(mesh)
    _, g_pure = _pure_grad(mesh, x, y)
    w = ParamState(jnp.asarray(W0))

    def step(x, y):
        g = st.grad(lambda x, y: _loss(w.value, x, y), grad_states=w)(x, y)
        w.value = w.value - 0.1 * g

    st.shard_map(step, mesh, in_specs=(P("x"), P("x")), out_specs=None)(x, y)
    assert_allclose(np.asarray(w.value), W0 - 0.1 * g_pure, rtol=1e-5)


def test_jit_nested_writes_propagate(mesh):
    x, _ = _data(mesh)
    w = ParamState(jnp.asarray(W0))
    total = State(jnp.zeros(()))
    per_shard = State(jnp.zeros(2 * N))

    @st.jit
    def inner(x):
        out = x @ w.value
        per_shard.value = per_shard.value + out
        total.value = total.value + jax.lax.psum(out.sum(), "x")
        return out

    f = st.shard_map(inner, mesh, in_specs=P("x"), out_specs=P("x"), state_in_specs={per_shard: P("x")})
    out = f(x)
    expected = np.asarray(x) @ W0
    assert_allclose(np.asarray(out), expected, rtol=1e-6)
    assert_allclose(np.asarray(per_shard.value), expected, rtol=1e-6)
    assert_allclose(float(total.value), expected.sum(), rtol=1e-5)


def test_vmap2_nested(mesh):
    x, _ = _data(mesh)
    w = ParamState(jnp.asarray(W0))

    def step(x):
        return st.vmap2(lambda row: row @ w.value)(x)

    out = st.shard_map(step, mesh, in_specs=P("x"), out_specs=P("x"))(x)
    assert_allclose(np.asarray(out), np.asarray(x) @ W0, rtol=1e-6)


def test_loops_nested(mesh):
    x, _ = _data(mesh)
    w = ParamState(jnp.asarray(W0))
    acc = State(jnp.zeros(N))

    def step(x):
        def body(row):
            acc.value = acc.value + row @ w.value
            return row @ w.value

        ys = st.for_loop(body, x)
        # As in jax.lax.scan, a carry that becomes varying must start varying.
        init = jax.lax.pcast(jnp.zeros(()), "x", to="varying")
        carry, _ = st.scan(lambda c, row: (c + row @ w.value, None), init, x)
        count = st.while_loop(lambda c: c < 3, lambda c: c + 1, 0)
        return ys, carry[None], jnp.full((1,), count)

    f = st.shard_map(step, mesh, in_specs=P("x"), out_specs=P("x"), state_in_specs={acc: P("x")})
    ys, carry, count = f(x)
    rows = np.asarray(x) @ W0
    assert_allclose(np.asarray(ys), rows, rtol=1e-6)
    assert_allclose(np.asarray(carry), rows.reshape(N, 2).sum(1), rtol=1e-6)
    assert_allclose(np.asarray(acc.value), rows.reshape(N, 2).sum(1), rtol=1e-6)
    assert np.asarray(count).tolist() == [3] * N


def test_cond_switch_checkpoint_nested(mesh):
    x, y = _data(mesh)
    _, g_pure = _pure_grad(mesh, x, y)
    w = ParamState(jnp.asarray(W0))

    def step(x, y):
        pick = st.cond(x.sum() > 1.0, lambda x: x @ w.value, lambda x: -(x @ w.value), x)
        three = st.switch(1, [lambda x: x, lambda x: 3 * x], x @ w.value)
        g = st.grad(st.checkpoint(lambda x, y: _loss(w.value, x, y)), grad_states=w)(x, y)
        return pick, three, g

    pick, three, g = st.shard_map(step, mesh, in_specs=(P("x"), P("x")), out_specs=(P("x"), P("x"), P()))(x, y)
    rows = np.asarray(x) @ W0
    sums = np.asarray(x).reshape(N, 2, 2).sum((1, 2))
    assert_allclose(np.asarray(pick), np.where(np.repeat(sums > 1.0, 2), rows, -rows), rtol=1e-6)
    assert_allclose(np.asarray(three), 3 * rows, rtol=1e-6)
    assert_allclose(np.asarray(g), g_pure, rtol=1e-5)


def test_traced_once_per_signature_and_context(mesh):
    x, y = _data(mesh)
    w = ParamState(jnp.asarray(W0))
    traces = []

    def loss(x, y):
        traces.append(jax.typeof(x))
        return _loss(w.value, x, y)

    g = st.grad(loss, grad_states=w)
    f = st.shard_map(lambda x, y: g(x, y), mesh, in_specs=(P("x"), P("x")), out_specs=P())
    first = f(x, y)
    f(x, y)
    assert len(traces) == 1
    # The same function eagerly on the whole batch: another context, traced again,
    # and it is the unsummed gradient of the global mean.
    xs, ys = jnp.asarray(np.asarray(x)), jnp.asarray(np.asarray(y))
    eager = g(xs, ys)
    g(xs, ys)
    assert len(traces) == 2
    assert_allclose(np.asarray(eager), jax.grad(_loss)(W0, xs, ys), rtol=1e-5)
    # Back inside shard_map (a new ShardMapFunction, same context): the nested trace is reused.
    again = st.shard_map(lambda x, y: g(x, y), mesh, in_specs=(P("x"), P("x")), out_specs=P())(x, y)
    assert len(traces) == 2
    assert_allclose(np.asarray(again), np.asarray(first), rtol=1e-6)


def test_nested_program_not_reused_for_other_varying_axes(mesh):
    x, _ = _data(mesh)
    w = ParamState(jnp.asarray(W0))

    @st.jit
    def apply(v):
        return v @ w.value

    replicated = st.shard_map(apply, mesh, in_specs=P(), out_specs=P())(jnp.asarray(np.asarray(x)))
    sharded = st.shard_map(apply, mesh, in_specs=P("x"), out_specs=P("x"))(x)
    assert_allclose(np.asarray(replicated), np.asarray(x) @ W0, rtol=1e-6)
    assert_allclose(np.asarray(sharded), np.asarray(x) @ W0, rtol=1e-6)


def test_failure_keeps_state(mesh):
    x, y = _data(mesh)
    w = ParamState(jnp.asarray(W0))
    seen = State(jnp.zeros(()))

    def step(x, y):
        g = st.grad(lambda x, y: _loss(w.value, x, y), grad_states=w)(x, y)
        w.value = w.value - g
        seen.value = seen.value + 1.0
        return jnp.ones(3) + g  # (3,) and (2,): fails at trace time, after the nested writes

    f = st.shard_map(step, mesh, in_specs=(P("x"), P("x")), out_specs=P())
    with pytest.raises(TypeError, match="incompatible shapes"):
        f(x, y)
    assert_allclose(np.asarray(w.value), W0)
    assert float(seen.value) == 0.0


def test_state_aware_jit_inside_plain_jax_shard_map(mesh):
    x, y = _data(mesh)
    _, g_pure = _pure_grad(mesh, x, y)
    w = ParamState(jnp.asarray(W0))
    g = st.grad(lambda x, y: _loss(w.value, x, y), grad_states=w)
    f = jax.jit(jax.shard_map(lambda x, y: g(x, y), mesh=mesh, in_specs=(P("x"), P("x")), out_specs=P()))
    assert_allclose(np.asarray(f(x, y)), g_pure, rtol=1e-5)


def test_check_vma_false_matches_jax_without_vma(mesh):
    # Without varying-axes types JAX inserts no pvary: each device keeps its own gradient.
    x, y = _data(mesh)
    w = ParamState(jnp.asarray(W0))
    g = st.grad(lambda x, y: _loss(w.value, x, y), grad_states=w)
    ours = st.shard_map(lambda x, y: g(x, y)[None], mesh, in_specs=(P("x"), P("x")), out_specs=P("x"), check_vma=False)
    pure = jax.jit(
        jax.shard_map(
            lambda w, x, y: jax.grad(_loss)(w, x, y)[None],
            mesh=mesh,
            in_specs=(P(), P("x"), P("x")),
            out_specs=P("x"),
            check_vma=False,
        )
    )
    expected = pure(jax.device_put(jnp.asarray(W0), NamedSharding(mesh, P())), x, y)
    xs, ys = np.asarray(x), np.asarray(y)
    per_shard = [jax.grad(_loss)(W0, xs[2 * i : 2 * i + 2], ys[2 * i : 2 * i + 2]) for i in range(N)]
    assert_allclose(np.asarray(expected), np.stack(per_shard), rtol=1e-5)
    assert_allclose(np.asarray(ours(x, y)), np.asarray(expected), rtol=1e-5)


def test_mesh_type_records_varying_axes(mesh):
    from state_core.engine import mesh_type

    seen = {}

    def body(x, w):
        seen["x"], seen["w"] = mesh_type(jax.typeof(x)), mesh_type(jax.typeof(w))
        return x

    jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x")))(
        _data(mesh)[1], jax.device_put(jnp.ones(2), NamedSharding(mesh, P()))
    )
    assert seen["x"][1] == frozenset({"x"})
    assert seen["w"][1] == frozenset()
    assert seen["x"] != seen["w"]
    assert mesh_type(jax.typeof(jnp.ones(2))) is None
