"""Time the reference library (brainstate) and flax.nnx on the same cases as ours.

Neither is a dependency of our packages: install them in a separate environment
(``hatch run bench-compare`` does) and run ``bench.py --compare``. Each library is
timed only if it imports; every time is also given as a ratio to hand-written
pure JAX measured in the same run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from state_core import ShortTermState
from state_core.filter import OfType
from state_transform import jit, vmap2

N_STATES = 100
BATCH = 16

Case = Callable[[], Any]


def _step_values(values: list, inp: Any) -> tuple[list, Any]:
    new = [v * 0.5 + inp for v in values]
    total = 0.0
    for v in new:
        total = total + v
    return new, total


def pure_cases() -> dict[str, Case]:
    x = jnp.ones((BATCH, 4))
    vm = jax.jit(jax.vmap(_step_values))
    jt = jax.jit(_step_values)
    box = {
        "v": [jnp.zeros((BATCH, 4)) + i for i in range(N_STATES)],
        "j": [jnp.zeros((BATCH, 4)) + i for i in range(N_STATES)],
    }

    def run_vmap():
        box["v"], out = vm(box["v"], x)
        return out

    def run_jit():
        box["j"], out = jt(box["j"], x)
        return out

    return {"vmap": run_vmap, "jit": run_jit}


def ours_cases() -> dict[str, Case]:
    x = jnp.ones((BATCH, 4))

    def make():
        states = [ShortTermState(jnp.zeros((BATCH, 4)) + i) for i in range(N_STATES)]

        def step(inp):
            total = 0.0
            for s in states:
                s.value = s.value * 0.5 + inp
                total = total + s.value
            return total

        return step

    vm = vmap2(make(), state_in_axes={0: OfType(ShortTermState)}, state_out_axes={0: OfType(ShortTermState)})
    jt = jit(make())
    return {"vmap": lambda: vm(x), "jit": lambda: jt(x)}


def brainstate_cases() -> dict[str, Case] | None:
    try:
        import brainstate
        from brainstate.util.filter import OfType as BsOfType
    except ImportError:
        return None
    x = jnp.ones((BATCH, 4))

    def make():
        states = [brainstate.ShortTermState(jnp.zeros((BATCH, 4)) + i) for i in range(N_STATES)]

        def step(inp):
            total = 0.0
            for s in states:
                s.value = s.value * 0.5 + inp
                total = total + s.value
            return total

        return step

    short = BsOfType(brainstate.ShortTermState)
    vm = brainstate.transform.vmap2(make(), state_in_axes={0: short}, state_out_axes={0: short})
    jt = brainstate.transform.jit(make())
    return {"vmap": lambda: vm(x), "jit": lambda: jt(x)}


def nnx_cases() -> dict[str, Case] | None:
    try:
        from flax import nnx
    except ImportError:
        return None
    x = jnp.ones((BATCH, 4))

    class Bank(nnx.Module):
        def __init__(self) -> None:
            self.vs = nnx.List([nnx.Variable(jnp.zeros((BATCH, 4)) + i) for i in range(N_STATES)])

    def step(bank, inp):
        total = 0.0
        for v in bank.vs:
            v[...] = v[...] * 0.5 + inp
            total = total + v[...]
        return total

    jit_bank, vmap_bank = Bank(), Bank()
    jt = nnx.jit(step)
    vm = nnx.vmap(nnx.jit(step), in_axes=(0, 0))
    return {"vmap": lambda: vm(vmap_bank, x), "jit": lambda: jt(jit_bank, x)}


def run(time_per_call: Callable[[Case, int, int], float], calls: int, repeats: int) -> None:
    """Print a table: each library's time per call and its ratio to pure JAX."""
    pure = pure_cases()
    rows = [("state (ours)", ours_cases())]
    for label, make in (("brainstate", brainstate_cases), ("flax.nnx", nnx_cases)):
        cases = make()
        if cases is None:
            print(f"{label}: not installed (hatch run bench-compare installs it in a separate env)")
        else:
            rows.append((label, cases))
    print(f"\n{N_STATES} states of shape ({BATCH}, 4); time per eager call, ratio to pure JAX\n")
    header = f"{'library':<14} {'case':<6} {'time (us)':>11} {'pure JAX (us)':>14} {'ratio':>9}"
    print(header)
    print("-" * len(header))
    for case in ("vmap", "jit"):
        t_pure = time_per_call(pure[case], calls, repeats)
        for label, cases in rows:
            slow = label != "state (ours)"
            t = time_per_call(cases[case], max(3, calls // 20) if slow else calls, repeats)
            print(f"{label:<14} {case:<6} {t * 1e6:>11.1f} {t_pure * 1e6:>14.1f} {t / t_pure:>8.2f}x")
