"""``split_for_lanes`` / ``is_single_key`` / ``is_random_state`` and the published lane numbers."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import state_core
import state_random as sr
from state_random import RandomState, is_random_state, is_single_key, split_for_lanes


def _data(key):
    return np.asarray(jr.key_data(key))


@pytest.fixture(autouse=True)
def _keep_default_key():
    saved = sr.DEFAULT._value
    yield
    sr.DEFAULT.restore_value(saved)


def test_split_for_lanes_discipline():
    key = jr.key(42)
    lanes, nxt = split_for_lanes(key, 4)
    P = jr.split(key, 5)
    assert lanes.shape == (4,)
    assert_array_equal(_data(lanes), _data(P[1:]))
    assert_array_equal(_data(nxt), _data(jr.split(P[0], 2)[1]))
    one, _ = split_for_lanes(jr.PRNGKey(42), 1)  # raw data is accepted
    assert_array_equal(_data(one), _data(jr.split(key, 2)[1:]))


def test_split_for_lanes_inside_jit_and_vmap():
    key = jr.key(7)
    lanes_e, nxt_e = split_for_lanes(key, 3)
    lanes_j, nxt_j = jax.jit(split_for_lanes, static_argnums=1)(key, 3)
    assert_array_equal(_data(lanes_j), _data(lanes_e))
    assert_array_equal(_data(nxt_j), _data(nxt_e))
    keys = jr.split(jr.key(8), 2)
    lanes_v, nxt_v = jax.vmap(lambda k: split_for_lanes(k, 3))(keys)
    assert lanes_v.shape == (2, 3) and nxt_v.shape == (2,)
    for i in range(2):
        li, ni = split_for_lanes(keys[i], 3)
        assert_array_equal(_data(lanes_v[i]), _data(li))
        assert_array_equal(_data(nxt_v[i]), _data(ni))


def _lane_normal(scales, seed):
    """What a mapping transform does for ``normal(0., s)``: lane i's state key is P[1+i]."""
    sr.seed(seed)
    lanes, nxt = split_for_lanes(sr.get_key(), len(scales))

    def lane(k, s):
        rng = RandomState(k)
        return rng.normal(0.0, s)

    out = jax.jit(jax.vmap(lane))(lanes, jnp.asarray(scales))
    sr.set_key(nxt)
    return out


def test_published_vmap_numbers_seed_42():
    out = _lane_normal([1.0, 2.0, 3.0, 4.0], 42)
    assert_allclose(np.asarray(out), [-1.0413289, -1.4796011, 2.222502, 6.412178], rtol=1e-6)
    # Bit-exact against the same computation written out lane by lane.
    P = jr.split(jr.key(42), 5)
    want = [jr.normal(jr.split(P[1 + i], 2)[1], ()) * s for i, s in enumerate([1.0, 2.0, 3.0, 4.0])]
    assert_array_equal(np.asarray(out), np.asarray(jnp.stack(want)))
    assert_array_equal(_data(sr.get_key()), _data(jr.split(P[0], 2)[1]))


def test_published_vmap_numbers_seed_123_uniform_then_normal():
    sr.seed(123)
    lanes, _ = split_for_lanes(sr.get_key(), 3)

    def lane(k, mean):
        rng = RandomState(k)
        return rng.uniform(0.0, 1.0) + rng.normal(mean, 1.0)

    out = jax.vmap(lane)(lanes, jnp.array([0.0, 1.0, 2.0]))
    assert_allclose(np.asarray(out), [1.063001, 2.0858884, 3.2780576], rtol=1e-6)


def test_lane_state_inside_stateful_function():
    # The same lane program through the tracing engine: lane keys become state inputs.
    sr.seed(42)
    lanes, _ = split_for_lanes(sr.get_key(), 4)
    lane_states = [RandomState(k) for k in lanes]
    f = state_core.StatefulFunction(lambda s: jnp.stack([r.normal(0.0, s[i]) for i, r in enumerate(lane_states)]))
    out = f(jnp.array([1.0, 2.0, 3.0, 4.0]))
    assert_allclose(np.asarray(out), [-1.0413289, -1.4796011, 2.222502, 6.412178], rtol=1e-6)


def test_is_single_key():
    k = jr.key(0)
    assert is_single_key(k)
    assert not is_single_key(jr.split(k, 2))
    assert not is_single_key(jr.PRNGKey(0))
    assert not is_single_key(1.0) and not is_single_key(None)
    seen = []
    jax.jit(lambda key: seen.append(is_single_key(key)))(k)
    jax.vmap(lambda key: seen.append(is_single_key(key)))(jr.split(k, 3))
    assert seen == [True, True]


def test_is_random_state():
    assert is_random_state(RandomState(0)) and is_random_state(sr.DEFAULT)
    assert not is_random_state(state_core.State(jr.key(0)))
    assert not is_random_state(jr.key(0))


@pytest.mark.parametrize(
    "args,exc,match",
    [
        ((jr.key(0), 0), ValueError, "num_lanes"),
        ((jr.key(0), 2.0), TypeError, "num_lanes"),
        ((jr.split(jr.key(0), 2), 2), ValueError, "single key"),
        ((np.zeros(3, np.uint32), 2), ValueError, "shape"),
        ((3, 2), TypeError, "key"),
    ],
)
def test_split_for_lanes_errors(args, exc, match):
    with pytest.raises(exc, match=match):
        split_for_lanes(*args)
