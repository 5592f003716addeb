"""The direct call: a cached signature's lookup and steady call in one frame.

After a steady call with positional arrays, a function whose cache holds at most
two signatures calls them directly (``TraceCache.use_direct``). A direct call does
exactly what the general path would do, or runs nothing and hands the call over:
these tests check that it is used, that it computes the same values, and that every
case it does not serve (another signature, changed states, an open trace, NaN
checks, changed settings or object graph, keyword arguments) still behaves.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import State, StatefulFunction, environ
from state_core._cache import DIRECT_CALLS
from state_core._steady_call import DIRECT_MISS


def _served_directly(step, x):
    """``StatefulFunction(step)`` after two calls ``f(x)``: its direct call is set up."""
    f = StatefulFunction(step)
    f(x)
    f(x)
    assert f._cache._direct is not None
    return f


def _accumulator(x=None):
    """``(s, f, x, traced)``: ``f`` halves State ``s`` and adds ``x``, called twice (``x``: ones(2))."""
    s = State(jnp.zeros(2), name="s")
    traced = []

    def step(x):
        traced.append(x.shape)
        s.value = s.value * 0.5 + x
        return s.value.sum()

    x = jnp.ones(2) if x is None else x
    return s, _served_directly(step, x), x, traced


def _only_direct(f):
    """Make every entry's general steady path fail, so a call that succeeds was served directly."""

    def refuse(*args, **kwargs):
        raise AssertionError("the general path ran")

    for entry in f._cache._entries.values():
        entry.runner = refuse


def test_a_function_with_one_signature_is_served_directly_with_the_values_of_the_general_path():
    s, f, x, traced = _accumulator(jnp.array([1.0, 2.0]))
    _only_direct(f)
    expected = np.zeros(2)
    for _ in range(2):
        expected = expected * 0.5 + np.array([1.0, 2.0])
    for _ in range(5):
        out = f(x)
        expected = expected * 0.5 + np.array([1.0, 2.0])
        assert_allclose(out, expected.sum(), rtol=1e-6)
    assert_allclose(s.value, expected, rtol=1e-6)
    assert traced == [(2,)]


def test_the_direct_call_updates_a_state_held_alone_in_place_and_never_one_held_elsewhere():
    s, f, x, _ = _accumulator()
    _only_direct(f)
    before = s.value.unsafe_buffer_pointer()
    f(x)
    assert s.value.unsafe_buffer_pointer() == before
    kept = s.value
    f(x)
    assert not kept.is_deleted()
    assert_allclose(kept, [1.75, 1.75])
    assert_allclose(s.value, [1.875, 1.875])


def test_two_alternating_signatures_are_both_served_directly_and_a_third_goes_back_to_the_lookup():
    s = State(jnp.zeros(2), name="s")
    traced = []

    def step(batch):
        traced.append(batch.shape)
        s.value = s.value * 0.5 + batch.mean(0)
        return s.value.sum()

    f = StatefulFunction(step)
    a, b, c = jnp.ones((2, 2)), jnp.full((3, 2), 2.0), jnp.full((4, 2), 4.0)
    for x in (a, b, a, b):
        f(x)
    assert len(f._cache._direct_parts) == DIRECT_CALLS == 2
    runners = {key: entry.runner for key, entry in f._cache._entries.items()}
    _only_direct(f)
    s.value = jnp.zeros(2)
    f(a)
    assert_allclose(s.value, [1.0, 1.0])
    f(b)
    assert_allclose(s.value, [2.5, 2.5])
    f(a)
    assert_allclose(s.value, [2.25, 2.25])
    assert traced == [(2, 2), (3, 2)]
    for key, entry in f._cache._entries.items():
        entry.runner = runners[key]
    for x in (c, a, b, c):
        f(x)
    assert f._cache._direct is None  # three signatures: the lookup finds them
    assert_allclose(s.value, [5.890625, 5.890625])
    assert traced == [(2, 2), (3, 2), (4, 2)]


def test_a_call_of_another_arity_or_with_keywords_takes_the_general_path():
    s = State(jnp.zeros(2), name="s")

    def step(x, y=None):
        s.value = s.value + x + (0.0 if y is None else y)
        return s.value

    x = jnp.ones(2)
    f = _served_directly(step, x)
    assert f._cache._direct((x, x), "step") is DIRECT_MISS  # (it serves one array argument)
    assert_allclose(f(x, x), [4.0, 4.0])
    assert_allclose(f(x, y=x), [6.0, 6.0])
    assert_allclose(f(x), [7.0, 7.0])


def test_a_state_that_changed_shape_is_traced_again_not_run_directly():
    s, f, x, traced = _accumulator()
    s.value = jnp.zeros(3)
    with pytest.raises(TypeError):
        f(x)  # (a (3,) state with a (2,) batch: the new trace fails in the user's code)
    assert s.value.shape == (3,)
    assert traced == [(2,), (2,)]
    s.value = jnp.zeros(2)
    assert_allclose(f(x), 2.0)


def test_a_call_inside_an_outer_trace_is_recorded_by_it_not_run_directly():
    from state_core.engine import Strategy

    s, f, x, _ = _accumulator()
    outer = StatefulFunction(lambda: f(x), strategy=Strategy())
    out = outer()
    assert_allclose(out, 3.5)
    assert_allclose(s.value, [1.75, 1.75])
    assert isinstance(s.value, jax.Array) and not isinstance(s.value, jax.core.Tracer)


def test_a_call_inside_an_open_state_trace_block_is_recorded_by_it():
    from state_core import StateTraceStack

    s, f, x, _ = _accumulator()
    with StateTraceStack() as stack:
        f(x)
    assert stack.was_written(s) and stack.get_write_states() == [s]
    assert_allclose(s.value, [1.75, 1.75])


def test_nan_checks_are_made_by_the_general_path_and_keep_the_states():
    s = State(jnp.ones(2), name="s")

    def step(x):
        s.value = s.value / x
        return s.value

    x = jnp.ones(2)
    f = _served_directly(step, x)
    zero = jnp.zeros(2)
    f(zero * 0 + 1.0)
    mode = jax.config.jax_debug_nans
    jax.config.update("jax_debug_nans", True)
    try:
        s.value = jnp.zeros(2)
        with pytest.raises(FloatingPointError, match="step"):
            f(zero)  # 0 / 0
    finally:
        jax.config.update("jax_debug_nans", mode)
    assert_allclose(s.value, [0.0, 0.0])


def test_a_changed_setting_read_by_the_program_selects_its_own_program():
    s = State(jnp.zeros(2), name="s")

    def step(x):
        s.value = s.value + x * environ.get("gain", 1.0)
        return s.value

    x = jnp.ones(2)
    f = _served_directly(step, x)
    with environ.context(gain=10.0):
        assert_allclose(f(x), [12.0, 12.0])
    assert_allclose(f(x), [13.0, 13.0])


def test_a_state_created_between_calls_is_seen_through_the_object_graph():
    class Holder:
        pass

    holder = Holder()
    holder.s = State(jnp.zeros(2), name="s")

    def step(x):
        holder.s.value = holder.s.value + x
        return holder.s.value

    x = jnp.ones(2)
    f = _served_directly(step, x)
    holder.s = State(jnp.full(2, 10.0), name="s")  # another State where the function looks
    assert_allclose(f(x), [11.0, 11.0])
    assert_allclose(f(x), [12.0, 12.0])


def test_arguments_that_are_not_arrays_get_no_direct_call():
    s = State(jnp.zeros(2), name="s")

    def step(x, scale):
        s.value = s.value + x * scale
        return s.value

    f = StatefulFunction(step)
    x = jnp.ones(2)
    f(x, 2.0)
    f(x, 2.0)
    assert f._cache._direct is None
    assert_allclose(f(x, 2.0), [6.0, 6.0])


def test_a_direct_call_that_misses_its_arguments_is_made_again_by_the_next_steady_call():
    s, f, x, traced = _accumulator()
    ((_, avals, _, _),) = f._cache._direct_parts
    stale = f._cache._direct
    avals[0] = object()  # (stands for an aval object the arguments no longer have)
    assert stale((x,), "step") is DIRECT_MISS
    f(x)  # the general path runs it and sets up a direct call for this aval object
    assert f._cache._direct is not stale
    ((_, avals_now, _, _),) = f._cache._direct_parts
    assert avals_now[0] is x.aval
    _only_direct(f)
    f(x)
    assert_allclose(s.value, [1.875, 1.875])  # (four runs: the missed call ran nothing)
    assert traced == [(2,)]


def test_a_direct_call_under_a_plain_jax_trace_refuses_to_leak_and_keeps_the_state():
    from state_core import StateLeakError

    s, f, x, _ = _accumulator()
    with pytest.raises(StateLeakError, match="State 's'"):
        jax.jit(lambda y: f(x) + y)(1.0)  # (x is concrete: the direct call serves it)
    assert_allclose(s.value, [1.5, 1.5])
    assert_allclose(f(x), 3.5)
