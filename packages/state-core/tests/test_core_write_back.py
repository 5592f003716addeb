"""Writes after a run go through the one write-back (``write_state_values``): all or none."""

import jax
import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

from state_core import State, StatefulFunction, StateLeakError, plain_trace_policy

CONSTANT = jnp.ones(2)


def test_jaxpr_call_auto_writes_all_states_or_none():
    a, b = State(jnp.zeros(2), name="a"), State(jnp.zeros(2), name="b")

    def f(x):
        a.value = CONSTANT  # a concrete new value
        b.value = x * 2  # a tracer of the plain jit below
        return x

    sf = StatefulFunction(f)
    with plain_trace_policy("ignore"), pytest.raises(StateLeakError, match=r"State 'b'"):
        jax.jit(sf.jaxpr_call_auto)(jnp.ones(2))
    # Before, 'a' was written and only then did 'b' fail.
    assert_allclose(a.value, [0.0, 0.0])
    assert_allclose(b.value, [0.0, 0.0])
