"""Benchmark: state-aware loops against hand-written ``jax.lax.scan``.

A population of leaky integrate-and-fire neurons with ``RandomState`` noise is
stepped by ``for_loop`` inside ``jit`` (and under ``vmap2`` over an ensemble);
the reference threads the membrane potentials, spikes and PRNG keys through a
hand-written ``jax.lax.scan`` (donated, as their old values are dead) and splits
the keys by hand, exactly as our RandomState does. A third case times a 10,000-step loop with and without a
progress bar.

    python benchmarks/bench_loops.py           # full sizes
    python benchmarks/bench_loops.py --quick   # fewer repetitions

``rows(quick=False)`` returns the measurements as dicts for the main benchmark table.
"""

from __future__ import annotations

import argparse
import functools
import io
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import state_random as sr
from state_core import HiddenState, ShortTermState
from state_core.filter import OfType
from state_transform import ProgressBar, for_loop, jit, vmap2

N_NEURONS = 1000
N_STEPS = 2000
ENSEMBLE = 16
DT, TAU, V_REST, V_TH, V_RESET, SIGMA, DRIVE = 0.1, 10.0, -65.0, -50.0, -65.0, 2.0, 16.0


def _lif_step(v: jax.Array, noise: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One Euler step of the LIF membrane (shared by ours and the reference)."""
    v = v + (-(v - V_REST) + DRIVE + SIGMA * noise) * (DT / TAU)
    spike = v >= V_TH
    return jnp.where(spike, V_RESET, v), spike


class Population:
    """LIF neurons whose potentials, spikes and noise key are States."""

    def __init__(self, n: int, seed: int, members: int | None = None) -> None:
        shape = (n,) if members is None else (members, n)
        self.n = n
        self.v = HiddenState(jnp.full(shape, V_REST), name="v")
        self.spike = ShortTermState(jnp.zeros(shape, bool), name="spike")
        self.rng = sr.RandomState(seed)

    def update(self, t: jax.Array) -> jax.Array:
        v, spike = _lif_step(self.v.value, self.rng.normal(size=(self.n,)))
        self.v.value, self.spike.value = v, spike
        return spike.sum()


def _reference_scan(n: int) -> Callable:
    """``(v, spike, key, ts) -> (v, spike, key, counts)`` with keys split by hand."""

    def sim(v, spike, key, ts):
        def step(carry, t):
            v, spike, key = carry
            parts = jax.random.split(key, 2)
            v, spike = _lif_step(v, jax.random.normal(parts[1], (n,)))
            return (v, spike, parts[0]), spike.sum()

        (v, spike, key), counts = jax.lax.scan(step, (v, spike, key), ts)
        return v, spike, key, counts

    return sim


def _block(x: Any) -> Any:
    return jax.block_until_ready(x)


def _time(fn: Callable[[], Any], calls: int) -> float:
    _block(fn())
    start = time.perf_counter()
    for _ in range(calls):
        out = fn()
    _block(out)
    return (time.perf_counter() - start) / calls


def _interleaved(ours: Callable, ref: Callable, calls: int, repeats: int) -> tuple[float, float]:
    t_ours, t_ref = [], []
    for _ in range(repeats):
        t_ref.append(_time(ref, calls))
        t_ours.append(_time(ours, calls))
    return statistics.median(t_ours), statistics.median(t_ref)


# ---------------------------------------------------------------------- cases
def make_single(n: int = N_NEURONS, steps: int = N_STEPS) -> tuple[Callable, Callable]:
    pop = Population(n, seed=0)
    ts = jnp.arange(steps, dtype=jnp.float32)
    ours = jit(lambda ts: for_loop(pop.update, ts))

    sim = jax.jit(_reference_scan(n), donate_argnums=(0, 1, 2))
    box = [jnp.full((n,), V_REST), jnp.zeros((n,), bool), jax.random.key(0)]

    def ref():
        box[0], box[1], box[2], counts = sim(box[0], box[1], box[2], ts)
        return counts

    return (lambda: ours(ts)), ref


def make_ensemble(n: int = N_NEURONS, steps: int = N_STEPS, members: int = ENSEMBLE) -> tuple[Callable, Callable]:
    pop = Population(n, seed=0, members=members)
    ts = jnp.arange(steps, dtype=jnp.float32)
    per_member = (OfType(HiddenState), OfType(ShortTermState))  # a tuple: any of them
    ours = vmap2(
        lambda ts: for_loop(pop.update, ts),
        in_axes=None,
        axis_size=members,
        state_in_axes={0: per_member},
        state_out_axes={0: per_member},
    )

    one = _reference_scan(n)

    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def sim(v, spike, key, ts):
        parts = jax.random.split(key, members + 1)  # the same lane keys vmap2 hands out
        v, spike, _, counts = jax.vmap(one, in_axes=(0, 0, 0, None))(v, spike, parts[1:], ts)
        return v, spike, jax.random.split(parts[0], 2)[1], counts

    box = [jnp.full((members, n), V_REST), jnp.zeros((members, n), bool), jax.random.key(0)]

    def ref():
        box[0], box[1], box[2], counts = sim(box[0], box[1], box[2], ts)
        return counts

    return (lambda: ours(ts)), ref


def first_call(make: Callable[[], tuple[Callable, Callable]], repeats: int) -> tuple[float, float]:
    """Median seconds of the first call (trace + compile + one run) of fresh functions."""
    t_ours, t_ref = [], []
    for _ in range(repeats):
        ours, ref = make()
        start = time.perf_counter()
        _block(ref())
        t_ref.append(time.perf_counter() - start)
        start = time.perf_counter()
        _block(ours())
        t_ours.append(time.perf_counter() - start)
    return statistics.median(t_ours), statistics.median(t_ref)


def make_progress(steps: int = 10_000, n: int = N_NEURONS) -> tuple[Callable, Callable]:
    """The same loop with a default progress bar (ours) and without (reference)."""
    pop = Population(n, seed=0)
    ts = jnp.arange(steps, dtype=jnp.float32)
    sink = io.StringIO()
    with_bar = jit(lambda ts: for_loop(pop.update, ts, progress_bar=ProgressBar(file=sink)))
    without = jit(lambda ts: for_loop(pop.update, ts))
    return (lambda: with_bar(ts)), (lambda: without(ts))


def rows(quick: bool = False) -> list[dict[str, Any]]:
    """Every measurement as ``{case, ours_ms, reference_ms, ratio, target}``."""
    calls, repeats = (2, 3) if quick else (5, 7)
    result = []

    def add(case: str, ours: float, ref: float, target: float) -> None:
        result.append(dict(case=case, ours_ms=ours * 1e3, reference_ms=ref * 1e3, ratio=ours / ref, target=target))

    add(f"LIF {N_NEURONS}x{N_STEPS} for_loop in jit", *_interleaved(*make_single(), calls, repeats), 1.2)
    add(
        f"LIF vmap2 {ENSEMBLE}x{N_NEURONS}x{N_STEPS}", *_interleaved(*make_ensemble(), max(1, calls // 2), repeats), 1.2
    )
    add("LIF first call (trace+compile)", *first_call(make_single, 3), 1.5)
    add("LIF vmap2 first call", *first_call(make_ensemble, 3), 1.5)
    import importlib.util

    if importlib.util.find_spec("tqdm") is not None:  # progress_bar's optional dependency
        add("10k-step loop + progress bar", *_interleaved(*make_progress(), max(1, calls // 2), repeats), 1.1)
    return result


def format_rows(table: list[dict[str, Any]]) -> str:
    lines = [f"{'case':<36} {'ours (ms)':>10} {'hand-written (ms)':>18} {'ratio':>7} {'target':>7}"]
    lines.append("-" * len(lines[0]))
    for r in table:
        lines.append(
            f"{r['case']:<36} {r['ours_ms']:>10.2f} {r['reference_ms']:>18.2f} {r['ratio']:>6.2f}x {r['target']:>6.1f}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__}, {jax.device_count()} device(s)\n")
    print(format_rows(rows(args.quick)))
    print("(progress-bar row: 'hand-written' is the same loop without a bar)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
