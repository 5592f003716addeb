"""``jit`` honours States' ``sharding`` annotations: in/out shardings of the compiled program."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from numpy.testing import assert_allclose

from state_core import ParamState, State
from state_transform import grad, jit


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)


@pytest.fixture
def on_mesh(mesh):
    with jax.set_mesh(mesh):
        yield mesh


def _init(key=0):
    k1, k2 = jax.random.split(jax.random.key(key))
    return 0.3 * jax.random.normal(k1, (4, 8)), 0.3 * jax.random.normal(k2, (8, 4))


def _trainer(w1, w2, counter):
    def loss(x, y):
        return jnp.mean((jnp.tanh(x @ w1.value) @ w2.value - y) ** 2)

    @jit
    def step(x, y):
        counter.append(1)
        g1, g2 = grad(loss, grad_states=[w1, w2])(x, y)
        w1.value = w1.value - 0.1 * g1
        w2.value = w2.value - 0.1 * g2
        return loss(x, y)

    return step


def _data():
    x = jnp.linspace(-1.0, 1.0, 32).reshape(8, 4)
    return x, jnp.sin(x)


def test_annotated_states_stay_sharded_and_match_an_unannotated_run(on_mesh):
    a1, a2 = _init()
    w1 = ParamState(a1, sharding=P(None, "model"))
    w2 = ParamState(a2, sharding=P("model", None))
    traced: list = []
    step = _trainer(w1, w2, traced)
    r1, r2 = ParamState(a1), ParamState(a2)
    ref = _trainer(r1, r2, [])
    x, y = _data()
    for _ in range(3):
        assert_allclose(np.asarray(step(x, y)), np.asarray(ref(x, y)), rtol=1e-5, atol=1e-6)
        assert w1.value.sharding == NamedSharding(on_mesh, P(None, "model"))
        assert w2.value.sharding == NamedSharding(on_mesh, P("model", None))
        assert [s.data.shape for s in w1.value.addressable_shards] == [(4, 2)] * 8
        assert [s.data.shape for s in w2.value.addressable_shards] == [(2, 4)] * 8
    assert_allclose(np.asarray(w1.value), np.asarray(r1.value), rtol=1e-5, atol=1e-6)
    assert_allclose(np.asarray(w2.value), np.asarray(r2.value), rtol=1e-5, atol=1e-6)
    assert len(traced) == 1
    assert r1.value.sharding.is_fully_replicated  # unannotated: no constraint, nothing split


def test_a_fresh_value_assigned_by_the_user_is_placed_without_retracing(on_mesh):
    w = ParamState(jnp.ones((8, 4)), sharding=P("data", "model"))
    traced: list = []

    @jit
    def scale(x):
        traced.append(1)
        return w.value * x

    assert_allclose(np.asarray(scale(2.0)), np.full((8, 4), 2.0))
    w.value = jnp.full((8, 4), 3.0, jnp.float32)  # a new array, not on the annotated layout
    assert_allclose(np.asarray(scale(2.0)), np.full((8, 4), 6.0))
    assert w.value.sharding.spec == P("data", "model")  # read-only, stored placed
    assert len(traced) == 1


def test_a_state_written_without_being_read_comes_back_annotated(on_mesh):
    out = State(jnp.zeros((8, 4)), sharding=P("data"))

    @jit
    def fill(x):
        out.value = x * 2.0

    fill(jnp.ones((8, 4)))
    assert out.value.sharding == NamedSharding(on_mesh, P("data"))
    assert_allclose(np.asarray(out.value), np.full((8, 4), 2.0))


def test_a_named_sharding_annotation_needs_no_context_mesh(mesh):
    w = ParamState(jnp.arange(8.0), sharding=NamedSharding(mesh, P("model")))
    f = jit(lambda: w.value.sum())
    assert float(f()) == 28.0
    assert w.value.sharding.spec == P("model")


def test_user_shardings_still_apply_to_arguments_and_outputs(on_mesh):
    w = ParamState(jnp.ones((8, 4)), sharding=P(None, "model"))
    data = NamedSharding(on_mesh, P("data"))

    @jit(in_shardings=data, out_shardings=data)
    def f(x):
        w.value = w.value + 1.0
        return x * 2.0

    x = jax.device_put(jnp.ones((8, 4)), data)
    out = f(x)
    assert out.sharding == data
    assert w.value.sharding.spec == P(None, "model")
    assert_allclose(np.asarray(w.value), np.full((8, 4), 2.0))


def test_donated_annotated_states(on_mesh):
    buf = State(jnp.zeros((8, 4)), sharding=P("data", "model"))
    f = jit(lambda x: setattr(buf, "value", buf.value + x), donate_states=True)
    f(1.0)
    f(2.0)
    assert buf.value.sharding.spec == P("data", "model")
    assert_allclose(np.asarray(buf.value), np.full((8, 4), 3.0))


def test_inside_an_outer_jax_jit(on_mesh):
    w = ParamState(jnp.ones((8, 4)), sharding=P(None, "model"))
    inner = jit(lambda x: w.value * x)
    out = jax.jit(lambda x: inner(x) + 1.0)(jnp.full((8, 4), 2.0))
    assert_allclose(np.asarray(out), np.full((8, 4), 3.0))


def test_no_mesh_names_the_state_and_keeps_values():
    w = ParamState(jnp.ones((4, 8)), name="w1", sharding=P(None, "model"))
    h = State(jnp.zeros(2), name="h")
    before = w.value

    @jit
    def f():
        h.value = h.value + 1.0
        w.value = w.value * 2.0

    with pytest.raises(ValueError, match=r"ParamState 'w1' is annotated with sharding P\(None, 'model'\), but no mesh"):
        f()
    assert w.value is before
    assert_allclose(np.asarray(h.value), np.zeros(2))


def test_bad_rank_and_indivisible_dimension_name_the_state_by_path(on_mesh):
    class Model:
        def __init__(self):
            self.bias = ParamState(jnp.ones(8), sharding=P(None, "model"))
            self.w = ParamState(jnp.ones((4, 6)), sharding=P(None, "model"))

        @jit
        def bias_sum(self):
            return self.bias.value.sum()

        @jit
        def w_sum(self):
            self.w.value = self.w.value + 1.0
            return self.w.value.sum()

    m = Model()
    with pytest.raises(ValueError, match=r"at path 'bias' is annotated with sharding P\(None, 'model'\).*rank 1"):
        m.bias_sum()
    with pytest.raises(ValueError, match=r"at path 'w' .*dimension 1 .*size 6.*not divisible by the 4 devices"):
        m.w_sum()
    assert_allclose(np.asarray(m.w.value), np.ones((4, 6)))  # the failed call wrote nothing
    m.w.metadata["sharding"] = P("data")  # fixed: the next call traces anew and works
    assert float(m.w_sum()) == 48.0
    assert m.w.value.sharding.spec == P("data")


def test_runtime_failure_keeps_annotated_values(on_mesh):
    w = ParamState(jnp.ones((8, 4)), sharding=P("data"))

    @jit
    def f(x):
        w.value = w.value + x
        return w.value

    f(jnp.ones((8, 4)))
    before = np.asarray(w.value)
    with pytest.raises(TypeError):
        f(jnp.ones((3, 5)))
    assert_allclose(np.asarray(w.value), before)


def test_explicit_axes_mesh_elementwise(mesh):
    explicit = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Explicit,) * 2)
    with jax.set_mesh(explicit):
        w = ParamState(jnp.ones((8, 4)), sharding=P("data", "model"))
        h = State(jnp.zeros((8, 4)), sharding=P("data"))

        @jit
        def update(x):
            h.value = h.value + x * w.value
            return h.value.sum()

        assert float(update(jnp.ones((8, 4)))) == 32.0
        assert float(update(jnp.ones((8, 4)))) == 64.0
    assert w.value.sharding == NamedSharding(explicit, P("data", "model"))
    assert h.value.sharding == NamedSharding(explicit, P("data"))


def test_composes_with_vmap2_grad_and_an_outer_jit(on_mesh):
    from state_transform import vmap2

    w = ParamState(jnp.arange(32.0).reshape(8, 4), sharding=P("data", "model"))
    f = jit(lambda x: (w.value * x).sum())
    assert_allclose(np.asarray(vmap2(f)(jnp.stack([jnp.ones((8, 4)), 2 * jnp.ones((8, 4))]))), [496.0, 992.0])
    (g,) = grad(lambda x: f(x), grad_states=[w])(jnp.full((8, 4), 3.0))
    assert_allclose(np.asarray(g), np.full((8, 4), 3.0))
    assert float(jit(lambda x: f(x) * 2.0)(jnp.ones((8, 4)))) == 992.0
    assert w.value.sharding.spec == P("data", "model")
