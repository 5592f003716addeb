"""Unit-carrying values (brainunit quantities) as State values: read, write, repr, checks, tracing."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from numpy.testing import assert_allclose

from state_core import HiddenState, State, StatefulFunction, environ, units

u = pytest.importorskip("brainunit")


def test_units_helpers():
    q = jnp.array([1.0, 2.0]) * u.mV
    assert units.is_quantity(q) and not units.is_quantity(jnp.ones(2))
    mantissa, unit = units.split_unit(q)
    assert_allclose(mantissa, [1.0, 2.0])
    assert unit == u.mV
    assert units.split_unit(3.0) == (3.0, None)
    ratio = u.Quantity(2.0, unit=u.ms / u.second)  # dimensionless but scaled
    assert units.split_unit(ratio) == (pytest.approx(0.002), None)
    back = units.with_unit(mantissa, unit)
    assert units.is_quantity(back) and back.unit == u.mV
    assert units.unit_library(q).__name__ in ("saiunit", "brainunit")
    assert u.Quantity in units.quantity_types()


def test_quantity_state_read_write_repr():
    v = HiddenState(jnp.full(3, -65.0, jnp.float32) * u.mV, name="V")
    assert repr(v) == "HiddenState(\n  name='V',\n  value=Quantity(ShapedArray(float32[3]), \"mV\")\n)"
    assert "Array([-65., -65., -65.], dtype=float32), \"mV\"" in str(v)
    v.value = v.value + 1.0 * u.mV
    assert v.value.unit == u.mV
    assert_allclose(v.value.to_decimal(u.mV), [-64.0, -64.0, -64.0])


@pytest.mark.parametrize(
    ("new", "message"),
    [
        (jnp.zeros(3), r"the state holds a quantity in mV but the new value has no unit. Write a quantity in mV"),
        (jnp.zeros(3) * u.volt, r"the new value is in V but the state holds mV. A state keeps its unit; convert"),
        (jnp.zeros(3) * u.ms, r"the new value is in ms but the state holds mV: the physical dimensions differ"),
    ],
)
def test_write_with_another_unit_names_the_state_and_both_units(new, message):
    v = State(jnp.full(3, -65.0) * u.mV, name="V")
    with pytest.raises(ValueError, match=r"Cannot assign to State 'V': " + message):
        v.value = new
    assert v.value.unit == u.mV  # the failed write changed nothing
    assert_allclose(v.value.mantissa, [-65.0] * 3)


def test_quantity_into_a_plain_state_and_nested_paths():
    plain = State(jnp.zeros(2), name="w")
    with pytest.raises(ValueError, match=r"'w': the new value is a quantity in mV but the state holds a plain array"):
        plain.value = jnp.zeros(2) * u.mV
    tree = State({"v": jnp.zeros(2) * u.mV, "g": jnp.zeros(2) * u.nS}, name="cell")
    with pytest.raises(ValueError, match=r"the new value at \['g'\] is in mS but the state holds nS"):
        tree.value = {"v": jnp.ones(2) * u.mV, "g": jnp.ones(2) * u.mS}
    other_structure = State((jnp.zeros(2) * u.mV,), name="pair")
    with pytest.raises(ValueError, match=r"pytree structure"):  # not a unit problem: the generic message
        other_structure.value = (jnp.zeros(2) * u.mV, jnp.zeros(2) * u.mV)


def test_stateful_function_updates_a_quantity_state():
    v = HiddenState(jnp.full(2, -65.0) * u.mV, name="V")

    def step(current):
        v.value = v.value + current * (0.1 * u.ms) / (1.0 * u.ms)
        return v.value.sum()

    f = StatefulFunction(step)
    total = f(2.0 * u.mV)
    assert total.unit == u.mV
    assert_allclose(total.to_decimal(u.mV), -129.6, rtol=1e-6)
    f(2.0 * u.mV)  # the cached program
    assert_allclose(v.value.to_decimal(u.mV), [-64.6, -64.6], rtol=1e-6)
    assert [s is v for s in f.get_write_states()] == [True]


def test_stateful_function_with_a_wrong_unit_write_fails_cleanly():
    v = State(jnp.zeros(2) * u.mV, name="V")

    def step():
        v.value = v.value.mantissa * u.ms

    with pytest.raises(ValueError, match="Cannot assign to State 'V': the new value is in ms but the state holds mV"):
        StatefulFunction(step)()
    assert v.value.unit == u.mV


def test_quantity_dt_in_environ_and_reads_unchanged():
    with environ.context(dt=0.1 * u.ms):
        assert environ.get_dt().unit == u.ms
        with environ.record_reads() as reads:
            environ.get_dt()
    with environ.context(dt=0.1 * u.ms):  # an equal quantity, another object
        assert environ.reads_unchanged(reads)
    with environ.context(dt=0.1 * u.second):
        assert not environ.reads_unchanged(reads)
    with pytest.raises(TypeError, match=r"dt must be a scalar, got a value of shape \(2,\)"):
        environ.set(dt=jnp.ones(2) * u.ms)
