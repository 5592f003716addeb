"""Benchmark: one-shot ensemble initialisation (``Map(...).init_all_states()``).

Initialisation runs once, so it must not pay for compiling a program it never
reuses. The reference is what a JAX user writes by hand: an eager (not jitted)
``jax.vmap`` of the member's init function over per-member random keys, producing
the same arrays. brainstate's and flax.nnx's one-shot ensemble inits are timed in
the same run when they are installed. Only ratios are printed (time / the
reference's time, medians of interleaved rounds: every library sees the same load).

    hatch run python benchmarks/bench_init.py          # standalone table
    python benchmarks/bench_init.py --rounds 15        # steadier medians

``bench.py`` can add the rows with ``from bench_init import init_cases`` (each case
returns ``(ours, pure)`` zero-argument callables, like the cases in ``bench.py``).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax

jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402

import state_core as sc  # noqa: E402
import state_random as sr  # noqa: E402

N_IN, N_OUT = 16, 16
MEMBERS = (8, 1000)


def case_map_init(members: int) -> tuple[Callable[[], Any], Callable[[], Any]] | None:
    """``Map(layer, members).init_all_states()`` against an eager ``jax.vmap`` of the init."""
    try:
        import state_nn
    except ImportError:
        return None

    class Layer(state_nn.Module):
        def init_state(self):
            self.w = sc.ParamState(sr.normal(0.0, 1.0, size=(N_IN, N_OUT)))
            self.b = sc.ParamState(jnp.zeros(N_OUT))
            self.h = sc.ShortTermState(jnp.zeros(N_OUT))

    sr.seed(0)

    def ours() -> Any:
        layer = Layer()
        state_nn.Map(layer, init_map_size=members).init_all_states()
        return layer.w.value

    def member_init(key: Any) -> tuple:
        draw = jax.random.split(key, 2)[1]
        return jax.random.normal(draw, (N_IN, N_OUT)), jnp.zeros(N_OUT), jnp.zeros(N_OUT)

    box = {"key": jax.random.key(0)}

    def pure() -> Any:
        parts = jax.random.split(box["key"], members + 1)
        w, _, _ = jax.vmap(member_init)(parts[1:])
        box["key"] = jax.random.split(parts[0], 2)[1]
        return w

    return ours, pure


def _label(members: int) -> str:
    return f"Map.init_all_states, {members} members"


def init_cases() -> list[tuple[str, Callable[[], Any]]]:
    """``(label, make_case)`` rows for ``bench.py``."""
    return [(_label(members), functools.partial(case_map_init, members)) for members in MEMBERS]


def _time(fn: Callable[[], Any], calls: int) -> float:
    jax.block_until_ready(fn())
    start = time.perf_counter()
    for _ in range(calls):
        out = fn()
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / calls


def _peers(members: int) -> dict[str, Callable[[], Any]]:
    """brainstate's and flax.nnx's init of the same ensemble, for those that import."""
    try:
        import compare
    except ImportError:  # run from elsewhere than benchmarks/: no peers
        return {}
    return dict(compare.peers_map_init(members, N_IN, N_OUT))


def measure(members: int, rounds: int, calls: int = 5) -> dict[str, float] | None:
    """``{library: ratio to the eager jax.vmap init}`` for ``members`` members (None without state_nn)."""
    built = case_map_init(members)
    if built is None:
        return None
    ours, pure = built
    timed = {"ours": ours, **_peers(members)}
    samples: dict[str, list[float]] = {name: [] for name in timed}
    reference: list[float] = []
    for _ in range(rounds):  # interleaved: every library sees the same machine load
        reference.append(_time(pure, calls))
        for name, fn in timed.items():
            samples[name].append(_time(fn, calls))
    base = statistics.median(reference)
    return {name: statistics.median(ts) / base for name, ts in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per row (median taken)")
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__}; ratio = time / an eager jax.vmap of the member init, same run")
    print(f"(median of {args.rounds} interleaved rounds)\n")
    table = [(_label(members), measure(members, args.rounds)) for members in MEMBERS]
    names = ["ours", *sorted({n for _, r in table if r for n in r} - {"ours"})]
    print(f"{'case':<36}" + "".join(f"{name:>12}" for name in names))
    for label, ratios in table:
        if ratios is None:
            print(f"{label:<36} skipped (state_nn not installed)")
            continue
        print(f"{label:<36}" + "".join(f"{ratios[n]:>11.2f}x" if n in ratios else f"{'n/a':>12}" for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
