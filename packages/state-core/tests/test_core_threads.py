"""Tracing is per thread: tracers a trace swaps into states are invisible to other threads."""

import threading
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import State, StatefulFunction, StateTraceStack
from state_core._context import CTX, PRIVATE_THREADS
from state_core._jax_internals import is_eager, is_tracer
from state_core._trace import private_state_values


def _run_in_thread(target):
    """Run ``target`` in a new thread; ``.result(timeout)`` on the returned future re-raises its error."""
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(target)
    pool.shutdown(wait=False)
    return future


def test_reader_thread_never_sees_a_tracer_while_another_thread_traces():
    s = State(jnp.arange(3.0), name="s")
    in_trace = threading.Event()
    release = threading.Event()

    def f(x):
        s.value = s.value + x  # s now holds a tracer for the tracing thread
        in_trace.set()
        assert release.wait(30)
        return s.value * 2

    sf = StatefulFunction(f)
    tracer_thread = _run_in_thread(lambda: sf.trace(1.0))
    assert in_trace.wait(30)
    seen = []
    for _ in range(2000):  # hammer the state while the trace is paused mid-function
        v = s.value
        seen.append(is_tracer(v) or is_tracer(s._value))
        assert_allclose(v, [0.0, 1.0, 2.0])
    release.set()
    tracer_thread.result(30)
    assert not any(seen)
    # The trace recorded the read and the write, and the state is untouched.
    entry = sf.get_traced_call()
    assert [st.name for st in entry.out_states] == ["s"]
    assert_allclose(s.value, [0.0, 1.0, 2.0])
    assert PRIVATE_THREADS[0] == 0


def test_tracing_thread_sees_its_own_tracers():
    s = State(jnp.ones(2))
    seen = {}

    def f():
        seen["read"] = is_tracer(s.value)
        s.value = s.value * 3
        seen["after_write"] = is_tracer(s.value)
        return s.value

    StatefulFunction(f).trace()
    assert seen == {"read": True, "after_write": True}
    assert not is_tracer(s.value)
    assert_allclose(s.value, [1.0, 1.0])


def test_several_threads_trace_their_own_functions_and_states_at_once():
    n_threads = 6
    barrier = threading.Barrier(n_threads)
    results = {}

    def work(i):
        s = State(jnp.full((2,), float(i)), name=f"s{i}")

        def f(x):
            barrier.wait(30)  # every thread is inside its trace at the same time
            s.value = s.value * x + i
            return s.value.sum()

        sf = StatefulFunction(f)
        entry = sf.trace(2.0)
        state_values, out = sf.jaxpr_call([s.value], 2.0)
        results[i] = (entry.out_states[0] is s, float(out), np.asarray(state_values[0]), np.asarray(s.value))

    threads = [_run_in_thread(lambda i=i: work(i)) for i in range(n_threads)]
    for thread in threads:
        thread.result(60)
    for i in range(n_threads):
        same, out, new_value, kept = results[i]
        assert same
        assert out == pytest.approx(2 * (2.0 * i + i))
        assert_allclose(new_value, [3.0 * i, 3.0 * i])
        assert_allclose(kept, [float(i), float(i)])  # tracing never writes the state


def test_private_values_are_dropped_at_the_end_and_blocks_nest():
    s = State(jnp.zeros(1))
    with private_state_values():
        s.restore_value(jnp.ones(1))
        with private_state_values():  # nested: shares the outer overlay
            assert_allclose(s.value, [1.0])
            s.restore_value(jnp.full((1,), 2.0))
        assert_allclose(s.value, [2.0])  # the inner block did not drop it
        seen_elsewhere = []
        thread = _run_in_thread(lambda: seen_elsewhere.append(np.asarray(s.value)))
        thread.result(30)
        assert_allclose(seen_elsewhere[0], [0.0])
    assert CTX.overlay is None and PRIVATE_THREADS[0] == 0
    assert_allclose(s.value, [0.0])


def test_failed_trace_leaves_no_private_values_behind():
    s = State(jnp.zeros(2), name="s")

    def bad():
        s.value = s.value + 1
        raise ValueError("boom in user code")

    with pytest.raises(ValueError, match="boom in user code"):
        StatefulFunction(bad).trace()
    assert CTX.overlay is None and PRIVATE_THREADS[0] == 0
    assert_allclose(s.value, [0.0, 0.0])


def test_eager_stack_writes_stay_visible_to_other_threads():
    # An eager StateTraceStack (no JAX trace) writes concrete values as before.
    s = State(jnp.zeros(1))
    with StateTraceStack():
        s.value = jnp.ones(1)
        seen = []
        thread = _run_in_thread(lambda: seen.append(np.asarray(s.value)))
        thread.result(30)
    assert_allclose(seen[0], [1.0])


def test_is_eager_tells_traces_from_eager_code():
    inside = []
    jax.jit(lambda x: inside.append(is_eager()) or x)(1.0)
    assert inside == [False]
    assert is_eager()


def test_a_stale_entry_stays_readable_while_another_thread_retraces_it():
    state = State(jnp.zeros(3))
    arm, mid_trace, reader_done = threading.Event(), threading.Event(), threading.Event()

    def f(x):
        if arm.is_set():
            mid_trace.set()
            reader_done.wait(timeout=10)
        state.value = state.value * 2.0
        return x.sum()

    sf = StatefulFunction(f)
    x = jnp.ones(3)
    sf.make_jaxpr(x)
    key = sf.get_arg_cache_key(x)
    state.value = jnp.zeros(5)  # the cached entry no longer fits: the next call re-traces
    errors = []

    def retrace():
        try:
            sf.make_jaxpr(x)
        except ValueError as err:  # pragma: no cover - reported through the list
            errors.append(err)

    arm.set()
    worker = threading.Thread(target=retrace)
    worker.start()
    try:
        assert mid_trace.wait(timeout=10)
        seen = sf.get_jaxpr_by_cache(key)  # the old entry, not a hole
    finally:
        reader_done.set()
        worker.join(timeout=15)
    assert errors == []
    assert "mul" in str(seen)
    assert sf.get_jaxpr_by_cache(key) is not seen  # replaced by the new trace
    assert sf.get_jaxpr_by_cache(key).in_avals[0].shape == (5,)


def test_a_stale_entry_whose_retrace_fails_is_dropped():
    state = State(jnp.zeros(3))
    fail = {"on": False}

    def f(x):
        if fail["on"]:
            raise RuntimeError("trace failed")
        state.value = state.value + x
        return x

    sf = StatefulFunction(f)
    sf.make_jaxpr(jnp.ones(3))
    key = sf.get_arg_cache_key(jnp.ones(3))
    state.value = jnp.zeros(3, jnp.int32)
    fail["on"] = True
    with pytest.raises(RuntimeError, match="trace failed"):
        sf.make_jaxpr(jnp.ones(3))
    with pytest.raises(ValueError, match="has no traced program for this cache key"):
        sf.get_jaxpr_by_cache(key)
