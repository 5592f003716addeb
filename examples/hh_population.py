"""A population of Hodgkin–Huxley neurons driven by a step current and per-step current noise.

Follows the structure of brainstate's ``docs/examples/brain_dynamics/hodgkin_huxley_neuron.ipynb``
(a ``Dynamics`` subclass with the three gating variables, states created in
``init_state``, every variable advanced by ``exp_euler_step`` with the time read
from the environment), grown into a population: each neuron gets its own
step-current amplitude and its own noise, drawn every step from a ``RandomState``;
the resting potentials start scattered by the seeded global random stream; and
``for_loop`` inside ``jit`` runs all the steps as one compiled program, with the
step index ``i`` and the time ``t`` handed to the model through ``environ.context``.

This is a brainstate program with its imports renamed. The marked import block
is the only part that differs from the brainstate original, line for line:

    from brainstate import HiddenState, ShortTermState, environ
        -> from state_core import HiddenState, ShortTermState, environ
    from brainstate.nn import Dynamics, exp_euler_step, init_all_states
        -> from state_nn import Dynamics, exp_euler_step, init_all_states
    from brainstate.random import RandomState, seed, uniform
        -> from state_random import RandomState, seed, uniform
    from brainstate.transform import for_loop, jit
        -> from state_transform import for_loop, jit

Both print the same spike counts and potentials, bit for bit (checked against
brainstate 0.5.4 by ``tests-integration/test_integration_brainstate_examples.py``).
In this repository: ``hatch run py examples/hh_population.py`` (100 neurons, 100 ms).
"""

import brainunit as u
import jax.numpy as jnp

# ---- renamed imports (brainstate -> state_*), see the module docstring ----
from state_core import HiddenState, ShortTermState, environ
from state_nn import Dynamics, exp_euler_step, init_all_states
from state_random import RandomState, seed, uniform
from state_transform import for_loop, jit

# ---- end of renamed imports ----


class HHPopulation(Dynamics):
    """Hodgkin–Huxley neurons, each with its own step-current amplitude and current noise."""

    def __init__(
        self,
        in_size,
        amplitude,
        onset=5.0 * u.ms,
        noise=2.0 * u.uA / u.cm**2,
        noise_seed=1,
        ENa=50.0 * u.mV,
        gNa=120.0 * u.mS / u.cm**2,
        EK=-77.0 * u.mV,
        gK=36.0 * u.mS / u.cm**2,
        EL=-54.387 * u.mV,
        gL=0.03 * u.mS / u.cm**2,
        V_th=20.0 * u.mV,
        C=1.0 * u.uF / u.cm**2,
    ):
        super().__init__(in_size)
        self.amplitude, self.onset, self.noise = amplitude, onset, noise
        self.ENa, self.gNa, self.EK, self.gK, self.EL, self.gL = ENa, gNa, EK, gK, EL, gL
        self.V_th, self.C = V_th, C
        # the noise has its own stream, so it does not depend on other draws
        self.rng = RandomState(noise_seed)

    # sodium activation m
    def m_alpha(self, V):
        return 1.0 / u.math.exprel(-(V / u.mV + 40) / 10)

    def m_beta(self, V):
        return 4.0 * jnp.exp(-(V / u.mV + 65) / 18)

    def m_inf(self, V):
        return self.m_alpha(V) / (self.m_alpha(V) + self.m_beta(V))

    def dm(self, m, t, V):
        return (self.m_alpha(V) * (1 - m) - self.m_beta(V) * m) / u.ms

    # sodium inactivation h
    def h_alpha(self, V):
        return 0.07 * jnp.exp(-(V / u.mV + 65) / 20.0)

    def h_beta(self, V):
        return 1 / (1 + jnp.exp(-(V / u.mV + 35) / 10))

    def h_inf(self, V):
        return self.h_alpha(V) / (self.h_alpha(V) + self.h_beta(V))

    def dh(self, h, t, V):
        return (self.h_alpha(V) * (1 - h) - self.h_beta(V) * h) / u.ms

    # potassium activation n
    def n_alpha(self, V):
        return 0.1 / u.math.exprel(-(V / u.mV + 55) / 10)

    def n_beta(self, V):
        return 0.125 * jnp.exp(-(V / u.mV + 65) / 80)

    def n_inf(self, V):
        return self.n_alpha(V) / (self.n_alpha(V) + self.n_beta(V))

    def dn(self, n, t, V):
        return (self.n_alpha(V) * (1 - n) - self.n_beta(V) * n) / u.ms

    def init_state(self, batch_size=None):
        # resting potentials scattered over [-70, -60) mV, gates at their steady state
        V = uniform(-70.0, -60.0, self.varshape) * u.mV
        self.V = HiddenState(V)
        self.m = HiddenState(self.m_inf(V))
        self.h = HiddenState(self.h_inf(V))
        self.n = HiddenState(self.n_inf(V))
        self.spike_count = ShortTermState(jnp.zeros(self.varshape, environ.ditype()))
        self.last_spike_step = ShortTermState(jnp.full(self.varshape, -1, environ.ditype()))

    def dV(self, V, t, m, h, n, I_ext):
        I_Na = (self.gNa * m * m * m * h) * (V - self.ENa)
        n2 = n * n
        I_K = (self.gK * n2 * n2) * (V - self.EK)
        I_leak = self.gL * (V - self.EL)
        return (-I_Na - I_K - I_leak + I_ext) / self.C

    def update(self):
        t = environ.get('t')
        i = environ.get('i')
        I_ext = self.amplitude * (t >= self.onset) + self.noise * self.rng.normal(size=self.varshape)
        V_next = exp_euler_step(self.dV, self.V.value, t, self.m.value, self.h.value, self.n.value, I_ext)
        m = exp_euler_step(self.dm, self.m.value, t, self.V.value)
        h = exp_euler_step(self.dh, self.h.value, t, self.V.value)
        n = exp_euler_step(self.dn, self.n.value, t, self.V.value)
        spike = jnp.logical_and(self.V.value < self.V_th, V_next >= self.V_th)
        self.V.value, self.m.value, self.h.value, self.n.value = V_next, m, h, n
        self.spike_count.value = self.spike_count.value + spike
        self.last_spike_step.value = jnp.where(spike, i, self.last_spike_step.value)
        return spike


def main(n_neurons=100, duration=100.0 * u.ms, seed_value=0):
    """Simulate ``n_neurons`` for ``duration``; print and return the run's summary numbers."""
    environ.set(dt=0.01 * u.ms)
    seed(seed_value)
    amplitude = jnp.linspace(0.0, 20.0, n_neurons) * u.uA / u.cm**2
    pop = HHPopulation(n_neurons, amplitude)
    init_all_states(pop)

    def step(i):
        with environ.context(i=i, t=i * environ.get_dt()):
            spike = pop()
        return spike, pop.V.value

    @jit
    def run(indices):
        return for_loop(step, indices)

    n_steps = int(duration / environ.get_dt())
    spikes, vs = run(jnp.arange(n_steps))

    counts = spikes.sum(axis=0)
    result = {
        'n_steps': n_steps,
        'total_spikes': int(counts.sum()),
        'spike_counts': counts,
        'last_spike_step': pop.last_spike_step.value,
        'rate_hz': float(counts.mean() / duration.to_decimal(u.second)),
        'mean_v_end_mv': float(pop.V.value.to_decimal(u.mV).mean()),
        'mean_v_mv': float(vs.to_decimal(u.mV).mean()),
    }
    print(f"{n_neurons} HH neurons, {n_steps} steps of {environ.get_dt()}")
    print(f"total spikes: {result['total_spikes']} (the state counted {int(pop.spike_count.value.sum())})")
    print(f"spike counts: {[int(c) for c in counts]}")
    print(f"mean firing rate: {result['rate_hz']!r} Hz")
    print(f"mean V at the end: {result['mean_v_end_mv']!r} mV; mean V over the run: {result['mean_v_mv']!r} mV")
    return result


if __name__ == '__main__':
    main()
