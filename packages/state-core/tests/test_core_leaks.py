"""Tracer hygiene: a state born inside a trace raises StateLeakError once the trace is over."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import State, StatefulFunction, StateLeakError


def test_state_created_in_plain_jit_and_read_afterwards_raises_with_creation_site():
    box = {}

    @jax.jit
    def make(x):
        box["s"] = State(x * 2, name="born_in_jit")
        return box["s"].value + 1  # reading it inside its own trace is fine

    assert_allclose(make(1.0), 3.0)
    with pytest.raises(
        StateLeakError, match=r"'born_in_jit' was created inside a traced function at .*test_core_leaks.py:\d+"
    ):
        _ = box["s"].value
    with pytest.raises(StateLeakError, match="born_in_jit"):
        box["s"].value = jnp.zeros(())


def test_state_born_in_plain_jit_is_usable_again_after_a_concrete_restore():
    box = {}
    jax.jit(lambda x: box.setdefault("s", State(x)).value)(1.0)
    box["s"].restore_value(jnp.asarray(5.0))
    assert_allclose(box["s"].value, 5.0)


def test_state_created_inside_stateful_trace_raises_after_it():
    box = {}

    def f(x):
        box["s"] = State(x + 1, name="inner")
        return box["s"].value

    StatefulFunction(f).trace(1.0)
    with pytest.raises(StateLeakError, match="'inner' was created inside a traced function"):
        _ = box["s"].value


def test_concrete_state_created_inside_a_trace_stays_usable():
    box = {}

    def f(x):
        box["s"] = State(np.arange(2.0), name="concrete")  # jnp ops would be traced here
        return x

    StatefulFunction(f).trace(1.0)
    assert_allclose(box["s"].value, [0.0, 1.0])
