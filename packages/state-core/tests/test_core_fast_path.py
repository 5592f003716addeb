"""StatefulFunction tries its last program before computing a cache key; that must stay correct."""

import jax.numpy as jnp
import numpy as np
from numpy.testing import assert_allclose

from state_core import State, StatefulFunction


def counted(fn):
    calls = []

    def wrapper(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)

    return wrapper, calls


def test_alternating_shapes():
    fn, calls = counted(lambda x: x + 1.0)
    f = StatefulFunction(fn)
    for _ in range(3):
        assert_allclose(np.asarray(f(jnp.zeros(2))), [1.0, 1.0])
        assert_allclose(np.asarray(f(jnp.zeros(3))), [1.0, 1.0, 1.0])
    assert len(calls) == 2


def test_same_leaves_different_structure_retraces():
    fn, calls = counted(lambda t: t[0] - t[1] if isinstance(t, tuple) else t[1] - t[0])
    f = StatefulFunction(fn)
    a, b = jnp.asarray(1.0), jnp.asarray(3.0)
    assert float(f((a, b))) == -2.0
    assert float(f([a, b])) == 2.0  # a list: the function takes the other branch
    assert float(f((a, b))) == -2.0
    assert len(calls) == 2


def test_python_numbers_of_different_types():
    f = StatefulFunction(lambda x: x * 2)
    assert f(3) == 6 and f(3).dtype == jnp.int32
    assert f(1.5) == 3.0 and f(1.5).dtype == jnp.float32
    assert f(True) == 2


def test_state_written_on_every_path():
    s = State(jnp.zeros(2))

    def add(x):
        s.value = s.value + x
        return s.value

    f = StatefulFunction(add)
    f(jnp.ones(2))
    f(jnp.ones(2))  # last program
    f(jnp.ones(3)[:2])  # same aval: still the last program
    assert_allclose(np.asarray(s.value), [3.0, 3.0])
    s.value = jnp.zeros(4)  # resized state: the program is stale
    assert_allclose(np.asarray(f(jnp.ones(4))), np.ones(4))
    assert s.value.shape == (4,)
