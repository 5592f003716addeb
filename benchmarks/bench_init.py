"""Benchmark: one-shot ensemble initialisation (``Map(...).init_all_states()``).

Initialisation runs once, so it must not pay for compiling a program it never
reuses. The reference is what a JAX user writes by hand: an eager (not jitted)
``jax.vmap`` of the member's init function over per-member random keys.

    hatch run python benchmarks/bench_init.py          # standalone table

``bench.py`` can add the rows with ``from bench_init import init_cases`` (each case
returns ``(ours, pure)`` zero-argument callables, like the cases in ``bench.py``).
"""

from __future__ import annotations

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


def init_cases() -> list[tuple[str, Callable[[], Any]]]:
    """``(label, make_case)`` rows for ``bench.py``."""
    return [
        ("Map.init_all_states, 8 members", lambda: case_map_init(8)),
        ("Map.init_all_states, 1000 members", lambda: case_map_init(1000)),
    ]


def _time(fn: Callable[[], Any], calls: int) -> float:
    jax.block_until_ready(fn())
    start = time.perf_counter()
    for _ in range(calls):
        out = fn()
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / calls


def main() -> int:
    calls, repeats = 5, 5
    print(f"{'case':<36} {'ours (ms)':>10} {'pure JAX (ms)':>14} {'ratio':>7}")
    for label, make in init_cases():
        built = make()
        if built is None:
            print(f"{label:<36} skipped (state_nn not installed)")
            continue
        ours, pure = built
        t_ours, t_pure = [], []
        for _ in range(repeats):  # interleaved: both see the same machine load
            t_pure.append(_time(pure, calls))
            t_ours.append(_time(ours, calls))
        o, p = statistics.median(t_ours), statistics.median(t_pure)
        print(f"{label:<36} {o * 1e3:>10.2f} {p * 1e3:>14.2f} {o / p:>6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
