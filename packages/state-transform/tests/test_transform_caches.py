"""Bounded caches, clear_caches() and tracing from several threads."""

import gc
import resource
import threading

import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core
import state_transform
from state_core import ParamState, ShortTermState, StatefulFunction
from state_transform import jit, vmap2


def _counting(fn):
    traced = []

    def wrapper(x):
        traced.append(x.shape)
        return fn(x)

    return wrapper, traced


def test_cache_keeps_at_most_cache_size_signatures_least_recently_used_first():
    fn, traced = _counting(lambda x: x + 1)
    f = StatefulFunction(fn, cache_size=2)
    f(jnp.zeros(1))
    f(jnp.zeros(2))
    f(jnp.zeros(1))  # refreshes shape (1,)
    f(jnp.zeros(3))  # evicts shape (2,), the least recently used
    assert len(f._cache) == 2
    f(jnp.zeros(1))
    assert traced == [(1,), (2,), (3,)]
    f(jnp.zeros(2))
    assert traced == [(1,), (2,), (3,), (2,)]


def test_cache_size_must_be_positive():
    with pytest.raises(ValueError, match="cache_size must be a positive int, got 0"):
        StatefulFunction(lambda: None, cache_size=0)


def test_jit_accepts_cache_size():
    fn, traced = _counting(lambda x: x * 2)
    f = jit(fn, cache_size=1)
    f(jnp.zeros(1))
    f(jnp.zeros(2))
    f(jnp.zeros(1))
    assert len(traced) == 3


def test_clear_caches_forgets_every_program():
    s = ShortTermState(jnp.zeros(()))
    fn, traced = _counting(lambda x: s.value + x)
    f, g = jit(fn), vmap2(fn)
    f(jnp.ones(()))
    g(jnp.ones(3))
    assert state_core.clear_caches is state_transform.clear_caches
    state_transform.clear_caches()
    assert len(f._cache) == 0 and len(g._cache) == 0
    assert_allclose(np.asarray(f(jnp.ones(()))), 1.0)
    assert_allclose(np.asarray(g(jnp.ones(3))), [1.0, 1.0, 1.0])
    assert len(traced) == 4


def test_concurrent_calls_of_one_function_trace_each_signature_once():
    w = ParamState(jnp.arange(4.0))
    traced = []
    lock = threading.Lock()

    def body(x):
        with lock:
            traced.append(x.shape)
        return (x * w.value).sum(-1)

    f = jit(body)
    f(jnp.ones((1, 4)))  # read w once outside the threads
    errors = []
    barrier = threading.Barrier(6)

    def worker(rows):
        barrier.wait()
        for _ in range(20):
            out = f(jnp.ones((rows, 4)))
            if not np.allclose(np.asarray(out), np.full(rows, 6.0)):
                errors.append(rows)

    threads = [threading.Thread(target=worker, args=(rows,)) for rows in (2, 2, 3, 3, 4, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(traced) == [(1, 4), (2, 4), (3, 4), (4, 4)]


@pytest.mark.slow  # 600 compiles: once per `hatch run test`, at the newest JAX
def test_vmap2_with_many_distinct_shapes_stays_within_memory_budget():
    # NumPy inputs: creating jax arrays of that many new shapes would fill JAX's own op caches.
    w = ParamState(jnp.ones(()))
    f = vmap2(lambda x: x * w.value)
    size = state_core.engine.DEFAULT_CACHE_SIZE
    warm_up, more = size + 16, 3 * size
    for n in range(1, warm_up + 1):
        f(np.ones(n, np.float32))
    gc.collect()
    warm = _resident_mb()
    for n in range(warm_up + 1, warm_up + more + 1):
        out = f(np.ones(n, np.float32))
        if n % 64 == 0:
            assert_allclose(np.asarray(out), np.ones(n))
    assert len(f._cache) == size
    gc.collect()
    grown = _resident_mb() - warm
    # The documented budget: DEFAULT_CACHE_SIZE programs; three caches' worth of new shapes must not add more.
    assert grown < 30, f"resident memory grew by {grown:.0f} MB over {more} evicted signatures"


def _resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20
