"""The steady cached call does no avoidable Python work (counted, never timed)."""

import threading

import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_core._call_signature as call_signature_module
import state_core._signature as signature_module
from state_core import State, StatefulFunction
from state_core._state import use_private_values
from state_core._trace import private_state_values


class CountingLock:
    """An RLock stand-in that counts acquisitions."""

    def __init__(self):
        self.lock = threading.RLock()
        self.acquired = 0

    def __enter__(self):
        self.acquired += 1
        return self.lock.__enter__()

    def __exit__(self, *exc):
        return self.lock.__exit__(*exc)


def test_steady_call_takes_no_lock_no_retrace_no_flatten_no_signature(count_calls):
    s = State(jnp.zeros(3), name="s")
    traced = []

    def step(x):
        traced.append(1)
        s.value = s.value + x
        return s.value * 2

    f = StatefulFunction(step)
    x = jnp.ones(3)
    f(x)
    f(x)  # the first replay stores the program's output avals
    lock = CountingLock()
    f._trace_lock = lock
    resolves = count_calls(f, "_resolve")
    call_keys = count_calls(f, "_call_key")
    flattens = count_calls(call_signature_module, "_tree_flatten")
    matches = count_calls(signature_module, "states_match")
    for _ in range(5):
        out = f(x)
    assert_allclose(np.asarray(out), np.full(3, 14.0))
    assert_allclose(np.asarray(s.value), np.full(3, 7.0))
    assert traced == [1]
    assert (lock.acquired, resolves, call_keys, flattens, matches) == (0, [], [], [], [])
    # the counters do count: a keyword call takes the general path
    f(x=x)
    assert call_keys and flattens and lock.acquired == 1 and len(traced) == 2


def test_changed_state_shape_is_still_noticed_after_identity_hits():
    s = State(jnp.zeros(2), name="s")
    traced = []

    def step():
        traced.append(1)
        s.value = s.value + 1
        return s.value.sum()

    f = StatefulFunction(step)
    f()
    f()
    f()
    assert len(traced) == 1
    s.value = jnp.zeros(4)  # new shape: the cached program no longer fits
    assert float(f()) == 4.0
    assert len(traced) == 2
    s.value = jnp.zeros(4, jnp.int32)  # new dtype
    assert int(f()) == 4
    assert len(traced) == 3
    s.value = np.zeros(4, np.int32)  # not a jax array: compared by signature, no re-trace
    assert int(f()) == 4
    assert len(traced) == 3


def test_same_shape_new_array_object_reuses_the_program():
    s = State(jnp.zeros(2), name="s")
    traced = []

    def step():
        traced.append(1)
        return s.value * 3

    f = StatefulFunction(step)
    f()
    s.value = jnp.ones(2)  # another array object (another aval object), same signature
    assert_allclose(np.asarray(f()), [3.0, 3.0])
    assert len(traced) == 1


def test_state_class_has_the_overlay_property_only_while_a_thread_traces():
    assert "_value" not in State.__dict__
    seen = []
    s = State(jnp.zeros(()), name="s")

    def step():
        seen.append(isinstance(State.__dict__.get("_value"), property))
        s.value = s.value + 1

    StatefulFunction(step)()
    assert seen == [True]
    assert "_value" not in State.__dict__
    assert float(s.value) == 1.0
    with private_state_values():
        with private_state_values():  # nested blocks share the outer overlay
            assert isinstance(State.__dict__["_value"], property)
        assert isinstance(State.__dict__["_value"], property)
    assert "_value" not in State.__dict__
    use_private_values(False)  # removing twice is harmless
    assert "_value" not in State.__dict__


def test_lru_order_is_kept_when_an_entry_is_hit_repeatedly():
    traced = []

    def step(x):
        traced.append(x.shape)
        return x + 1

    f = StatefulFunction(step, cache_size=2)
    a, b, c = jnp.zeros(1), jnp.zeros(2), jnp.zeros(3)
    f(a)
    f(b)
    f(a)
    f(b)
    f(a)  # found by its aval object: still counted as used
    f(a)  # a repeated hit of `a`: `b` stays the least recently used
    f(c)  # evicts `b`
    f(a)
    assert traced == [(1,), (2,), (3,)]
    f(b)
    assert traced == [(1,), (2,), (3,), (2,)]


@pytest.mark.parametrize("kwargs", [False, True])
def test_pytree_and_keyword_arguments_use_the_cached_program(kwargs):
    s = State(jnp.zeros(2), name="s")
    traced = []

    def step(batch, scale=1.0):
        traced.append(1)
        s.value = s.value + batch["x"] * scale
        return s.value

    f = StatefulFunction(step)
    batch = {"x": jnp.ones(2)}
    for _ in range(3):
        out = f(batch, scale=jnp.float32(2.0)) if kwargs else f(batch)
    expected = 6.0 if kwargs else 3.0
    assert_allclose(np.asarray(out), [expected, expected])
    assert traced == [1]


def test_steady_call_checks_a_value_without_an_aval_by_signature_once(count_calls):
    s = State(jnp.zeros(3), name="s")
    traced = []

    def step(x):
        traced.append(1)
        s.value = s.value + x
        return s.value

    f = StatefulFunction(step)
    x = jnp.ones(3)
    f(x)
    f(x)
    s.value = np.full(3, 10.0, np.float32)  # written outside: a NumPy array has no aval to compare
    matches = count_calls(signature_module, "states_match")
    outs = [f(x) for _ in range(4)]
    assert_allclose(np.asarray(outs[-1]), np.full(3, 14.0))
    # One check by signature for the NumPy value; the program's outputs are then
    # recognised by aval identity again, and nothing was traced anew.
    assert len(matches) == 1
    assert traced == [1]
