"""pmap2 flags, nesting, collectives, and composition with jit / grad / lax control flow."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
from state_core.filter import OfType
from state_transform import StatefulMapping, grad, jit, pmap2, vmap2

SHORT = OfType(state_core.ShortTermState)


# ---------------------------------------------------------------- pmap2 flags
def test_pmap2_static_broadcasted_argnums():
    traces = []

    def f(x, power):
        traces.append(power)
        return x**power

    g = pmap2(f, axis_name="i", static_broadcasted_argnums=(1,))
    x = jnp.arange(4.0)
    assert_allclose(np.asarray(g(x, 2)), [0.0, 1.0, 4.0, 9.0])
    assert_allclose(np.asarray(g(x, 3)), [0.0, 1.0, 8.0, 27.0])
    assert_allclose(np.asarray(g(x + 1, 2)), [1.0, 4.0, 9.0, 16.0])
    assert traces == [2, 3]  # one trace per static value, none on the repeated signature


def test_pmap2_static_broadcasted_argnums_int_and_python_object():
    # a non-array static argument (a string) that selects the code path
    def f(mode, x):
        return x * 2 if mode == "double" else x + 100

    g = pmap2(f, axis_name="i", static_broadcasted_argnums=0, in_axes=(None, 0))
    assert_allclose(np.asarray(g("double", jnp.arange(3.0))), [0.0, 2.0, 4.0])
    assert_allclose(np.asarray(g("shift", jnp.arange(3.0))), [100.0, 101.0, 102.0])


def test_pmap2_donate_argnums():
    g = pmap2(lambda x, y: x + y, axis_name="i", donate_argnums=(0,))
    x = jnp.arange(4.0) + 0.0
    y = jnp.ones(4)
    out = g(x, y)
    assert_allclose(np.asarray(out), [1.0, 2.0, 3.0, 4.0])
    assert_allclose(np.asarray(y), np.ones(4))  # not donated
    out2 = g(jnp.arange(4.0), y)
    assert_allclose(np.asarray(out2), [1.0, 2.0, 3.0, 4.0])


def test_pmap2_devices_subset_and_axis_size():
    devs = jax.devices()[:2]
    w = state_core.ParamState(jnp.zeros(2), name="w")

    def f(x):
        w.value = w.value + x
        return w.value * 10

    g = pmap2(
        f,
        axis_name="i",
        devices=devs,
        axis_size=2,
        state_in_axes={0: OfType(state_core.ParamState)},
        state_out_axes={0: OfType(state_core.ParamState)},
    )
    out = g(jnp.array([1.0, 2.0]))
    assert_allclose(np.asarray(out), [10.0, 20.0])
    assert_allclose(np.asarray(w.value), [1.0, 2.0])
    assert set(out.devices()) <= set(devs)


def test_pmap2_axis_size_without_mapped_input():
    # Like jax.pmap, pmap2 needs a mapped input (issue 10); axis_size alone is not one.
    with pytest.raises(ValueError, match="pmap2: needs at least one argument with a mapped axis"):
        pmap2(lambda x: x + jnp.arange(3.0), axis_name="i", in_axes=None, axis_size=4)


def test_pmap2_psum_writes_unbatched_state():
    total = state_core.State(jnp.zeros(()), name="total")

    def f(x):
        total.value = total.value + jax.lax.psum(x, "i")
        return x

    g = pmap2(f, axis_name="i")
    g(jnp.arange(8.0))
    assert total.value.shape == ()
    assert_allclose(float(total.value), 28.0)
    g(jnp.ones(8))
    assert_allclose(float(total.value), 36.0)


def test_pmap2_axis_index_per_device():
    out = pmap2(lambda x: x + jax.lax.axis_index("d"), axis_name="d")(jnp.zeros(8, jnp.int32))
    assert_allclose(np.asarray(out), np.arange(8))


# ---------------------------------------------------------------- nesting
def test_pmap2_of_vmap2_with_states():
    acc = state_core.ShortTermState(jnp.zeros((2, 3)), name="acc")

    def inner(x):
        acc.value = acc.value + x
        return acc.value * 2

    vm = vmap2(inner, state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    pm = pmap2(vm, axis_name="i", state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    x = jnp.arange(6.0).reshape(2, 3)
    out = pm(x)
    assert_allclose(np.asarray(out), 2 * np.arange(6.0).reshape(2, 3))
    assert_allclose(np.asarray(acc.value), np.arange(6.0).reshape(2, 3))
    pm(x)
    assert_allclose(np.asarray(acc.value), 2 * np.arange(6.0).reshape(2, 3))


def test_pmap2_of_vmap2_plain_without_axis_names():
    pm = pmap2(vmap2(lambda x, y: x * y, in_axes=(0, None)), in_axes=(0, None))
    out = pm(jnp.arange(8.0).reshape(4, 2), 3.0)
    assert_allclose(np.asarray(out), 3 * np.arange(8.0).reshape(4, 2))


def test_vmap2_nested_in_vmap2_with_states():
    grid = state_core.ShortTermState(jnp.zeros((3, 4)), name="grid")
    shared = state_core.ParamState(jnp.array(10.0), name="shared")

    def cell(x):
        grid.value = grid.value + x + shared.value
        return grid.value

    inner = vmap2(cell, state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    outer = vmap2(inner, state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    x = jnp.arange(12.0).reshape(3, 4)
    out = outer(x)
    assert_allclose(np.asarray(out), np.arange(12.0).reshape(3, 4) + 10)
    assert_allclose(np.asarray(grid.value), np.arange(12.0).reshape(3, 4) + 10)
    assert float(shared.value) == 10.0


def test_vmap2_nested_inner_axis_name_collective():
    def f(x):
        return x - jax.lax.pmean(x, "inner")

    g = vmap2(vmap2(f, axis_name="inner"), axis_name="outer")
    x = jnp.array([[1.0, 3.0], [10.0, 20.0]])
    assert_allclose(np.asarray(g(x)), [[-1.0, 1.0], [-5.0, 5.0]])


# ---------------------------------------------------------------- with jit and grad
def test_vmap2_inside_our_jit_writes_states():
    acc = state_core.ShortTermState(jnp.zeros(3), name="acc")

    def step(x):
        acc.value = acc.value + x
        return acc.value.sum()

    f = jit(vmap2(step, state_in_axes={0: SHORT}, state_out_axes={0: SHORT}))
    out = f(jnp.array([1.0, 2.0, 3.0]))
    assert_allclose(np.asarray(out), [1.0, 2.0, 3.0])
    out = f(jnp.array([1.0, 1.0, 1.0]))
    assert_allclose(np.asarray(out), [2.0, 3.0, 4.0])
    assert_allclose(np.asarray(acc.value), [2.0, 3.0, 4.0])
    assert not isinstance(acc.value, jax.core.Tracer)


def test_our_jit_called_inside_vmap2():
    counter = state_core.LongTermState(jnp.zeros(()), name="counter")

    @jit
    def g(x):
        counter.value = counter.value + 1.0  # lane-independent write: stays unbatched
        return x * 2

    out = vmap2(g)(jnp.arange(3.0))
    assert_allclose(np.asarray(out), [0.0, 2.0, 4.0])
    assert counter.value.shape == ()
    assert float(counter.value) == 1.0


def test_grad_of_vmap2_with_respect_to_shared_state():
    w = state_core.ParamState(jnp.array(2.0), name="w")

    def per_example(x):
        return w.value * x**2

    batched = vmap2(per_example)
    loss = lambda xs: jnp.sum(batched(xs))
    g = grad(loss, grad_states=w)
    xs = jnp.array([1.0, 2.0, 3.0])
    assert_allclose(float(g(xs)), 14.0)
    assert float(w.value) == 2.0


def test_grad_through_vmap2_argument():
    f = grad(lambda xs: jnp.sum(vmap2(lambda x: jnp.sin(x) * x)(xs)))
    xs = jnp.array([0.0, 1.0, 2.0])
    assert_allclose(np.asarray(f(xs)), np.cos(np.asarray(xs)) * np.asarray(xs) + np.sin(np.asarray(xs)), rtol=1e-6)


# ---------------------------------------------------------------- lax control flow inside a mapped function
def test_lax_scan_inside_vmap2_writes_state():
    h = state_core.HiddenState(jnp.zeros(2), name="h")

    def run(xs):
        # plain lax.scan is not state-aware: the state's value is carried through it
        def body(carry, x):
            total, hv = carry
            hv = hv * 0.5 + x
            return (total + hv, hv), hv

        (total, h_final), trace = jax.lax.scan(body, (jnp.zeros(()), h.value), xs)
        h.value = h_final
        return total, trace

    f = vmap2(
        run, state_in_axes={0: OfType(state_core.HiddenState)}, state_out_axes={0: OfType(state_core.HiddenState)}
    )
    xs = jnp.array([[1.0, 1.0, 1.0], [2.0, 0.0, 0.0]])
    total, trace = f(xs)
    assert_allclose(np.asarray(trace), [[1.0, 1.5, 1.75], [2.0, 1.0, 0.5]])
    assert_allclose(np.asarray(total), [4.25, 3.5])
    assert_allclose(np.asarray(h.value), [1.75, 0.5])
    # second call continues from the written state
    total, trace = f(xs)
    assert_allclose(np.asarray(trace[:, 0]), [1.875, 2.25])


def test_lax_scan_inside_vmap2_undeclared_write_of_reduced_value():
    count = state_core.LongTermState(jnp.zeros(()), name="count")

    def run(xs):
        total = jax.lax.scan(lambda c, x: (c + x, None), jnp.zeros(()), xs)[0]
        count.value = count.value + jax.lax.psum(total, "b")
        return total

    f = vmap2(run, axis_name="b", unexpected_out_state_mapping="raise")
    out = f(jnp.array([[1.0, 2.0], [3.0, 4.0]]))
    assert_allclose(np.asarray(out), [3.0, 7.0])
    assert count.value.shape == ()
    assert float(count.value) == 10.0


def test_lax_cond_inside_vmap2_writes_state():
    s = state_core.ShortTermState(jnp.zeros(4), name="s")

    def f(x):
        new, flag = jax.lax.cond(
            x > 0,
            lambda v: (v + x, jnp.ones(())),
            lambda v: (v - 100.0, -jnp.ones(())),
            s.value,
        )
        s.value = new
        return flag

    g = vmap2(f, state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    out = g(jnp.array([1.0, -1.0, 2.0, -3.0]))
    assert_allclose(np.asarray(out), [1.0, -1.0, 1.0, -1.0])
    assert_allclose(np.asarray(s.value), [1.0, -100.0, 2.0, -100.0])


def test_lax_cond_on_lane_value_makes_undeclared_write_batched():
    # a broadcast state written through a cond whose predicate depends on the lane
    s = state_core.State(jnp.zeros(()), name="flagged")

    def f(x):
        s.value = jax.lax.cond(x > 0, lambda: jnp.ones(()), lambda: jnp.zeros(()))
        return x

    g = vmap2(f, unexpected_out_state_mapping="ignore")
    g(jnp.array([1.0, -1.0, 2.0]))
    assert_allclose(np.asarray(s.value), [1.0, 0.0, 1.0])


def test_lax_fori_loop_inside_pmap2_writes_state():
    s = state_core.ShortTermState(jnp.zeros(4), name="s")

    def f(x):
        s.value = jax.lax.fori_loop(0, 3, lambda i, v: v + x, s.value)
        return s.value

    g = pmap2(f, axis_name="d", state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    out = g(jnp.arange(4.0))
    assert_allclose(np.asarray(out), 3 * np.arange(4.0))
    assert_allclose(np.asarray(s.value), 3 * np.arange(4.0))


# ---------------------------------------------------------------- foreign (non state-aware) transforms
def test_plain_jax_jit_around_state_writing_vmap2_raises_state_leak():
    s = state_core.ShortTermState(jnp.arange(3.0), name="leaky")
    g = vmap2(lambda x: _bump(s, x), state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    with pytest.raises(state_core.StateLeakError, match="leaky"):
        jax.jit(g)(jnp.ones(3))
    assert not isinstance(s.value, jax.core.Tracer)
    assert_allclose(np.asarray(s.value), [0.0, 1.0, 2.0])
    # the mapping still works eagerly afterwards
    g(jnp.ones(3))
    assert_allclose(np.asarray(s.value), [1.0, 2.0, 3.0])


def _bump(s, x):
    s.value = s.value + x
    return s.value


def test_plain_jax_jit_around_read_only_vmap2_works():
    w = state_core.ParamState(jnp.array([1.0, 2.0, 3.0]), name="w")
    g = vmap2(lambda x: x * w.value)
    out = jax.jit(g)(jnp.array([1.0, 2.0]))
    assert_allclose(np.asarray(out), [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])
    out = jax.jit(g)(jnp.array([3.0, 4.0]))
    assert_allclose(np.asarray(out), [[3.0, 6.0, 9.0], [4.0, 8.0, 12.0]])
    assert_allclose(np.asarray(w.value), [1.0, 2.0, 3.0])


def test_plain_jax_vmap_around_read_only_vmap2_works():
    w = state_core.ParamState(jnp.array(2.0), name="w")
    g = vmap2(lambda x: x * w.value)
    out = jax.vmap(g)(jnp.ones((2, 3)))
    assert_allclose(np.asarray(out), np.full((2, 3), 2.0))


# ---------------------------------------------------------------- more compositions / shapes
def test_our_jit_around_pmap2_writes_states():
    s = state_core.ShortTermState(jnp.zeros(4), name="pj")

    def f(x):
        s.value = s.value + x
        return s.value

    g = jit(pmap2(f, axis_name="i", state_in_axes={0: SHORT}, state_out_axes={0: SHORT}))
    g(jnp.ones(4))
    out = g(jnp.ones(4))
    assert_allclose(np.asarray(out), np.full(4, 2.0))
    assert_allclose(np.asarray(s.value), np.full(4, 2.0))


def test_grad_through_pmap2_wrt_shared_state():
    w = state_core.ParamState(jnp.array(2.0), name="w_pm")
    loss = lambda xs: jnp.sum(pmap2(lambda x: w.value * x**2, axis_name="i")(xs))
    assert_allclose(float(grad(loss, grad_states=w)(jnp.arange(4.0))), 14.0)


def test_out_axes_tuple_with_unmapped_output():
    out = vmap2(lambda x: (x * 2, jnp.ones(2)), out_axes=(0, None))(jnp.arange(3.0))
    assert_allclose(np.asarray(out[0]), [0.0, 2.0, 4.0])
    assert out[1].shape == (2,)


def test_function_returning_none_only_writes_state():
    s = state_core.ShortTermState(jnp.zeros(3), name="none_ret")

    def f(x):
        s.value = s.value + x

    assert vmap2(f, state_in_axes={0: SHORT}, state_out_axes={0: SHORT})(jnp.ones(3)) is None
    assert_allclose(np.asarray(s.value), np.ones(3))


def test_pytree_valued_state_mapped():
    d = state_core.ShortTermState({"a": jnp.arange(3.0), "b": jnp.ones((3, 2))}, name="tree")

    def f(x):
        d.value = {"a": d.value["a"] + x, "b": d.value["b"] * x}
        return d.value["a"]

    out = vmap2(f, state_in_axes={0: SHORT}, state_out_axes={0: SHORT})(jnp.arange(3.0))
    assert_allclose(np.asarray(out), [0.0, 2.0, 4.0])
    assert_allclose(np.asarray(d.value["b"]), [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])


def test_write_changing_pytree_structure_is_error_and_restores():
    e = state_core.State(jnp.zeros(3), name="struct")

    def f(x):
        e.value = (x, x)
        return x

    with pytest.raises(ValueError, match="struct"):
        vmap2(f)(jnp.ones(3))
    assert_allclose(np.asarray(e.value), np.zeros(3))


def test_stateful_mapping_static_argnames_and_kwargs():
    traces = []

    def f(x, n=1):
        traces.append(n)
        return x * n

    sm = StatefulMapping(f, static_argnames=("n",))
    assert_allclose(np.asarray(sm(jnp.arange(3.0), n=3)), [0.0, 3.0, 6.0])
    assert_allclose(np.asarray(sm(jnp.arange(3.0), n=3)), [0.0, 3.0, 6.0])
    assert_allclose(np.asarray(sm(jnp.arange(3.0), n=2)), [0.0, 2.0, 4.0])
    assert traces == [3, 2]


def test_vmap2_spmd_axis_name_none_accepted():
    assert_allclose(np.asarray(vmap2(lambda x: x * 2, spmd_axis_name=None)(jnp.arange(3.0))), [0.0, 2.0, 4.0])


def test_vmap2_decorator_form():
    @vmap2(in_axes=(0, None))
    def f(x, y):
        return x + y

    assert isinstance(f, StatefulMapping)
    assert_allclose(np.asarray(f(jnp.arange(3.0), 1.0)), [1.0, 2.0, 3.0])


def test_pmap2_static_argnum_negative_and_in_the_middle():
    g = pmap2(lambda x, n: x * n, axis_name="i", static_broadcasted_argnums=-1)
    assert_allclose(np.asarray(g(jnp.arange(3.0), 4)), [0.0, 4.0, 8.0])
    h = pmap2(lambda x, n, y: x * n + y, axis_name="i", static_broadcasted_argnums=1, in_axes=(0, None, None))
    assert_allclose(np.asarray(h(jnp.arange(3.0), 4, 1.0)), [1.0, 5.0, 9.0])


def test_pmap2_in_axes_1_and_backend():
    g = pmap2(lambda x: x.sum(), axis_name="i", in_axes=1, backend="cpu")
    assert_allclose(np.asarray(g(jnp.arange(12.0).reshape(3, 4))), [12.0, 15.0, 18.0, 21.0])


@pytest.mark.parametrize("outer", [jax.grad, jax.vmap], ids=["jax.grad", "jax.vmap"])
def test_other_plain_jax_transforms_around_state_writing_vmap2_raise_leak(outer):
    s = state_core.ShortTermState(jnp.arange(3.0), name="leak2")
    g = vmap2(lambda x: _bump(s, x), state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    if outer is jax.grad:
        call = lambda: jax.grad(lambda x: g(x).sum())(jnp.ones(3))
    else:
        call = lambda: jax.vmap(g)(jnp.ones((2, 3)))
    with pytest.raises(state_core.StateLeakError, match="not state-aware"):
        call()
    assert_allclose(np.asarray(s.value), [0.0, 1.0, 2.0])


def test_state_write_inside_plain_lax_scan_body_is_state_leak_error():
    s = state_core.ShortTermState(jnp.zeros(3), name="inscan")

    def f(xs):
        def body(c, x):
            s.value = s.value + x  # plain lax.scan is not state-aware
            return c, None

        jax.lax.scan(body, 0.0, xs)
        return xs

    with pytest.raises(state_core.StateLeakError, match="inscan"):
        vmap2(f)(jnp.ones((2, 3)))
    assert_allclose(np.asarray(s.value), np.zeros(3))
    assert not isinstance(s.value, jax.core.Tracer)


def test_nested_pmap2_with_states_and_axis_index():
    g = state_core.ShortTermState(jnp.zeros((4, 2)), name="grid")

    def cell(x):
        g.value = g.value + x + jax.lax.axis_index("c")
        return g.value

    inner = pmap2(cell, axis_name="c", state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    outer = pmap2(inner, axis_name="r", state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    out = outer(jnp.arange(8.0).reshape(4, 2))
    expected = np.arange(8.0).reshape(4, 2) + np.array([0.0, 1.0])
    assert_allclose(np.asarray(out), expected)
    assert_allclose(np.asarray(g.value), expected)
