"""State-aware ``jit`` and ``grad``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
from state_transform import GradFunction, JittedFunction, grad, jit, vmap2


# ---------------------------------------------------------------- jit
def test_jit_writes_states_and_traces_once_per_signature():
    traces = []
    total = state_core.State(jnp.zeros(()), name="total")

    def add(x):
        traces.append(1)
        total.value = total.value + x.sum()
        return total.value

    f = jit(add)
    assert isinstance(f, JittedFunction)
    assert_allclose(float(f(jnp.ones(2))), 2.0)
    assert_allclose(float(f(jnp.ones(2))), 4.0)
    assert len(traces) == 1
    assert_allclose(float(f(jnp.ones(3))), 7.0)
    assert len(traces) == 2
    f(jnp.ones(3))
    assert len(traces) == 2
    assert_allclose(float(total.value), 10.0)


def test_jit_decorator_forms():
    s = state_core.State(jnp.zeros(()), name="deco")

    @jit
    def a(x):
        s.value = s.value + x
        return x * 2

    @jit()
    def b(x):
        return x * 3

    @jit(static_argnums=1)
    def c(x, n):
        return x * n

    assert_allclose(float(a(1.0)), 2.0)
    assert_allclose(float(b(1.0)), 3.0)
    assert_allclose(float(c(1.0, 4)), 4.0)
    assert_allclose(float(s.value), 1.0)
    assert a.__name__ == "a"  # functools.wraps


def test_jit_static_argnums_and_argnames():
    traces = []

    def f(x, n, *, mode="add"):
        traces.append((n, mode))
        return x + n if mode == "add" else x * n

    g = jit(f, static_argnums=(1,), static_argnames=("mode",))
    assert_allclose(float(g(2.0, 3)), 5.0)
    assert_allclose(float(g(2.0, 3, mode="mul")), 6.0)
    assert_allclose(float(g(5.0, 3)), 8.0)
    assert_allclose(float(g(2.0, 4)), 6.0)
    assert traces == [(3, "add"), (3, "mul"), (4, "add")]


def test_jit_static_arg_controls_python_shape():
    g = jit(lambda n: jnp.arange(n) * 2, static_argnums=0)
    assert_allclose(np.asarray(g(3)), [0, 2, 4])
    assert_allclose(np.asarray(g(5)), [0, 2, 4, 6, 8])


def test_jit_negative_static_argnums():
    g = jit(lambda x, n: x * n, static_argnums=-1)
    assert_allclose(float(g(2.0, 5)), 10.0)


def test_jit_unhashable_static_arg_is_clear_error():
    g = jit(lambda x, opts: x, static_argnums=1)
    with pytest.raises(TypeError, match="hashable"):
        g(1.0, [1, 2])


def test_jit_static_argnums_out_of_range():
    g = jit(lambda x: x, static_argnums=2)
    with pytest.raises(ValueError, match="static_argnums"):
        g(1.0)


def test_jit_donate_argnums():
    g = jit(lambda x, y: x + y, donate_argnums=0)
    x = jnp.arange(4.0) + 0
    y = jnp.ones(4)
    out = g(x, y)
    assert_allclose(np.asarray(out), [1.0, 2.0, 3.0, 4.0])
    assert x.is_deleted()
    assert not y.is_deleted()


def test_jit_donate_argnums_with_static_before():
    g = jit(lambda n, x: x * n, static_argnums=0, donate_argnums=1)
    x = jnp.ones(3) + 0
    assert_allclose(np.asarray(g(2, x)), [2.0, 2.0, 2.0])
    assert x.is_deleted()


@pytest.mark.usefixtures("donate_small")
def test_jit_donate_states():
    s = state_core.State(jnp.ones(3) + 0, name="donated")
    old = s.value  # the user holds the first value: never donated
    g = jit(lambda: _scale(s))
    g()
    assert_allclose(np.asarray(s.value), [2.0, 2.0, 2.0])
    assert not old.is_deleted()
    assert_allclose(np.asarray(old), [1.0, 1.0, 1.0])
    pointer = s.value.unsafe_buffer_pointer()
    g()  # nothing else holds the value now: updated in place
    assert_allclose(np.asarray(s.value), [4.0, 4.0, 4.0])
    assert s.value.unsafe_buffer_pointer() == pointer
    off = jit(lambda: _scale(s), donate_states=False)
    pointer = s.value.unsafe_buffer_pointer()
    off()
    assert s.value.unsafe_buffer_pointer() != pointer
    assert_allclose(np.asarray(s.value), [8.0, 8.0, 8.0])


def _scale(s):
    s.value = s.value * 2
    return None


def test_jit_pytree_arguments_and_outputs():
    g = jit(lambda d: {"sum": d["a"] + d["b"], "prod": d["a"] * d["b"]})
    out = g({"a": jnp.array(2.0), "b": jnp.array(3.0)})
    assert set(out) == {"sum", "prod"}
    assert_allclose(float(out["sum"]), 5.0)
    assert_allclose(float(out["prod"]), 6.0)


def test_jit_nested_in_jit_writes_states_once():
    s = state_core.State(jnp.zeros(()), name="nested")
    inner = jit(lambda x: _inc(s, x))
    outer = jit(lambda x: inner(x) + inner(x))
    out = outer(1.0)
    assert_allclose(float(s.value), 2.0)
    assert_allclose(float(out), 3.0)  # 1 + 2


def _inc(s, x):
    s.value = s.value + x
    return s.value


def test_jit_exception_keeps_states():
    s = state_core.State(jnp.array(1.0), name="keep")

    def f(x):
        s.value = s.value + x
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        jit(f)(1.0)
    assert float(s.value) == 1.0


# ---------------------------------------------------------------- grad
W0 = np.array([1.0, 2.0], np.float32)
X0 = np.array([3.0, 4.0], np.float32)


def _w_loss():
    w = state_core.ParamState(jnp.asarray(W0), name="w")
    b = state_core.ParamState(jnp.array(0.5), name="b")

    def loss(x):
        return jnp.sum(w.value * x) + b.value * 2.0

    return w, b, loss


def test_grad_default_argnum_0():
    g = grad(lambda x, y: jnp.sum(x**2 * y))
    assert isinstance(g, GradFunction)
    assert_allclose(np.asarray(g(jnp.array([1.0, 2.0]), 3.0)), [6.0, 12.0])


def test_grad_argnums_int_and_tuple():
    f = lambda x, y: jnp.sum(x * y**2)
    x, y = jnp.array([1.0, 2.0]), jnp.array([3.0, 4.0])
    assert_allclose(np.asarray(grad(f, argnums=1)(x, y)), [6.0, 16.0])
    gx, gy = grad(f, argnums=(0, 1))(x, y)
    assert_allclose(np.asarray(gx), [9.0, 16.0])
    assert_allclose(np.asarray(gy), [6.0, 16.0])
    (gy_only,) = grad(f, argnums=(1,))(x, y)
    assert_allclose(np.asarray(gy_only), [6.0, 16.0])


def test_grad_argnums_out_of_range():
    with pytest.raises(ValueError, match="argnums"):
        grad(lambda x: jnp.sum(x), argnums=3)(jnp.ones(2))


def test_grad_single_state():
    w, _b, loss = _w_loss()
    gw = grad(loss, grad_states=w)(jnp.asarray(X0))
    assert_allclose(np.asarray(gw), X0)
    assert_allclose(np.asarray(w.value), W0)  # not modified


def test_grad_list_of_states():
    w, b, loss = _w_loss()
    grads = grad(loss, grad_states=[w, b])(jnp.asarray(X0))
    assert isinstance(grads, list) and len(grads) == 2
    assert_allclose(np.asarray(grads[0]), X0)
    assert_allclose(float(grads[1]), 2.0)


def test_grad_dict_of_states():
    w, b, loss = _w_loss()
    grads = grad(loss, grad_states={"w": w, "b": b})(jnp.asarray(X0))
    assert set(grads) == {"w", "b"}
    assert_allclose(np.asarray(grads["w"]), X0)
    assert_allclose(float(grads["b"]), 2.0)


def test_grad_states_and_argnums():
    w, _b, loss = _w_loss()
    state_grads, arg_grad = grad(loss, grad_states=w, argnums=0)(jnp.asarray(X0))
    assert_allclose(np.asarray(state_grads), X0)
    assert_allclose(np.asarray(arg_grad), W0)


def test_grad_state_not_used_gets_zero_gradient():
    w, _b, loss = _w_loss()
    unused = state_core.ParamState(jnp.ones((2, 2)), name="unused")
    with pytest.warns(UserWarning, match="ParamState 'unused' in grad_states is never read by loss"):
        grads = grad(loss, grad_states=[w, unused])(jnp.asarray(X0))
    assert_allclose(np.asarray(grads[1]), np.zeros((2, 2)))


def test_grad_has_aux():
    w, _b, loss = _w_loss()

    def loss_aux(x):
        value = loss(x)
        return value, {"value": value, "double": value * 2}

    gw, aux = grad(loss_aux, grad_states=w, has_aux=True)(jnp.asarray(X0))
    assert_allclose(np.asarray(gw), X0)
    assert_allclose(float(aux["value"]), 12.0)
    assert_allclose(float(aux["double"]), 24.0)


def test_grad_return_value():
    w, _b, loss = _w_loss()
    gw, value = grad(loss, grad_states=w, return_value=True)(jnp.asarray(X0))
    assert_allclose(np.asarray(gw), X0)
    assert_allclose(float(value), 12.0)


def test_grad_return_value_and_has_aux():
    w, _b, loss = _w_loss()
    f = grad(lambda x: (loss(x), x.sum()), grad_states=w, argnums=0, has_aux=True, return_value=True)
    (gw, gx), value, aux = f(jnp.asarray(X0))
    assert_allclose(np.asarray(gw), X0)
    assert_allclose(np.asarray(gx), W0)
    assert_allclose(float(value), 12.0)
    assert_allclose(float(aux), 7.0)


def test_grad_decorator_form():
    _w, b, loss = _w_loss()

    @grad(grad_states=b)
    def gb(x):
        return loss(x)

    assert_allclose(float(gb(jnp.asarray(X0))), 2.0)


def test_grad_updates_states_written_inside():
    w, _b, loss = _w_loss()
    calls = state_core.LongTermState(jnp.zeros(()), name="calls")
    running = state_core.ShortTermState(jnp.zeros(2), name="running")

    def f(x):
        calls.value = calls.value + 1.0
        running.value = running.value * 0.5 + x
        return loss(x)

    g = grad(f, grad_states=w)
    gw = g(jnp.asarray(X0))
    assert_allclose(np.asarray(gw), X0)
    assert_allclose(float(calls.value), 1.0)
    assert_allclose(np.asarray(running.value), X0)
    g(jnp.asarray(X0))
    assert_allclose(float(calls.value), 2.0)
    assert_allclose(np.asarray(running.value), X0 * 1.5)
    assert not isinstance(running.value, jax.core.Tracer)


def test_grad_state_written_and_differentiated():
    w = state_core.ParamState(jnp.array(3.0), name="w_rw")

    def f(x):
        y = w.value * x
        w.value = w.value + 1.0
        return y

    gw = grad(f, grad_states=w)(2.0)
    assert_allclose(float(gw), 2.0)
    assert_allclose(float(w.value), 4.0)


def test_grad_states_type_check():
    with pytest.raises(TypeError, match="grad_states"):
        grad(lambda x: x, grad_states=[jnp.ones(2)])


def test_grad_of_jit_and_jit_of_grad():
    w, _b, loss = _w_loss()
    g1 = jit(grad(loss, grad_states=w))
    g2 = grad(jit(loss), grad_states=w)
    assert_allclose(np.asarray(g1(jnp.asarray(X0))), X0)
    assert_allclose(np.asarray(g2(jnp.asarray(X0))), X0)


def test_vmap2_of_grad_per_example_state_gradient():
    w = state_core.ParamState(jnp.array([1.0, 2.0]), name="w_pe")
    per_example = vmap2(grad(lambda x: jnp.sum(w.value * x) ** 2, grad_states=w))
    xs = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    out = per_example(xs)
    # d/dw (w.x)^2 = 2 (w.x) x
    assert_allclose(np.asarray(out), [[2.0, 0.0], [0.0, 4.0]])


def test_grad_negative_argnums():
    assert_allclose(float(grad(lambda x, y: x * y, argnums=-1)(2.0, 3.0)), 2.0)


def test_grad_tuple_of_states_keeps_structure():
    s = state_core.ParamState(jnp.arange(3.0), name="tup")
    out = grad(lambda: s.value.sum() * 2, grad_states=(s,))()
    assert isinstance(out, tuple) and len(out) == 1
    assert_allclose(np.asarray(out[0]), [2.0, 2.0, 2.0])


def test_jit_keyword_arguments():
    assert_allclose(float(jit(lambda x, y=1.0: x * y)(2.0, y=3.0)), 6.0)


# ---------------------------------------------------------------------- jit as jax.jit
def test_jit_as_method_decorator_binds_each_instance():
    from state_core import ShortTermState
    from state_transform import jit as sjit

    class Counter:
        def __init__(self, start):
            self.n = ShortTermState(jnp.asarray(start, jnp.float32))

        @sjit
        def add(self, x):
            self.n.value = self.n.value + x
            return self.n.value

    a, b = Counter(0.0), Counter(10.0)
    assert float(a.add(1.0)) == 1.0
    assert float(b.add(1.0)) == 11.0
    assert float(a.add(2.0)) == 3.0
    assert a.add is a.add  # one compiled function per instance
    assert float(b.n.value) == 11.0


def test_jit_static_argnums_on_a_method_refer_to_the_method_arguments():
    from state_transform import jit as sjit

    class Scaler:
        @sjit(static_argnums=(2,))
        def scale(self, x, times):
            return x * times

    s = Scaler()
    assert float(s.scale(2.0, 3)) == 6.0


def test_jit_lower_and_eval_shape_touch_no_state():
    from state_core import State
    from state_transform import jit as sjit

    s = State(jnp.ones(3))

    def step(x):
        s.value = s.value + x
        return s.value.sum()

    f = sjit(step)
    shape = f.eval_shape(jnp.ones(3))
    assert shape.shape == () and shape.dtype == jnp.float32
    text = f.lower(jnp.ones(3)).as_text()
    assert "add" in text
    np.testing.assert_allclose(np.asarray(s.value), [1.0, 1.0, 1.0])
    compiled = f.compile(jnp.ones(3))
    out, _ = compiled([s.value], [], jnp.ones(3))
    np.testing.assert_allclose(np.asarray(out), 6.0)
    np.testing.assert_allclose(np.asarray(s.value), [1.0, 1.0, 1.0])


def test_jit_lower_and_eval_shape_inside_an_outer_trace_write_nothing():
    from state_core import State, StatefulFunction
    from state_transform import jit as sjit

    s = State(jnp.ones(3), name="s")
    t = State(jnp.zeros(()), name="t")

    def step(x):
        s.value = s.value + x
        return s.value.sum()

    inner = sjit(step)

    def outer(x):
        inner.eval_shape(x)
        inner.lower(x)
        t.value = t.value + 1.0
        return x

    sf = StatefulFunction(outer)
    sf.make_jaxpr(jnp.ones(3))
    assert [st.name for st in sf.get_write_states()] == ["t"]
    sjit(outer)(jnp.ones(3))
    np.testing.assert_allclose(np.asarray(s.value), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(np.asarray(t.value), 1.0)


def test_jit_shardings_and_donation_apply_to_user_arguments():
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from state_core import ParamState
    from state_transform import jit as sjit

    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    sharded = NamedSharding(mesh, P("x"))
    w = ParamState(jnp.ones(()))
    n = jax.device_count()
    f = sjit(lambda x: x * w.value, in_shardings=(sharded,), out_shardings=sharded, donate_argnums=0)
    x = jax.device_put(jnp.arange(n, dtype=jnp.float32), sharded)
    out = f(x)
    assert out.sharding == sharded
    np.testing.assert_allclose(np.asarray(out), np.arange(n))
    assert x.is_deleted()
    assert not w.value.is_deleted()


def test_jit_name_origin_fun_and_stateful_fun():
    from state_core import StatefulFunction
    from state_transform import jit as sjit

    def body(x):
        return x + 1

    f = sjit(body, name="my_step")
    assert f.name == "my_step"
    assert f.origin_fun is body
    assert isinstance(f.stateful_fun, StatefulFunction)
    assert float(f(1.0)) == 2.0


def test_a_static_argname_is_static_when_passed_positionally_too():
    # jax.jit treats a static_argnames parameter the same however it is passed.
    total = state_core.State(jnp.zeros(3))
    seen = []

    def f(x, n):
        seen.append(n)
        total.value = total.value + jnp.ones(n).sum() * x
        return jnp.zeros(n) + x

    g = jit(f, static_argnames="n")
    np.testing.assert_allclose(g(1.0, 3), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(g(2.0, n=3), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(g(1.0, 3), [1.0, 1.0, 1.0])
    assert seen == [3, 3]  # traced once per way of passing it, as jax.jit does
    np.testing.assert_allclose(total.value, [12.0, 12.0, 12.0])


def test_donate_argnames_donates_that_argument():
    g = jit(lambda x, y: x * 2.0 + y, donate_argnames="x")
    assert g.donate_argnums == (0,)
    x = jnp.arange(4.0)
    np.testing.assert_allclose(g(x, 1.0), [1.0, 3.0, 5.0, 7.0])
    # Passed by keyword, the argument is not donated (a new buffer; never wrong).
    kept = jnp.arange(4.0)
    np.testing.assert_allclose(g(y=1.0, x=kept), [1.0, 3.0, 5.0, 7.0])
    np.testing.assert_allclose(kept, [0.0, 1.0, 2.0, 3.0])
