"""A first call does no avoidable work besides tracing and compiling (counted, never timed).

What a new signature costs over JAX's own ``jax.jit(jax.vmap(pure))`` first call is
measured by ``benchmarks/bench_first_call.py``; these tests pin the pieces of work
that were taken out of it.
"""

import jax
import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import state_core._stateful_function as stateful_function_module
import state_random
from state_core import BatchAxisError, ParamState, ShortTermState, State, StatefulFunction
from state_core.engine import donation_min_bytes, set_donation_min_bytes
from state_core.filter import OfType
from state_transform import grad, jit, vmap2, vmap2_new_states

SHORT = OfType(ShortTermState)


def _bank(n):
    states = [ShortTermState(jnp.zeros((4, 2)) + i, name=f"s{i}") for i in range(n)]

    def step(x):
        total = 0.0
        for s in states:
            s.value = s.value * 0.5 + x
            total = total + s.value
        return total

    return states, step


@pytest.fixture
def gate():
    before = donation_min_bytes()
    yield
    set_donation_min_bytes(before)


def test_vmap2_first_call_describes_no_state(count_calls):
    # Every mapped state used to be described (a label per state, made three times)
    # for messages that a call which succeeds never shows.
    described = count_calls(State, "describe")
    states, step = _bank(20)
    out = vmap2(step, state_in_axes={0: SHORT}, state_out_axes={0: SHORT})(jnp.ones((4, 2)))
    assert described == []
    assert_allclose(out, sum(0.5 * i + 1.0 for i in range(20)) * jnp.ones((4, 2)))
    assert_allclose(states[3].value, jnp.full((4, 2), 2.5))


def test_mismatched_mapped_sizes_still_name_the_state():
    a = ShortTermState(jnp.zeros((4, 2)), name="a")
    b = ShortTermState(jnp.zeros((3, 2)), name="b")

    def step():
        a.value = a.value + b.value.sum()

    f = vmap2(step, state_in_axes={0: SHORT}, state_out_axes={0: SHORT})
    with pytest.raises(BatchAxisError, match=r"inconsistent sizes: ShortTermState 'a'.*: 4; ShortTermState 'b'.*: 3"):
        f()
    assert_allclose(a.value, jnp.zeros((4, 2)))


def test_out_of_range_state_axis_names_the_state():
    s = ShortTermState(jnp.zeros(3), name="lonely")

    def step():
        s.value = s.value + 1

    f = vmap2(step, state_in_axes={2: SHORT}, state_out_axes={2: SHORT})
    with pytest.raises(
        ValueError, match=r"vmap2\(step\): cannot map ShortTermState 'lonely'.*\(from state_in_axes\) over axis 2"
    ):
        f()
    assert_allclose(s.value, jnp.zeros(3))


def test_state_read_and_written_on_other_axes_still_named():
    s = ShortTermState(jnp.zeros((2, 3)), name="twisted")

    def step():
        s.value = s.value + 1

    f = vmap2(step, state_in_axes={0: SHORT}, state_out_axes={1: SHORT})
    with pytest.raises(BatchAxisError, match=r"ShortTermState 'twisted'.* is mapped on axis 0 by state_in_axes"):
        f()
    assert_allclose(s.value, jnp.zeros((2, 3)))


@pytest.mark.parametrize("kind", ["jit", "vmap2", "StatefulFunction"])
def test_no_donating_program_is_built_below_the_size_gate(count_calls, kind, gate):
    # A second jax.jit object (the donating form) used to be built, then dropped.
    set_donation_min_bytes(1 << 20)
    states, step = _bank(2)
    wrap = {
        "jit": jit,
        "vmap2": lambda f: vmap2(f, state_in_axes={0: SHORT}, state_out_axes={0: SHORT}),
        "StatefulFunction": StatefulFunction,
    }[kind]
    jits = count_calls(jax, "jit")
    f = wrap(step)
    f(jnp.ones((4, 2)))
    assert len(jits) == 1
    assert f.get_traced_call() is not None
    assert_allclose(states[1].value, jnp.full((4, 2), 1.5))


def test_donating_program_still_built_above_the_gate(count_calls, gate):
    set_donation_min_bytes(0)
    states, step = _bank(2)
    jits = count_calls(jax, "jit")
    f = jit(step)
    f(jnp.ones((4, 2)))
    assert len(jits) == 2  # the program and its donating form
    assert f._last.program.donating is not None
    assert_allclose(states[0].value, jnp.ones((4, 2)))


def test_first_call_walks_the_jaxpr_for_callbacks_once(count_calls, gate):
    set_donation_min_bytes(0)
    walks = count_calls(stateful_function_module, "may_fail_at_run_time")
    states, step = _bank(3)
    jit(step)(jnp.ones((4, 2)))
    assert walks == [1]
    assert_allclose(states[2].value, jnp.full((4, 2), 2.0))


@pytest.mark.parametrize("kind", ["jit", "vmap2"])
def test_donated_buffer_takes_the_state_own_new_value(kind, gate):
    # XLA pairs a donated buffer with the first output of its shape: with the return
    # value first, the state's old buffer held the return value (and XLA compiled the
    # shifted pairing more slowly, a fifth for a thousand states).
    set_donation_min_bytes(0)
    s = State(jnp.arange(8.0).reshape(4, 2), name="s")

    def step():
        s.value = s.value * 2
        return s.value + 1

    f = jit(step) if kind == "jit" else vmap2(step, state_in_axes={0: s}, state_out_axes={0: s})
    f()
    f()
    before = s.value.unsafe_buffer_pointer()
    out = f()
    assert s.value.unsafe_buffer_pointer() == before
    assert_allclose(s.value, jnp.arange(8.0).reshape(4, 2) * 8)
    assert_allclose(out, jnp.arange(8.0).reshape(4, 2) * 8 + 1)


def _program_traces(fn, name, *args):
    """How many times JAX traces a program named ``name`` while ``fn(*args)`` runs."""
    durations = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/jaxpr_trace_duration" and kwargs.get("fun_name") == name:
            durations.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        fn(*args)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    return len(durations)


def test_first_call_traces_the_donating_program_once(gate):
    # The shape check (eval_shape) traces the form the first call runs: one trace.
    set_donation_min_bytes(0)
    states, step = _bank(3)

    def counted(x):
        return step(x)

    assert _program_traces(jit(counted), "counted", jnp.ones((4, 2))) == 1
    assert_allclose(states[0].value, jnp.ones((4, 2)))


def test_first_call_that_cannot_donate_traces_its_program_once(gate):
    # A value the user still holds is not donated: the first call runs the plain form,
    # and the shape check traced that one.
    set_donation_min_bytes(0)
    states, step = _bank(3)
    held = states[1].value

    def counted(x):
        return step(x)

    assert _program_traces(jit(counted), "counted", jnp.ones((4, 2))) == 1
    assert_allclose(held, jnp.ones((4, 2)))  # still readable: not donated
    assert_allclose(states[1].value, jnp.full((4, 2), 1.5))


def test_inline_grad_first_call_op_by_op_matches_the_compiled_calls_within_rounding():
    # A grad's first call runs op by op (no compile), the later ones compiled. Bitwise
    # equal on JAX 0.12 here; JAX 0.10's XLA fuses the compiled form differently (a few
    # float32 ulps).
    keys = jax.random.split(jax.random.key(0), 3)
    w1 = ParamState(jax.random.normal(keys[0], (16, 32)) / 4)
    w2 = ParamState(jax.random.normal(keys[1], (32, 1)) / 6)
    x = jax.random.normal(keys[2], (8, 16))

    def loss(x):
        return jnp.mean((jnp.tanh(x @ w1.value) @ w2.value - 1.0) ** 2)

    g = grad(loss, grad_states=[w1, w2])
    compiles = []

    def on_event(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration" and kwargs.get("fun_name") == "jit(grad_loss)":
            compiles.append(duration)

    jax.monitoring.register_event_duration_secs_listener(on_event)
    try:
        cold = g(x)
        assert compiles == []  # op by op
        warm = g(x)
        assert len(compiles) == 1  # compiled from the second call on
    finally:
        jax.monitoring.unregister_event_duration_listener(on_event)
    for a, b in zip(cold, warm, strict=True):
        assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_eager_one_shot_init_matches_the_compiled_mapping_within_rounding():
    # Not bitwise: XLA compiles the normal draw's inverse error function differently
    # from its op-by-op kernels (one float32 ulp here); the draws and keys are the same.
    class Layer:
        def init_all_states(self):
            self.w = ParamState(state_random.normal(0.0, 1.0, size=(4, 3)))
            self.h = ShortTermState(jnp.tanh(self.w.value).sum(0))

    state_random.seed(7)
    eager = Layer()
    vmap2_new_states(eager, axis_size=5)  # op by op
    eager_key = jax.random.key_data(state_random.DEFAULT.value)
    state_random.seed(7)
    compiled = Layer()

    def init():
        vmap2_new_states(compiled, axis_size=5)  # the compiled mapping, inside jit

    jit(init)()
    assert_array_equal(jax.random.key_data(state_random.DEFAULT.value), eager_key)
    assert_allclose(eager.w.value, compiled.w.value, rtol=0, atol=4e-7)
    assert_allclose(eager.h.value, compiled.h.value, rtol=0, atol=2e-6)
