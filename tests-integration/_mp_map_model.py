"""The ensemble both ``_mp_worker_map.py`` and its test run (not a test module)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

import state_core
import state_nn
import state_random


class NoisyCell(state_nn.Module):
    """Per-member weights drawn at init; each step draws noise and subtracts the ensemble mean."""

    def init_state(self, size: int = 3) -> None:
        self.w = state_core.ParamState(state_random.normal(size=size))
        self.h = state_core.HiddenState(jnp.zeros(size))

    def update(self, x: jax.Array) -> jax.Array:
        drive = x * self.w.value + state_random.normal(size=self.h.value.shape)
        self.h.value = 0.5 * self.h.value + drive - jax.lax.pmean(drive, "members")
        return self.h.value.sum()


def run_ensemble(behavior: str, members: int, steps: int, **kwargs: Any) -> tuple[state_nn.Map, list]:
    """Initialise the ensemble and run ``steps`` updates with the same input on every process."""
    ens = state_nn.Map(NoisyCell(), init_map_size=members, behavior=behavior, axis_name="members", **kwargs)
    ens.init_all_states()
    x = jnp.linspace(-1.0, 1.0, members * 3, dtype=jnp.float32).reshape(members, 3)
    return ens, [ens(x) for _ in range(steps)]
