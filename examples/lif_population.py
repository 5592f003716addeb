"""Simulate a population of leaky integrate-and-fire neurons with ``for_loop``.

The population is a ``state_nn.Module`` whose membrane potentials, spikes and
noise key are States. ``for_loop`` steps it inside one compiled ``lax.scan``
(the potentials, spikes and PRNG key are carried; the weights are read-only
loop invariants) and shows a progress bar driven from inside the loop. The
spike raster and the population rate are saved to a PNG.

    hatch run py examples/lif_population.py                # 1000 neurons, 5000 steps
    hatch run py examples/lif_population.py --neurons 200 --steps 1000 --no-progress

Writes ``examples/out/lif_population.png`` (or ``--out DIR``).
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import state_random
from state_core import HiddenState, ParamState, ShortTermState
from state_nn import Module
from state_transform import ProgressBar, for_loop, jit

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


class LIFPopulation(Module):
    """Leaky integrate-and-fire neurons with noisy drive and random excitatory coupling.

    ``tau dV/dt = -(V - V_rest) + R I_ext + noise + recurrent input``; a neuron that
    reaches ``V_th`` spikes and is reset to ``V_reset``, then stays silent for
    ``t_ref`` ms.
    """

    def __init__(self, n: int, seed: int = 0, dt: float = 0.1, coupling: float = 0.4) -> None:
        super().__init__()
        self.n, self.dt = n, dt
        self.tau, self.v_rest, self.v_th, self.v_reset, self.t_ref = 10.0, -65.0, -50.0, -65.0, 2.0
        self.sigma = 3.0
        key = jax.random.key(seed)
        # Sparse random excitatory weights (10% connectivity), a read-only state.
        mask = jax.random.bernoulli(key, 0.1, (n, n))
        self.weight = ParamState(jnp.where(mask, coupling * 10.0 / max(n * 0.1, 1.0), 0.0), name="weight")
        self.v = HiddenState(jnp.full(n, self.v_rest), name="v")
        self.spike = ShortTermState(jnp.zeros(n, bool), name="spike")
        self.last_spike = ShortTermState(jnp.full(n, -1e7), name="last_spike")
        self.rng = state_random.RandomState(seed + 1)

    def update(self, t: jax.Array, i_ext: jax.Array) -> jax.Array:
        v = self.v.value
        recurrent = self.spike.value.astype(v.dtype) @ self.weight.value
        noise = self.sigma * jnp.sqrt(self.tau / self.dt) * self.rng.normal(size=(self.n,))
        dv = (-(v - self.v_rest) + i_ext + noise) * (self.dt / self.tau) + recurrent
        refractory = (t - self.last_spike.value) < self.t_ref
        v = jnp.where(refractory, self.v_reset, v + dv)
        spike = v >= self.v_th
        self.v.value = jnp.where(spike, self.v_reset, v)
        self.spike.value = spike
        self.last_spike.value = jnp.where(spike, t, self.last_spike.value)
        return spike


def simulate(pop: LIFPopulation, steps: int, i_ext: float = 14.0, progress: bool = True) -> np.ndarray:
    """Run ``steps`` steps and return the spike raster, ``bool[steps, n]``."""
    times = jnp.arange(steps) * pop.dt
    bar = ProgressBar(desc="LIF", count=50) if progress else None

    @jit
    def run(times):
        return for_loop(lambda t: pop.update(t, i_ext), times, progress_bar=bar)

    return np.asarray(run(times))


def population_rate(spikes: np.ndarray, dt: float, window_ms: float = 5.0) -> np.ndarray:
    """Population firing rate in Hz, smoothed with a boxcar of ``window_ms``."""
    per_step = spikes.mean(axis=1) / (dt * 1e-3)
    width = max(int(window_ms / dt), 1)
    return np.convolve(per_step, np.ones(width) / width, mode="same")


def plot(spikes: np.ndarray, dt: float, path: str) -> None:
    """Save the raster (top) and population rate (bottom) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, n = spikes.shape
    t_ms = np.arange(steps) * dt
    fig, (ax_r, ax_f) = plt.subplots(2, 1, sharex=True, figsize=(9, 6), gridspec_kw={"height_ratios": [3, 1]})
    step_idx, neuron_idx = np.nonzero(spikes)
    ax_r.plot(t_ms[step_idx], neuron_idx, ",k")
    ax_r.set_ylabel("neuron")
    ax_r.set_ylim(0, n)
    ax_r.set_title(f"{n} LIF neurons, {steps} steps of {dt} ms (state_transform.for_loop)")
    ax_f.plot(t_ms, population_rate(spikes, dt), color="tab:red")
    ax_f.set_xlabel("time (ms)")
    ax_f.set_ylabel("rate (Hz)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description="LIF population simulated with state_transform.for_loop")
    parser.add_argument("--neurons", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=OUT_DIR, help="directory for lif_population.png")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = parser.parse_args(argv)

    pop = LIFPopulation(args.neurons, seed=args.seed)
    spikes = simulate(pop, args.steps, progress=not args.no_progress)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "lif_population.png")
    plot(spikes, pop.dt, path)
    rate = spikes.mean() / (pop.dt * 1e-3)
    print(f"{args.neurons} neurons x {args.steps} steps: {int(spikes.sum())} spikes, mean rate {rate:.1f} Hz -> {path}")
    return {"spikes": spikes, "rate_hz": float(rate), "png": path, "population": pop}


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
