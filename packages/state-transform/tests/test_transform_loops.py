"""State-aware scan / for_loop / fori_loop / while_loop / map: values, states, trace counts, errors."""

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
import state_random
from state_core import State, StateTraceStack
from state_transform import for_loop, fori_loop, jit, map, scan, while_loop


# ---------------------------------------------------------------- scan
def test_scan_matches_lax_scan_and_writes_final_state():
    acc = State(jnp.zeros(3), name="acc")
    scale = State(jnp.array([1.0, 2.0, 3.0]), name="scale")

    def f(c, x):
        acc.value = acc.value * 0.5 + x * scale.value
        return c + acc.value.sum(), acc.value

    xs = jnp.arange(12.0).reshape(4, 3)
    carry, ys = scan(f, 0.0, xs)

    def pure(carry, x):
        c, a = carry
        a = a * 0.5 + x * jnp.array([1.0, 2.0, 3.0])
        return (c + a.sum(), a), a

    (c_ref, a_ref), ys_ref = jax.lax.scan(pure, (0.0, jnp.zeros(3)), xs)
    assert_allclose(carry, c_ref, rtol=1e-6)
    assert_allclose(ys, ys_ref, rtol=1e-6)
    assert_allclose(acc.value, a_ref, rtol=1e-6)
    assert_allclose(scale.value, [1.0, 2.0, 3.0])


def test_scan_reverse_length_and_no_xs():
    s = State(jnp.zeros(()), name="s")

    def f(c, x):
        s.value = s.value * 10 + x
        return c, s.value

    _, ys = scan(f, None, jnp.arange(1.0, 4.0), reverse=True)
    assert_allclose(ys, [321.0, 32.0, 3.0])
    assert_allclose(s.value, 321.0)

    def g(c, _):
        s.value = s.value + 1
        return c + 1, None

    c, ys = scan(g, 0, None, length=5)
    assert int(c) == 5 and ys is None
    assert_allclose(s.value, 326.0)


def test_read_only_states_are_invariants_not_written():
    w = State(jnp.ones(2), name="w")
    h = State(jnp.zeros(2), name="h")

    def step(x):
        h.value = h.value + w.value * x
        return h.value

    with StateTraceStack() as trace:
        for_loop(step, jnp.arange(3.0))
    assert [s.name for s in trace.get_write_states()] == ["h"]
    assert {s.name for s in trace.get_read_states()} == {"w"}
    assert_allclose(h.value, [3.0, 3.0])


def test_body_traced_once_per_signature():
    v = State(jnp.zeros(()), name="v")
    traces = []

    def step(x):
        traces.append(1)
        v.value = v.value + x
        return v.value

    for_loop(step, jnp.arange(3.0))
    for_loop(step, jnp.arange(3.0) + 1)
    assert len(traces) == 1
    for_loop(step, jnp.arange(5.0))  # new length: the body signature is the same
    assert len(traces) == 1
    for_loop(step, jnp.arange(5))  # new dtype: new signature
    assert len(traces) == 2
    assert_allclose(v.value, 3.0 + 6.0 + 10.0 + 10.0)


def test_scan_inside_jit_traces_once():
    v = State(jnp.zeros(2), name="v")
    traces = []

    def step(c, x):
        traces.append(1)
        v.value = v.value + x
        return c, None

    @jit
    def run(xs):
        scan(step, 0.0, xs)
        return v.value.sum()

    assert_allclose(run(jnp.ones((4, 2))), 8.0)
    assert_allclose(run(jnp.ones((4, 2))), 16.0)
    assert len(traces) == 1
    assert_allclose(v.value, [8.0, 8.0])


# ---------------------------------------------------------------- random keys are carries
def test_random_state_in_loop_is_bit_exact_with_python_loop():
    def make():
        rng = state_random.RandomState(7)
        v = State(jnp.zeros(4), name="v")

        def step(t):
            noise = rng.normal(size=(4,))
            v.value = v.value * 0.9 + noise + t
            return noise

        return rng, v, step

    rng, v, step = make()
    ys = for_loop(step, jnp.arange(5.0))
    rng2, v2, step2 = make()
    eager = [step2(jnp.float32(t)) for t in range(5)]
    # The draws are bit-exact; arithmetic on them may be fused differently when compiled.
    np.testing.assert_array_equal(np.asarray(ys), np.asarray(jnp.stack(eager)))
    assert_allclose(v.value, v2.value, rtol=1e-6)
    np.testing.assert_array_equal(
        np.asarray(jax.random.key_data(rng.value)), np.asarray(jax.random.key_data(rng2.value))
    )


def test_default_random_state_draws_fresh_numbers_per_step():
    state_random.seed(3)
    ys = for_loop(lambda t: state_random.normal(size=(2,)), jnp.arange(4))
    assert len({tuple(np.asarray(y).tolist()) for y in ys}) == 4
    state_random.seed(3)
    eager = jnp.stack([state_random.normal(size=(2,)) for _ in range(4)])
    np.testing.assert_array_equal(np.asarray(ys), np.asarray(eager))


# ---------------------------------------------------------------- errors and transactions
def test_state_changing_shape_is_an_error_naming_it_and_state_untouched():
    buf = State(jnp.zeros(3), name="buf")

    def step(x):
        buf.value = jnp.concatenate([buf.value, x[None]])
        return x

    with pytest.raises(ValueError, match=r"buf.*float32\[4\].*float32\[3\]"):
        for_loop(step, jnp.arange(2.0))
    assert_allclose(buf.value, np.zeros(3))


def test_trace_time_failure_leaves_states_untouched():
    a = State(jnp.ones(2), name="a")

    def step(x):
        a.value = a.value + x
        raise RuntimeError("body failed while tracing")

    with pytest.raises(RuntimeError, match="body failed while tracing"):
        for_loop(step, jnp.arange(3.0))
    assert_allclose(a.value, [1.0, 1.0])


def _explode(x):
    raise RuntimeError("runtime failure inside the loop")


def test_runtime_failure_leaves_states_untouched():
    a = State(jnp.ones(2), name="a")
    rng = state_random.RandomState(0)
    key_before = np.asarray(jax.random.key_data(rng.value))

    def step(x):
        a.value = a.value + x + rng.uniform()
        return jax.pure_callback(_explode, jax.ShapeDtypeStruct((), jnp.float32), x)

    with pytest.raises(Exception, match="runtime failure inside the loop"):
        jax.block_until_ready(for_loop(step, jnp.arange(3.0)))
    assert_allclose(a.value, [1.0, 1.0])
    np.testing.assert_array_equal(np.asarray(jax.random.key_data(rng.value)), key_before)


def test_leading_axis_mismatch_names_sizes():
    with pytest.raises(ValueError, match=r"xs\[0\] has 3, xs\[1\] has 4"):
        for_loop(lambda a, b: a + b, jnp.zeros(3), jnp.zeros(4))
    with pytest.raises(ValueError, match="length=5"):
        scan(lambda c, x: (c, x), 0.0, jnp.zeros(3), length=5)
    with pytest.raises(ValueError, match="scalar"):
        for_loop(lambda a: a, jnp.float32(1.0))


def test_scan_body_must_return_pair():
    with pytest.raises(TypeError, match=r"scan: the body must return a pair \(carry, y\)"):
        scan(lambda c, x: c + x, 0.0, jnp.zeros(3))


def test_state_resized_between_calls_retraces():
    h = State(jnp.zeros(2), name="h")
    traces = []

    def step(x):
        traces.append(1)
        h.value = h.value + x
        return h.value.sum()

    for_loop(step, jnp.ones(2))
    h.value = jnp.zeros(5)  # e.g. reset_state(batch_size=5)
    ys = for_loop(step, jnp.ones(2))
    assert len(traces) == 2
    assert_allclose(ys, [5.0, 10.0])
    assert_allclose(h.value, 2 * np.ones(5))


# ---------------------------------------------------------------- fori_loop / while_loop
def test_fori_loop_concrete_and_traced_bounds_match_lax():
    s = State(jnp.zeros(()), name="s")

    def body(i, c):
        s.value = s.value + i
        return c * 2.0

    out = fori_loop(2, 6, body, 1.0)
    assert_allclose(out, jax.lax.fori_loop(2, 6, lambda i, c: c * 2.0, 1.0))
    assert_allclose(s.value, 2 + 3 + 4 + 5)

    @jit
    def traced(n):
        return fori_loop(0, n, body, 1.0)

    assert_allclose(traced(3), 8.0)
    assert_allclose(s.value, 14 + 0 + 1 + 2)


def test_fori_loop_is_differentiable_with_concrete_bounds():
    def loss(w):
        return fori_loop(0, 3, lambda i, c: c * w, 1.0)

    assert_allclose(jax.grad(loss)(2.0), 3 * 2.0**2)


def test_while_loop_cond_reads_carried_state():
    x = State(jnp.array(1.0), name="x")
    n_reads = State(jnp.array(10.0), name="limit")

    def body(n):
        x.value = x.value * 2
        return n + 1

    n = while_loop(lambda n: x.value < n_reads.value, body, 0)
    assert int(n) == 4
    assert_allclose(x.value, 16.0)
    assert_allclose(n_reads.value, 10.0)


def test_while_loop_cond_writing_state_is_an_error():
    counter = State(jnp.zeros(()), name="counter")

    def cond(n):
        counter.value = counter.value + 1
        return n < 3

    with pytest.raises(ValueError, match=r"cond_fun writes .*counter"):
        while_loop(cond, lambda n: n + 1, 0)
    assert_allclose(counter.value, 0.0)


def test_while_loop_cond_must_return_bool_scalar():
    with pytest.raises(TypeError, match="cond_fun must return a boolean scalar"):
        while_loop(lambda n: n, lambda n: n + 1, 0)


# ---------------------------------------------------------------- map
def test_map_sequential_and_batched_match_lax_map():
    calls = State(jnp.zeros((), jnp.int32), name="calls")
    w = State(jnp.array(3.0), name="w")

    def f(x):
        calls.value = calls.value + 1
        return x * w.value

    xs = jnp.arange(7.0)
    assert_allclose(map(f, xs), jax.lax.map(lambda x: x * 3.0, xs))
    assert int(calls.value) == 7
    assert_allclose(map(lambda x: x * w.value, xs, batch_size=3), xs * 3.0)
    assert_allclose(map(lambda a, b: a + b, xs, xs, batch_size=7), 2 * xs)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        map(f, xs, batch_size=0)


# ---------------------------------------------------------------- nesting
def test_nested_loops():
    total = State(jnp.zeros(()), name="total")

    def inner(j):
        total.value = total.value + j
        return total.value

    def outer(i):
        ys = for_loop(inner, jnp.arange(3.0) + i)
        return ys[-1]

    ys = for_loop(outer, jnp.arange(2.0))
    # inner adds 0+1+2=3, then 1+2+3=6
    assert_allclose(ys, [3.0, 9.0])
    assert_allclose(total.value, 9.0)


def test_state_leak_error_points_to_state_aware_scan():
    s = State(jnp.zeros(()), name="leaky")

    def body(c, x):
        s.value = s.value + x
        return c, None

    @jit
    def plain(xs):
        jax.lax.scan(body, 0.0, xs)

    with pytest.raises(state_core.StateLeakError, match=r"(?s)leaky.*state_transform\.scan / for_loop"):
        plain(jnp.ones(3))
    assert_allclose(s.value, 0.0)

    @jit
    def aware(xs):
        scan(body, 0.0, xs)

    aware(jnp.ones(3))
    assert_allclose(s.value, 3.0)


def test_pbar_is_brainstates_name_for_progress_bar():
    with pytest.raises(TypeError, match="progress_bar must be"):
        for_loop(lambda t: t, jnp.arange(3), pbar="yes")


# ---------------------------------------------------------------- states local to a body
# A State the body creates and uses only there is local to the body (brainstate and
# flax NNX run such bodies): its reads and writes are traced values of one step.
def test_scan_body_with_local_scratch_state_matches_lax_scan():
    acc = State(jnp.zeros(2), name="acc")
    traces = []

    def f(c, x):
        traces.append(1)
        scratch = state_core.ShortTermState(c * 2.0)  # its value depends on the carry
        scratch.value = scratch.value + x
        acc.value = acc.value + scratch.value
        return scratch.value, scratch.value.sum()

    xs = jnp.arange(6.0).reshape(3, 2)
    carry, ys = scan(f, jnp.ones(2), xs)
    carry2, _ = scan(f, jnp.ones(2), xs)

    def pure(state, x):
        c, a = state
        s = c * 2.0 + x
        return (s, a + s), s.sum()

    (c_ref, a_ref), ys_ref = jax.lax.scan(pure, (jnp.ones(2), jnp.zeros(2)), xs)
    assert_allclose(carry, c_ref, rtol=1e-6)
    assert_allclose(carry2, c_ref, rtol=1e-6)
    assert_allclose(ys, ys_ref, rtol=1e-6)
    assert_allclose(acc.value, 2 * np.asarray(a_ref), rtol=1e-6)
    assert len(traces) == 1  # traced once for both calls


def test_for_loop_body_with_local_state_matches_lax_scan():
    total = State(jnp.zeros(()), name="total")

    def body(x):
        sq = state_core.ShortTermState(jnp.zeros(3))  # a scratch variable, born concrete
        sq.value = sq.value + x**2
        sq.value = sq.value * 0.5
        total.value = total.value + sq.value.sum()
        return sq.value

    xs = jnp.arange(12.0).reshape(4, 3)
    ys = for_loop(body, xs)

    def pure(t, x):
        s = x**2 * 0.5
        return t + s.sum(), s

    t_ref, ys_ref = jax.lax.scan(pure, jnp.zeros(()), xs)
    assert_allclose(ys, ys_ref, rtol=1e-6)
    assert_allclose(total.value, t_ref, rtol=1e-6)


def test_fori_loop_with_known_and_traced_bounds_and_a_local_state():
    def body(i, c):
        tmp = State(c + i, name="tmp")
        tmp.value = tmp.value * 0.5
        return tmp.value

    def pure(i, c):
        return (c + i) * 0.5

    ref = jax.lax.fori_loop(0, 6, pure, jnp.float32(1.0))
    assert_allclose(fori_loop(0, 6, body, jnp.float32(1.0)), ref, rtol=1e-6)

    @jit
    def traced_bounds(n):  # bounds known only at run time: one lax.while_loop
        return fori_loop(0, n, body, jnp.float32(1.0))

    assert_allclose(traced_bounds(jnp.int32(6)), ref, rtol=1e-6)


def test_while_loop_body_and_cond_with_local_states():
    steps = State(jnp.zeros((), jnp.int32), name="steps")

    def cond_fun(c):
        limit = State(jnp.float32(20.0), name="limit")  # local to the condition
        return c < limit.value

    def body_fun(c):
        step = State(c + 1.0, name="step")
        step.value = step.value * 1.5
        steps.value = steps.value + 1
        return step.value

    out = while_loop(cond_fun, body_fun, jnp.float32(0.0))
    ref = jax.lax.while_loop(lambda c: c < 20.0, lambda c: (c + 1.0) * 1.5, jnp.float32(0.0))
    n_ref = 0
    c = 0.0
    while c < 20.0:
        c, n_ref = (c + 1.0) * 1.5, n_ref + 1
    assert_allclose(out, ref, rtol=1e-6)
    assert int(steps.value) == n_ref


def test_loop_body_builds_a_local_module_as_plain_python_would():
    import state_nn

    def body(c, x):
        layer = state_nn.Linear(2, 2)  # weights drawn from state_random's default stream
        return c + layer(x), None

    xs = jnp.arange(6.0).reshape(3, 2)
    state_random.seed(7)
    out, _ = scan(body, jnp.zeros(2), xs)
    key_after = jax.random.key_data(state_random.DEFAULT.value)

    state_random.seed(7)
    with jax.disable_jit():  # the same body run step by step in Python
        ref, _ = scan(body, jnp.zeros(2), xs)
    assert_allclose(out, ref, rtol=1e-5)
    np.testing.assert_array_equal(key_after, jax.random.key_data(state_random.DEFAULT.value))

    def with_weights(c, x):  # a module whose parameters depend on the carry
        layer = state_nn.Linear(2, 2, w_init=jnp.eye(2) * c.sum(), b_init=jnp.ones(2))
        return layer(x) * 0.1, None

    out, _ = scan(with_weights, jnp.ones(2), xs)
    ref, _ = jax.lax.scan(lambda c, x: ((x @ (jnp.eye(2) * c.sum()) + 1.0) * 0.1, None), jnp.ones(2), xs)
    assert_allclose(out, ref, rtol=1e-6)


def test_loop_body_builds_a_local_param_module():
    import state_nn

    def body(i, c):
        p = state_nn.Param(c + 1.0, t=state_nn.SoftplusT(0.0), reg=state_nn.L2Reg(0.5))
        return p.value() * 0.5 + p.reg_loss()

    out = fori_loop(0, 4, body, jnp.ones(2))
    ref = jax.lax.fori_loop(0, 4, lambda i, c: (c + 1.0) * 0.5 + 0.5 * jnp.sum((c + 1.0) ** 2), jnp.ones(2))
    assert_allclose(out, ref, rtol=1e-5)


def test_local_states_are_reported_by_no_enclosing_catch_new_states_block():
    with state_core.catch_new_states() as caught:
        outside = State(jnp.ones(()), name="outside")
        ys = for_loop(lambda x: State(x * 2 + outside.value, name="local").value, jnp.arange(3.0))
    assert [s.name for s in caught] == ["outside"]
    assert_allclose(ys, [1.0, 3.0, 5.0])


def test_loop_refuses_a_state_its_body_keeps_on_an_outer_object():
    class Model:
        def __init__(self):
            self.total = State(jnp.zeros(()), name="total")

        def step(self, x):
            self.cache = State(x * 2, name="cache")
            self.total.value = self.total.value + self.cache.value

    model = Model()
    with pytest.raises(
        ValueError,
        match=r"(?s)for_loop: the body creates State 'cache' and keeps it at path 'cache' of the Model.*"
        r"Create it before the for_loop .*pass its value out through the carry",
    ):
        for_loop(model.step, jnp.arange(3.0))
    assert_allclose(model.total.value, 0.0)


def test_loop_refuses_a_state_its_body_appends_to_an_outer_list_or_variable():
    total = State(jnp.zeros(()), name="total")
    kept = []

    def append(c, x):
        s = state_core.ShortTermState(c + x, name="scratch")
        kept.append(s)
        total.value = total.value + s.value
        return s.value, None

    with pytest.raises(ValueError, match=r"scan: the body creates ShortTermState 'scratch' and keeps it at path '0'"):
        scan(append, 0.0, jnp.arange(3.0))
    assert_allclose(total.value, 0.0)

    last = None

    def remember(i, c):
        nonlocal last
        last = State(c + i, name="last")
        return last.value

    with pytest.raises(ValueError, match=r"fori_loop: the body creates State 'last' and keeps it in a variable"):
        fori_loop(0, 3, remember, 0.0)


def test_loop_refuses_a_state_its_body_returns():
    def body(x):
        return State(x, name="out")

    with pytest.raises(TypeError, match=r"for_loop: the body is a State \(State 'out'\)"):
        for_loop(body, jnp.arange(3.0))


def test_a_local_state_read_after_the_loop_raises():
    # Kept through a route the loop cannot see (a class attribute filled by a helper):
    # reading it afterwards is refused, naming the state, the loop and the fix.
    class Registry:
        items: ClassVar[list[State]] = []

        @classmethod
        def add(cls, state):
            cls.items.append(state)

    def body(x):
        s = State(x * 2, name="scratch")
        Registry.add(s)
        return s.value

    assert_allclose(for_loop(body, jnp.arange(3.0)), [0.0, 2.0, 4.0])
    with pytest.raises(
        state_core.StateLeakError,
        match=r"(?s)State 'scratch' was created .*local to the body of for_loop.*through a loop's carry",
    ):
        _ = Registry.items[0].value
