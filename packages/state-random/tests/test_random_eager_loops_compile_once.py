"""Eager draws of the samplers that loop (rejection and sequential ones) compile once per signature.

An eager ``lax.while_loop`` compiles its loop anew on every call; these samplers
run theirs inside a compiled function whose shape and dtype are static, so a
second eager draw of the same shape reuses the program (it took 0.4-0.8 s a draw).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from state_random import RandomState

_FIRST = {
    "vonmises": ((0.5, 4.0), (0.1, 2.0)),
    "zipf": ((2.0,), (3.5,)),
    "hypergeometric": ((5, 5, 4), (7, 3, 6)),
}


@pytest.mark.parametrize("name", sorted(_FIRST))
def test_a_second_eager_draw_of_the_same_shape_compiles_nothing(name, count_compiles):
    first_args, other_args = _FIRST[name]
    rs = RandomState(11)
    draw = getattr(rs, name)
    first = jax.block_until_ready(draw(*first_args, size=(3, 41)))
    with count_compiles() as compiles:
        again = jax.block_until_ready(draw(*first_args, size=(3, 41)))
        other = jax.block_until_ready(draw(*other_args, size=(3, 41)))  # new values, same shapes
    assert compiles == []
    assert first.shape == again.shape == other.shape == (3, 41)
    assert not np.array_equal(first, again)  # the stream moved on
