"""Quantities with units (brainunit) as sampler arguments: which samplers carry units, and how."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import state_random as sr
from state_core import StatefulFunction
from state_random import RandomState

u = pytest.importorskip("brainunit")


@pytest.fixture(autouse=True)
def _keep_default_key():
    saved = sr.DEFAULT._value
    yield
    sr.DEFAULT.restore_value(saved)


def _same_draw(with_units, plain, unit):
    """``with_units`` is ``plain`` in ``unit``, bit for bit (the same key, the same numbers)."""
    assert isinstance(with_units, u.Quantity) and with_units.unit == unit
    assert_array_equal(with_units.mantissa, plain)


@pytest.mark.parametrize("name", ["normal", "laplace", "logistic", "gumbel", "cauchy"])
def test_location_scale_samplers_draw_in_the_shared_unit(name):
    both = getattr(RandomState(0), name)(-65.0 * u.mV, 2.0 * u.mV, size=3)
    _same_draw(both, getattr(RandomState(0), name)(-65.0, 2.0, size=3), u.mV)
    # A plain partner is read in the other's unit; a compatible unit is converted.
    _same_draw(getattr(RandomState(0), name)(-65.0 * u.mV, 2.0, size=3), both.mantissa, u.mV)
    _same_draw(getattr(RandomState(0), name)(-65.0, 2.0 * u.mV, size=3), both.mantissa, u.mV)
    converted = getattr(RandomState(0), name)(-65.0 * u.mV, 0.002 * u.volt, size=3)
    assert converted.unit == u.mV
    assert_allclose(converted.mantissa, both.mantissa, rtol=1e-5)


def test_the_module_function_matches_brainstates_example():
    sr.seed(0)
    v = sr.normal(loc=-65.0 * u.mV, scale=2.0 * u.mV, size=3)
    sr.seed(0)
    _same_draw(v, sr.normal(-65.0, 2.0, size=3), u.mV)


def test_other_dimensions_raise_unit_mismatch_and_do_not_draw():
    rng = RandomState(0)
    key = rng.value
    with pytest.raises(u.UnitMismatchError, match=r"normal: `scale` is in ms but `loc` is in mV"):
        rng.normal(0.0 * u.mV, 1.0 * u.ms, size=2)
    with pytest.raises(u.UnitMismatchError, match=r"uniform: `high` is in s but `low` is in mV"):
        rng.uniform(0.0 * u.mV, 1.0 * u.second)
    assert_array_equal(jax.random.key_data(rng.value), jax.random.key_data(key))  # the stream did not move


def test_bounds_samplers_share_one_unit():
    _same_draw(RandomState(1).uniform(1.0 * u.mV, 10.0 * u.mV, (4,)), RandomState(1).uniform(1.0, 10.0, (4,)), u.mV)
    x = RandomState(2).truncated_normal(-1.0 * u.mV, 1.0 * u.mV, 50, loc=0.0, scale=0.5)
    assert x.unit == u.mV and bool(((x.mantissa >= -1) & (x.mantissa <= 1)).all())
    _same_draw(RandomState(3).triangular(0.0 * u.ms, 0.5, 1.0, 4), RandomState(3).triangular(0.0, 0.5, 1.0, 4), u.ms)
    _same_draw(RandomState(4).wald(1.0 * u.ms, 2.0 * u.ms, 3), RandomState(4).wald(1.0, 2.0, 3), u.ms)


@pytest.mark.parametrize(
    ("name", "args"),
    [("exponential", ()), ("rayleigh", ()), ("gamma", (2.0,)), ("weibull_min", (1.5,))],
)
def test_scale_samplers_draw_in_the_scales_unit(name, args):
    with_units = getattr(RandomState(0), name)(*args, 3.0 * u.ms, size=3)
    _same_draw(with_units, getattr(RandomState(0), name)(*args, 3.0, size=3), u.ms)


def test_values_keep_their_unit_and_like_samplers_read_the_shape():
    values = jnp.arange(5.0) * u.mV
    _same_draw(RandomState(0).choice(values, 3), RandomState(0).choice(jnp.arange(5.0), 3), u.mV)
    _same_draw(RandomState(0).permutation(values), RandomState(0).permutation(jnp.arange(5.0)), u.mV)
    _same_draw(RandomState(0).shuffle(values), RandomState(0).shuffle(jnp.arange(5.0)), u.mV)
    noise = RandomState(0).randn_like(jnp.ones(3) * u.mV)
    assert not isinstance(noise, u.Quantity)
    assert_array_equal(noise, RandomState(0).randn_like(jnp.ones(3)))
    assert RandomState(0).rand_like(jnp.ones((2, 2)) * u.ms).shape == (2, 2)


def test_multivariate_normal_needs_cov_in_the_square_unit():
    mean, cov = jnp.zeros(2) * u.mV, jnp.eye(2) * u.mV**2
    _same_draw(
        RandomState(0).multivariate_normal(mean, cov, size=3),
        RandomState(0).multivariate_normal(jnp.zeros(2), jnp.eye(2), size=3),
        u.mV,
    )
    with pytest.raises(u.UnitMismatchError, match=r"`mean` is in mV, so `cov` must be a quantity in mV\^2"):
        RandomState(0).multivariate_normal(mean, jnp.eye(2))
    with pytest.raises(u.UnitMismatchError, match=r"`cov` is in mV but must be in the square of `mean`'s unit mV"):
        RandomState(0).multivariate_normal(mean, jnp.eye(2) * u.mV)
    with pytest.raises(ValueError, match=r"`cov` is a quantity in mV\^2 but `mean` has no unit"):
        RandomState(0).multivariate_normal(jnp.zeros(2), cov)


def test_shape_rate_and_probability_parameters_must_be_dimensionless():
    with pytest.raises(ValueError, match=r"gamma: `shape` must be dimensionless, got a quantity in mV"):
        RandomState(0).gamma(2.0 * u.mV, 1.0)
    with pytest.raises(ValueError, match=r"poisson: `lam` must be dimensionless, got a quantity in Hz"):
        RandomState(0).poisson(3.0 * u.Hz, 2)
    # A dimensionless quantity is its number (ms / s = 0.001).
    ratio = u.Quantity(500.0, unit=u.ms / u.second)
    assert_array_equal(RandomState(0).bernoulli(ratio, 4), RandomState(0).bernoulli(0.5, 4))
    assert not isinstance(RandomState(0).poisson(u.Quantity(2.0), 3), u.Quantity)


def test_plain_arguments_return_plain_arrays():
    assert type(RandomState(0).normal(0.0, 1.0, 2)) is type(jnp.zeros(2))
    assert type(sr.exponential(np.float32(2.0), size=2)) is type(jnp.zeros(2))


def test_quantities_in_a_traced_call():
    rng = RandomState(0)
    draw = StatefulFunction(lambda loc: rng.normal(loc, 2.0 * u.mV, size=3))
    first = draw(-65.0 * u.mV)  # traced: the quantity's mantissa is a tracer
    assert first.unit == u.mV
    assert_array_equal(first.mantissa, RandomState(0).normal(-65.0, 2.0, size=3))
    second = draw(-60.0 * u.mV)  # the cached program, with the stream advanced
    expected = RandomState(0)
    expected.normal(size=3)
    assert_allclose(second.mantissa, expected.normal(-60.0, 2.0, size=3), rtol=1e-6)
