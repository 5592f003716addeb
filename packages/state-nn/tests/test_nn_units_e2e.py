"""End to end: brainstate-style neuron models with units, ``environ``, ``exp_euler_step`` and ``Dynamics``.

The models are written the way brainstate programs write them, with the imports
renamed (``brainstate.nn`` -> ``state_nn``, ``brainstate.environ`` ->
``state_core.environ``, ``brainstate.transform`` -> ``state_transform``,
``brainstate.random`` -> ``state_random``, ``brainstate.HiddenState`` ->
``state_core.HiddenState``).
"""

from __future__ import annotations

import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import state_core
import state_nn
import state_random
import state_transform
from state_core import environ

u = pytest.importorskip("brainunit")


@pytest.fixture(autouse=True)
def _clean_environment():
    environ.reset()
    yield
    environ.reset()


class LIF(state_nn.Dynamics):
    """Leaky integrate-and-fire: tau dV/dt = -(V - V_rest) + R I, spike and reset at V_th."""

    def __init__(self, n, tau=10.0 * u.ms, v_rest=-65.0 * u.mV, v_th=-50.0 * u.mV, v_reset=-68.0 * u.mV):
        super().__init__(n)
        self.tau, self.v_rest, self.v_th, self.v_reset = tau, v_rest, v_th, v_reset
        self.r = 1.0 * u.ohm

    def init_state(self, batch_size=None, **kwargs):
        self.V = state_core.HiddenState(jnp.full(self.varshape, -65.0, environ.dftype()) * u.mV)
        self.spike = state_core.ShortTermState(jnp.zeros(self.varshape, bool))

    def dv(self, v, current):
        return (-(v - self.v_rest) + self.r * current) / self.tau

    def update(self, current):
        v = state_nn.exp_euler_step(self.dv, self.V.value, current)
        spike = v >= self.v_th
        self.V.value = u.math.where(spike, self.v_reset, v)
        self.spike.value = spike
        return spike


CURRENTS = jnp.array([10.0, 14.0, 18.0, 22.0, 30.0]) * u.mA


def _step(model):
    def step(i, t):
        with environ.context(i=i, t=t):
            model(CURRENTS)
        return model.V.value, model.spike.value

    return step


@pytest.mark.numerics  # long simulations checked against theory
def test_lif_python_loop_and_for_loop_agree_and_match_theory():
    environ.set(dt=0.1 * u.ms)
    n = 600
    times = jnp.arange(n) * environ.get_dt()
    assert times.unit == u.ms

    # The eager Python loop (op by op, the slow part) is compared over the first 200 steps,
    # which include the first spikes; the theory check below uses all n steps of for_loop.
    n_eager = 200
    eager = state_nn.init_all_states(LIF(5))
    step = _step(eager)
    eager_v, eager_spikes = zip(*(step(i, times[i]) for i in range(n_eager)), strict=True)

    looped = state_nn.init_all_states(LIF(5))
    vs, spikes = state_transform.for_loop(_step(looped), jnp.arange(n), times)
    assert vs.unit == u.mV and vs.shape == (n, 5)
    assert_allclose(vs[:n_eager].to_decimal(u.mV), np.stack([v.to_decimal(u.mV) for v in eager_v]), atol=1e-4)
    assert_array_equal(spikes[:n_eager], np.stack(eager_spikes))
    assert np.asarray(spikes[:n_eager]).any(), "the compared stretch includes spikes"
    assert looped.V.value.unit == u.mV

    # Below threshold (V_inf = -65 + R I < -50 mV) no spikes; above, the analytic period of a
    # LIF neuron: T = tau * ln((V_inf - V_reset) / (V_inf - V_th)), up to one step.
    counts = np.asarray(spikes.sum(0))
    assert counts[0] == 0 and counts[1] == 0
    for k, drive in ((3, 22.0), (4, 30.0)):
        v_inf = -65.0 + drive
        period = 10.0 * np.log((v_inf + 68.0) / (v_inf + 50.0))
        first = 10.0 * np.log((v_inf + 65.0) / (v_inf + 50.0))
        expected = 1 + int((60.0 - first) // period)
        assert abs(int(counts[k]) - expected) <= 1, (k, counts[k], expected)


class HH(state_nn.Dynamics):
    """Hodgkin-Huxley, as in brainstate's example (written here in our own words)."""

    def __init__(self, in_size):
        super().__init__(in_size)
        self.e_na, self.g_na = 50.0 * u.mV, 120.0 * u.mS / u.cm**2
        self.e_k, self.g_k = -77.0 * u.mV, 36.0 * u.mS / u.cm**2
        self.e_l, self.g_l = -54.387 * u.mV, 0.03 * u.mS / u.cm**2
        self.c, self.v_th = 1.0 * u.uF / u.cm**2, 20.0 * u.mV

    def m_alpha(self, v):
        return 1.0 / u.math.exprel(-(v / u.mV + 40) / 10)

    def m_beta(self, v):
        return 4.0 * jnp.exp(-(v / u.mV + 65) / 18)

    def h_alpha(self, v):
        return 0.07 * jnp.exp(-(v / u.mV + 65) / 20.0)

    def h_beta(self, v):
        return 1 / (1 + jnp.exp(-(v / u.mV + 35) / 10))

    def n_alpha(self, v):
        return 0.1 / u.math.exprel(-(v / u.mV + 55) / 10)

    def n_beta(self, v):
        return 0.125 * jnp.exp(-(v / u.mV + 65) / 80)

    def gate(self, alpha, beta):
        return lambda x, t, v: (alpha(v) * (1 - x) - beta(v) * x) / u.ms

    def init_state(self, batch_size=None):
        self.V = state_core.HiddenState(jnp.ones(self.varshape, environ.dftype()) * -65.0 * u.mV)
        v = self.V.value
        self.m = state_core.HiddenState(self.m_alpha(v) / (self.m_alpha(v) + self.m_beta(v)))
        self.h = state_core.HiddenState(self.h_alpha(v) / (self.h_alpha(v) + self.h_beta(v)))
        self.n = state_core.HiddenState(self.n_alpha(v) / (self.n_alpha(v) + self.n_beta(v)))

    def dv(self, v, t, m, h, n, current):
        current = self.sum_current_inputs(current, v)
        i_na = self.g_na * m**3 * h * (v - self.e_na)
        i_k = self.g_k * n**4 * (v - self.e_k)
        i_leak = self.g_l * (v - self.e_l)
        return (-i_na - i_k - i_leak + current) / self.c

    def update(self, x=0.0 * u.mA / u.cm**2):
        t = environ.get("t")
        v = state_nn.exp_euler_step(self.dv, self.V.value, t, self.m.value, self.h.value, self.n.value, x)
        m = state_nn.exp_euler_step(self.gate(self.m_alpha, self.m_beta), self.m.value, t, self.V.value)
        h = state_nn.exp_euler_step(self.gate(self.h_alpha, self.h_beta), self.h.value, t, self.V.value)
        n = state_nn.exp_euler_step(self.gate(self.n_alpha, self.n_beta), self.n.value, t, self.V.value)
        v = self.sum_delta_inputs(init=v)
        spike = jnp.logical_and(self.V.value < self.v_th, v >= self.v_th)
        self.V.value, self.m.value, self.h.value, self.n.value = v, m, h, n
        return spike


@pytest.mark.numerics  # long simulations checked against theory
def test_hodgkin_huxley_port_runs_in_a_for_loop():
    hh = HH(4)
    state_nn.init_all_states(hh)
    dt = 0.01 * u.ms

    def run(t, inp):
        with environ.context(t=t, dt=dt):
            hh(inp)
        return hh.V.value

    times = u.math.arange(0.0 * u.ms, 30.0 * u.ms, dt)
    state_random.seed(0)
    drive = jnp.array([0.0, 2.0, 10.0, 20.0]) * u.uA / u.cm**2
    inputs = state_random.uniform(0.9, 1.1, (times.shape[0], 4)) * drive
    vs = state_transform.for_loop(run, times, inputs)
    assert vs.unit == u.mV and vs.shape == (times.shape[0], 4)
    peak = np.asarray(vs.to_decimal(u.mV).max(0))
    assert abs(peak[0] + 65.0) < 0.5  # no input: it stays at rest
    assert peak[3] > 20.0  # strong input: action potentials overshoot 0 mV
    assert environ.get("t", None) is None


def test_no_package_imports_brainunit():
    """Without brainunit the packages import and run; none of them imports it by itself."""
    code = (
        "import sys\n"
        "sys.modules['brainunit'] = None; sys.modules['saiunit'] = None  # importing them now fails\n"
        "import jax.numpy as jnp, state_core, state_random, state_transform, state_nn\n"
        "from state_core import State, environ\n"
        "s = State(jnp.zeros(2)); s.value = s.value + 1\n"
        "with environ.context(dt=0.1):\n"
        "    x = state_nn.exp_euler_step(lambda v, i: -v + i, jnp.ones(2), 1.0)\n"
        "state_random.seed(0); state_random.normal(0.0, 1.0, size=2)\n"
        "print(float(x.sum()))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_allclose(float(proc.stdout.split()[-1]), 2.0)


def test_for_loop_sees_a_changed_dt():
    # A program reads dt as a constant: it is reused only while the settings it read are unchanged.
    total = state_core.State(jnp.zeros(()))

    def step(i):
        total.value = total.value + environ.get_dt()

    with environ.context(dt=0.1):
        state_transform.for_loop(step, jnp.arange(3))
    with environ.context(dt=1.0):
        state_transform.for_loop(step, jnp.arange(3))
    assert_allclose(total.value, 3.3, rtol=1e-6)
    with environ.context(dt=0.1):  # back to a value seen before: the right program again
        state_transform.for_loop(step, jnp.arange(3))
    assert_allclose(total.value, 3.6, rtol=1e-6)
