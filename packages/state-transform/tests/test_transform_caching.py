"""Caching / performance invariants and the forms ``state_in_axes`` accepts (incl. path filters)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
from state_core.filter import OfType, PathContains
from state_transform import StatefulMapping, jit, pmap2, vmap2

SHORT = OfType(state_core.ShortTermState)


def counting_vmap():
    calls = []

    def mapping_fn(fun, **kw):
        calls.append(kw)
        return jax.vmap(fun, **kw)

    return mapping_fn, calls


# ---------------------------------------------------------------- no retrace / no rebuild on a hit
def test_cache_hit_does_not_run_user_function_or_rebuild_mapping():
    traces = []
    s = state_core.ShortTermState(jnp.zeros(3), name="acc")

    def f(x):
        traces.append(1)
        s.value = s.value + x
        return s.value * 2

    mapping_fn, built = counting_vmap()
    g = StatefulMapping(f, state_in_axes={0: SHORT}, state_out_axes={0: SHORT}, mapping_fn=mapping_fn)
    for _ in range(4):
        out = g(jnp.ones(3))
    assert len(traces) == 1
    assert len(built) == 1
    assert_allclose(np.asarray(s.value), np.full(3, 4.0))
    assert_allclose(np.asarray(out), np.full(3, 8.0))


def test_pmap2_cache_hit_does_not_retrace():
    traces = []

    def f(x):
        traces.append(1)
        return x + 1

    g = pmap2(f, axis_name="i")
    g(jnp.arange(4.0))
    out = g(jnp.arange(4.0) * 2)
    assert len(traces) == 1
    assert_allclose(np.asarray(out), [1.0, 3.0, 5.0, 7.0])


def test_new_dtype_or_structure_retraces_once_each():
    traces = []

    def f(x):
        traces.append(1)
        return jax.tree.map(lambda v: v * 2, x)

    g = vmap2(f)
    g(jnp.ones(3))
    g(jnp.ones(3, jnp.int32))
    g(jnp.ones(3, jnp.int32))
    g((jnp.ones(3), jnp.ones(3)))
    g((jnp.ones(3), jnp.ones(3)))
    assert len(traces) == 3


def test_changed_broadcast_state_shape_retraces_exactly_once():
    traces = []
    s = state_core.State(jnp.ones(3), name="table")

    def f(x):
        traces.append(1)
        return x + s.value.sum()

    g = vmap2(f)
    assert_allclose(np.asarray(g(jnp.zeros(2))), [3.0, 3.0])
    assert len(traces) == 1
    s.value = jnp.ones(5)
    assert_allclose(np.asarray(g(jnp.zeros(2))), [5.0, 5.0])
    assert len(traces) == 2
    assert_allclose(np.asarray(g(jnp.zeros(2))), [5.0, 5.0])
    assert len(traces) == 2


def test_changed_state_dtype_retraces_exactly_once():
    traces = []
    s = state_core.State(jnp.ones(2, jnp.float32), name="typed")

    def f(x):
        traces.append(1)
        return x + s.value

    g = vmap2(f)
    assert g(jnp.zeros((3, 2))).dtype == jnp.float32
    s.value = jnp.ones(2, jnp.int32) * 4
    out = g(jnp.zeros((3, 2), jnp.int32))
    assert out.dtype == jnp.int32
    assert_allclose(np.asarray(out), np.full((3, 2), 4))
    assert len(traces) == 2


def test_changed_mapped_state_size_retraces_exactly_once():
    traces = []
    s = state_core.ShortTermState(jnp.arange(3.0), name="lanes")

    def f():
        traces.append(1)
        s.value = s.value * 10
        return s.value + 1

    g = vmap2(f, in_axes=(), state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    assert_allclose(np.asarray(g()), [1.0, 11.0, 21.0])
    assert len(traces) == 1
    s.value = jnp.arange(5.0)
    assert_allclose(np.asarray(g()), [1.0, 11.0, 21.0, 31.0, 41.0])
    assert len(traces) == 2
    assert_allclose(np.asarray(s.value), [0.0, 10.0, 20.0, 30.0, 40.0])
    g()
    assert len(traces) == 2
    assert_allclose(np.asarray(s.value), [0.0, 100.0, 200.0, 300.0, 400.0])


def test_written_state_that_changes_shape_each_call():
    # the undeclared write stacks the state (shape () -> (3,)): the next call sees a new
    # state aval, retraces once feeding the stacked value per lane, and is stable afterwards
    traces = []
    s = state_core.State(jnp.zeros(()), name="grows")

    def f(x):
        traces.append(1)
        s.value = s.value + x
        return x

    g = vmap2(f)
    with pytest.warns(UserWarning, match="'grows'.*gains an axis of size 3"):
        g(jnp.arange(3.0))
    assert s.value.shape == (3,)
    g(jnp.arange(3.0))
    assert s.value.shape == (3,)  # it does not grow an axis per call
    assert_allclose(np.asarray(s.value), [0.0, 2.0, 4.0])
    g(jnp.arange(3.0))
    assert_allclose(np.asarray(s.value), [0.0, 3.0, 6.0])
    assert len(traces) == 2


def test_introspection_of_states():
    r = state_core.ParamState(jnp.ones(()), name="r")
    w = state_core.ShortTermState(jnp.zeros(2), name="w")

    def f(x):
        w.value = w.value + x * r.value
        return x

    g = vmap2(f, state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    g(jnp.ones(2))
    assert g.get_states() == [w, r]  # first-access order: w is read first (w.value + ...)
    assert g.get_read_states() == [r]
    assert g.get_write_states() == [w]


# ---------------------------------------------------------------- under outer traces
def test_closure_over_outer_tracer_is_not_reused_across_traces():
    xs = jnp.arange(3.0)

    @jax.jit
    def outer(y):
        return vmap2(lambda x: x + y)(xs)

    assert_allclose(np.asarray(outer(1.0)), [1.0, 2.0, 3.0])
    assert_allclose(np.asarray(outer(10.0)), [10.0, 11.0, 12.0])


def test_mapping_reused_under_our_jit_with_closure_tracer():
    xs = jnp.arange(3.0)
    s = state_core.State(jnp.zeros(()), name="total")

    @jit
    def outer(y):
        g = vmap2(lambda x: x * y)
        out = g(xs)
        s.value = s.value + out.sum()
        return out

    assert_allclose(np.asarray(outer(2.0)), [0.0, 2.0, 4.0])
    assert_allclose(np.asarray(outer(3.0)), [0.0, 3.0, 6.0])
    assert_allclose(float(s.value), 15.0)


def test_same_mapping_called_eagerly_and_under_jit():
    s = state_core.ShortTermState(jnp.zeros(3), name="mix")
    g = vmap2(lambda x: _add(s, x), state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    g(jnp.ones(3))
    jit(g)(jnp.ones(3))
    g(jnp.ones(3))
    assert_allclose(np.asarray(s.value), np.full(3, 3.0))
    assert not isinstance(s.value, jax.core.Tracer)


def _add(s, x):
    s.value = s.value + x
    return s.value


# ---------------------------------------------------------------- forms of state_in_axes
def test_state_in_axes_bare_filter():
    s = state_core.ShortTermState(jnp.arange(3.0), name="bare")
    p = state_core.ParamState(jnp.ones(2), name="shared")
    g = vmap2(lambda x: s.value * x + p.value.sum(), state_in_axes=SHORT)
    assert g.state_in_axes == {0: SHORT}
    assert_allclose(np.asarray(g(jnp.full(3, 2.0))), [2.0, 4.0, 6.0])


def test_state_in_axes_bare_class_is_of_type():
    g = vmap2(lambda x: x, state_in_axes=state_core.ShortTermState)
    assert g.state_in_axes == {0: OfType(state_core.ShortTermState)}


def test_state_in_axes_single_state():
    a = state_core.State(jnp.arange(3.0), name="mapped_one")
    b = state_core.State(jnp.arange(2.0), name="broadcast_one")
    g = vmap2(lambda x: a.value * x + b.value.sum(), state_in_axes=a)
    assert_allclose(np.asarray(g(jnp.ones(3))), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="inconsistent sizes"):
        vmap2(lambda x: a.value + b.value.sum(), state_in_axes=b)(jnp.ones(3))


def test_state_in_axes_list_of_states():
    a = state_core.State(jnp.arange(3.0), name="la")
    b = state_core.State(jnp.arange(3.0) * 10, name="lb")
    c = state_core.State(jnp.ones(4), name="lc")

    def f(x):
        a.value = a.value + b.value + x
        return c.value.sum() + a.value

    g = vmap2(f, state_in_axes=[a, b], state_out_axes=[a])
    out = g(jnp.ones(3))
    assert_allclose(np.asarray(out), [5.0, 16.0, 27.0])
    assert_allclose(np.asarray(a.value), [1.0, 12.0, 23.0])
    assert_allclose(np.asarray(b.value), [0.0, 10.0, 20.0])
    assert c.value.shape == (4,)


def test_state_in_axes_dict_with_none_axis_first_match_wins():
    special = state_core.ShortTermState(jnp.ones(2), name="special", tag="keep")
    batched = state_core.ShortTermState(jnp.arange(3.0), name="batched")

    def f(x):
        return batched.value * x + special.value.sum()

    g = vmap2(f, state_in_axes={None: "keep", 0: SHORT})
    assert_allclose(np.asarray(g(jnp.ones(3))), [2.0, 3.0, 4.0])
    # reversed order: the ShortTermState filter now claims `special` too -> size clash
    h = vmap2(f, state_in_axes={0: SHORT, None: "keep"})
    with pytest.raises(ValueError, match=r"(?s)special.*2"):
        h(jnp.ones(3))


# ---------------------------------------------------------------- path filters
class Layer:
    def __init__(self, n):
        self.h = state_core.ShortTermState(jnp.zeros(n))
        self.scale = state_core.ParamState(jnp.array(2.0))


class Net:
    def __init__(self):
        self.layer1 = Layer(3)
        self.layer2 = Layer(2)

    def __call__(self, x):
        self.layer1.h.value = self.layer1.h.value + x * self.layer1.scale.value
        self.layer2.h.value = self.layer2.h.value + 1.0
        return self.layer1.h.value

    def step(self, x):
        return self(x)


def _check_path_mapping(g, net):
    out = g(jnp.array([1.0, 2.0, 3.0]))
    assert_allclose(np.asarray(out), [2.0, 4.0, 6.0])
    assert_allclose(np.asarray(net.layer1.h.value), [2.0, 4.0, 6.0])
    # layer2's state is broadcast in and its lane-independent write is unbatched
    assert net.layer2.h.value.shape == (2,)
    assert_allclose(np.asarray(net.layer2.h.value), [1.0, 1.0])


def test_path_contains_filter_on_object():
    net = Net()
    g = vmap2(
        net,
        state_in_axes={0: PathContains("layer1") & OfType(state_core.ShortTermState)},
        state_out_axes={0: PathContains("layer1")},
        unexpected_out_state_mapping="raise",
    )
    _check_path_mapping(g, net)


def test_path_contains_filter_on_bound_method():
    net = Net()
    g = vmap2(
        net.step,
        state_in_axes={0: PathContains("layer1") & OfType(state_core.ShortTermState)},
        state_out_axes={0: PathContains("layer1")},
        unexpected_out_state_mapping="raise",
    )
    _check_path_mapping(g, net)


def test_path_contains_in_error_message_names_path():
    net = Net()
    g = vmap2(net, state_in_axes={0: PathContains("layer2")})
    with pytest.raises(ValueError, match=r"layer2\.h"):
        g(jnp.ones(3))


def test_path_filter_with_plain_function_matches_nothing():
    # a plain function offers no paths: PathContains never matches, states are broadcast
    net = Net()
    g = vmap2(lambda x: net.layer1.scale.value * x, state_in_axes={0: PathContains("layer1")})
    assert_allclose(np.asarray(g(jnp.ones(3))), [2.0, 2.0, 2.0])


# ---------------------------------------------------------------- axis size known only from a state
class _SizedByState:
    def __init__(self):
        self.h = state_core.ShortTermState(jnp.arange(5.0))
        self.traces = 0

    def __call__(self):
        self.traces += 1
        return self.h.value + jax.lax.psum(1, "b")


def test_axis_size_from_state_of_object_with_collective_traces_once():
    m = _SizedByState()
    g = vmap2(m, in_axes=(), axis_name="b", state_in_axes={0: SHORT})
    assert_allclose(np.asarray(g()), [5.0, 6.0, 7.0, 8.0, 9.0])
    g()
    assert m.traces == 1


def test_axis_size_from_state_read_by_plain_function_with_collective():
    s = state_core.ShortTermState(jnp.arange(5.0), name="sized")
    g = vmap2(lambda: s.value + jax.lax.psum(1, "b"), in_axes=(), axis_name="b", state_in_axes={0: SHORT})
    assert_allclose(np.asarray(g()), [5.0, 6.0, 7.0, 8.0, 9.0])


def test_python_scalar_and_float64_states_do_not_retrace_forever():
    traces = []
    p = state_core.State(1.0, name="pyfloat")
    q = state_core.State(np.ones(2), name="f64")

    def h(x):
        traces.append(1)
        return x * p.value + q.value.sum()

    g = vmap2(h)
    for _ in range(3):
        out = g(jnp.ones(3))
    assert_allclose(np.asarray(out), [3.0, 3.0, 3.0])
    assert len(traces) == 1
