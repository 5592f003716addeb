"""Concurrent draws never hand two threads the same key (eager splits are atomic)."""

from __future__ import annotations

import threading

import jax
import numpy as np

import state_random as sr
from state_random import RandomState

THREADS = 16
PER_THREAD = 10


def _run_threads(work):
    barrier = threading.Barrier(THREADS)
    results = [None] * THREADS

    def run(i):
        barrier.wait()
        results[i] = work()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results


def _data(keys):
    return [tuple(np.asarray(jax.random.key_data(k)).tolist()) for k in keys]


def _sequential_keys(seed, n):
    key, out = jax.random.key(seed), []
    for _ in range(n):
        key, sub = jax.random.split(key, 2)
        out.append(sub)
    return key, out


def test_sixteen_threads_get_sixteen_distinct_keys_from_one_state():
    rng = RandomState(0)
    rng.split_key()  # compile the split once, so threads race on the split itself
    rng.seed(0)
    keys = _run_threads(lambda: [rng.split_key() for _ in range(PER_THREAD)])
    handed = [k for ks in keys for k in _data(ks)]
    assert len(set(handed)) == THREADS * PER_THREAD
    # Whatever the interleaving, the keys are exactly those of a sequential run.
    final, expected = _sequential_keys(0, THREADS * PER_THREAD)
    assert set(handed) == set(_data(expected))
    assert bool(rng.value == final)


def test_threads_drawing_from_default_get_distinct_numbers():
    sr.seed(1)
    sr.normal(size=2)
    sr.seed(1)
    draws = _run_threads(lambda: [np.asarray(sr.normal(size=4)) for _ in range(PER_THREAD)])
    rows = {tuple(d.tolist()) for ds in draws for d in ds}
    assert len(rows) == THREADS * PER_THREAD
    final, _ = _sequential_keys(1, THREADS * PER_THREAD)
    assert bool(sr.get_key() == final)
