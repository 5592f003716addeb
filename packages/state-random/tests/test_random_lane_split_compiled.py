"""An eager lane split (a mapped call's first run, a one-shot ensemble init) is one compiled call."""

from __future__ import annotations

import jax
import jax.random as jr
import numpy as np
from numpy.testing import assert_array_equal

from state_random import RandomState, split_for_lanes


def _data(key):
    return np.asarray(jr.key_data(key))


def test_an_eager_split_for_a_new_lane_count_compiles_one_program(count_compiles):
    key = jr.key(5)
    jax.block_until_ready(key)
    with count_compiles() as compiles:
        lanes, nxt = RandomState(key).split_across_lanes(key, 53)  # a lane count no other test uses
        jax.block_until_ready((lanes, nxt))
    assert len(compiles) == 1  # (op by op: a split, three slices and a second split)
    parts = jr.split(key, 54)
    assert_array_equal(_data(lanes), _data(parts[1:]))
    assert_array_equal(_data(nxt), _data(jr.split(parts[0], 2)[1]))


def test_traced_and_eager_splits_agree_for_every_key_kind():
    for key in (jr.key(3), jr.wrap_key_data(jr.PRNGKey(3)), jr.key(3, impl="rbg")):
        eager = split_for_lanes(key, 6)
        traced = jax.jit(split_for_lanes, static_argnums=1)(key, 6)
        for a, b in zip(eager, traced, strict=True):
            assert_array_equal(_data(a), _data(b))
