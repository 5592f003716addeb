"""Only programs whose written states hold enough bytes donate (set_donation_min_bytes)."""

import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

from state_core import State, clear_caches
from state_core._donation import values_nbytes
from state_core.engine import donation_min_bytes, set_donation_min_bytes
from state_transform import jit, vmap2


def _stepper(n, kind="jit"):
    s = State(jnp.zeros(n, jnp.float32), name="s")

    def step():
        s.value = s.value + 1.0

    return s, (jit(step) if kind == "jit" else vmap2(step, axis_size=1))


@pytest.mark.parametrize("kind", ["jit", "vmap2"])
def test_a_state_below_the_size_gate_gets_a_new_buffer(kind):
    s, f = _stepper(8, kind)
    f()
    f()
    pointer = s.value.unsafe_buffer_pointer()  # alive until the call returns: a new buffer cannot take its place
    f()
    assert s.value.unsafe_buffer_pointer() != pointer
    assert_allclose(s.value, 3.0)


def test_a_state_at_the_size_gate_is_updated_in_place():
    assert donation_min_bytes() == 128 * 1024
    s, f = _stepper(32 * 1024)  # 32768 float32 = 128 KiB
    f()
    pointer = s.value.unsafe_buffer_pointer()
    f()
    assert s.value.unsafe_buffer_pointer() == pointer
    assert_allclose(s.value, 2.0)


def test_the_gate_applies_to_programs_traced_after_it():
    s_before, before = _stepper(8)
    before()
    previous = set_donation_min_bytes(0)
    try:
        s_after, after = _stepper(8)
        after()
        before()
        pointers = s_after.value.unsafe_buffer_pointer(), s_before.value.unsafe_buffer_pointer()
        after()
        before()
        assert s_after.value.unsafe_buffer_pointer() == pointers[0]  # traced with the gate at 0
        assert s_before.value.unsafe_buffer_pointer() != pointers[1]  # traced before: keeps its decision
        clear_caches()
        before()
        pointer = s_before.value.unsafe_buffer_pointer()
        before()
        assert s_before.value.unsafe_buffer_pointer() == pointer  # re-traced: now donates
    finally:
        assert set_donation_min_bytes(previous) == 0
    assert_allclose(s_before.value, 5.0)
    assert_allclose(s_after.value, 2.0)


def test_set_donation_min_bytes_checks_its_argument():
    with pytest.raises(TypeError, match="n_bytes must be an int, got float"):
        set_donation_min_bytes(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="n_bytes must be an int, got bool"):
        set_donation_min_bytes(True)
    with pytest.raises(ValueError, match="n_bytes must be >= 0, got -1"):
        set_donation_min_bytes(-1)
    assert donation_min_bytes() == 128 * 1024


def test_values_nbytes_counts_every_array_leaf():
    assert values_nbytes([jnp.zeros((3, 4)), {"a": jnp.zeros(2, jnp.int8), "b": 1.0}]) == 3 * 4 * 4 + 2
    assert values_nbytes([]) == 0
