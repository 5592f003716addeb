"""Our transforms under threads: other threads never see a trace's tracers."""

import threading
from concurrent.futures import ThreadPoolExecutor

import jax.numpy as jnp
import numpy as np
from numpy.testing import assert_allclose

import state_transform as st
from state_core import ShortTermState, State
from state_core._jax_internals import is_tracer
from state_core.filter import OfType


def _start(target):
    """Run ``target`` in a new thread; ``.result(timeout)`` on the returned future re-raises its error."""
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(target)
    pool.shutdown(wait=False)
    return future


def test_reader_sees_concrete_values_while_jit_and_vmap2_trace():
    shared = State(jnp.arange(4.0), name="shared")
    in_trace, release = threading.Event(), threading.Event()

    def body(x):
        shared.value = shared.value * x
        in_trace.set()
        assert release.wait(30)
        return shared.value.sum()

    for transform in (st.jit, lambda f: st.vmap2(f, in_axes=None, axis_size=2)):
        in_trace.clear()
        release.clear()
        f = transform(body)
        before = np.asarray(shared.value)
        thread = _start(lambda f=f: f(2.0))
        assert in_trace.wait(30)
        for _ in range(500):
            value = shared.value
            assert not is_tracer(value)
            assert_allclose(value, before)  # the pre-call value, never the traced one
        release.set()
        thread.result(60)
        assert_allclose(shared.value, before * 2.0)  # the call's result, written back


def test_threads_with_their_own_states_and_functions_run_concurrently():
    n_threads, steps = 4, 20
    barrier = threading.Barrier(n_threads)
    results = {}

    def work(i):
        count = ShortTermState(jnp.zeros(3) + i, name=f"count{i}")

        def step(x):
            count.value = count.value + x
            return count.value.sum()

        jitted = st.jit(step)
        mapped = st.vmap2(step, state_in_axes={0: OfType(ShortTermState)}, state_out_axes={0: OfType(ShortTermState)})
        barrier.wait(30)  # all threads trace at the same time
        for _ in range(steps):
            jitted(1.0)
        out = mapped(jnp.ones(3))
        results[i] = (np.asarray(count.value), np.asarray(out))

    threads = [_start(lambda i=i: work(i)) for i in range(n_threads)]
    for thread in threads:
        thread.result(120)
    for i in range(n_threads):
        value, out = results[i]
        assert_allclose(value, np.full(3, i + steps + 1.0))
        assert_allclose(out, np.full(3, i + steps + 1.0))
