"""What a type checker sees of ``state_nn.Map``: it knows the type of the module it maps.

Checked by ``mypy --strict`` and run by ``tests-integration/test_typing.py``.
"""

from __future__ import annotations

from typing import assert_type

import jax
import jax.numpy as jnp
import numpy as np

from state_core import HiddenState, ParamState
from state_nn import Linear, Map, Module


class Cell(Module):
    """A leaky accumulator with one hidden state per member."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self.decay = ParamState(jnp.full(size, 0.5))

    def init_state(self, *args: object, **kwargs: object) -> None:
        self.hidden = HiddenState(jnp.zeros(self.size))

    def update(self, x: jax.Array) -> jax.Array:
        self.hidden.value = self.decay.value * self.hidden.value + x
        return self.hidden.value


ensemble = Map(Cell(3), init_map_size=4)
assert_type(ensemble, Map[Cell])
assert_type(ensemble.module, Cell)
ensemble.init_all_states()
assert_type(ensemble.module.hidden, HiddenState[jax.Array])
assert_type(ensemble.module.hidden.value, jax.Array)
assert_type(ensemble.module.decay, ParamState[jax.Array])
ensemble(jnp.ones((4, 3)))
out = ensemble(jnp.ones((4, 3)))
np.testing.assert_allclose(out, np.full((4, 3), 1.5))
assert ensemble.module.hidden.value.shape == (4, 3)

# The parameter may be spelled out; a bare ``Map`` means ``Map[Module]``.
layers: Map[Linear] = Map[Linear](Linear(3, 2), init_map_size=2)
assert_type(layers.module.weight, ParamState[jax.Array])
anything: Map = layers
assert_type(anything.module, Module)
