"""Which programs donate by size: every size by default, above a gate once one is set.

Programs whose first call may run op by op keep a 128 KiB gate of their own.
"""

import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

from state_core import State, clear_caches, eager_first_calls
from state_core._donation import values_nbytes
from state_core.engine import donation_min_bytes, set_donation_min_bytes
from state_transform import jit, vmap2


def _stepper(n, kind="jit"):
    s = State(jnp.zeros(n, jnp.float32), name="s")

    def step():
        s.value = s.value + 1.0

    return s, (jit(step) if kind == "jit" else vmap2(step, axis_size=1))


def _in_place(s, f):
    """Whether the next call of ``f`` reuses the buffer of ``s``'s value (``f`` has run twice already)."""
    pointer = s.value.unsafe_buffer_pointer()  # (an int: nothing else holds the value)
    f()
    return s.value.unsafe_buffer_pointer() == pointer


@pytest.fixture
def gate():
    """``gate(n)`` sets ``set_donation_min_bytes(n)``; the default comes back afterwards."""
    before = donation_min_bytes()
    yield set_donation_min_bytes
    set_donation_min_bytes(before)


@pytest.mark.parametrize("kind", ["jit", "vmap2"])
def test_a_small_state_is_updated_in_place_by_default(kind):
    assert donation_min_bytes() == 0
    s, f = _stepper(8, kind)
    f()
    f()
    assert _in_place(s, f)
    assert_allclose(s.value, 3.0)


@pytest.mark.parametrize("kind", ["jit", "vmap2"])
def test_a_state_below_the_gate_gets_a_new_buffer(kind, gate):
    gate(1024)
    s, f = _stepper(8, kind)
    f()
    f()
    pointer = s.value.unsafe_buffer_pointer()
    held = s.value  # alive until the call returns: a new buffer cannot take its place
    f()
    assert s.value.unsafe_buffer_pointer() != pointer
    assert_allclose(held, 2.0)
    assert_allclose(s.value, 3.0)


def test_a_state_at_the_gate_is_updated_in_place(gate):
    gate(128 * 1024)
    s, f = _stepper(32 * 1024)  # 32768 float32 = 128 KiB
    f()
    assert _in_place(s, f)
    assert_allclose(s.value, 2.0)


def test_the_gate_applies_to_programs_traced_after_it(gate):
    gate(1024)
    s_before, before = _stepper(8)
    before()
    gate(0)
    s_after, after = _stepper(8)
    after()
    before()
    assert _in_place(s_after, after)  # traced with the gate at 0
    held = s_before.value
    pointer = held.unsafe_buffer_pointer()
    del held
    before()
    assert s_before.value.unsafe_buffer_pointer() != pointer  # traced before: keeps its decision
    clear_caches()
    before()
    assert _in_place(s_before, before)  # re-traced: now donates
    assert_allclose(s_before.value, 5.0)
    assert_allclose(s_after.value, 2.0)


def test_a_program_whose_first_call_runs_op_by_op_keeps_a_gate_of_128_kib():
    with eager_first_calls(True):  # (vmap2 programs then run their first call op by op)
        small, f_small = _stepper(8, "vmap2")
        large, f_large = _stepper(32 * 1024, "vmap2")
        f_small()
        f_large()
    for f in (f_small, f_large):
        f()
        f()
    held = small.value
    pointer = held.unsafe_buffer_pointer()
    del held
    f_small()
    assert small.value.unsafe_buffer_pointer() != pointer  # below 128 KiB: deciding would cost the first call a trace
    assert _in_place(large, f_large)
    assert_allclose(small.value, 4.0)
    assert_allclose(large.value, 4.0)


def test_set_donation_min_bytes_checks_its_argument():
    with pytest.raises(TypeError, match="n_bytes must be an int, got float"):
        set_donation_min_bytes(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="n_bytes must be an int, got bool"):
        set_donation_min_bytes(True)
    with pytest.raises(ValueError, match="n_bytes must be >= 0, got -1"):
        set_donation_min_bytes(-1)
    assert donation_min_bytes() == 0


def test_values_nbytes_counts_every_array_leaf():
    assert values_nbytes([jnp.zeros((3, 4)), {"a": jnp.zeros(2, jnp.int8), "b": 1.0}]) == 3 * 4 * 4 + 2
    assert values_nbytes([]) == 0
