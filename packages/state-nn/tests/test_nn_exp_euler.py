"""``exp_euler_step``: exact on linear ODEs, brainstate's update on nonlinear ones, units, SDEs, errors."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

import state_random
from state_core import environ
from state_nn import exp_euler_step
from state_nn._exp_euler import _exprel

# The integrator's numbers against closed forms: the newest end only.
pytestmark = pytest.mark.numerics


def _leak(tau):
    return lambda v, current: (-v + current) / tau


@pytest.mark.parametrize("dt", [0.01, 0.5, 3.0])
def test_linear_ode_follows_the_closed_form_solution(dt):
    # dV/dt = (-V + I) / tau  =>  V(t) = I + (V0 - I) exp(-t / tau), for any dt (exact integration).
    tau, current, v0 = 10.0, 2.0, jnp.array([0.0, -1.0, 5.0])
    v = v0
    with environ.context(dt=dt):
        for n in range(1, 41):
            v = exp_euler_step(_leak(tau), v, current)
            assert_allclose(v, current + (v0 - current) * np.exp(-n * dt / tau), rtol=2e-5, atol=1e-6)


def test_linear_ode_with_units():
    u = pytest.importorskip("brainunit")
    tau, current = 10.0 * u.ms, 2.0 * u.mV
    v = jnp.zeros(3) * u.mV
    with environ.context(dt=0.25 * u.ms):
        for _ in range(20):
            v = exp_euler_step(_leak(tau), v, current)
    assert v.unit == u.mV
    assert_allclose(v.to_decimal(u.mV), 2.0 * (1 - math.exp(-5.0 / 10.0)) * np.ones(3), rtol=1e-5)
    # The drift may answer in another, compatible unit (V/ms): the result stays in mV.
    with environ.context(dt=0.25 * u.ms):
        w = exp_euler_step(lambda x: (-x / tau).in_unit(u.volt / u.ms), jnp.ones(2) * u.mV)
    assert w.unit == u.mV
    assert_allclose(w.to_decimal(u.mV), math.exp(-0.025) * np.ones(2), rtol=1e-6)


def test_nonlinear_drift_is_brainstates_update():
    def drift(x, a):
        return a - x**3  # element-wise: d drift_i / d x_i = -3 x_i^2

    x, a, dt = jnp.array([0.5, -1.0, 2.0]), 0.3, 0.1
    with environ.context(dt=dt):
        got = exp_euler_step(drift, x, a)
    z = dt * (-3 * x**2)
    expected = x + dt * (np.expm1(z) / z) * drift(x, a)
    assert_allclose(got, expected, rtol=1e-6)


def test_coupled_drift_uses_the_column_sums_like_brainstate():
    # vector_grad (a VJP with ones) gives the column sums of the Jacobian, not its diagonal.
    def drift(x):
        return jnp.array([-x[0] + 2 * x[1], -x[1]])

    x, dt = jnp.array([1.0, 1.0]), 0.1
    with environ.context(dt=dt):
        got = exp_euler_step(drift, x)
    z = dt * jnp.array([-1.0, 2.0 - 1.0])
    assert_allclose(got, x + dt * (np.expm1(z) / z) * drift(x), rtol=1e-6)


def test_exprel_is_smooth_at_zero():
    z = jnp.array([0.0, 1e-8, -5e-4, 5e-4, 2e-3, -3.0, 20.0])
    expected = np.array([1.0, 1.0, *[np.expm1(v) / v for v in (-5e-4, 5e-4, 2e-3, -3.0, 20.0)]])
    assert_allclose(_exprel(z), expected, rtol=1e-6)
    assert_allclose(jax.grad(lambda s: _exprel(s))(0.0), 0.5)
    with environ.context(dt=0.1):
        grad = jax.grad(lambda x0: exp_euler_step(lambda v: -v, x0).sum())(jnp.ones(2))
    assert_allclose(grad, math.exp(-0.1) * np.ones(2), rtol=1e-6)


def test_sde_adds_scaled_noise_from_the_default_stream():
    x, dt, sigma = jnp.array([1.0, 2.0, 3.0]), 0.04, 0.5
    state_random.seed(7)
    with environ.context(dt=dt):
        got = exp_euler_step(lambda v: -v, lambda v: sigma * jnp.ones_like(v), x)
    state_random.seed(7)
    noise = state_random.randn_like(x)
    assert_allclose(got, x * math.exp(-dt) + sigma * math.sqrt(dt) * noise, rtol=1e-5)


def test_sde_with_units_and_a_wrong_diffusion_unit():
    u = pytest.importorskip("brainunit")
    v = jnp.zeros(2) * u.mV
    with environ.context(dt=0.01 * u.ms):
        state_random.seed(1)
        out = exp_euler_step(lambda x: -x / (5 * u.ms), lambda x: 1.0 * u.mV / u.ms**0.5, v)
        assert out.unit == u.mV
        state_random.seed(1)
        assert_allclose(out.to_decimal(u.mV), 0.1 * state_random.randn_like(jnp.zeros(2)), rtol=1e-5)
        with pytest.raises(ValueError, match=r"the diffusion term has .* but the state has mV"):
            exp_euler_step(lambda x: -x / (5 * u.ms), lambda x: 1.0 * u.mV, v)


def test_unit_errors_say_what_the_drift_must_return():
    u = pytest.importorskip("brainunit")
    with (
        environ.context(dt=0.1 * u.ms),
        pytest.raises(
            ValueError, match=r"the drift returned values in mV, but with x in mV and dt in ms it must return mV / ms"
        ),
    ):
        exp_euler_step(lambda v: -v, jnp.ones(2) * u.mV)
    with (
        environ.context(dt=0.1),
        pytest.raises(ValueError, match=r"dt is a plain number but the drift returned values in mV / ms"),
    ):
        exp_euler_step(lambda v: -v / u.ms, jnp.ones(2) * u.mV)


def test_argument_errors():
    with environ.context(dt=0.1):
        with pytest.raises(TypeError, match=r"fn \(the drift, dx/dt = fn\(x, \.\.\.\)\) must be callable, got float"):
            exp_euler_step(1.0, jnp.ones(2))
        with pytest.raises(TypeError, match="missing the state variable x"):
            exp_euler_step(lambda v: -v)
        with pytest.raises(TypeError, match="missing the state variable x"):
            exp_euler_step(lambda v: -v, lambda v: v)
        with pytest.raises(ValueError, match="must be float16, bfloat16, float32 or float64, got int32"):
            exp_euler_step(lambda v: -v, jnp.ones(2, jnp.int32))
    with pytest.raises(KeyError, match="'dt' is not set"):
        exp_euler_step(lambda v: -v, jnp.ones(2))
