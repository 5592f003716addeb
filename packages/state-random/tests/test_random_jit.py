"""Draws inside ``jax.jit`` through ``state_core.StatefulFunction``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from numpy.testing import assert_array_equal

import state_core
import state_random as sr
from state_random import RandomState


def _data(key):
    return np.asarray(jr.key_data(key))


@pytest.fixture(autouse=True)
def _keep_default_key():
    saved = sr.DEFAULT._value
    yield
    sr.DEFAULT.restore_value(saved)


def test_default_draw_in_stateful_function_matches_eager():
    sr.seed(0)
    eager = [sr.normal(size=3) for _ in range(3)]
    eager_key = _data(sr.get_key())
    sr.seed(0)
    f = state_core.StatefulFunction(lambda: sr.normal(size=3))
    traced = [f() for _ in range(3)]
    for a, b in zip(eager, traced, strict=True):
        assert_array_equal(np.asarray(a), np.asarray(b))
    assert_array_equal(_data(sr.get_key()), eager_key)
    assert f.get_write_states() == [sr.DEFAULT]
    assert len(f._cache) == 1  # traced once, reused


def test_several_draws_and_arguments_in_one_program():
    rng = RandomState(5)

    def step(mu):
        return rng.uniform(0.0, 1.0) + rng.normal(mu, 1.0, size=2)

    f = state_core.StatefulFunction(step)
    out = f(jnp.array([0.0, 1.0]))
    k1, k2 = jr.split(jr.key(5))
    k3 = jr.split(k1)[1]
    want = jr.uniform(k2, (), jnp.float32, 0.0, 1.0) + jr.normal(k3, (2,)) + jnp.array([0.0, 1.0])
    # Same keys and samples; XLA may fuse the final adds differently from eager (1 ulp).
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-6)
    assert_array_equal(_data(rng.value), _data(jr.split(k1)[0]))


def test_traced_parameters_skip_value_checks_but_keep_working():
    rng = RandomState(0)
    f = state_core.StatefulFunction(lambda p: rng.bernoulli(p, size=4))
    assert_array_equal(np.asarray(f(1.0)), np.ones(4, bool))
    f(1.5)  # p is traced: no concrete check, no error (jax semantics apply)
    g = state_core.StatefulFunction(lambda lo, hi: rng.randint(lo, hi, size=3))
    assert g(jnp.int32(2), jnp.int32(3)).tolist() == [2, 2, 2]


def test_seed_with_traced_int_inside_stateful_function():
    rng = RandomState(0)
    f = state_core.StatefulFunction(lambda s: (rng.seed(s), rng.normal())[1])
    out = f(jnp.int32(3))
    assert_array_equal(np.asarray(out), np.asarray(jr.normal(jr.split(jr.key(3))[1], ())))
    assert_array_equal(_data(rng.value), _data(jr.split(jr.key(3))[0]))


def test_seed_context_inside_stateful_function():
    sr.seed(1)
    before = _data(sr.get_key())

    def body():
        with sr.seed_context(8):
            return sr.uniform(size=2)

    out = state_core.StatefulFunction(body)()
    assert_array_equal(np.asarray(out), np.asarray(jr.uniform(jr.split(jr.key(8))[1], (2,))))
    assert_array_equal(_data(sr.get_key()), before)


def test_split_key_under_jit():
    rng = RandomState(2)
    f = state_core.StatefulFunction(lambda: rng.split_key(3))
    keys = f()
    parts = jr.split(jr.key(2), 4)
    assert_array_equal(_data(keys), _data(parts[1:]))
    assert_array_equal(_data(rng.value), _data(parts[0]))


def test_explicit_key_inside_plain_jit():
    rng = RandomState(0)
    before = _data(rng.value)
    out = jax.jit(lambda k: rng.gumbel(size=3, key=k))(jr.key(4))
    assert_array_equal(np.asarray(out), np.asarray(jr.gumbel(jr.key(4), (3,))))
    assert_array_equal(_data(rng.value), before)


def test_drawing_from_state_inside_plain_jit_is_a_clear_error():
    rng = RandomState(0)
    with pytest.raises(state_core.StateLeakError, match="read inside a JAX transformation that is not state-aware"):
        jax.jit(lambda: rng.normal())()
    # With plain-trace reads allowed, writing the advanced (traced) key back is still refused.
    with state_core.plain_trace_policy("ignore"), pytest.raises(state_core.StateLeakError, match="tracer"):
        jax.jit(lambda: rng.normal())()
    assert_array_equal(_data(rng.value), _data(jr.key(0)))
