"""A State read or written inside a plain JAX transformation is reported (warn / error / ignore)."""

import gc
import threading
import warnings
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import (
    ParamState,
    PlainTraceStateAccessWarning,
    State,
    StatefulFunction,
    StateLeakError,
    plain_trace_policy,
    plain_trace_policy_in_effect,
    set_plain_trace_policy,
)


def _recorded(fn):
    """Run ``fn`` in 'warn' mode; return its result and the PlainTraceStateAccessWarnings issued."""
    with warnings.catch_warnings(record=True) as caught, plain_trace_policy("warn"):
        warnings.simplefilter("always")
        result = fn()
    return result, [c for c in caught if issubclass(c.category, PlainTraceStateAccessWarning)]


def test_read_in_plain_jit_warns_once_per_state_naming_it_and_the_fix():
    w = ParamState(jnp.ones(2), name="weight")
    out, caught = _recorded(lambda: [jax.jit(lambda x: w.value * x)(2.0), jax.jit(lambda x: w.value + x)(2.0)])
    assert_allclose(out[0], [2.0, 2.0])
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "ParamState 'weight' was read inside a JAX transformation that is not state-aware" in message
    assert "captured as a constant" in message
    assert "writes made inside it are lost" in message
    assert "state_transform.jit / vmap2 / grad" in message
    assert "as an argument" in message
    assert caught[0].filename == __file__  # points at the user's line, not at the library


def test_the_warning_is_real_the_value_is_frozen():
    w = State(jnp.array(1.0), name="w")
    f = jax.jit(lambda x: w.value * x)
    first, caught = _recorded(lambda: f(2.0))
    w.value = jnp.array(5.0)
    assert_allclose(first, 2.0)
    assert_allclose(f(2.0), 2.0)  # the old value, as the warning said
    assert len(caught) == 1


@pytest.mark.parametrize(
    "transform",
    [
        pytest.param(lambda f: jax.vmap(f), id="vmap"),
        pytest.param(lambda f: jax.grad(lambda x: f(x).sum()), id="grad"),
        pytest.param(
            lambda f: lambda x: jax.lax.scan(lambda c, _: (c + f(x), None), jnp.zeros_like(x), None, length=2)[0],
            id="scan",
        ),
        pytest.param(lambda f: lambda x: jax.lax.cond(True, f, lambda x: x * 0, x), id="cond-eager"),
        pytest.param(lambda f: jax.jit(lambda x: jax.lax.cond(x.sum() > 0, f, lambda x: x * 0, x)), id="cond-in-jit"),
    ],
)
def test_read_in_other_plain_transformations_warns(transform):
    s = State(jnp.array(3.0), name="scale")
    _, caught = _recorded(lambda: transform(lambda x: s.value * x)(jnp.ones(2)))
    assert len(caught) == 1
    assert "State 'scale' was read" in str(caught[0].message)


def test_unnamed_state_is_named_by_type_and_value():
    s = State(jnp.zeros((2, 3)))
    _, caught = _recorded(lambda: jax.jit(lambda x: s.value + x)(1.0))
    assert "State holding ShapedArray(float32[2,3]) was read" in str(caught[0].message)


def test_concrete_write_in_plain_jit_warns_once():
    s = State(np.float32(0.0), name="counter")

    def f(x):
        s.value = np.float32(7.0)  # happens while JAX traces, never when the program is replayed
        return x

    _, caught = _recorded(lambda: [jax.jit(f)(1.0), jax.jit(f)(2.0)])
    assert len(caught) == 1
    assert "State 'counter' was written inside a JAX transformation that is not state-aware" in str(caught[0].message)
    assert "lost on every later call" in str(caught[0].message)


def test_read_and_write_are_reported_separately():
    s = State(np.float32(1.0), name="both")

    def f(x):
        y = s.value * x
        s.value = np.float32(2.0)
        return y

    _, caught = _recorded(lambda: jax.jit(f)(1.0))
    assert [("was read" in str(c.message), "was written" in str(c.message)) for c in caught] == [
        (True, False),
        (False, True),
    ]


def test_error_mode_raises_at_every_read_and_leaves_the_state_alone():
    s = State(jnp.ones(2), name="frozen")
    with plain_trace_policy("error"):
        for _ in range(2):  # not only the first time
            with pytest.raises(
                StateLeakError, match=r"State 'frozen' was read inside a JAX transformation that is not state-aware"
            ):
                jax.jit(lambda x: s.value * x)(2.0)
    assert issubclass(StateLeakError, RuntimeError)
    assert_allclose(s.value, [1.0, 1.0])


def test_error_mode_on_write_keeps_the_old_value():
    s = State(np.float32(1.0), name="kept")

    def f(x):
        s.value = np.float32(9.0)
        return x

    with plain_trace_policy("error"), pytest.raises(StateLeakError, match="'kept' was written"):
        jax.jit(f)(1.0)
    assert_allclose(s.value, 1.0)


def test_ignore_mode_is_silent():
    s = State(jnp.arange(3.0), name="table")
    with warnings.catch_warnings(record=True) as caught, plain_trace_policy("ignore"):
        warnings.simplefilter("always")
        out = jax.jit(lambda i: s.value[i])(1)
    assert_allclose(out, 1.0)
    assert not [c for c in caught if issubclass(c.category, PlainTraceStateAccessWarning)]


def test_process_wide_policy_is_returned_and_restored_and_the_block_wins():
    before = set_plain_trace_policy("ignore")
    try:
        assert plain_trace_policy_in_effect() == "ignore"
        with plain_trace_policy("error"):
            assert plain_trace_policy_in_effect() == "error"
        assert plain_trace_policy_in_effect() == "ignore"
    finally:
        assert set_plain_trace_policy(before) == "ignore"
    assert plain_trace_policy_in_effect() == before


def test_block_policy_is_per_thread():
    process_wide = plain_trace_policy_in_effect()
    seen = []
    with plain_trace_policy("ignore" if process_wide != "ignore" else "error"):
        worker = threading.Thread(target=lambda: seen.append(plain_trace_policy_in_effect()))
        worker.start()
        worker.join()
        assert plain_trace_policy_in_effect() != process_wide
    assert seen == [process_wide]


@pytest.mark.parametrize("mode", ["loud", None, "WARN"])
def test_unknown_mode_is_a_value_error(mode):
    with pytest.raises(ValueError, match=r"set_plain_trace_policy: mode must be one of 'warn', 'error' or 'ignore'"):
        set_plain_trace_policy(mode)
    with pytest.raises(ValueError, match=r"plain_trace_policy: mode must be one of"), plain_trace_policy(mode):
        pass


def test_no_report_outside_traces():
    s = State(jnp.ones(2), name="eager")
    with warnings.catch_warnings(), plain_trace_policy("error"):
        warnings.simplefilter("error")
        s.value = s.value * 2
    assert_allclose(s.value, [2.0, 2.0])


def test_no_report_under_our_own_trace():
    s = State(jnp.ones(2), name="counted")

    def step(x):
        s.value = s.value + x
        return s.value.sum()

    f = StatefulFunction(step)
    with plain_trace_policy("error"):
        assert_allclose(f(jnp.ones(2)), 4.0)
        assert_allclose(f(jnp.ones(2)), 6.0)
    assert_allclose(s.value, [3.0, 3.0])


def test_no_report_for_states_created_inside_the_plain_trace():
    def f(x):
        local = State(x * 2, name="local")
        concrete = State(np.float32(3.0), name="concrete")
        local.value = local.value + concrete.value
        concrete.value = np.float32(4.0)
        return local.value

    with plain_trace_policy("error"):
        assert_allclose(jax.jit(f)(1.0), 5.0)


def test_no_report_under_ensure_compile_time_eval():
    s = State(jnp.array(2.0), name="folded")

    def f(x):
        with jax.ensure_compile_time_eval():
            factor = s.value * 3  # computed now, on purpose
        return x * factor

    with plain_trace_policy("error"):
        assert_allclose(jax.jit(f)(1.0), 6.0)


def test_traced_value_is_not_reported_as_frozen():
    # A state that holds a tracer of the running trace freezes nothing when read.
    s = State(jnp.zeros(()), name="carry")

    def f(x):
        s.restore_value(x)
        try:
            return s.value * 2
        finally:
            s.restore_value(jnp.zeros(()))

    with plain_trace_policy("error"):
        assert_allclose(jax.jit(f)(3.0), 6.0)


def _warn_about_a_new_state():
    temporary = State(jnp.ones(1), name="temporary")
    _, caught = _recorded(lambda: jax.jit(lambda x: temporary.value + x)(1.0))
    assert len(caught) == 1
    return weakref.ref(temporary)


def test_warned_set_does_not_keep_states_alive():
    ref = _warn_about_a_new_state()
    gc.collect()
    assert ref() is None


def test_fast_trace_probe_agrees_with_the_public_api():
    # The probe State.value uses on every read must say what jax.extend.core says.
    from state_core._jax_internals import EVAL_TRACE, TRACE_STATE, current_trace

    assert TRACE_STATE.value is EVAL_TRACE
    assert current_trace() is EVAL_TRACE
    seen = []

    @jax.jit
    def f(x):
        seen.append((TRACE_STATE.value is EVAL_TRACE, TRACE_STATE.value is current_trace()))
        return x

    f(1.0)
    assert seen == [(False, True)]
    assert TRACE_STATE.value is EVAL_TRACE
