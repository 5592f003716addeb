"""Unit tests of StatefulFunction (state_core._stateful_function)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import (
    HiddenState,
    ParamState,
    State,
    StatefulFunction,
    StateLeakError,
    StateTraceStack,
    strict_state_checks,
)
from state_core._context import CTX
from state_core._signature import leaf_signature
from state_core.engine import Trace, open_jaxpr


def _not_tracer(x):
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x))


class Counted:
    """Wrap a function and count how often its Python body runs."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = 0
        self.__name__ = fn.__name__

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)


# ------------------------------------------------------------------------ basic calling
def test_outputs_writes_and_read_only_states():
    w = ParamState(jnp.arange(3.0), name="w")
    acc = HiddenState(jnp.zeros(3), name="acc")

    def step(x):
        acc.value = acc.value + w.value * x
        return jnp.sum(acc.value) + 1.0

    f = StatefulFunction(step)
    out1 = f(jnp.full(3, 2.0))
    assert_allclose(out1, 0 * 2 + 1 * 2 + 2 * 2 + 1.0)
    assert_allclose(acc.value, [0.0, 2.0, 4.0])
    out2 = f(jnp.ones(3))
    assert_allclose(out2, (0 + 3 + 6) + 1.0)
    assert_allclose(acc.value, [0.0, 3.0, 6.0])
    assert_allclose(w.value, [0.0, 1.0, 2.0])  # read-only: unchanged
    assert _not_tracer(acc.value) and _not_tracer(w.value)
    assert [s.name for s in f.get_states()] == ["acc", "w"]
    assert f.get_read_states() == [w]
    assert f.get_write_states() == [acc]


def test_matches_pure_computation():
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(4, 3)).astype(np.float32)
    b0 = rng.normal(size=(3,)).astype(np.float32)
    w = ParamState(jnp.asarray(w0), name="w")
    b = ParamState(jnp.asarray(b0), name="b")
    h = HiddenState(jnp.zeros(3), name="h")

    def cell(x):
        h.value = jnp.tanh(x @ w.value + b.value + 0.5 * h.value)
        return h.value * 2

    f = StatefulFunction(cell)
    h_ref = np.zeros(3, np.float32)
    for _ in range(3):
        x = rng.normal(size=(4,)).astype(np.float32)
        out = f(jnp.asarray(x))
        h_ref = np.tanh(x @ w0 + b0 + 0.5 * h_ref)
        assert_allclose(out, h_ref * 2, rtol=1e-5, atol=1e-6)
        assert_allclose(h.value, h_ref, rtol=1e-5, atol=1e-6)


def test_function_runs_once_per_signature_and_never_on_cache_hit():
    s = State(jnp.zeros(()), name="s")

    def body(x):
        s.value = s.value + jnp.sum(x)
        return x * 2

    fn = Counted(body)
    f = StatefulFunction(fn)
    f(jnp.ones(3))
    assert fn.calls == 1
    for _ in range(4):
        f(jnp.ones(3))
    assert fn.calls == 1
    assert_allclose(s.value, 15.0)
    out = f(jnp.ones((2, 2)))  # new shape -> retrace
    assert fn.calls == 2
    assert out.shape == (2, 2)
    f(jnp.ones(3, jnp.int32))  # new dtype -> retrace
    assert fn.calls == 3
    f(jnp.ones(3))
    f(jnp.ones((2, 2)))
    assert fn.calls == 3
    assert re.fullmatch(r"StatefulFunction\(body, 3 cached signature\(s\)\)", repr(f))
    f.clear_cache()
    f(jnp.ones(3))
    assert fn.calls == 4


def test_python_scalar_args_share_one_trace():
    fn = Counted(lambda x, y: x * y + 1)
    f = StatefulFunction(fn)
    assert_allclose(f(2.0, 3.0), 7.0)
    assert_allclose(f(4.0, 0.5), 3.0)
    assert fn.calls == 1
    assert_allclose(f(2, 3), 7)  # ints are a different signature
    assert fn.calls == 2
    assert f(2, 3).dtype == jnp.int32
    assert f(True, 1.0).dtype == jnp.float32
    assert fn.calls == 3


def test_pytree_args_and_kwargs():
    bias = State(jnp.zeros(2), name="bias")
    fn = Counted(
        lambda params, xs, *, scale: {
            "sum": params["a"] + params["b"][0] * xs[1] + bias.value,
            "scaled": xs[0] * scale,
        }
    )
    f = StatefulFunction(fn)
    params = {"a": jnp.ones(2), "b": (jnp.full(2, 2.0),)}
    out = f(params, (jnp.arange(2.0), jnp.full(2, 3.0)), scale=jnp.asarray(10.0))
    assert_allclose(out["sum"], [7.0, 7.0])
    assert_allclose(out["scaled"], [0.0, 10.0])
    f(params, (jnp.arange(2.0), jnp.full(2, 3.0)), scale=jnp.asarray(1.0))
    assert fn.calls == 1
    f(params, [jnp.arange(2.0), jnp.full(2, 3.0)], scale=jnp.asarray(1.0))  # list != tuple
    assert fn.calls == 2


# ------------------------------------------------------------------------ static args
def test_static_argnums():
    fn = Counted(lambda x, n: x**n if n > 1 else x)  # Python control flow on a static
    f = StatefulFunction(fn, static_argnums=1)
    assert_allclose(f(jnp.asarray(3.0), 2), 9.0)
    assert_allclose(f(jnp.asarray(2.0), 2), 4.0)
    assert fn.calls == 1
    assert_allclose(f(jnp.asarray(2.0), 3), 8.0)
    assert fn.calls == 2
    assert_allclose(f(jnp.asarray(5.0), 1), 5.0)
    assert fn.calls == 3


def test_negative_static_argnums():
    fn = Counted(lambda x, y, mode: x + y if mode == "add" else x * y)
    f = StatefulFunction(fn, static_argnums=(-1,))
    assert_allclose(f(2.0, 3.0, "add"), 5.0)
    assert_allclose(f(2.0, 3.0, "mul"), 6.0)
    assert_allclose(f(4.0, 3.0, "mul"), 12.0)
    assert fn.calls == 2
    assert f.get_arg_cache_key(1.0, 1.0, "add") == f.get_arg_cache_key(7.0, 8.0, "add")
    assert f.get_arg_cache_key(1.0, 1.0, "add") != f.get_arg_cache_key(1.0, 1.0, "mul")


def test_static_argnames():
    fn = Counted(lambda x, *, y, mode: x * y if mode == "mul" else x + y)
    f = StatefulFunction(fn, static_argnames="mode")
    assert_allclose(f(2.0, y=3.0, mode="mul"), 6.0)
    assert_allclose(f(2.0, y=5.0, mode="mul"), 10.0)
    assert_allclose(f(2.0, y=3.0, mode="add"), 5.0)
    assert fn.calls == 2
    g = StatefulFunction(lambda x, a, b: x * a + b, static_argnames=["a", "b"])
    assert_allclose(g(1.0, a=2, b=3), 5.0)


def test_unhashable_static_args_are_type_errors():
    f = StatefulFunction(lambda x, k: x, static_argnums=1)
    with pytest.raises(
        TypeError, match=r"<lambda>: static argument 1 must be hashable, got a list; pass it as a tuple"
    ):
        f(1.0, [1, 2])
    g = StatefulFunction(lambda x, *, opts: x, static_argnames="opts")
    with pytest.raises(TypeError, match=r"<lambda>: static argument 'opts' must be hashable, got a dict"):
        g(1.0, opts={"a": 1})


def test_static_argnum_out_of_range_is_value_error():
    f = StatefulFunction(lambda x, k=2: x * k, static_argnums=1)
    with pytest.raises(
        ValueError, match=r"<lambda>: static_argnums contains 1, but it was called with only 1 positional argument"
    ):
        f(1.0, k=3)


def test_bad_static_argnums_spec():
    with pytest.raises(TypeError, match="static_argnums must be an int or a sequence of ints"):
        StatefulFunction(lambda x: x, static_argnums=("a",))


def test_non_callable_is_rejected():
    with pytest.raises(TypeError, match=r"StatefulFunction expects a callable, got int\."):
        StatefulFunction(3)


# ------------------------------------------------------------------------ introspection
def test_introspection_before_tracing_is_value_error():
    f = StatefulFunction(lambda x: x, name="fresh")
    with pytest.raises(ValueError, match=r"fresh has not been traced yet"):
        f.get_states()
    with pytest.raises(ValueError, match=r"fresh has no traced program for this cache key"):
        f.get_jaxpr_by_cache(f.get_arg_cache_key(1.0))


def test_get_states_by_key_and_jaxpr_layout():
    st = State({"p": jnp.zeros(5), "q": jnp.zeros(6)}, name="st")  # 2 leaves, read-only
    out_state = HiddenState(jnp.zeros(7), name="out")  # written, never read

    def fn(x, yz):
        y, z = yz
        out_state.value = jnp.full(7, 1.0) * jnp.sum(x)
        return jnp.sum(st.value["p"]) + jnp.sum(st.value["q"]) + jnp.sum(y) + jnp.sum(z)

    f = StatefulFunction(fn)
    args = (jnp.ones(2), (jnp.ones(3), jnp.ones(4)))
    key = f.get_arg_cache_key(*args)
    assert key == f.get_arg_cache_key(jnp.zeros(2), (jnp.zeros(3), jnp.zeros(4)))
    assert key != f.get_arg_cache_key(jnp.zeros(2), (jnp.zeros(3), jnp.zeros(5)))
    f(*args)
    assert list(f.get_states_by_cache(key)) == [out_state, st]
    assert list(f.get_read_states_by_cache(key)) == [st]
    assert list(f.get_write_states_by_cache(key)) == [out_state]
    jaxpr = f.get_jaxpr_by_cache(key)
    assert jaxpr is f.make_jaxpr(*args)
    # inputs: the state leaves first (dict leaves in key order), then the argument leaves
    assert len(open_jaxpr(jaxpr).invars) == 2 + 3
    assert [v.aval.shape for v in open_jaxpr(jaxpr).invars] == [(5,), (6,), (2,), (3,), (4,)]
    # outputs: the return value's leaves, then the written state leaves
    assert len(open_jaxpr(jaxpr).outvars) == 1 + 1
    assert [v.aval.shape for v in open_jaxpr(jaxpr).outvars] == [(), (7,)]
    traced = f.get_traced_call(key)
    assert isinstance(traced, Trace)
    assert traced.in_states == (st,) and traced.out_states == (out_state,)
    assert f.get_out_shapes_by_cache(key) == jax.ShapeDtypeStruct((), jnp.float32)


def test_jaxpr_invars_count_read_and_written_state():
    s = State(jnp.zeros(3), name="s")

    def fn(x, y):
        s.value = s.value + x
        return s.value * y

    f = StatefulFunction(fn)
    jaxpr = f.make_jaxpr(jnp.ones(3), 2.0)
    assert len(open_jaxpr(jaxpr).invars) == 1 + 2
    invars = open_jaxpr(jaxpr).invars
    assert [(v.aval.shape, v.aval.dtype) for v in invars] == [((3,), jnp.float32)] * 2 + [((), jnp.float32)]
    assert len(open_jaxpr(jaxpr).outvars) == 2


def test_jaxpr_call_does_not_touch_states():
    w = ParamState(jnp.full(2, 3.0, jnp.float32), name="w")
    u = State(jnp.zeros(2), name="u")

    def fn(x):
        u.value = u.value + x * w.value
        return u.value * 2

    f = StatefulFunction(fn)
    f.make_jaxpr(jnp.ones(2))
    in_states = f.get_traced_call().in_states
    assert in_states == (u, w)  # read order: u, then w
    new_values, out = f.jaxpr_call([jnp.full(2, 5.0, jnp.float32), jnp.full(2, 2.0, jnp.float32)], jnp.ones(2))
    assert len(new_values) == 1
    assert_allclose(new_values[0], [7.0, 7.0])
    assert_allclose(out, [14.0, 14.0])
    assert_allclose(u.value, [0.0, 0.0])
    assert_allclose(w.value, [3.0, 3.0])


def test_jaxpr_call_accepts_weakly_typed_state_values():
    """Bug: jaxpr_call with a same-shape/dtype but weakly typed value raises the private _StaleTrace."""
    u = State(jnp.zeros(2), name="u")

    def fn(x):
        u.value = u.value + x
        return u.value * 2

    f = StatefulFunction(fn)
    new_values, out = f.jaxpr_call([jnp.full(2, 5.0)], jnp.ones(2))  # jnp.full(2, 5.) is weakly typed
    assert_allclose(new_values[0], [6.0, 6.0])
    assert_allclose(out, [12.0, 12.0])
    assert_allclose(u.value, [0.0, 0.0])


def test_jaxpr_call_with_wrong_state_shape_gives_clear_error():
    """Bug: a wrong-shaped state value makes jaxpr_call raise the private, message-less _StaleTrace."""
    u = State(jnp.zeros(2), name="u")

    def fn(x):
        u.value = u.value + x
        return u.value

    f = StatefulFunction(fn)
    f(jnp.ones(2))
    with pytest.raises(ValueError, match="u"):
        f.jaxpr_call([jnp.zeros(3, jnp.float32)], jnp.ones(2))


# ------------------------------------------------------------------------ tracing purity
def test_tracing_never_changes_state_values():
    a = State(jnp.arange(3.0), name="a")
    b = State(jnp.zeros(3), name="b")
    a_before, b_before = a.value, b.value

    def fn(x):
        b.value = a.value * x
        a.value = a.value + 100.0
        return b.value

    f = StatefulFunction(fn)
    jaxpr = f.make_jaxpr(jnp.ones(3))
    assert len(open_jaxpr(jaxpr).invars) == 2  # a, x  (b is written before it is read)
    assert a.value is a_before and b.value is b_before
    assert _not_tracer(a.value) and _not_tracer(b.value)
    assert f.get_write_states() == [a, b]  # first-access order: `a` is read before `b` is written
    f(jnp.full(3, 2.0))
    assert_allclose(b.value, [0.0, 2.0, 4.0])
    assert_allclose(a.value, [100.0, 101.0, 102.0])


def test_error_during_tracing_restores_states_and_propagates():
    a = State(jnp.ones(2), name="a")
    b = State(jnp.zeros(2), name="b")
    fail = {"on": True}

    class Boom(Exception):
        pass

    def fn(x):
        a.value = a.value + x
        b.value = b.value - 1.0
        if fail["on"]:
            raise Boom("user error")
        return a.value

    counted = Counted(fn)
    f = StatefulFunction(counted)
    with pytest.raises(Boom, match="user error"):
        f(jnp.ones(2))
    assert_allclose(a.value, [1.0, 1.0])
    assert_allclose(b.value, [0.0, 0.0])
    assert _not_tracer(a.value) and _not_tracer(b.value)
    assert CTX.stacks == []
    fail["on"] = False
    assert_allclose(f(jnp.ones(2)), [2.0, 2.0])  # nothing was cached for the failed trace
    assert counted.calls == 2
    assert_allclose(b.value, [-1.0, -1.0])


def test_written_state_changes_shape_between_calls_retraces():
    s = State(jnp.zeros(2), name="s")
    fn = Counted(lambda: setattr(s, "value", s.value + 1.0) or jnp.sum(s.value))
    f = StatefulFunction(fn)
    assert_allclose(f(), 2.0)
    assert_allclose(f(), 4.0)
    assert fn.calls == 1
    s.value = jnp.zeros(5)  # allowed outside strict mode
    assert_allclose(f(), 5.0)  # stale cache entry detected -> retrace
    assert fn.calls == 2
    assert_allclose(s.value, np.ones(5))
    assert_allclose(f(), 10.0)
    assert fn.calls == 2


def test_read_state_changes_shape_between_calls_retraces():
    v = State(jnp.ones(2), name="v")
    fn = Counted(lambda x: jnp.sum(v.value) * x)
    f = StatefulFunction(fn)
    assert_allclose(f(1.0), 2.0)
    v.value = jnp.ones(5)
    assert_allclose(f(1.0), 5.0)
    assert_allclose(f(2.0), 10.0)
    assert fn.calls == 2
    v.value = jnp.ones(5, jnp.int32)  # dtype change -> retrace as well
    out = f(1.0)
    assert_allclose(out, 5.0)
    assert fn.calls == 3


def test_strict_mode_applies_to_traced_writes():
    s = State(jnp.zeros(2), name="s")
    f = StatefulFunction(lambda x: setattr(s, "value", jnp.concatenate([s.value, x])) or x)
    with (
        strict_state_checks(),
        pytest.raises(
            ValueError,
            match=re.escape(
                "Strict state check failed for State 's': the state holds ShapedArray(float32[2]) "
                "but the new value is ShapedArray(float32[3])."
            ),
        ),
    ):
        f(jnp.ones(1))
    assert_allclose(s.value, [0.0, 0.0])
    f(jnp.ones(1))  # non-strict: the write may grow the state
    assert_allclose(s.value, [0.0, 0.0, 1.0])


def test_state_created_inside_is_not_an_input_or_output():
    outside = State(jnp.ones(2), name="outside")

    def fn(x):
        local = State(jnp.zeros(2), name="local")
        local.value = local.value + x
        return local.value + outside.value

    f = StatefulFunction(fn)
    assert_allclose(f(jnp.ones(2)), [2.0, 2.0])
    assert f.get_states() == [outside]
    assert f.get_write_states() == []


@pytest.mark.parametrize(
    "init",
    [1.5, np.full(2, 1.5), np.full(2, 1.5, np.float32), 3, np.arange(2)],
    ids=["py-float", "np-float64", "np-float32", "py-int", "np-int64"],
)
def test_reading_state_holding_python_scalar_or_numpy_array(init):
    """Bug: states holding Python scalars / 64-bit numpy arrays fail with the private _StaleTrace."""
    s = State(init, name="s")
    f = StatefulFunction(lambda x: s.value * x)
    assert_allclose(f(2.0), np.asarray(init) * 2.0)
    assert_allclose(f(3.0), np.asarray(init) * 3.0)


# ------------------------------------------------------------------------ nesting & stacks
def test_nested_stateful_functions():
    a = State(jnp.ones(3), name="a")
    b = State(jnp.zeros(3), name="b")

    def inner_fn(x):
        b.value = b.value + a.value * x
        return jnp.sum(b.value)

    inner_counted = Counted(inner_fn)
    inner = StatefulFunction(inner_counted)

    def outer_fn(x):
        r = inner(x)
        a.value = a.value + 1.0
        return r + inner(x)

    outer_counted = Counted(outer_fn)
    outer = StatefulFunction(outer_counted)
    # b: 0 -> 1 (r = 3), a -> 2, b -> 3 (sum 9)
    assert_allclose(outer(1.0), 12.0)
    assert_allclose(a.value, [2.0] * 3)
    assert_allclose(b.value, [3.0] * 3)
    assert inner_counted.calls == 1  # traced once, the second inner call was a cache hit
    # b: 3 -> 5 (15), a -> 3, b -> 8 (24)
    assert_allclose(outer(1.0), 39.0)
    assert outer_counted.calls == 1
    assert_allclose(b.value, [8.0] * 3)
    assert outer.get_states() == [b, a]
    assert outer.get_write_states() == [b, a]
    assert outer.get_read_states() == []


def test_inner_cached_before_outer_traces():
    a = State(jnp.full(2, 2.0), name="a")
    inner = StatefulFunction(lambda x: setattr(a, "value", a.value * x) or a.value)
    assert_allclose(inner(jnp.full(2, 3.0)), [6.0, 6.0])
    outer = StatefulFunction(lambda x: inner(x) + inner(x))
    assert_allclose(outer(jnp.full(2, 2.0)), [12.0 + 24.0] * 2)
    assert_allclose(a.value, [24.0, 24.0])
    assert outer.get_write_states() == [a]


def test_call_inside_outer_state_trace_stack_records_accesses():
    w = ParamState(jnp.ones(2), name="w")
    acc = State(jnp.zeros(2), name="acc")
    f = StatefulFunction(lambda x: setattr(acc, "value", acc.value + w.value * x) or jnp.sum(acc.value))
    f(1.0)  # cached
    with StateTraceStack() as trace:
        assert_allclose(f(1.0), 4.0)
    assert trace.get_read_states() == [w]
    assert trace.get_write_states() == [acc]
    assert_allclose(trace.original_values[0], [1.0, 1.0])
    trace.restore_original_values()
    assert_allclose(acc.value, [1.0, 1.0])


# ------------------------------------------------------------------------ control flow
def test_scan_and_cond_reading_states_inside_and_writing_outside():
    d = State(jnp.asarray(2.0), name="d")
    total = State(jnp.asarray(0.0), name="total")

    def fn(xs, flag):
        def body(carry, x):
            return carry + d.value * x, carry

        tot, ys = jax.lax.scan(body, 0.0, xs)
        picked = jax.lax.cond(flag, lambda t: t + d.value, lambda t: t - d.value, tot)
        total.value = total.value + picked
        return ys

    f = StatefulFunction(fn)
    ys = f(jnp.arange(4.0), True)
    assert_allclose(ys, [0.0, 0.0, 2.0, 6.0])
    assert_allclose(total.value, 12.0 + 2.0)
    f(jnp.arange(4.0), False)
    assert_allclose(total.value, 14.0 + 10.0)
    assert f.get_read_states() == [d]
    assert f.get_write_states() == [total]


def test_scan_carrying_state_value_explicitly():
    h = HiddenState(jnp.zeros(2), name="h")
    w = ParamState(jnp.full(2, 0.5), name="w")

    def fn(xs):
        def body(carry, x):
            new = carry * w.value + x
            return new, jnp.sum(new)

        h.value, sums = jax.lax.scan(body, h.value, xs)
        return sums

    f = StatefulFunction(fn)
    xs = jnp.ones((3, 2))
    sums = f(xs)
    ref_h, ref = np.zeros(2), []
    for x in np.ones((3, 2)):
        ref_h = ref_h * 0.5 + x
        ref.append(ref_h.sum())
    assert_allclose(sums, ref)
    assert_allclose(h.value, ref_h)


def test_writing_state_inside_plain_scan_body_is_reported_as_state_leak():
    """Gap: a write inside a jax.lax.scan body currently surfaces as jax's UnexpectedTracerError."""
    c = State(jnp.zeros(()), name="c")

    def fn(xs):
        def body(carry, x):
            c.value = c.value + x
            return carry, c.value

        return jax.lax.scan(body, 0.0, xs)[1]

    with pytest.raises(StateLeakError, match="State 'c'"):
        StatefulFunction(fn)(jnp.arange(3.0))
    assert_allclose(c.value, 0.0)


def test_writing_state_inside_plain_cond_branch_is_reported_as_state_leak():
    """Gap: a write inside a jax.lax.cond branch currently surfaces as jax's UnexpectedTracerError."""
    c = State(jnp.zeros(()), name="c")

    def fn(p):
        def true_branch(_):
            c.value = c.value + 10.0
            return c.value

        return jax.lax.cond(p, true_branch, lambda _: c.value, None)

    with pytest.raises(StateLeakError, match="State 'c'"):
        StatefulFunction(fn)(True)
    assert_allclose(c.value, 0.0)


# ------------------------------------------------------------------------ JAX transformations
def test_grad_with_read_only_states():
    w = ParamState(jnp.array([1.0, 2.0, 3.0]), name="w")
    f = StatefulFunction(lambda x: jnp.sum(w.value * x**2))
    x = jnp.array([1.0, -1.0, 2.0])
    assert_allclose(jax.grad(f)(x), 2 * np.array([1.0, 2.0, 3.0]) * np.array([1.0, -1.0, 2.0]))
    assert_allclose(f(x), 1 + 2 + 12)
    value, grad = jax.value_and_grad(f)(x)
    assert_allclose(value, 15.0)
    assert_allclose(grad, [2.0, -4.0, 12.0])
    assert_allclose(w.value, [1.0, 2.0, 3.0])


def test_jit_and_vmap_with_read_only_states():
    w = ParamState(jnp.array([1.0, 2.0]), name="w")
    f = StatefulFunction(lambda x: jnp.dot(w.value, x))
    assert_allclose(jax.jit(f)(jnp.ones(2)), 3.0)
    xs = jnp.arange(6.0).reshape(3, 2)
    assert_allclose(jax.vmap(f)(xs), xs @ np.array([1.0, 2.0]))


def test_writing_stateful_function_inside_plain_jit_is_state_leak():
    u = State(jnp.zeros(2), name="u")
    f = StatefulFunction(lambda x: setattr(u, "value", u.value + x) or u.value, name="writer")
    with pytest.raises(
        StateLeakError,
        match=r"writer writes State 'u' but was called inside a JAX transformation that is not state-aware",
    ):
        jax.jit(f)(jnp.ones(2))
    assert_allclose(u.value, [0.0, 0.0])
    assert _not_tracer(u.value)
    assert_allclose(f(jnp.ones(2)), [1.0, 1.0])  # still usable eagerly


def test_writing_stateful_function_inside_grad_is_state_leak():
    u = State(jnp.zeros(()), name="u")

    def fn(x):
        u.value = u.value + x
        return u.value * x

    with pytest.raises(StateLeakError, match="State 'u'"):
        jax.grad(StatefulFunction(fn))(2.0)
    assert_allclose(u.value, 0.0)


# ------------------------------------------------------------------------ misuse
def test_state_as_argument_is_type_error():
    s = State(jnp.zeros(2), name="s")
    f = StatefulFunction(lambda x: x, name="f")
    with pytest.raises(TypeError, match=r"f: positional argument 0 is a State \(State 's'\)") as info:
        f(s)
    assert "`state.value`" in str(info.value)
    with pytest.raises(TypeError, match=r"f: positional argument 0\['w'\] is a State \(State 's'\).*`state.value`"):
        f({"w": s})
    g = StatefulFunction(lambda x, *, k: x, name="g")
    with pytest.raises(TypeError, match=r"g: keyword argument 'k' is a State \(State 's'\)"):
        g(1.0, k=s)


def test_state_returned_is_type_error():
    s = State(jnp.zeros(2), name="s")
    f = StatefulFunction(lambda: (1.0, s), name="ret")
    with pytest.raises(TypeError, match=re.escape("The return value of ret[1] is a State (State 's')")) as info:
        f()
    assert "pass/return `state.value`" in str(info.value)
    assert_allclose(s.value, [0.0, 0.0])


def test_non_array_argument_suggests_static_argnums():
    f = StatefulFunction(lambda x, mode: x, name="f")
    with pytest.raises(
        TypeError,
        match=r"f: positional argument 1 is a str, which JAX cannot trace\..*static_argnums / static_argnames",
    ):
        f(1.0, "fast")
    assert_allclose(StatefulFunction(lambda x, mode: x * 2, static_argnums=1)(1.0, "fast"), 2.0)


# ------------------------------------------------------------------------ helpers
def test_leaf_signature():
    assert leaf_signature(jnp.ones((2, 3))) == ((2, 3), jnp.dtype("float32"), False)
    assert leaf_signature(jnp.asarray(1.0)) == ((), jnp.dtype("float32"), True)
    assert leaf_signature(1.0) is float and leaf_signature(2) is int and leaf_signature(True) is bool
    assert leaf_signature(np.zeros(3, np.int8)) == ((3,), np.dtype("int8"), False)
    with pytest.raises(TypeError):
        leaf_signature("text")
