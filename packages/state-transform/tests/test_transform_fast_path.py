"""The key-free fast path of the mapping engines: reusing the last program must stay correct.

When every argument is a plain array, a call first tries the last compiled program
without computing the cache key; JAX's dispatch compares avals and the program's
trace-time checks reject a mismatch. These tests change exactly one thing between
calls and check results and trace counts.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from state_core import ShortTermState
from state_core.filter import OfType
from state_transform import pmap2, vmap2


def counted(fn):
    calls = []

    def wrapper(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)

    return wrapper, calls


def test_alternating_shapes_give_right_results_and_trace_once_each():
    fn, calls = counted(lambda x: x * 2.0 + 1.0)
    f = vmap2(fn)
    a, b = jnp.arange(3.0), jnp.arange(4.0)
    for _ in range(3):
        assert_allclose(np.asarray(f(a)), np.arange(3.0) * 2 + 1)
        assert_allclose(np.asarray(f(b)), np.arange(4.0) * 2 + 1)
    assert len(calls) == 2


def test_changing_number_of_array_arguments():
    f = vmap2(lambda *xs: sum(xs))
    one, two = f(jnp.ones(3)), f(jnp.ones(3), jnp.full(3, 2.0))
    assert_allclose(np.asarray(one), np.ones(3))
    assert_allclose(np.asarray(two), np.full(3, 3.0))
    assert_allclose(np.asarray(f(jnp.ones(3))), np.ones(3))


def test_weak_and_strong_arrays_are_distinguished():
    fn, calls = counted(lambda x, y: x + y)
    f = vmap2(fn, in_axes=(0, None))
    x16 = jnp.ones(2, dtype=jnp.bfloat16)
    strong = f(x16, jnp.asarray(1.0, dtype=jnp.float32))
    weak = f(x16, jnp.asarray(1.0))  # weakly typed: keeps bfloat16
    assert strong.dtype == jnp.float32
    assert weak.dtype == jnp.bfloat16
    assert len(calls) == 2


def test_dtype_change_of_argument():
    f = vmap2(lambda x: x + 1)
    assert f(jnp.arange(3)).dtype == jnp.int32
    assert f(jnp.arange(3.0)).dtype == jnp.float32
    assert_allclose(np.asarray(f(jnp.arange(3))), [1, 2, 3])


def test_python_scalar_after_array_uses_the_keyed_path():
    f = vmap2(lambda x, s: x * s, in_axes=(0, None))
    assert_allclose(np.asarray(f(jnp.ones(3), jnp.asarray(2.0))), np.full(3, 2.0))
    assert_allclose(np.asarray(f(jnp.ones(3), 3.0)), np.full(3, 3.0))
    assert_allclose(np.asarray(f(jnp.ones(3), jnp.asarray(4.0))), np.full(3, 4.0))


def test_batch_size_change_of_mapped_argument_and_state():
    s = ShortTermState(jnp.zeros(3))

    def step(x):
        s.value = s.value + x
        return s.value

    f = vmap2(step, state_in_axes={0: OfType(ShortTermState)}, state_out_axes={0: OfType(ShortTermState)})
    f(jnp.ones(3))
    s.value = jnp.zeros(5)  # resize the state, then call with a matching argument
    out = f(jnp.full(5, 2.0))
    assert_allclose(np.asarray(out), np.full(5, 2.0))
    assert s.value.shape == (5,)
    with pytest.raises(ValueError, match=r"(?s)argument 0: 4.*5"):
        f(jnp.ones(4))
    assert_allclose(np.asarray(s.value), np.full(5, 2.0))  # unchanged by the failed call


def test_state_value_change_is_seen_without_retrace():
    s = ShortTermState(jnp.ones(()))
    fn, calls = counted(lambda x: x * s.value)
    f = vmap2(fn)
    assert_allclose(np.asarray(f(jnp.arange(3.0))), [0.0, 1.0, 2.0])
    s.value = jnp.asarray(10.0, dtype=jnp.float32)  # same aval as before
    assert_allclose(np.asarray(f(jnp.arange(3.0))), [0.0, 10.0, 20.0])
    assert len(calls) == 1


def test_pmap2_fast_path_with_changing_shapes():
    n = jax.local_device_count()
    fn, calls = counted(lambda x: x.sum())
    f = pmap2(fn)
    a = jnp.ones((n, 2))
    b = jnp.ones((n, 3))
    for _ in range(2):
        assert_allclose(np.asarray(f(a)), np.full(n, 2.0))
        assert_allclose(np.asarray(f(b)), np.full(n, 3.0))
    assert len(calls) == 2
